"""The interface the runtime talks to: backend-neutral, and scoped to what a store owns."""

from __future__ import annotations

from typing import Protocol

from persistence import CANCEL, SIGNAL, SqliteStore, Store, dumps

from .conftest import new_wf


def test_store_is_a_protocol_both_backends_implement() -> None:
    from persistence._pg._store import PgStore

    assert Protocol in Store.__mro__ and issubclass(SqliteStore, Store)
    assert issubclass(PgStore, Store)


def test_an_owning_store_owns_every_workflow_of_its_database(store) -> None:
    """SQLite: the whole file; PostgreSQL: the whole schema (one node)."""
    store.create_workflow(new_wf("a"))
    assert store.owns("a") and store.owns("not-created-yet")


def test_the_query_for_cancels_waiting_agrees_with_the_interfaces_definition(store) -> None:
    s = store
    for wid in ("quiet", "signalled", "cancelled", "both"):
        s.create_workflow(new_wf(wid))
    s.append_inbox("signalled", SIGNAL, "go", dumps(1), at=1.0)
    s.append_inbox("cancelled", CANCEL, "cancel", dumps("stop"), at=1.0)
    s.append_inbox("both", SIGNAL, "go", dumps(1), at=1.0)
    s.append_inbox("both", CANCEL, "cancel", dumps(None), at=2.0)
    assert s.workflows_cancelling() == Store.workflows_cancelling(s) == {"cancelled", "both"}


def test_records_and_tombstones_read_together_agree_with_one_by_one(store) -> None:
    """load_workflows() and tombstones() (a statement per hundred ids) give, for 250 ids with
    repeats, what load_workflow() and tombstone() give id by id, and the interface's own
    definition (one read per id) gives the same."""
    s = store
    made = [f"w-{i}" for i in range(0, 250, 3)]
    s.create_workflows([new_wf(w) for w in made])
    ids = [f"w-{i}" for i in range(250)] + ["w-99", "w-0"]
    got = s.load_workflows(ids)
    assert sorted(got) == sorted(made)
    assert all(got[w] == s.load_workflow(w) for w in made)
    assert Store.load_workflows(s, ids) == got
    assert s.load_workflows([]) == {} and s.tombstones([]) == {}
    assert s.tombstones(ids) == Store.tombstones(s, ids) == {
        w: t for w in ids if (t := s.tombstone(w)) is not None}
