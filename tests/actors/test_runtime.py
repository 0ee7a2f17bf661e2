"""The ActorSystem end to end, in one process, on a real SQLite file and a virtual clock."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

import actors._system
from actors import (
    ActorSystem,
    Status,
    TimerNotArmed,
    UnknownWorkflow,
    WorkflowNotRunning,
    WorkflowRef,
)
from actors._actor import Kick
from actors.testing import VirtualClock
from workflows import Cancelled, WorkflowFailed

from . import flows

T = 30  # every wait in these tests is bounded


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(autouse=True)
def fresh_flows() -> None:
    """Each test starts with the flows' counters empty (a test runs once per backend)."""
    with flows.CALLS_LOCK:
        flows.CALLS.clear()
    flows.FLAKY_FAILS.clear()
    flows.REDUCER_FAILS.clear()
    flows.GATE.clear()
    flows.LATER.clear()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    """Where the system runs: a SQLite file, or a PostgreSQL schema of the test's own."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "wf.db")


class _PgConnection:
    """The parts of a sqlite3 connection these tests use, on the PostgreSQL schema (``?``)."""

    def __init__(self, url: str) -> None:
        import psycopg

        from persistence._pg._reducer_db import PgDatabase
        from persistence._pg._schema import parse_url

        self.conn = psycopg.connect(parse_url(url)[0], autocommit=True)  # holds no locks
        self.db = PgDatabase(self.conn)

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.db.execute(sql, params)

    def commit(self) -> None:
        pass  # each statement committed as it ran

    def close(self) -> None:
        self.conn.close()


def connect(db: str) -> Any:
    """A connection to the database the test's system runs on, whichever backend."""
    return _PgConnection(db) if db.startswith("postgresql://") else sqlite3.connect(db)


@pytest.fixture
def system(db, clock):
    s = ActorSystem(db, clock=clock)
    yield s
    s.shutdown()


def app_events(db: str, wf: str | None = None) -> list[str]:
    if db.startswith("postgresql://"):
        import psycopg

        from persistence._pg._schema import parse_url

        with psycopg.connect(parse_url(db)[0]) as pg:
            if pg.execute("SELECT to_regclass('app_events')").fetchone() == (None,):
                return []
            rows = pg.execute("SELECT wf, text FROM app_events ORDER BY id").fetchall()
        return [t for w, t in rows if wf is None or w == wf]
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT wf, text FROM app_events ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return [t for w, t in rows if wf is None or w == wf]


def test_timer_fires_on_virtual_clock(system, clock):
    """A durable timer fires when the virtual clock passes its due time, not before."""
    ref = system.start(flows.sleeper, 3600)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(3599)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == 3600


def test_signals_are_buffered_and_consumed_in_order(system):
    """Signals sent before they are awaited stay buffered and are consumed once, in order."""
    ref = system.start(flows.collect, 3)
    for i in range(3):
        ref.signal("item", i)
    assert ref.result(timeout=T) == [0, 1, 2]


def test_procedures_return_values_and_reducers_commit(system, db):
    """Procedure results resume the workflow; reducers run in the step's transaction."""
    ref = system.start(flows.adder, 5, id="adder-1")
    assert ref.result(timeout=T) == 20
    assert app_events(db, "adder-1") == ["10,20"]
    keys = [k for (what, (x, k)) in flows.CALLS if what == "double" and k.startswith("adder-1#")]
    assert len(keys) == 2 and len(set(keys)) == 2


def test_procedure_retries_with_backoff_then_succeeds(system, clock):
    """A failing procedure is retried after its backoff on the workflow clock."""
    ref = system.start(flows.uses_flaky, "t1", 2)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # first attempt failed, retry due in 10 s
    clock.advance(10)
    system.idle(timeout=T)
    clock.advance(20)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "ok after 3"


def test_procedure_failure_after_last_attempt_is_catchable(system, clock):
    """After its last attempt a procedure raises ProcedureFailed, which the workflow can catch."""
    ref = system.start(flows.uses_flaky, "t2", 5)
    for _ in range(3):
        system.idle(timeout=T)
        clock.advance(100)
    assert ref.result(timeout=T) == "gave up: ConnectionError after 3"


def test_auction_in_test_mode(system):
    """The seed's auction test: alice 100, bob 150, the end timer fires, bob wins at 150."""
    ref = system.start(flows.auction, 50, test_mode=True)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 100})
    ref.debug_send_signal("bid", {"bidder": "bob", "amount": 150})
    ref.debug_fire_timer("end")
    assert ref.result(timeout=T) == {"winner": "bob", "price": 150}


def test_test_mode_timers_never_fire_by_themselves(system, clock):
    """In test mode timers do not fire even when due; debug_fire_timer fires them."""
    ref = system.start(flows.sleeper, 10, test_mode=True)
    system.idle(timeout=T)
    clock.advance(1000)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    ref.debug_fire_timer("wake")
    assert ref.result(timeout=T) == 1000  # fired by hand, after the clock moved 1000 s


def test_debug_fire_timer_unknown_name_lists_armed(system):
    """Firing a timer that is not armed is an error listing the armed timers."""
    ref = system.start(flows.auction, 1, test_mode=True)
    system.idle(timeout=T)
    with pytest.raises(TimerNotArmed, match=r"no armed timer named 'nope'; armed timers: 'end'"):
        ref.debug_fire_timer("nope")


def test_select_disarms_losing_timer(system, db):
    """When a select is won by a signal, its timer is cancelled (deleted), not left to fire."""
    ref = system.start(flows.auction, 10)
    system.idle(timeout=T)
    ref.signal("cancel")
    assert ref.result(timeout=T) == {"cancelled": True}
    con = connect(db)
    assert con.execute("SELECT count(*) FROM timers").fetchone()[0] == 0
    con.close()


def test_select_procedure_beats_timer(system):
    """A procedure arm of a select wins over a later timer and names itself in the Event."""
    ref = system.start(flows.select_proc_vs_timer, 21)
    assert ref.result(timeout=T) == "procedure:double:42"


def test_children_results_and_failures(system, clock, db):
    """A child's result reaches its parent once; a failing child raises ChildFailed there."""
    ref = system.start(flows.parent, [1, -2, 3], id="p1")
    for _ in range(3):
        system.idle(timeout=T)
        clock.advance(1)
    assert ref.result(timeout=T) == 40
    assert app_events(db, "p1") == ["child failed: negative -2"]
    kids = [w for w in system.workflows() if w.parent_id == "p1"]
    assert sorted(w.status.value for w in kids) == ["completed", "completed", "failed"]


def test_gather_children(system, clock):
    """gather() of spawns returns every child's result, in order."""
    ref = system.start(flows.fan_out, [3, 1, 2])
    system.idle(timeout=T)
    clock.advance(5)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == [30, 10, 20]


def test_cancel_runs_finally_which_may_await(system, clock, db):
    """cancel() raises Cancelled at the await; the finally block runs its reducers and awaits."""
    ref = system.start(flows.guarded, "x", id="g1")
    system.idle(timeout=T)
    ref.cancel("player left")
    system.idle(timeout=T)
    assert app_events(db, "g1") == ["locked", "unlocked"]
    clock.advance(1)
    system.idle(timeout=T)
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    assert ref.status() is Status.CANCELLED
    assert app_events(db, "g1") == ["locked", "unlocked", "cleaned"]


def test_cancel_can_be_caught(system):
    """except Cancelled catches cancellation like any exception."""
    ref = system.start(flows.catches_cancel)
    system.idle(timeout=T)
    ref.cancel("because")
    assert ref.result(timeout=T) == "caught because"


def test_cancel_reaches_children(system):
    """Cancelling a parent cancels the child it waits on."""
    ref = system.start(flows.parent_of_sleeper)
    system.idle(timeout=T)
    ref.cancel("stop")
    system.idle(timeout=T)
    assert system.get("the-child").status() is Status.CANCELLED
    assert ref.status() is Status.CANCELLED


def test_failure_is_reported_with_original_error(system, clock):
    """A workflow that raises ends FAILED; result() raises WorkflowFailed with type and traceback."""
    ref = system.start(flows.boom)
    system.idle(timeout=T)
    clock.advance(1)
    with pytest.raises(WorkflowFailed) as ei:
        ref.result(timeout=T)
    assert ei.value.error_type == "KeyError"
    assert "lost item" in ei.value.error_message
    assert "flows.py" in ei.value.traceback


def test_runtime_fault_restarts_then_fails_and_escalates(system, clock):
    """A reducer that raises restarts the actor with backoff; past the intensity the workflow
    fails and its parent gets ChildFailed."""
    ref = system.start(flows.parent_of_faulty)
    system.idle(timeout=T)
    with capture_logs() as logs:
        clock.advance(1)
        system.idle(timeout=T)
    assert ref.result(timeout=T).startswith("child failed: runtime fault after 5 restarts")
    restarts = [e for e in logs if e["event"] == "actor_restarted"]
    assert len(restarts) == 5
    # Bound to the workflow's id and type, as every lifecycle event.
    assert {(e["workflow_id"], e["workflow_type"]) for e in restarts} == {
        (restarts[0]["workflow_id"], "tests.actors.flows:faulty")
    }

def test_start_returns_once_the_first_step_is_committed_with_the_record(system):
    """start() runs the first step on the caller's thread and commits it with the record: when it
    returns, the workflow is already at its first await, with no other work left."""
    ref = system.start(flows.waits_once, id="stepped-at-start")
    rec = system._rt.store.load_workflow(ref.id)
    assert rec.step_seq == 1
    assert "go" in rec.waiting_on
    assert system._rt.work.count == 0


def test_a_first_step_that_cannot_commit_is_a_supervised_fault(system, db):
    """A reducer failing in the first step: the workflow is created all the same (start() returns
    its ref) and the step is restarted with backoff, as any runtime fault; its effect lands once."""
    with capture_logs() as logs:
        ref = system.start(flows.faulty_first_step, "start-twice", 2, id="faulty-first")
        system.idle(timeout=T)
    assert [e["event"] for e in logs].count("actor_restarted") == 2
    assert ("workflow_started", "faulty-first") in [(e["event"], e.get("workflow_id")) for e in logs]
    ref.signal("go", "done")
    assert ref.result(timeout=T) == "done"
    con = connect(db)
    assert con.execute("SELECT count(*) FROM app_events WHERE wf = 'start-twice'").fetchone()[0] == 1


def test_a_first_step_that_never_commits_fails_the_workflow(system):
    """Past the restart intensity, a start whose first step always faults ends FAILED."""
    ref = system.start(flows.faulty_first_step, "start-always", 100)
    system.idle(timeout=T)
    with pytest.raises(WorkflowFailed, match="runtime fault after 5 restarts"):
        ref.result(timeout=T)


def test_a_start_after_a_message_to_its_id_still_runs(system):
    """An actor that looked for an id before any workflow had it (a message came first) and is
    still live: a start of that id is not lost on its stale view, the workflow runs."""
    system._rt.activator.deliver("early", Kick())
    system.idle(timeout=T)
    assert system.live_actors() == 1
    ref = system.start(flows.waits_once, id="early")
    system.idle(timeout=T)
    assert system._rt.store.load_workflow("early").step_seq == 1
    ref.signal("go", "ran")
    assert ref.result(timeout=T) == "ran"


def test_two_starts_of_one_id_at_once_start_it_once(db, clock, held_commits):
    """A start whose first step is still uncommitted, and a second start of the same id: both
    return the same workflow, which runs its first step once."""
    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s, only="twin")
        first: list = []
        second: list = []
        t = threading.Thread(target=lambda: first.append(s.start(flows.counter, 2, id="twin")))
        t.start()
        _wait_until(lambda: len(held) == 1, "the first start's step reached the writer")
        u = threading.Thread(target=lambda: second.append(s.start(flows.counter, 2, id="twin")))
        u.start()
        held_commits.let_go(s)
        t.join(T)
        u.join(T)
        assert first == second and len(first) == 1
        second = second[0]
        s.idle(timeout=T)
        assert s._rt.store.load_workflow("twin").step_seq == 1
        second.signal("inc", 1)
        second.signal("inc", 1)
        assert second.result(timeout=T) == 2
        assert len(s.workflows()) == 1


def test_broadcast_reaches_only_matching_subscribers(system):
    """A broadcast reaches the workflows subscribed with an equal filter value only."""
    wolves = system.start(flows.quester, "wolf")
    bears = system.start(flows.quester, "bear")
    system.idle(timeout=T)
    assert system.broadcast("killed", "wolf", 1) == 1
    assert system.broadcast("killed", "wolf", 2) == 1
    assert wolves.result(timeout=T) == [1, 2]
    assert bears.status() is Status.RUNNING


def test_a_store_owning_a_subset_wakes_only_its_own_workflows(system, monkeypatch):
    """A row delivered to a workflow the store does not own is its owner's to take: no actor of
    that workflow runs here, and the row waits in its inbox."""
    system.start(flows.quester, "wolf", id="mine")
    system.start(flows.quester, "wolf", id="theirs")
    system.idle(timeout=T)
    monkeypatch.setattr(system._rt.store, "owns", lambda wid: wid != "theirs")
    assert system.broadcast("killed", "wolf", 1) == 2  # both rows are written
    system.idle(timeout=T)
    assert [r.name for r in system._rt.store.inbox("theirs")] == ["killed"]
    assert system._rt.store.inbox("mine") == []  # taken by its step


def test_send_between_workflows(system):
    """send() from one workflow reaches another's inbox when the step commits."""
    target = system.start(flows.collect, 1, id="target")
    system.start(flows.pinger, "target")
    assert target.result(timeout=T) == ["ping"]


def test_recovery_continues_where_it_was(db, clock):
    """Closing the system and opening the file again continues every workflow: locals and
    buffered signals intact, timers due during the downtime fire at recovery."""
    with ActorSystem(db, clock=clock) as s1:
        c = s1.start(flows.collect, 3, id="c")
        c.signal("item", "a")
        s1.idle(timeout=T)
        s1.start(flows.sleeper, 50, id="s")
        s1.idle(timeout=T)
    clock.advance(100)  # the sleeper's timer falls due while nothing runs
    with ActorSystem(db, clock=clock) as s2:
        assert s2.recovered["running"] == 2
        c = s2.get("c")
        c.signal("item", "b")
        c.signal("item", "c")
        assert c.result(timeout=T) == ["a", "b", "c"]
        s2.idle(timeout=T)
        assert s2.get("s").result(timeout=T) == 100


def test_start_existing_id_returns_ref(system):
    """Starting an id that exists returns a ref to it and starts nothing new."""
    a = system.start(flows.waits_once, id="same")
    b = system.start(flows.waits_once, id="same")
    assert a == b
    assert len(system.workflows()) == 1


class _Draws:
    """The runtime's draw of an id's random bits: the given hex strings first, then real draws."""

    def __init__(self, *hexes: str) -> None:
        self.hexes = list(hexes)

    def __call__(self) -> str:
        return self.hexes.pop(0) if self.hexes else _real_draw()


_real_draw = actors._system._id_bits


def test_a_generated_id_already_taken_is_drawn_again(system, monkeypatch):
    """A generated id that happens to exist is someone else's workflow: start() and start_many()
    draw another instead of returning a ref to it."""
    taken = "a" * 12
    other = system.start(flows.waits_once, id=f"waits_once-{taken}")
    monkeypatch.setattr("actors._system._id_bits", _Draws(taken, "b" * 12))
    mine = system.start(flows.waits_once)
    assert mine.id == "waits_once-" + "b" * 12
    monkeypatch.setattr("actors._system._id_bits", _Draws("c" * 12, taken, "c" * 12, "d" * 12))
    many = system.start_many(flows.waits_once, [(), (), ()])
    # The second collides with the existing workflow, the third with the first: both drawn again.
    assert [_hex(r) for r in many[:2]] == ["c" * 12, "d" * 12]
    assert _hex(many[2]) not in {taken, "b" * 12, "c" * 12, "d" * 12}
    system.idle(timeout=T)
    assert len(system.workflows()) == 5
    for r in (other, mine, *many):
        r.signal("go", r.id)
        assert r.result(timeout=T) == r.id


def _hex(ref) -> str:
    return ref.id.split("-")[1]


def test_unknown_and_finished_workflows_are_clear_errors(system):
    """get() of an unknown id raises UnknownWorkflow; signalling a finished one is an error."""
    with pytest.raises(UnknownWorkflow, match="nope"):
        system.get("nope")
    ref = system.start(flows.waits_once)
    ref.signal("go", 1)
    assert ref.result(timeout=T) == 1
    with pytest.raises(WorkflowNotRunning, match="already finished"):
        ref.signal("go", 2)


def test_refs_are_made_by_the_runtime(system):
    """Users cannot construct a WorkflowRef; the error says how to get one."""
    with pytest.raises(TypeError, match="system.start"):
        WorkflowRef(system, "x")


def test_idle_times_out_while_work_remains(system):
    """idle(timeout) raises TimeoutError while a procedure is still running, and returns after."""
    flows.GATE.clear()
    ref = system.start(flows.waits_on_blocker)
    with pytest.raises(TimeoutError, match="in flight"):
        system.idle(timeout=0.3)
    flows.GATE.set()
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "released"


def test_live_actors_stay_under_max_live(db, clock):
    """With max_live=5, 60 workflows all complete and no more than 5 actors are ever live."""
    seen = []
    with ActorSystem(db, clock=clock, max_live=5) as s:
        refs = [s.start(flows.waits_once, id=f"w{i}") for i in range(60)]
        s.idle(timeout=T)
        seen.append(s.live_actors())
        for i, r in enumerate(refs):
            r.signal("go", i)
            seen.append(s.live_actors())
        s.idle(timeout=T)
        assert [r.result(timeout=T) for r in refs] == list(range(60))
    assert max(seen) <= 5


def test_lifecycle_is_logged(system):
    """Each lifecycle transition is one structlog event bound to the workflow id."""
    with capture_logs() as logs:
        ref = system.start(flows.waits_once, id="logged")
        ref.signal("go", 0)
        ref.result(timeout=T)
        system.idle(timeout=T)
    events = [(e["event"], e.get("workflow_id")) for e in logs]
    assert ("workflow_started", "logged") in events
    assert ("workflow_completed", "logged") in events


def test_signals_sent_before_the_first_step_are_consumed_once(system):
    """Thousands of signals sent right after start, while the actor loads and steps, are each
    consumed exactly once (a Wake queued behind the step that consumed its row is ignored)."""
    ref = system.start(flows.counter, 3000)
    for _ in range(3000):
        ref.signal("inc", 1)
    assert ref.result(timeout=120) == 3000


def test_start_many_starts_each_once(system):
    """start_many starts every workflow in one transaction; existing ids start nothing new."""
    first = system.start_many(flows.waits_once, [()] * 3, ids=["a", "b", "c"])
    again = system.start_many(flows.waits_once, [(), ()], ids=["c", "d"])
    assert [r.id for r in first + again] == ["a", "b", "c", "c", "d"]
    system.idle(timeout=T)
    assert sorted(w.id for w in system.workflows()) == ["a", "b", "c", "d"]
    for r in (first[0], again[1]):
        r.signal("go", r.id)
        assert r.result(timeout=T) == r.id
    with pytest.raises(ValueError, match="2 argument tuples but 1 ids"):
        system.start_many(flows.waits_once, [(), ()], ids=["x"])


def test_a_file_with_waits_stored_whole_resumes(db, clock):
    """Files written before the wait was stored as its own payload hold the Wait object in the
    step envelope: such a workflow resumes, takes its signals and finishes."""
    from persistence import dumps, loads

    with ActorSystem(db, clock=clock) as s:
        ref = s.start(flows.collect, 2)
        s.idle(timeout=T)
        ref.signal("item", "a")
        s.idle(timeout=T)
    conn = connect(db)
    (blob,) = conn.execute("SELECT continuation FROM workflows WHERE id = ?", (ref.id,)).fetchone()
    env = loads(blob)
    old = dumps({"cont": env["cont"], "wait": loads(env["wait_p"])})
    conn.execute("UPDATE workflows SET continuation = ? WHERE id = ?", (old, ref.id))
    conn.commit()
    conn.close()
    with ActorSystem(db, clock=clock) as s:
        again = s.get(ref.id)
        again.signal("item", "b")
        assert again.result(timeout=T) == ["a", "b"]


def test_gather_keeps_partial_results_across_a_restart(db, clock):
    """A gather arm taken before a restart stays taken: its value is durable once signal() returns."""
    with ActorSystem(db, clock=clock) as s1:
        s1.start(flows.pair, id="pair")
        s1.idle(timeout=T)
        s1.get("pair").signal("a", 1)
    with ActorSystem(db, clock=clock) as s2:
        ref = s2.get("pair")
        assert "signal 'b'" in ref.info().waiting_on and "signal 'a'" not in ref.info().waiting_on
        ref.signal("b", 2)
        assert ref.result(timeout=T) == [1, 2]


def test_gather_of_many_children(system, clock):
    """A gather of 60 children completes with every result in order."""
    ref = system.start(flows.fan_out, list(range(60)))
    system.idle(timeout=T)
    clock.advance(5)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == [10 * v for v in range(60)]


def test_a_procedure_outcome_commits_with_the_step_that_consumes_it(system, db):
    """A procedure's reply costs no commit of its own: one commit per step, the start's with the
    first."""
    ref = system.start(flows.adder, 3, id="adder-commits")
    system.idle(timeout=T)
    before = system._rt.store._writer.commits
    ref2 = system.start(flows.adder, 4, id="adder-commits-2")
    assert ref2.result(timeout=T) == 16
    system.idle(timeout=T)
    # The record with the first step (which dispatches the call), the second (consumes it and
    # dispatches the next), the finish.
    assert system._rt.store._writer.commits - before == 3
    assert ref.result(timeout=T) == 12
    con = connect(db)
    assert con.execute("SELECT count(*) FROM procedures").fetchone()[0] == 0
    con.close()


def test_a_procedure_outcome_survives_a_failed_step_without_running_again(system, clock, db):
    """If the step consuming a procedure's reply fails to commit, the reply is kept in the store:
    the restarted actor resumes with it and the procedure does not run a second time."""
    ref = system.start(flows.double_then_fragile_reducer, "frag", 21, id="frag-1")
    for _ in range(4):  # two restarts with backoff on the virtual clock
        system.idle(timeout=T)
        clock.advance(5)
    assert ref.result(timeout=T) == 42
    runs = [k for (what, (x, k)) in flows.CALLS if what == "double" and k.startswith("frag-1#")]
    assert len(runs) == 1
    assert app_events(db, "frag") == ["reduced"]


def test_a_signal_is_stepped_on_an_engine_thread_never_the_senders(system):
    """signal() hands the signal to the engine and waits: the step that consumes it runs on an
    actor thread of the runtime, whichever thread sent it."""
    import threading

    ref = system.start(flows.reports_its_thread)
    system.idle(timeout=T)
    ref.signal("go")
    sender = threading.Thread(target=lambda: ref.signal("go"), name="a-sender")
    sender.start()
    sender.join(T)
    names = ref.result(timeout=T)
    assert len(names) == 2 and all(n.startswith("actorflow-actor-") for n in names), names


def test_an_interrupt_in_the_callers_wait_leaves_the_signal_durable_or_unacknowledged(db, clock, held_commits):
    """Ctrl-C while ``signal()`` waits for the commit of the step that takes it: the interrupt
    reaches the caller only; the engine goes on, and the signal is consumed exactly once."""
    import os
    import signal as os_signal
    import threading

    with ActorSystem(db, clock=clock) as s:
        ref = s.start(flows.collect, 3)
        s.idle(timeout=T)
        ref.signal("item", "a")
        held = held_commits(s, only=ref.id)

        def interrupt() -> None:
            _wait_until(lambda: len(held) == 1, "the step taking the signal reached the writer")
            os.kill(os.getpid(), os_signal.SIGINT)  # what Ctrl-C sends

        t = threading.Thread(target=interrupt)
        t.start()
        with pytest.raises(KeyboardInterrupt):
            ref.signal("item", "b")
        t.join(T)
        held_commits.let_go(s)
        s.idle(timeout=T)
        ref.signal("item", "c")
        assert ref.result(timeout=T) == ["a", "b", "c"]


def test_passivated_actors_are_freed_without_the_cycle_collector(db, clock):
    """An actor, once stopped, holds no reference cycle: reference counting frees it (and its
    workflow's state) at once, so passivation never piles work up for the cycle collector."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        with ActorSystem(db, clock=clock) as s:
            refs = [s.start(flows.waits_once) for _ in range(5)]
            s.idle(timeout=T)
            live = [sl.ref._actor_weakref() for sl in s._rt.activator._live.values()]
            stopped = [a.actor_stopped for a in live]
            actors = [weakref.ref(a) for a in live]
            del live
            assert len(actors) == 5
            assert s._rt.activator.passivate_idle(0) == 5
            assert all(e.wait(T) for e in stopped)
            # The stop is handled on a dispatcher thread, which lets go of the actor right after.
            deadline = time.monotonic() + T
            while any(a() is not None for a in actors) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert [a() for a in actors] == [None] * 5
            for r in refs:
                r.signal("go", 1)
            assert [r.result(timeout=T) for r in refs] == [1] * 5
    finally:
        gc.enable()


@pytest.fixture
def held_commits(monkeypatch):
    """One actor thread, and every step's commit held until the test lets it through."""
    import threading

    import actors._system as runtime_module
    from actors._pool import Dispatcher
    from persistence import Promise

    monkeypatch.setattr(runtime_module, "Dispatcher", lambda threads: Dispatcher(1))
    held: list = []
    lock = threading.Lock()

    def hold(system, only: str | None = None):
        real = system._rt.store.submit_step

        def submit_step(sw):
            if only is not None and sw.workflow_id != only:
                return real(sw)
            p = Promise()
            with lock:
                held.append((sw, p, real))
            return p

        system._rt.store.submit_step = submit_step
        return held

    def let_go(system) -> None:
        """Stop holding: release what is held, and let later commits through at once."""
        del system._rt.store.submit_step
        with lock:
            pending = list(held)
            held.clear()
        for sw, p, real in pending:
            real(sw).add_done_callback(_chain(p))

    hold.let_go = let_go
    return hold


def _chain(p):
    def settle(done):
        if done.exception(0) is None:
            p.set_result(done.result(0))
        else:
            p.set_exception(done.exception(0))

    return settle


def _wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_a_step_waiting_for_its_commit_frees_its_thread(db, clock, held_commits):
    """On one actor thread, three workflows each reach their first commit before any of them is
    committed: an actor waiting for the writer gives its thread to the others."""
    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s)
        # start_many: the first steps run on the actor thread (start() would run one here).
        refs = s.start_many(flows.waits_once, [()] * 3)
        _wait_until(lambda: len(held) == 3, "each workflow's first step reached the writer")
        assert sorted(sw.workflow_id for sw, _, _ in held) == sorted(r.id for r in refs)
        held_commits.let_go(s)
        s.idle(timeout=T)
        for i, r in enumerate(refs):
            r.signal("go", i)
        assert [r.result(timeout=T) for r in refs] == [0, 1, 2]


def test_messages_to_an_actor_waiting_for_its_commit_are_handled_after_it_in_order(
    db, clock, held_commits
):
    import threading

    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s)
        (ref,) = s.start_many(flows.collect, [(3,)])  # its first step on the actor thread
        _wait_until(lambda: len(held) == 1, "the first step reached the writer")
        senders = []
        for i in range(3):
            t = threading.Thread(target=ref.signal, args=("item", i))
            t.start()
            senders.append(t)
            # Each signal is queued (durably appended or not) in the order sent.
            _wait_until(lambda i=i: len(ref_inbox(s, ref.id)) == i + 1, f"signal {i} queued")
        assert len(held) == 1, "nothing else ran for this workflow while its step was uncommitted"
        held_commits.let_go(s)
        for t in senders:
            t.join(T)
        assert ref.result(timeout=T) == [0, 1, 2]


def ref_inbox(s, workflow_id: str) -> list:
    slot = s._rt.activator._live.get(workflow_id)
    return [] if slot is None else list(slot.ref.actor_inbox._items)


def test_shutdown_lets_an_actor_waiting_for_its_commit_finish_its_messages(db, clock, held_commits):
    """The system shuts down while a step waits for the writer and a signal is queued behind it:
    the step commits, the signal's step runs and its sender is answered, then the threads stop."""
    import threading

    s = ActorSystem(db, clock=clock)
    held = held_commits(s)
    (ref,) = s.start_many(flows.collect, [(1,)])  # its first step on the actor thread
    _wait_until(lambda: len(held) == 1, "the first step reached the writer")
    answered: list = []
    sender = threading.Thread(target=lambda: answered.append(ref.signal("item", "x")))
    sender.start()
    _wait_until(lambda: len(ref_inbox(s, ref.id)) == 1, "the signal queued behind the paused step")
    closer = threading.Thread(target=s.shutdown)
    closer.start()
    _wait_until(lambda: s._rt.activator._closed, "shutdown reached the actors")
    held_commits.let_go(s)
    closer.join(T)
    sender.join(T)
    assert not closer.is_alive() and answered == [None]
    with ActorSystem(db, clock=clock) as again:
        assert again.get(ref.id).result(timeout=T) == ["x"]


def test_outcomes_queued_together_are_resolved_and_committed_together(db, clock, held_commits):
    """Children's outcomes that queue up behind a busy parent are taken in one pass: one commit
    for three of them, in the gather's order, and no read-back of the inbox per wake-up."""
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(flows.gather_staggered)
        s.idle(timeout=T)
        reads: list = []
        real_inbox = s._rt.store.inbox
        s._rt.store.inbox = lambda wid: reads.append(wid) or real_inbox(wid)
        held = held_commits(s, only=ref.id)
        clock.advance(1)
        _wait_until(lambda: len(held) == 1, "the parent committing child 1's outcome")
        clock.advance(1)
        _wait_until(lambda: len(ref_inbox(s, ref.id)) == 3, "three outcomes queued behind it")
        held_commits.let_go(s)
        assert ref.result(timeout=T) == [10, 20, 30, 40]
        # spawn, child 1's outcome, the other three with the end of the workflow
        assert s._rt.store.load_workflow(ref.id).step_seq == 3
        assert reads == []


def test_events_queued_before_a_stop_are_resolved_before_it(db, clock, held_commits):
    """Events queued behind a paused parent, then the stop of shutdown: the events are resolved
    and committed before the actor stops, not left for the next start to find."""
    import threading

    s = ActorSystem(db, clock=clock)
    ref = s.start(flows.gather_staggered)
    s.idle(timeout=T)
    held = held_commits(s, only=ref.id)
    clock.advance(1)
    _wait_until(lambda: len(held) == 1, "the parent committing child 1's outcome")
    clock.advance(1)
    _wait_until(lambda: len(ref_inbox(s, ref.id)) == 3, "three outcomes queued behind it")
    mailbox = s._rt.activator._live[ref.id].ref.actor_inbox._items  # shutdown forgets the actor
    closer = threading.Thread(target=s.shutdown)
    closer.start()
    _wait_until(lambda: len(mailbox) == 4, "the stop queued behind them")
    held_commits.let_go(s)
    closer.join(T)
    assert not closer.is_alive()
    con = connect(db)
    try:
        status, step_seq = con.execute(
            "SELECT status, step_seq FROM workflows WHERE id = ?", (ref.id,)
        ).fetchone()
    finally:
        con.close()
    assert (status, step_seq) == ("completed", 3)


def test_a_fault_keeps_every_procedure_outcome_the_actor_held(db, clock):
    """Two procedure outcomes are taken together and the step that consumes them fails to commit:
    both outcomes (not only the last message's) are kept, so the restarted actor finishes."""
    from persistence import Promise

    flows.LATER.clear()
    with ActorSystem(db, clock=clock) as s:
        real = s._rt.store.submit_step
        calls: list = []
        held: list = []

        def submit_step(sw):
            calls.append(sw)
            if len(calls) == 2:  # the commit of the first outcome: held
                p = Promise()
                held.append((sw, p))
                return p
            if len(calls) == 3:  # the step that takes the other two: fails
                p = Promise()
                p.set_exception(OSError("the disk went away"))
                return p
            return real(sw)

        s._rt.store.submit_step = submit_step
        ref = s.start(flows.gather_procedures, id="gp")
        _wait_until(lambda: len(held) == 1, "the first outcome's commit reached the writer")
        flows.LATER.set()
        _wait_until(lambda: len(ref_inbox(s, ref.id)) == 2, "the other two outcomes queued")
        sw, p = held.pop()
        real(sw).add_done_callback(_chain(p))
        assert ref.result(timeout=T) == [2, 20, 30]
        assert len(calls) == 4


def test_spawn_with_a_taken_id_raises_at_the_await(system):
    """spawn(..., id=X) where a workflow X exists raises WorkflowError at the await, where the
    workflow catches it (it used to fault the actor until the parent failed); X is untouched."""
    other = system.start(flows.collect, 5, id="taken")
    ref = system.start(flows.spawns_taken_id, "taken")
    text = ref.result(timeout=T)
    assert text.startswith("caught: spawn(") and "'taken'" in text and "exists already" in text
    assert other.status() is Status.RUNNING and other.info().parent_id is None


def test_gather_spawning_one_id_twice_raises_at_the_await(system):
    """Two spawns of one explicit id in one gather: the error is raised at the await, and
    neither child is started."""
    ref = system.start(flows.spawns_one_id_twice)
    assert ref.result(timeout=T).startswith("caught: spawn(")
    system.idle(timeout=T)
    assert [w.id for w in system.workflows() if w.parent_id == ref.id] == []


def test_procedure_of_a_lambda_is_refused_at_the_call(system):
    """procedure(lambda: ...) raises TypeError at the call (it used to be dispatched and fail
    after its retries as an unknown procedure)."""
    text = system.start(flows.calls_a_lambda).result(timeout=T)
    assert text.startswith("caught: procedure() needs a function that a restarted process can find")
    assert "<lambda>" in text


def test_module_imported_in_a_step_registers_its_procedures_and_reducers(system, db, tmp_path, monkeypatch):
    """A module first imported by workflow code during a step: its @procedure and @reducer lines
    decorate (they used to be taken for calls), and the step can call them."""
    name = "af_lazy_effects"
    (tmp_path / f"{name}.py").write_text(
        "from workflows import procedure, reducer\n\n"
        "@procedure\ndef triple(x):\n    return 3 * x\n\n"
        "@reducer\ndef note(db, x):\n"
        "    db.execute('CREATE TABLE IF NOT EXISTS lazy_notes (x INTEGER)')\n"
        "    db.execute('INSERT INTO lazy_notes VALUES (?)', (x,))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    ref = system.start(flows.imports_in_a_step, name, 7)
    ref.signal("go")
    assert ref.result(timeout=T) == 21
    mod = sys.modules[name]
    assert callable(mod.triple) and mod.triple(2) == 6 and callable(mod.note)
    con = connect(db)
    assert con.execute("SELECT x FROM lazy_notes").fetchall() == [(7,)]
    con.close()


def test_signals_lost_by_mistake_are_in_the_senders_history(db, clock):
    """send() to an unknown id or a full inbox is shown in the sender's own history (wf show),
    in the step's transaction, besides the log's warning; the buffered ones are delivered."""
    with ActorSystem(db, clock=clock, inbox_limit=2) as system:
        sink = system.start(flows.collect, 2)
        assert system.start(flows.sends_many, sink.id, 3, id="sender").result(timeout=T) == 3
        assert sink.result(timeout=T) == [0, 1]
    con = connect(db)
    rows = con.execute("SELECT event, detail FROM history WHERE workflow_id = 'sender' ORDER BY seq").fetchall()
    con.close()
    lost = [json.loads(d) for e, d in rows if e == "signal_dropped"]
    assert lost == [
        {"to": sink.id, "name": "item", "reason": "inbox full (2 buffered signals)"},
        {"to": "nobody-has-this-id", "name": "item", "reason": "unknown workflow"},
    ]
    assert [e for e, _ in rows][-1] == "completed"


def test_broadcast_to_a_full_inbox_is_logged(db, clock):
    """A subscriber whose inbox is full does not get a broadcast: the count says so, and a
    broadcast_dropped warning names it (it used to be skipped without a word)."""
    with ActorSystem(db, clock=clock, inbox_limit=1) as system:
        full = system.start(flows.subscribed_not_listening, "g", id="full")
        system.start(flows.subscribed_not_listening, "g", id="roomy")
        full.signal("filler")
        with capture_logs() as logs:
            assert system.broadcast("go", "g", 1) == 1
        dropped = [e for e in logs if e["event"] == "broadcast_dropped"]
        assert [(e["workflow_id"], e["log_level"]) for e in dropped] == [("full", "warning")]
        assert "inbox full" in dropped[0]["reason"]


def test_refs_after_shutdown_raise_system_closed(db, clock):
    """status(), info() and result() of a ref after shutdown raise SystemClosed, as documented
    (they raised the store's StoreClosed); a second system in this process is told so."""
    from persistence import DatabaseLocked

    s = ActorSystem(db, clock=clock)
    ref = s.start(flows.collect, 1)
    with pytest.raises(DatabaseLocked, match="another ActorSystem .* in this very process"):
        ActorSystem(db, clock=clock)
    s.shutdown()
    for call in (ref.status, ref.info, ref.result):
        with pytest.raises(actors._system.SystemClosed):
            call()


def test_start_with_an_unpicklable_argument_names_the_argument(system):
    """An argument that cannot be pickled fails the start, naming the argument (the message
    spoke of a live local), and nothing is created."""
    from workflows import CheckpointError

    with pytest.raises(CheckpointError, match=r"cannot start workflow .*collect: its argument 'n' \(_thread.lock\)"):
        system.start(flows.collect, threading.Lock())
    with pytest.raises(CheckpointError, match="its argument 'n'"):
        system.start_many(flows.collect, [(1,), (threading.Lock(),)])
    assert system.workflows() == []


def _steps_and_ends(db: str, wid: str) -> list[tuple]:
    from persistence import open_store

    with open_store(db, owner=False) as store:
        return [(h.event, json.loads(h.detail), h.at, h.seq is None) for h in store.history(wid)]


def test_history_says_what_woke_each_step(db, clock):
    """Each step's history event names what woke it (start, signal, timer, procedure with its
    outcome, children, cancel), with its step number and time, ahead of the end's event."""
    t0 = clock.now()
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.each_kind, id="k")
        ref.signal("go")
        system.idle(timeout=T)
        clock.advance(5)
        system.idle(timeout=T)
        clock.advance(1)
        system.idle(timeout=T)
        assert "never" in ref.info().waiting_on
        ref.cancel("enough")
        with pytest.raises(Cancelled):
            ref.result(timeout=T)
    events = _steps_and_ends(db, "k")
    assert [e[3] for e in events] == [True] * (len(events) - 1) + [False]  # the end: history table
    assert [e[1].pop("step") for e in events[:-1]] == list(range(1, len(events)))
    double_fn, refuses_fn = f"{flows.__name__}:double", f"{flows.__name__}:refuses"
    assert [(e[0], e[1]) for e in events[:5]] == [
        ("started", {}),
        ("signal", {"name": "go"}),
        ("timer", {"name": "pause"}),
        ("procedure", {"function": double_fn, "attempts": 1, "ok": True}),
        ("procedure", {"function": refuses_fn, "attempts": 1, "ok": False, "error": "ValueError"}),
    ]
    # The two children end together: taken in one step, or the first in a step of its own.
    children = [(e[0], e[1]) for e in events[5:-2]]
    kids = {"k/child-5.0", "k/child-5.1"}  # spawned by step 5
    if len(children) == 1:
        (kind, detail), = children
        assert kind == "child" and detail["taken"] == 2 and detail["child"] in kids
    else:
        assert [c[0] for c in children] == ["gather", "child"] and children[0][1] == {"taken": 1}
        assert children[1][1]["child"] in kids and "taken" not in children[1][1]
    assert all(c[1].get("outcome", "completed") == "completed" for c in children)
    assert events[-2][:2] == ("cancel", {"reason": "enough"})
    assert events[-1][:2] == ("cancelled", {"reason": "enough"})
    assert [e[2] for e in events] == sorted(e[2] for e in events)
    assert events[0][2] == pytest.approx(t0) and events[2][2] == pytest.approx(t0 + 5)


def test_history_keeps_the_newest_steps_across_restarts(db, clock):
    """A workflow's row describes its newest RECENT_STEPS steps; a restart goes on from them
    (no step lost or described twice)."""
    from persistence import RECENT_STEPS

    n = RECENT_STEPS + 5
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.collect, n, id="c")
        for i in range(8):
            ref.signal("item", i)
        system.idle(timeout=T)
        assert len(_steps_and_ends(db, "c")) == 9
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("c")
        for i in range(8, n):
            ref.signal("item", i)
        assert ref.result(timeout=T) == list(range(n))
    events = _steps_and_ends(db, "c")
    assert len(events) == RECENT_STEPS + 1
    assert [(e[0], e[1]) for e in events[:-1]] == [
        ("signal", {"step": s, "name": "item"}) for s in range(n + 2 - RECENT_STEPS, n + 2)
    ]
    assert events[-1][0] == "completed"
