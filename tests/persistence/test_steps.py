"""commit_step: guards, every part of a StepWrite, atomicity, reducers."""

from __future__ import annotations

import functools
import sqlite3

import pytest

from persistence import (
    CANCEL,
    CHILD,
    COMPLETED,
    FAILED,
    SIGNAL,
    NewProcedure,
    NewTimer,
    OutBroadcast,
    OutSignal,
    PersistenceError,
    ReducerFailed,
    SqliteStore,
    StaleStep,
    StepWrite,
    UnknownWorkflowId,
    WorkflowExists,
    WorkflowFinished,
    dumps,
    loads,
    open_store,
)
from persistence._format import HISTORY_TRIM_EVERY
from persistence._types import DropCause, Dropped

from .conftest import has_table, new_wf, step


def _snapshot(store, wid: str) -> tuple:
    return (store.load_workflow(wid), store.inbox(wid), store.timers(wid), store.procedures(wid),
            store.history(wid), store.read_table("SELECT * FROM waits ORDER BY name"),
            store.read_table("SELECT * FROM subscriptions ORDER BY name"))


def test_step_updates_row(store) -> None:
    """A step writes status, continuation, fingerprint, waiting_on, step_seq, updated_at."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", continuation=b"c1", fingerprint="fp2",
                           waiting_on='{"signals": ["go"]}', updated_at=5.0))
    rec = store.load_workflow("a")
    assert (rec.continuation, rec.fingerprint, rec.waiting_on, rec.step_seq, rec.updated_at) == (
        b"c1", "fp2", '{"signals": ["go"]}', 1, 5.0)


def test_step_keeps_continuation_when_none(store) -> None:
    """continuation and fingerprint left None keep their stored values."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", continuation=b"c1"))
    store.commit_step(step(store, "a"))
    rec = store.load_workflow("a")
    assert (rec.continuation, rec.fingerprint, rec.step_seq) == (b"c1", "fp1", 2)


@pytest.mark.parametrize("seq", [0, 2, 5])
def test_stale_step_seq(store, seq: int) -> None:
    """A step_seq other than stored + 1 raises StaleStep and writes nothing."""
    store.create_workflow(new_wf("a"))
    before = _snapshot(store, "a")
    with pytest.raises(StaleStep, match="stored step counter is 0") as info:
        store.commit_step(StepWrite("a", seq, continuation=b"x", new_timers=[NewTimer("t", 1.0)]))
    assert info.value.workflow_id == "a"
    assert _snapshot(store, "a") == before


@pytest.mark.parametrize("field,what", [("consume_inbox", "inbox message"),
                                        ("consume_timers", "timer"),
                                        ("consume_procedures", "procedure")])
def test_stale_missing_consumed_row(store, field: str, what: str) -> None:
    """Consuming a row that does not exist raises StaleStep naming it, and writes nothing."""
    store.create_workflow(new_wf("a"))
    d = store.append_inbox("a", SIGNAL, "s", b"p", at=1.0)
    before = _snapshot(store, "a")
    with pytest.raises(StaleStep, match=what):
        fields = {"consume_inbox": [d.seq]}
        fields[field] = fields.get(field, []) + [999]
        store.commit_step(step(store, "a", **fields))
    assert _snapshot(store, "a") == before


def test_cannot_consume_other_workflows_rows(store) -> None:
    """An inbox row of another workflow is not consumable (StaleStep)."""
    store.create_workflow(new_wf("a"))
    store.create_workflow(new_wf("b"))
    d = store.append_inbox("b", SIGNAL, "s", b"p", at=1.0)
    with pytest.raises(StaleStep):
        store.commit_step(step(store, "a", consume_inbox=[d.seq]))
    assert [r.seq for r in store.inbox("b")] == [d.seq]


def test_step_on_unknown_and_finished(store) -> None:
    """A step of an unknown workflow raises UnknownWorkflowId; of a finished one WorkflowFinished."""
    with pytest.raises(UnknownWorkflowId, match="nope"):
        store.commit_step(StepWrite("nope", 1))
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", status=COMPLETED, result=dumps(1)))
    with pytest.raises(WorkflowFinished, match="completed"):
        store.commit_step(step(store, "a"))


def test_step_unknown_status(store) -> None:
    """A step with a status that is not one of the four is refused."""
    store.create_workflow(new_wf("a"))
    with pytest.raises(PersistenceError, match="unknown status 'paused'"):
        store.commit_step(step(store, "a", status="paused"))


def test_consume_and_arm(store) -> None:
    """A step consumes inbox/timer/procedure rows and arms new timers and procedures."""
    store.create_workflow(new_wf("a"))
    d = store.append_inbox("a", SIGNAL, "go", b"1", at=1.0)
    ack = store.commit_step(step(store, "a", consume_inbox=[d.seq],
                                 new_timers=[NewTimer("t1", 10.0), NewTimer("t2", 5.0)],
                                 new_procedures=[NewProcedure("k1", "m:f", dumps(((), {})))]))
    assert len(ack.timer_ids) == 2 and ack.timer_ids[0] < ack.timer_ids[1]
    assert store.inbox("a") == []
    assert [(t.id, t.name) for t in store.timers("a")] == [(ack.timer_ids[1], "t2"),
                                                           (ack.timer_ids[0], "t1")]
    [p] = store.procedures("a")
    assert (p.key, p.function, p.status, p.attempts) == ("k1", "m:f", "pending", 1)  # attempt 1 counted with the row
    store.procedure_finished("k1", result=dumps(42), error=None, attempts=1)
    store.commit_step(step(store, "a", consume_timers=[ack.timer_ids[1]],
                           cancel_timers=[ack.timer_ids[0]], consume_procedures=["k1"]))
    assert store.timers("a") == [] and store.procedures("a") == []


def test_consuming_many_rows_is_one_statement_per_chunk_and_all_or_nothing(store) -> None:
    """A gather's step consumes hundreds of inbox rows; one missing row (another workflow's, or
    one consumed already) makes the whole step stale and writes nothing."""
    from persistence._writes import CONSUME_CHUNK

    store.create_workflow(new_wf("a"))
    store.create_workflow(new_wf("b"))
    n = CONSUME_CHUNK + 7  # two chunks
    seqs = [store.append_inbox("a", CHILD, f"c{i}", dumps(i), at=1.0).seq for i in range(n)]
    other = store.append_inbox("b", SIGNAL, "go", b"x", at=1.0).seq
    before = _snapshot(store, "a")
    for bad in ([*seqs[:-1], other], [*seqs[:10], seqs[3]], [*seqs, 10**9]):
        with pytest.raises(StaleStep, match="are gone"):
            store.commit_step(step(store, "a", consume_inbox=bad))
        assert _snapshot(store, "a") == before
    statements: list[str] = []
    if isinstance(store, SqliteStore):
        store._writer.conn.set_trace_callback(statements.append)
    try:
        store.commit_step(step(store, "a", consume_inbox=seqs))
    finally:
        if isinstance(store, SqliteStore):
            store._writer.conn.set_trace_callback(None)
    assert store.inbox("a") == [] and [r.seq for r in store.inbox("b")] == [other]
    if isinstance(store, SqliteStore):
        assert sum(s.startswith("DELETE FROM inbox") for s in statements) == 2
    with pytest.raises(StaleStep, match="inbox message 1 it consumes is gone"):
        store.commit_step(step(store, "a", consume_inbox=[1]))


def test_a_step_that_stays_running_writes_one_page(file_store, db_path) -> None:
    """Only the row's page changes: the indexes on status are left alone while it stays running
    (three pages a commit before), so the fsync'd log grows by one page per step."""
    import sqlite3

    file_store.create_workflow(new_wf("a"))
    file_store.commit_step(step(file_store, "a", continuation=b"c0"))
    other = sqlite3.connect(db_path)
    try:
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        for i in range(20):
            file_store.commit_step(step(file_store, "a", continuation=b"c%d" % i, waiting_on="{}"))
        _busy, frames, _done = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        other.close()
    assert frames == 20
    file_store.commit_step(step(file_store, "a", status=COMPLETED, result=dumps(1)))
    rec = file_store.load_workflow("a")
    assert (rec.status, rec.step_seq, loads(rec.result)) == (COMPLETED, 22, 1)
    assert [r.id for r in file_store.list_workflows(status="running")] == []


def test_cancel_missing_rows_is_fine(store) -> None:
    """cancel_timers / cancel_procedures of rows that are gone are ignored."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", cancel_timers=[77], cancel_procedures=["zz"]))
    assert store.load_workflow("a").step_seq == 1


def test_duplicate_procedure_key_rejected(store) -> None:
    """Dispatching an idempotency key that exists rolls the step back with a clear error."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", new_procedures=[NewProcedure("k", "m:f", b"")]))
    with pytest.raises(PersistenceError, match="idempotency key"):
        store.commit_step(step(store, "a", new_procedures=[NewProcedure("k", "m:f", b"")]))
    assert store.load_workflow("a").step_seq == 1


def test_waits_replaced_each_step(store) -> None:
    """wait_signals is the current set: each step replaces it."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", wait_signals=("x", "y")))
    store.commit_step(step(store, "a", wait_signals=("z",)))
    assert store.read_table("SELECT name FROM waits WHERE workflow_id = 'a'") == [{"name": "z"}]


def test_children_created(store) -> None:
    """new_workflows are created in the step; their ids are in the ack."""
    store.create_workflow(new_wf("p"))
    ack = store.commit_step(step(store, "p", new_workflows=[new_wf("c1", parent_id="p"),
                                                            new_wf("c2", parent_id="p")]))
    assert ack.created == ["c1", "c2"]
    assert [r.id for r in store.list_workflows(parent_id="p")] == ["c1", "c2"]
    assert set(store.workflows_with_work()) == {"c1", "c2"}


def test_child_id_taken_rejects_step(store) -> None:
    """A child id that exists rolls the whole step back with WorkflowExists."""
    store.create_workflow(new_wf("p"))
    store.create_workflow(new_wf("taken"))
    with pytest.raises(WorkflowExists, match="child 'taken'.*already exists") as info:
        store.commit_step(step(store, "p", new_workflows=[new_wf("fresh", parent_id="p"),
                                                          new_wf("taken", parent_id="p")]))
    assert info.value.parent_id == "p"
    assert store.load_workflow("fresh") is None
    assert store.load_workflow("p").step_seq == 0


def test_out_signals_delivered_and_dropped(store) -> None:
    """Signals to running workflows are inserted; to unknown or finished ones reported dropped."""
    for wid in ("a", "b", "done"):
        store.create_workflow(new_wf(wid))
    store.commit_step(step(store, "done", status=COMPLETED))
    ack = store.commit_step(step(store, "a", signals=[
        OutSignal("b", "hello", b"1"), OutSignal("ghost", "hello", b"2"),
        OutSignal("done", "hello", b"3"), OutSignal("b", "ch", b"4", kind=CHILD)]))
    assert [(d.workflow_id, d.kind, d.name) for d in ack.delivered] == [
        ("b", SIGNAL, "hello"), ("b", CHILD, "ch")]
    assert ack.dropped == [("ghost", Dropped(DropCause.UNKNOWN)), ("done", Dropped(DropCause.ENDED, status="completed"))]
    assert [(wid, str(why), why.expected) for wid, why in ack.dropped] == [
        ("ghost", "unknown workflow", False), ("done", "workflow completed", True)]
    assert [(r.seq, r.payload) for r in store.inbox("b")] == [
        (ack.delivered[0].seq, b"1"), (ack.delivered[1].seq, b"4")]


def test_out_signal_bad_kind(store) -> None:
    """An outgoing message of unknown kind rolls the step back."""
    store.create_workflow(new_wf("a"))
    with pytest.raises(PersistenceError, match="unknown kind 'shout'"):
        store.commit_step(step(store, "a", signals=[OutSignal("a", "x", b"", kind="shout")]))


def test_subscriptions_and_broadcasts(store) -> None:
    """subscribe/unsubscribe maintain the index; broadcasts fan out to current subscribers."""
    for wid in ("pub", "s1", "s2", "s3"):
        store.create_workflow(new_wf(wid))
    store.commit_step(step(store, "s1", subscribe=[("zone", '"north"')]))
    store.commit_step(step(store, "s2", subscribe=[("zone", '"north"'), ("zone", '"south"')]))
    store.commit_step(step(store, "s3", subscribe=[("zone", '"north"')]))
    store.commit_step(step(store, "s3", unsubscribe=[("zone", '"north"')]))
    ack = store.commit_step(step(store, "pub", broadcasts=[OutBroadcast("zone", '"north"', b"x")]))
    assert sorted(d.workflow_id for d in ack.delivered) == ["s1", "s2"]
    assert store.inbox("s3") == []
    got = store.broadcast("zone", '"south"', b"y", at=3.0)
    assert [(d.workflow_id, d.name) for d in got] == [("s2", "zone")]
    assert sorted(store.subscribers("zone", '"north"')) == ["s1", "s2"]
    assert store.subscribers("zone", '"south"') == ["s2"]
    assert store.subscribers("zone", '"east"') == []


def test_finish_cleans_up(store) -> None:
    """Finishing deletes the workflow's timers, procedures, waits, subscriptions and inbox."""
    store.create_workflow(new_wf("a"))
    store.append_inbox("a", SIGNAL, "later", b"", at=1.0)
    store.commit_step(step(store, "a", new_timers=[NewTimer("t", 9.0)], wait_signals=("x",),
                           new_procedures=[NewProcedure("k", "m:f", b"")],
                           subscribe=[("n", "null")]))
    store.commit_step(step(store, "a", status=FAILED, error='{"type": "E"}',
                           signals=[OutSignal("a", "self", b"")]))
    rec = store.load_workflow("a")
    assert (rec.status, rec.error) == (FAILED, '{"type": "E"}')
    assert store.inbox("a") == [] and store.timers("a") == [] and store.procedures("a") == []
    assert store.read_table("SELECT * FROM waits") == []
    assert store.read_table("SELECT * FROM subscriptions") == []


def test_a_finishing_step_consumes_its_rows_and_subscribes_to_nothing(store) -> None:
    """The step that ends a workflow may consume rows (they are checked, then dropped with the
    rest) and a subscription it asks for is not left behind."""
    store.create_workflow(new_wf("a"))
    seq = store.append_inbox("a", SIGNAL, "go", b"", at=1.0).seq
    store.commit_step(step(store, "a", new_timers=[NewTimer("t", 9.0)]))
    (timer,) = store.timers("a")
    with pytest.raises(StaleStep, match="inbox message 999"):
        store.commit_step(step(store, "a", status=COMPLETED, consume_inbox=[999]))
    store.commit_step(step(store, "a", status=COMPLETED, consume_inbox=[seq],
                           consume_timers=[timer.id], subscribe=[("n", "null")]))
    assert store.load_workflow("a").status == COMPLETED
    assert store.inbox("a") == [] and store.timers("a") == []
    assert store.read_table("SELECT * FROM subscriptions") == []


def test_a_workflow_ending_in_its_first_step_leaves_nothing_behind(store) -> None:
    """Ending in its first step, a workflow can hold only inbox rows, the subscriptions that very
    step asks for, and its waits: all go (the writer's cache of waits is not relied upon)."""
    store.create_workflow(new_wf("a"))
    store.create_workflow(new_wf("b"))
    store.append_inbox("a", SIGNAL, "early", b"", at=1.0)
    store._writer.waits.clear()
    store.commit_step(step(store, "a", status=COMPLETED, result=dumps(1), subscribe=[("n", "null")],
                           signals=[OutSignal("b", "done", b"")]))
    assert store.load_workflow("a").step_seq == 1
    assert store.inbox("a") == [] and [r.name for r in store.inbox("b")] == ["done"]
    assert store.read_table("SELECT * FROM waits WHERE workflow_id = 'a'") == []
    assert store.read_table("SELECT * FROM subscriptions") == []


def test_finished_result_stored(store) -> None:
    """A completing step stores the result bytes."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", status=COMPLETED, result=dumps({"winner": "x"})))
    assert loads(store.load_workflow("a").result) == {"winner": "x"}
    assert store.list_workflows(status=COMPLETED)[0].id == "a"


def _insert(db, table: str, value: int) -> None:
    db[table].insert({"v": value})


def _append(db, value: int) -> None:
    db["log"].insert({"v": value}, pk="id")  # the key filled in: 1, 2, ... in insertion order


def test_reducers_run_in_order_in_transaction(store) -> None:
    """Reducers run in call order, on the step's db (sqlite_utils.Database on SQLite), committed
    with the step."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", reducers=[functools.partial(_append, value=v)
                                                 for v in (3, 1, 4, 0, 2)]))
    assert [r["v"] for r in store.read_table("SELECT v FROM log ORDER BY id")] == [3, 1, 4, 0, 2]


def test_reducer_failure_rolls_back_step(store) -> None:
    """A reducer that raises rolls back the whole step (earlier reducers too): ReducerFailed."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", reducers=[functools.partial(_insert, table="log", value=0)]))
    d = store.append_inbox("a", SIGNAL, "s", b"", at=1.0)
    before = _snapshot(store, "a")

    def boom(db) -> None:
        raise KeyError("no such item")

    with pytest.raises(ReducerFailed) as info:
        store.commit_step(step(store, "a", consume_inbox=[d.seq], new_timers=[NewTimer("t", 1)],
                               signals=[OutSignal("a", "x", b"")],
                               reducers=[functools.partial(_insert, table="log", value=1), boom]))
    err = info.value
    assert isinstance(err.original, KeyError) and err.__cause__ is err.original
    assert "boom" in err.reducer and "'a'" in str(err) and "rolled back" in str(err)
    assert _snapshot(store, "a") == before
    assert store.read_table("SELECT v FROM log") == [{"v": 0}]


def test_history_recorded_and_trimmed(store) -> None:
    """History rows are kept, the newest ``history_keep`` per workflow (what a history_limit
    sets), trimmed every few steps."""
    HISTORY_KEEP = 200
    store.create_workflow(new_wf("a"))
    n = HISTORY_TRIM_EVERY * 6
    for i in range(n):
        store.commit_step(step(store, "a", history=[("step", f'{{"i": {i}}}')], history_keep=HISTORY_KEEP))
    rows = store.history("a", limit=10_000)
    assert HISTORY_KEEP <= len(rows) < HISTORY_KEEP + HISTORY_TRIM_EVERY
    assert rows[-1].detail == f'{{"i": {n - 1}}}'
    assert [r.seq for r in rows] == sorted(r.seq for r in rows)
    assert [r.event for r in store.history("a", limit=3)] == ["step"] * 3
    assert store.history("a", limit=3)[-1].detail == rows[-1].detail


def test_submit_step_future(store) -> None:
    """submit_step returns a future resolving to the StepAck."""
    store.create_workflow(new_wf("a"))
    fut = store.submit_step(step(store, "a", new_timers=[NewTimer("t", 1.0)]))
    ack = fut.result(timeout=10)
    assert ack.timer_ids == [store.timers("a")[0].id]


def test_cancel_message_kind() -> None:
    """A cancel message is delivered even when the inbox is full of signals."""
    with open_store(":memory:", inbox_limit=2) as s:
        s.create_workflow(new_wf("a"))
        s.append_inbox("a", SIGNAL, "x", b"", at=1)
        s.append_inbox("a", SIGNAL, "x", b"", at=1)
        d = s.append_inbox("a", CANCEL, "", dumps(None), at=1)
        assert d.kind == CANCEL and len(s.inbox("a")) == 3


def test_wait_set_after_rolled_back_step(store) -> None:
    """A rolled-back step's wait set is not taken as written: the next step writes its own."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", wait_signals=("x",)))

    def boom(db) -> None:
        raise ValueError("no")

    with pytest.raises(ReducerFailed):
        store.commit_step(step(store, "a", wait_signals=("y",), reducers=[boom]))
    assert store.read_table("SELECT name FROM waits") == [{"name": "x"}]
    store.commit_step(step(store, "a", wait_signals=("y",)))
    assert store.read_table("SELECT name FROM waits") == [{"name": "y"}]
    store.commit_step(step(store, "a", wait_signals=("y",)))
    assert store.read_table("SELECT name FROM waits") == [{"name": "y"}]


# -- a step that creates its workflow (the first step of a start) ----------------------------------
def test_a_creating_step_writes_the_record_already_stepped(store) -> None:
    """``create``: the record lands as the first step leaves it, never as a never-stepped row."""
    wf = new_wf("a", at=1.0)
    ack = store.commit_step(StepWrite(
        "a", 1, updated_at=2.0, continuation=b"after-1", fingerprint="fp2", waiting_on='{"w": 1}',
        new_timers=[NewTimer("t", 9.0)], wait_signals=["go"], create=wf))
    rec = store.load_workflow("a")
    assert (rec.status, rec.step_seq, rec.continuation, rec.fingerprint, rec.waiting_on) == (
        "running", 1, b"after-1", "fp2", '{"w": 1}')
    assert (rec.created_at, rec.updated_at, rec.type) == (1.0, 2.0, wf.type)
    assert [t.id for t in store.timers("a")] == ack.timer_ids
    assert store.read_table("SELECT name FROM waits WHERE workflow_id = 'a'") == [{"name": "go"}]
    # Not among the workflows to start: its first step is done.
    assert "a" not in set(store.workflows_with_work())


def test_a_creating_step_that_ends_the_workflow(store) -> None:
    """A first step that returns: the record is written finished, with its result, its end
    time and no continuation (a finished workflow keeps none)."""
    store.commit_step(StepWrite("a", 1, updated_at=2.0, status="completed", result=dumps(7),
                                create=new_wf("a")))
    rec = store.load_workflow("a")
    assert (rec.status, rec.step_seq, loads(rec.result)) == ("completed", 1, 7)
    assert (rec.continuation, rec.finished_at) == (None, 2.0)


def test_a_creating_step_on_a_taken_id_writes_nothing(store) -> None:
    """The id exists: WorkflowExists, and neither the step nor its effects are written."""
    store.create_workflow(new_wf("a"))
    with pytest.raises(WorkflowExists):
        store.commit_step(StepWrite(
            "a", 1, continuation=b"x", new_timers=[NewTimer("t", 9.0)],
            reducers=[lambda db: db["app"].insert({"x": 1})], create=new_wf("a")))
    rec = store.load_workflow("a")
    assert (rec.step_seq, rec.continuation) == (0, new_wf("a").continuation)
    assert store.timers("a") == []
    assert not has_table(store, "app")


def test_a_creating_step_whose_reducer_fails_writes_nothing(store) -> None:
    with pytest.raises(ReducerFailed):
        store.commit_step(StepWrite(
            "a", 1, continuation=b"x",
            reducers=[lambda db: (_ for _ in ()).throw(RuntimeError("no"))], create=new_wf("a")))
    assert store.load_workflow("a") is None


def test_only_a_first_step_can_create(store) -> None:
    with pytest.raises(PersistenceError, match="only a workflow's own first step"):
        store.commit_step(StepWrite("a", 2, create=new_wf("a")))
    with pytest.raises(PersistenceError, match="only a workflow's own first step"):
        store.commit_step(StepWrite("a", 1, create=new_wf("b")))
    assert store.load_workflow("a") is None and store.load_workflow("b") is None


def test_recent_steps_written_by_the_step_and_kept_when_none(store) -> None:
    """A step's ``recent`` text replaces the row's recent_steps; None leaves it as it is (a
    write that is not a workflow step, such as a block or an escalation, keeps them)."""
    store.create_workflow(new_wf("a"))
    assert store.load_workflow("a").recent_steps is None
    store.commit_step(step(store, "a", recent='[2000,"started",{"step":1}]'))
    store.commit_step(step(store, "a", history=[("blocked", "{}")]))
    assert store.load_workflow("a").recent_steps == '[2000,"started",{"step":1}]'
    text = '[2000,"started",{"step":1}]\n[3000,"signal",{"step":3,"name":"go"}]'
    store.commit_step(step(store, "a", recent=text, updated_at=3.0))
    assert store.load_workflow("a").recent_steps == text


def test_recent_steps_of_a_first_step_that_creates(store) -> None:
    """A start's first step, which inserts the row, writes its recent_steps in that INSERT."""
    wf = new_wf("a")
    store.commit_step(StepWrite(workflow_id="a", step_seq=1, create=wf, updated_at=1.0,
                                recent='[1000,"started",{"step":1}]'))
    assert store.load_workflow("a").recent_steps == '[1000,"started",{"step":1}]'


def test_history_merges_the_rows_steps_with_the_table_in_time_order(store) -> None:
    """history(): the row's steps (seq None, at in seconds) and the table's events, by time; in
    one millisecond the step comes first (an end is written by its last step); the limit counts
    both; a line that is not JSON is kept as an unreadable_step event."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", updated_at=1.0, recent='[1000,"started",{"step":1}]'))
    store.commit_step(step(store, "a", updated_at=1.5, history=[("blocked", '{"message": "x"}')]))
    text = '[1000,"started",{"step":1}]\n[2000,"signal",{"step":3,"name":"go"}]'
    store.commit_step(step(store, "a", updated_at=2.0004, status=COMPLETED, recent=text,
                           history=[("completed", '{"result": "1"}')]))
    rows = store.history("a")
    assert [(r.seq is None, r.at, r.event) for r in rows] == [
        (True, 1.0, "started"), (False, 1.5, "blocked"), (True, 2.0, "signal"),
        (False, 2.0004, "completed"),
    ]
    assert rows[2].detail == '{"step": 3, "name": "go"}' and rows[2].workflow_id == "a"
    assert [r.event for r in store.history("a", limit=2)] == ["signal", "completed"]
    assert store.history("a", limit=0) == []


def test_history_keeps_a_damaged_step_line(file_store, db_path) -> None:
    """A recent_steps line that is not JSON (a row edited by hand) is shown, not dropped."""
    file_store.create_workflow(new_wf("a"))
    file_store.commit_step(step(file_store, "a", recent='[2000,"started",{"step":1}]'))
    con = sqlite3.connect(db_path)
    with con:
        con.execute("""UPDATE workflows SET recent_steps = 'not json' || char(10) || recent_steps""")
    con.close()
    rows = file_store.history("a")
    assert [(r.event, r.detail) for r in rows] == [
        ("unreadable_step", '{"line": "not json"}'), ("started", '{"step": 1}'),
    ]


def test_a_reducer_sees_what_each_statement_did(store) -> None:
    """A reducer's statements run as it calls them: a row count decides what it does next (as
    the demo's hold_gold does), on every backend."""
    seen: list[int] = []

    def setup(db) -> None:
        db["purse"].insert({"id": "ann", "gold": 10}, pk="id")

    def spend(db, amount: int) -> None:
        cur = db.execute("UPDATE purse SET gold = gold - ? WHERE id = ? AND gold >= ?",
                         [amount, "ann", amount])
        seen.append(cur.rowcount)
        if cur.rowcount == 1:
            db["spent"].insert({"amount": amount}, pk="id")

    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", reducers=[setup]))
    store.commit_step(step(store, "a", reducers=[functools.partial(spend, amount=7),
                                                 functools.partial(spend, amount=7)]))
    assert seen == [1, 0]
    assert store.read_table("SELECT gold FROM purse") == [{"gold": 3}]
    assert store.read_table("SELECT amount FROM spent") == [{"amount": 7}]
