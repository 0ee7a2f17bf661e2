"""The procedure executor's hand-over of outcomes, at the edges the runtime tests cannot time."""

from __future__ import annotations

import threading
import time

import pytest

from actors._clock import SystemClock
from actors._procedures import ProcedureDone, ProcedureExecutor, _Workers, pack_call
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
    """A call that finishes while the system is closing (a clean shutdown waits for it) records
    its outcome, so the next start does not run it again."""
    from . import fault_flows

    store = open_store(str(tmp_path / "a.db"))
    store.create_workflow(NewWorkflow(id="w", type="m:wf", continuation=dumps(0), fingerprint="f",
                                      created_at=1.0))
    store.commit_step(StepWrite("w", 1, updated_at=1.0, new_procedures=[
        NewProcedure("w#1.0", "tests.actors.fault_flows:held", pack_call((21,), {}, None, None), 0.0)]))
    got: list[ProcedureDone] = []
    ex = ProcedureExecutor(store, SystemClock(), 1, lambda wid, d: got.append(d), lambda at, f: None, WorkCounter())
    fault_flows.STARTED.clear()
    fault_flows.RELEASE.clear()
    try:
        ex.dispatch(store.procedures("w")[0])
        assert fault_flows.STARTED.wait(10)
        threading.Timer(0.1, fault_flows.RELEASE.set).start()  # it returns while shutdown waits
        ex.shutdown()
        deadline = time.monotonic() + 10
        while store.procedures("w")[0].status == "pending" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == []
        (row,) = store.procedures("w")
        assert (row.status, loads(row.result), row.attempts) == ("done", 42, 1)
    finally:
        fault_flows.RELEASE.set()
        store.close()


def test_a_shutdown_gives_back_the_count_of_an_attempt_not_started(tmp_path):
    """A call queued behind a busy pool is counted as attempt 1 with its row but has not run: at
    shutdown its row is uncounted, and the next start runs it as attempt 1."""
    store = _store_with_a_pending_call(str(tmp_path / "a.db"))
    assert store.procedures("w")[0].attempts == 1  # counted by the step that made the row
    ex = ProcedureExecutor(store, SystemClock(), 1, lambda wid, d: None, lambda at, f: None, WorkCounter())
    gate = threading.Event()
    ex._pool.submit(gate.wait, 10)  # the one worker is busy
    try:
        ex.dispatch(store.procedures("w")[0])
        threading.Timer(0.1, gate.set).start()  # the busy worker's call ends while shutdown waits
        ex.shutdown()
        assert store.procedures("w")[0].attempts == 0
    finally:
        gate.set()
        store.close()


def test_the_pool_runs_at_most_its_size_at_once_and_survives_a_failing_call():
    pool = _Workers(2, "test-proc")
    lock = threading.Lock()
    running, peak, ran = [0], [0], []
    release = threading.Event()

    def call(i: int) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
            ran.append(i)
        if i == 0:
            raise RuntimeError("a call that fails must not end its worker")

    for i in range(6):
        pool.submit(call, i)
    assert len(pool._threads) == 2
    deadline = time.monotonic() + 10
    while running[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # both threads hold a call; the other four wait in the queue
    time.sleep(0.05)
    assert running[0] == 2
    release.set()
    while len(ran) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(ran) == list(range(6)) and peak[0] == 2
    assert pool.shutdown() == []
    for t in pool._threads:
        t.join(10)
        assert not t.is_alive()
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(call, 7)


def test_shutdown_hands_back_the_calls_not_started_and_counts_them_done():
    """Queued calls are dropped at shutdown (their rows stay pending for the next start), and the
    work counter forgets them, as it forgets a call that ran."""
    work = WorkCounter()
    ex = ProcedureExecutor(None, SystemClock(), 1, lambda wid, d: None, lambda at, f: None, work)  # type: ignore[arg-type]
    gate = threading.Event()
    ex._pool.submit(gate.wait, 10)  # the one worker is busy
    for i in range(3):
        ex._submit(f"k{i}", "w", "tests.actors.flows:double", b"", 1)
    assert work.count == 3
    threading.Timer(0.1, gate.set).start()  # the busy worker's call ends while shutdown waits
    ex.shutdown()
    assert work.count == 0


def test_a_pool_needs_a_thread():
    with pytest.raises(ValueError, match="procedure_workers must be at least 1"):
        _Workers(0, "test-proc")


def test_a_call_goes_to_an_idle_thread_before_a_new_one_starts():
    pool = _Workers(4, "test-proc")
    try:
        for i in range(5):
            done = threading.Event()
            pool.submit(done.set)
            assert done.wait(10)
            deadline = time.monotonic() + 10
            while not pool._idle and time.monotonic() < deadline:
                time.sleep(0.001)  # the thread is back among the idle ones
            assert len(pool._idle) == 1, i
        assert len(pool._threads) == 1
    finally:
        pool.shutdown()
    for t in pool._threads:
        t.join(10)
        assert not t.is_alive()


def test_a_burst_of_calls_on_idle_threads_runs_every_call():
    """Calls that come while a woken thread has not started yet wait in the queue; each thread
    that starts wakes the next, so none is left behind."""
    pool = _Workers(4, "test-proc")
    try:
        warm = [threading.Event() for _ in range(4)]
        hold = threading.Event()
        for e in warm:
            pool.submit(lambda e=e: (e.set(), hold.wait(10)))
        assert all(e.wait(10) for e in warm)  # four threads, all busy
        hold.set()
        deadline = time.monotonic() + 10
        while len(pool._idle) < 4 and time.monotonic() < deadline:
            time.sleep(0.001)  # all four idle again
        done = threading.Semaphore(0)
        lock = threading.Lock()
        ran: list[int] = []

        def call(i: int) -> None:
            with lock:
                ran.append(i)
            done.release()

        for i in range(200):
            pool.submit(call, i)
        assert all(done.acquire(timeout=10) for _ in range(200))
        assert sorted(ran) == list(range(200)) and len(pool._threads) == 4
    finally:
        pool.shutdown()


def test_a_clean_shutdown_lets_a_running_attempt_finish_and_keeps_its_outcome(tmp_path, caplog):
    """``shutdown()`` (and so ``serve()`` on SIGTERM) waits for the attempt running now: its
    outcome is recorded while the store is open, nothing is logged as failed, and the next start
    takes the outcome instead of running the call a second time."""
    import logging

    from actors import ActorSystem

    from . import limit_flows as lf

    lf.reset()
    db = str(tmp_path / "s.db")
    system = ActorSystem(db)
    system.start(lf.call_gated, 7, id="g")
    deadline = time.monotonic() + 30
    while not lf.STARTS:
        assert time.monotonic() < deadline, "the attempt never started"
        time.sleep(0.01)
    opener = threading.Timer(0.2, lf.GATE.set)  # it returns while the shutdown waits for it
    opener.start()
    with caplog.at_level(logging.WARNING, logger="actorflow"):
        system.shutdown()
    opener.join()
    assert lf.RUNNING[0] == 0  # it had finished when shutdown() returned
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    with ActorSystem(db) as again:
        assert again.get("g").result(timeout=30) == 7
    assert [w for w, _ in lf.STARTS] == ["7"]  # run once


def test_a_shutdown_with_no_attempt_running_says_none_is_finishing(tmp_path, caplog):
    """Once every procedure call has ended, ``shutdown()`` logs no ``procedure_attempts_finishing``:
    it said ``running=1`` for the pool's idle worker on its way out, as if an attempt ran."""
    import logging

    from actors import ActorSystem

    from . import flows

    with caplog.at_level(logging.INFO, logger="actorflow"):
        with ActorSystem(str(tmp_path / "s.db")) as system:
            assert system.start(flows.adder, 2).result(timeout=30) is not None
            system.idle(timeout=30)
        said = [r.getMessage() for r in caplog.records]
    assert any("system_shutdown" in m for m in said)
    assert not [m for m in said if "procedure_attempts" in m], said
