"""Fixtures for the store tests: a store on a fresh file, and one in memory."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from persistence import NewWorkflow, SqliteStore, StepWrite, Store, dumps, open_store


def new_wf(wid: str, *, type: str = "mod:wf", parent_id: str | None = None, at: float = 1.0,
           test_mode: bool = False, detached: bool = False) -> NewWorkflow:
    """Build a NewWorkflow with a small continuation."""
    return NewWorkflow(
        id=wid, type=type, continuation=dumps({"pc": 0, "id": wid}), fingerprint="fp1",
        parent_id=parent_id, detached=detached, test_mode=test_mode, created_at=at,
    )


def step(store: Store, wid: str, **fields) -> StepWrite:
    """Build the next step of ``wid`` (its step_seq read from the store)."""
    rec = store.load_workflow(wid)
    assert rec is not None
    fields.setdefault("updated_at", 2.0)
    return StepWrite(workflow_id=wid, step_seq=rec.step_seq + 1, **fields)


def has_table(store: Store, name: str) -> bool:
    """True if the application table ``name`` exists (where reducers create tables)."""
    if isinstance(store, SqliteStore):
        sql = "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?"
    else:
        sql = "SELECT count(*) AS n FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
    return bool(store.read_table(sql, (name,))[0]["n"])


@pytest.fixture
def db_path(tmp_path: pathlib.Path) -> str:
    """A path for a database that does not exist yet."""
    return str(tmp_path / "wf.db")


@pytest.fixture(params=["file", "memory", "postgres"])
def store(request: pytest.FixtureRequest, db_path: str) -> Iterator[Store]:
    """An owning store: on a SQLite file, in memory, and on PostgreSQL (a schema of its own)."""
    if request.param == "postgres":
        target = request.getfixturevalue("pg_store_url")
    else:
        target = db_path if request.param == "file" else ":memory:"
    s = open_store(target)
    yield s
    s.close()


@pytest.fixture
def file_store(db_path: str) -> Iterator[SqliteStore]:
    """An owning store on a file."""
    s = open_store(db_path)
    yield s
    s.close()
