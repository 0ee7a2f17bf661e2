"""The public names of persistence, pinned."""

from __future__ import annotations

import persistence
from persistence import PersistenceError, SqliteStore, Store


def test_all_names_exist() -> None:
    """Every name in __all__ is importable, and the brief's names are all there."""
    wanted = {
        "open_store", "SqliteStore", "Store", "dumps", "loads", "PersistenceError",
        "DatabaseLocked", "ForeignDatabase", "SchemaTooNew", "CorruptDatabase",
        "ReadOnlyDatabase", "DiskFull", "StorageUnavailable", "DatabaseBusy", "StorageIOError", "StaleStep", "ReducerFailed", "UnknownWorkflowId",
        "WorkflowFinished", "InboxFull", "NewWorkflow", "NewTimer", "NewProcedure", "OutSignal",
        "OutBroadcast", "StepWrite", "Delivered", "StepAck", "WorkflowRecord", "InboxRow",
        "TimerRow", "ProcedureRow", "ExternalRow", "HistoryRow",
    }
    assert wanted <= set(persistence.__all__)
    for name in persistence.__all__:
        assert hasattr(persistence, name), name


def test_errors_share_the_root() -> None:
    """Every exported error derives from PersistenceError."""
    errors = [getattr(persistence, n) for n in persistence.__all__
              if isinstance(getattr(persistence, n), type)
              and issubclass(getattr(persistence, n), Exception)]
    assert len(errors) >= 14
    assert all(issubclass(e, PersistenceError) for e in errors)


def test_sqlite_store_implements_store() -> None:
    """SqliteStore implements every abstract method of Store."""
    assert issubclass(SqliteStore, Store)
    assert not getattr(SqliteStore, "__abstractmethods__", set())
