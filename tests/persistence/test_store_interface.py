"""The interface the runtime talks to: backend-neutral, and scoped to what a store owns."""

from __future__ import annotations

from typing import Protocol

from persistence import CANCEL, SIGNAL, SqliteStore, Store, dumps

from .conftest import new_wf


def test_store_is_a_protocol_the_sqlite_backend_implements() -> None:
    assert Protocol in Store.__mro__ and issubclass(SqliteStore, Store)


def test_a_sqlite_store_owns_every_workflow_of_its_file(file_store) -> None:
    file_store.create_workflow(new_wf("a"))
    assert file_store.owns("a") and file_store.owns("not-created-yet")


def test_the_sqlite_query_for_cancels_waiting_agrees_with_the_interfaces_definition(file_store) -> None:
    s = file_store
    for wid in ("quiet", "signalled", "cancelled", "both"):
        s.create_workflow(new_wf(wid))
    s.append_inbox("signalled", SIGNAL, "go", dumps(1), at=1.0)
    s.append_inbox("cancelled", CANCEL, "cancel", dumps("stop"), at=1.0)
    s.append_inbox("both", SIGNAL, "go", dumps(1), at=1.0)
    s.append_inbox("both", CANCEL, "cancel", dumps(None), at=2.0)
    assert s.workflows_cancelling() == Store.workflows_cancelling(s) == {"cancelled", "both"}
