"""The procedure executor's hand-over of outcomes, at the edges the runtime tests cannot time."""

from __future__ import annotations

from actors._clock import SystemClock
from actors._procedures import ProcedureDone, ProcedureExecutor, pack_call
from actors._work import WorkCounter
from persistence import NewProcedure, NewWorkflow, StepWrite, dumps, loads, open_store


def _store_with_a_pending_call(path: str):
    store = open_store(path)
    store.create_workflow(NewWorkflow(id="w", type="m:wf", continuation=dumps(0), fingerprint="f",
                                      created_at=1.0))
    store.commit_step(StepWrite("w", 1, updated_at=1.0, new_procedures=[
        NewProcedure("w#1.0", "tests.actors.flows:double", pack_call((21,), {}, None, None), 0.0)]))
    return store


def test_an_outcome_goes_to_the_actor_without_a_write(tmp_path):
    """While the system runs, an outcome is handed to the actor; the row stays pending until the
    step that consumes it."""
    store = _store_with_a_pending_call(str(tmp_path / "a.db"))
    got: list[ProcedureDone] = []
    ex = ProcedureExecutor(store, SystemClock(), 1, lambda wid, d: got.append(d), lambda at, f: None, WorkCounter())
    try:
        ex._attempt("w#1.0", "w", "tests.actors.flows:double", store.procedures("w")[0].args, 1)
        assert [(d.key, d.ok, d.value, d.durable) for d in got] == [("w#1.0", True, 42, False)]
        assert store.procedures("w")[0].status == "pending"
    finally:
        ex.shutdown()
        store.close()


def test_an_outcome_after_shutdown_began_is_recorded_not_lost(tmp_path):
    """A call that finishes while the system is closing records its outcome, so the next start
    does not run it again."""
    store = _store_with_a_pending_call(str(tmp_path / "a.db"))
    got: list[ProcedureDone] = []
    ex = ProcedureExecutor(store, SystemClock(), 1, lambda wid, d: got.append(d), lambda at, f: None, WorkCounter())
    try:
        ex.shutdown()
        ex._attempt("w#1.0", "w", "tests.actors.flows:double", store.procedures("w")[0].args, 1)
        assert got == []
        (row,) = store.procedures("w")
        assert (row.status, loads(row.result)) == ("done", 42)
    finally:
        store.close()
