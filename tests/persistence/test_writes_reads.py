"""Single writes (inbox, broadcast, procedures, external requests) and every read."""

from __future__ import annotations

import threading

import pytest

from persistence import (
    CANCEL,
    CHILD,
    COMPLETED,
    SIGNAL,
    InboxFull,
    NewProcedure,
    NewTimer,
    OutSignal,
    PersistenceError,
    UnknownWorkflowId,
    WorkflowFinished,
    dumps,
    open_store,
)
from persistence._types import DropCause, Dropped

from .conftest import new_wf, step


def test_create_workflow_once(store) -> None:
    """create_workflow inserts a running never-stepped row; an existing id returns False."""
    assert store.create_workflow(new_wf("a", test_mode=True, detached=True, parent_id="p"))
    assert not store.create_workflow(new_wf("a", type="other:wf"))
    rec = store.load_workflow("a")
    assert (rec.type, rec.status, rec.step_seq, rec.test_mode, rec.detached, rec.parent_id) == (
        "mod:wf", "running", 0, True, True, "p")
    assert store.load_workflow("missing") is None


def test_append_inbox_order_and_rows(store) -> None:
    """Appended messages get increasing seqs and come back in arrival order with their data."""
    store.create_workflow(new_wf("a"))
    ds = [store.append_inbox("a", SIGNAL, f"s{i}", dumps(i), at=float(i)) for i in range(5)]
    assert [d.seq for d in ds] == sorted(d.seq for d in ds)
    rows = store.inbox("a")
    assert [(r.seq, r.kind, r.name, r.created_at) for r in rows] == [
        (d.seq, SIGNAL, f"s{i}", float(i)) for i, d in enumerate(ds)]


def test_append_inbox_errors(store) -> None:
    """Unknown workflow, finished workflow and unknown kind are each refused clearly."""
    with pytest.raises(UnknownWorkflowId, match="'ghost'"):
        store.append_inbox("ghost", SIGNAL, "s", b"", at=1.0)
    store.create_workflow(new_wf("a"))
    with pytest.raises(PersistenceError, match="unknown inbox kind 'poke'"):
        store.append_inbox("a", "poke", "s", b"", at=1.0)
    store.commit_step(step(store, "a", status=COMPLETED))
    with pytest.raises(WorkflowFinished, match="already completed"):
        store.append_inbox("a", SIGNAL, "s", b"", at=1.0)


def test_inbox_full() -> None:
    """Past inbox_limit buffered signals, append raises InboxFull naming workflow and bound."""
    with open_store(":memory:", inbox_limit=3) as s:
        s.create_workflow(new_wf("a"))
        for _ in range(3):
            s.append_inbox("a", SIGNAL, "s", b"", at=1.0)
        with pytest.raises(InboxFull, match="'a'.*3 signals.*inbox_limit") as info:
            s.append_inbox("a", SIGNAL, "s", b"", at=1.0)
        assert info.value.limit == 3
        assert s.append_inbox("a", CHILD, "c", b"", at=1.0).kind == CHILD
        s.commit_step(step(s, "a", consume_inbox=[s.inbox("a")[0].seq]))
        s.create_workflow(new_wf("b"))
        ack = s.commit_step(step(s, "b", signals=[OutSignal("a", "s", b""),
                                                OutSignal("a", "s", b"")]))
        assert len(ack.delivered) == 0 and ack.dropped == [("a", Dropped(DropCause.INBOX_FULL, limit=3))] * 2


def test_broadcast_skips_finished_and_full() -> None:
    """A broadcast reaches running subscribers only (finished ones unsubscribed, full ones skipped)."""
    with open_store(":memory:", inbox_limit=1) as s:
        for wid in ("a", "b", "c"):
            s.create_workflow(new_wf(wid))
            s.commit_step(step(s, wid, subscribe=[("news", "null")]))
        s.append_inbox("b", SIGNAL, "other", b"", at=1)
        s.commit_step(step(s, "c", status=COMPLETED))
        got = s.broadcast("news", "null", b"hi", at=2)
        assert [d.workflow_id for d in got] == ["a"]
        assert s.broadcast("nobody", "null", b"", at=2) == []


def test_procedure_lifecycle(store) -> None:
    """procedure_retry records attempts; procedure_finished sets done/failed once; gone rows say False."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", new_procedures=[
        NewProcedure("k1", "m:f", b"args", next_attempt_at=5.0), NewProcedure("k2", "m:g", b"")]))
    assert [p.key for p in store.procedures_to_run()] == ["k2", "k1"]
    assert store.procedure_retry("k1", attempts=1, next_attempt_at=9.0)
    assert store.procedure_finished("k1", result=dumps(3), error=None, attempts=2)
    assert store.procedure_finished("k2", result=None, error='{"type": "E"}', attempts=1)
    # A second outcome (at-least-once) does not overwrite the first.
    assert store.procedure_finished("k1", result=dumps(4), error=None, attempts=3)
    rows = {p.key: p for p in store.procedures("a")}
    assert (rows["k1"].status, rows["k1"].result, rows["k1"].attempts) == ("done", dumps(3), 2)
    assert (rows["k2"].status, rows["k2"].error) == ("failed", '{"type": "E"}')
    assert list(store.procedures_to_run()) == []
    assert not store.procedure_retry("k1", attempts=5, next_attempt_at=1.0)
    assert not store.procedure_finished("gone", result=None, error=None, attempts=1)
    assert not store.procedure_retry("gone", attempts=1, next_attempt_at=1.0)


def test_workflows_with_work(store) -> None:
    """Work = never stepped, a cancel/child message, an awaited signal, or a finished procedure."""
    for wid in ("fresh", "idle", "sig", "unawaited", "cancel", "child", "proc", "done"):
        store.create_workflow(new_wf(wid))
    for wid in ("idle", "sig", "unawaited", "cancel", "child", "proc", "done"):
        store.commit_step(step(store, wid, wait_signals=("go",), new_timers=[NewTimer("t", 1e9)],
                               new_procedures=[NewProcedure(f"k-{wid}", "m:f", b"")]))
    store.append_inbox("sig", SIGNAL, "go", b"", at=1)
    store.append_inbox("unawaited", SIGNAL, "later", b"", at=1)
    store.append_inbox("cancel", CANCEL, "", b"", at=1)
    store.append_inbox("child", CHILD, "kid", b"", at=1)
    store.procedure_finished("k-proc", result=b"", error=None, attempts=1)
    store.append_inbox("done", SIGNAL, "go", b"", at=1)
    store.commit_step(step(store, "done", status=COMPLETED))
    assert sorted(store.workflows_with_work()) == ["cancel", "child", "fresh", "proc", "sig"]


def test_timers_due(store) -> None:
    """timers_due returns timers due before the time, soonest first, at most limit."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", new_timers=[NewTimer(f"t{d}", float(d)) for d in (5, 1, 3, 9)]))
    assert [t.name for t in store.timers_due(6.0, 10)] == ["t1", "t3", "t5"]
    assert [t.name for t in store.timers_due(6.0, 2)] == ["t1", "t3"]
    assert store.timers_due(0.5, 10) == []
    assert store.next_timer_due() == 1.0


def test_list_and_count(store) -> None:
    """list_workflows filters by status/type/parent with a limit; count_workflows groups."""
    store.create_workflow(new_wf("p", type="m:parent", at=1))
    for i in range(3):
        store.create_workflow(new_wf(f"c{i}", type="m:child", parent_id="p", at=2 + i))
    store.commit_step(step(store, "c1", status=COMPLETED))
    assert [r.id for r in store.list_workflows()] == ["p", "c0", "c1", "c2"]
    assert [r.id for r in store.list_workflows(type="m:child", status="running")] == ["c0", "c2"]
    assert [r.id for r in store.list_workflows(parent_id="p", limit=2)] == ["c0", "c1"]
    assert store.count_workflows() == {("m:parent", "running"): 1, ("m:child", "running"): 2,
                                       ("m:child", "completed"): 1}
    assert store.running_count() == 3


def test_read_table_is_read_only(store) -> None:
    """read_table returns dicts and refuses writes."""
    store.create_workflow(new_wf("a"))
    assert store.read_table("SELECT id, step_seq FROM workflows WHERE id = ?", ("a",)) == [
        {"id": "a", "step_seq": 0}]
    with pytest.raises(PersistenceError):
        store.read_table("DELETE FROM workflows")
    assert store.load_workflow("a") is not None


def test_external_requests_between_processes(file_store, db_path: str) -> None:
    """A non-owner posts requests; the owner sees changed(), takes them in order, deletes them."""
    file_store.create_workflow(new_wf("a"))
    file_store.changed()
    assert not file_store.changed()
    with open_store(db_path, owner=False) as cli:
        s1 = cli.post_external("signal", "a", "bid", '{"amount": 5}', at=1.0)
        s2 = cli.post_external("cancel", "a", None, None, at=2.0)
        with pytest.raises(PersistenceError, match="unknown external request kind"):
            cli.post_external("explode", "a", None, None, at=2.0)
        assert s2 > s1
        assert cli.load_workflow("a").id == "a"
    assert file_store.changed()
    rows = file_store.take_external(0)
    assert [(r.seq, r.kind, r.name, r.payload) for r in rows] == [
        (s1, "signal", "bid", '{"amount": 5}'), (s2, "cancel", None, None)]
    assert [r.seq for r in file_store.take_external(s1)] == [s2]
    file_store.delete_external([s1, s2])
    assert file_store.take_external(0) == []


def test_owner_post_external(store) -> None:
    """The owner itself may post external requests (through its writer)."""
    seq = store.post_external("fire_timer", "a", "t", None, at=1.0)
    assert [r.seq for r in store.take_external(0)] == [seq]


def test_changed_memory() -> None:
    """In memory, changed() reports commits since the last call."""
    with open_store(":memory:") as s:
        s.changed()
        assert not s.changed()
        s.create_workflow(new_wf("a"))
        assert s.changed()
        assert not s.changed()


def test_concurrent_readers_and_writer(file_store) -> None:
    """Many threads reading while steps commit see only whole steps (step_seq == app rows)."""
    file_store.create_workflow(new_wf("a"))
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            rows = file_store.read_table(
                "SELECT (SELECT step_seq FROM workflows WHERE id = 'a') AS s, "
                "(SELECT count(*) FROM sqlite_master WHERE name = 'app') AS t")
            if rows[0]["t"]:
                n = file_store.read_table(
                    "SELECT (SELECT step_seq FROM workflows WHERE id = 'a') AS s, "
                    "(SELECT count(*) FROM app) AS n")[0]
                if n["s"] != n["n"]:
                    bad.append(f"step_seq {n['s']} but {n['n']} app rows")

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(200):
            file_store.commit_step(step(file_store, "a", reducers=[
                lambda db, i=i: db["app"].insert({"i": i})]))
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert bad == []
