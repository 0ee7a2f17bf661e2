"""The group-commit writer: batching, per-step rollback, failed commits, full disks, closing.

While the writer is held (``_writer_blocked``) a ``:memory:`` store cannot be read (readers and
the writer take turns there), so steps are built before blocking it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from persistence import (
    DiskFull,
    PersistenceError,
    ReducerFailed,
    StaleStep,
    StepWrite,
    StoreClosed,
    open_store,
)
from persistence._writer import stage_on_this_thread

from .conftest import new_wf, step


@contextlib.contextmanager
def _writer_blocked(store):
    """Hold the writer thread inside a write until the block exits, so later writes pile up.

    The writes queued meanwhile join the held write's batch before its COMMIT: they share its
    commit, and its fate (a failed COMMIT fails the held write too, so only wait for it here).
    """
    entered, release = threading.Event(), threading.Event()

    def hold(w) -> None:
        entered.set()
        assert release.wait(30)

    fut = store._write(hold)
    assert entered.wait(30)
    try:
        yield
    finally:
        release.set()
        fut.exception(30)


def test_batch_commits_together_and_isolates_failures(store) -> None:
    """Queued steps share one commit; a stale step and a failing reducer fail alone."""
    for wid in ("a", "b", "c"):
        store.create_workflow(new_wf(wid))

    def boom(db) -> None:
        db["app"].insert({"from": "c"})
        raise RuntimeError("reducer bug")

    steps = [step(store, "a", reducers=[lambda db: db["app"].insert({"from": "a"})]),
             StepWrite("b", 7), step(store, "c", reducers=[boom]),
             step(store, "b", continuation=b"b1")]
    commits_before = store._writer.commits
    with _writer_blocked(store):
        fa, fstale, fc, fb = [store.submit_step(s) for s in steps]
    fa.result(10)
    fb.result(10)
    with pytest.raises(StaleStep):
        fstale.result(10)
    with pytest.raises(ReducerFailed, match="reducer bug"):
        fc.result(10)
    # The four queued steps joined the held write's batch: one commit for all five.
    assert store._writer.commits - commits_before == 1
    assert store.read_table("SELECT \"from\" FROM app") == [{"from": "a"}]
    assert [store.load_workflow(w).step_seq for w in "abc"] == [1, 1, 0]


def test_memory_readers_never_find_a_failed_transaction_open() -> None:
    """On ``:memory:`` (shared cache: table locks, no snapshots) a transaction that failed is rolled
    back before readers are let in again; a read in between raised ``DatabaseBusy`` (``database
    table is locked``), from ``idle()`` or ``status()`` while a reducer that raised was retried."""
    s = open_store(":memory:")
    try:
        writer = s._writer
        open_at_release: list[bool] = []

        class Watched:
            def __init__(self, lock: threading.RLock) -> None:
                self.lock = lock

            def __enter__(self) -> None:
                self.lock.acquire()

            def __exit__(self, *exc: object) -> None:
                open_at_release.append(writer.conn.in_transaction)
                self.lock.release()

        writer._gate = Watched(writer._gate)
        s.create_workflow(new_wf("a"))

        def boom(db) -> None:
            db["app"].insert({"x": 1})
            raise RuntimeError("reducer bug")

        with pytest.raises(ReducerFailed):
            s.submit_step(step(s, "a", reducers=[boom])).result(10)
        assert open_at_release and not any(open_at_release), open_at_release
        assert s.load_workflow("a").step_seq == 0
    finally:
        s.close()


def test_failed_commit_fails_whole_batch_and_writer_survives(file_store) -> None:
    """If COMMIT fails, every step of the batch fails and nothing is visible; the writer goes on."""
    s = file_store
    s._write_wait(lambda w: w.conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
    s._write_wait(lambda w: w.conn.execute(
        "CREATE TABLE child (pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)"))
    for wid in ("a", "b"):
        s.create_workflow(new_wf(wid))
    sa = step(s, "a", reducers=[lambda db: db["child"].insert({"pid": 99})])
    sb = step(s, "b", continuation=b"x")
    # Foreign keys are a connection setting that cannot change inside a transaction; the writer
    # is idle (blocked on its queue) here, so setting it from this thread is safe.
    s._writer.conn.execute("PRAGMA foreign_keys = ON")
    with _writer_blocked(s):
        fa = s.submit_step(sa)
        fb = s.submit_step(sb)
    for f in (fa, fb):
        with pytest.raises(PersistenceError, match="FOREIGN KEY"):
            f.result(10)
    assert [s.load_workflow(w).step_seq for w in "ab"] == [0, 0]
    s._writer.conn.execute("PRAGMA foreign_keys = OFF")
    s.commit_step(step(s, "b", continuation=b"y"))
    assert s.load_workflow("b").continuation == b"y"


def test_group_commit_under_concurrency(file_store) -> None:
    """64 threads committing steps of their own workflows: all land, in fewer commits than steps."""
    s = file_store
    n_threads, n_steps = 64, 20
    for t in range(n_threads):
        s.create_workflow(new_wf(f"w{t}"))
    before = s._writer.commits

    def run(t: int) -> None:
        for i in range(1, n_steps + 1):
            s.commit_step(StepWrite(f"w{t}", i, continuation=str(i).encode(),
                                    reducers=[lambda db, t=t, i=i: db["app"].insert({"t": t, "i": i})]),
                          timeout=60)

    with ThreadPoolExecutor(n_threads) as pool:
        list(pool.map(run, range(n_threads)))
    assert all(s.load_workflow(f"w{t}").step_seq == n_steps for t in range(n_threads))
    assert s.read_table("SELECT count(*) AS n, count(DISTINCT t || '-' || i) AS d FROM app") == [
        {"n": n_threads * n_steps, "d": n_threads * n_steps}]
    assert s._writer.commits - before < n_threads * n_steps


def test_close_finishes_queued_writes(db_path: str) -> None:
    """close() commits what was queued before it; later writes raise StoreClosed."""
    s = open_store(db_path)
    s.create_workflow(new_wf("a"))
    futs = []
    with _writer_blocked(s):
        futs = [s.submit_step(StepWrite("a", i)) for i in range(1, 6)]
        closer = threading.Thread(target=s.close)
        closer.start()
    closer.join(30)
    assert [f.result(10).timer_ids for f in futs] == [[]] * 5
    with pytest.raises(StoreClosed):
        s.submit_step(StepWrite("a", 6))
    with open_store(db_path) as again:
        assert again.load_workflow("a").step_seq == 5


def test_late_writes_join_the_running_batch_once(file_store) -> None:
    """A write queued while a batch runs commits with it; one queued during that late one waits."""
    s = file_store
    for wid in ("a", "b"):
        s.create_workflow(new_wf(wid))
    late_running, late_release = threading.Event(), threading.Event()

    def late(w) -> str:
        late_running.set()
        assert late_release.wait(30)
        return "late"

    entered, release = threading.Event(), threading.Event()

    def hold(w) -> None:
        entered.set()
        assert release.wait(30)

    before = s._writer.commits
    f_hold = s._write(hold)
    assert entered.wait(30)
    fa = s.submit_step(step(s, "a", continuation=b"a1"))
    f_late = s._write(late)
    release.set()
    # The held batch took both queued writes before its COMMIT and now runs the late one.
    assert late_running.wait(30)
    fb = s.submit_step(step(s, "b", continuation=b"b1"))
    late_release.set()
    assert f_late.result(30) == "late"
    f_hold.result(30)
    fa.result(30)
    fb.result(30)
    # The held write, the step of "a" and the late write: one commit. "b" came while that batch
    # was already taking late writes, so it had the next one: batches stay bounded.
    assert s._writer.commits - before == 2
    assert [s.load_workflow(w).continuation for w in "ab"] == [b"a1", b"b1"]


def test_cancelled_future_is_skipped(store) -> None:
    """A queued step whose future was cancelled before it ran is not written."""
    store.create_workflow(new_wf("a"))
    never = step(store, "a", continuation=b"never")
    with _writer_blocked(store):
        fut = store.submit_step(never)
        assert fut.cancel()
    store.commit_step(step(store, "a", continuation=b"real"))
    assert store.load_workflow("a").continuation == b"real"


def test_disk_full_page_limit(file_store) -> None:
    """A step that does not fit (page limit reached) raises DiskFull; the store stays usable."""
    s = file_store
    s.create_workflow(new_wf("a"))
    pages = s._write_wait(lambda w: w.conn.execute("PRAGMA page_count").fetchone()[0])
    s._write_wait(lambda w: w.conn.execute(f"PRAGMA max_page_count = {pages + 2}"))
    with pytest.raises(DiskFull, match="full") as info:
        s.commit_step(step(s, "a", continuation=os.urandom(200_000)))
    assert s.path in str(info.value)
    assert s.load_workflow("a").step_seq == 0
    s._write_wait(lambda w: w.conn.execute("PRAGMA max_page_count = 1073741823"))
    s.commit_step(step(s, "a", continuation=b"small"))
    assert s.load_workflow("a").step_seq == 1


def test_reducer_that_commits_does_not_break_the_writer(file_store) -> None:
    """A reducer that commits the transaction itself: its step lands; later queued steps still do."""
    s = file_store
    for wid in ("a", "b"):
        s.create_workflow(new_wf(wid))

    def rude(db) -> None:
        db["app"].insert({"v": 1})
        db.conn.commit()

    steps = [step(s, "a", reducers=[rude]), step(s, "b", continuation=b"b")]
    with _writer_blocked(s):
        futs = [s.submit_step(x) for x in steps]
    for f in futs:
        f.result(10)
    assert [s.load_workflow(w).step_seq for w in "ab"] == [1, 1]
    s.commit_step(step(s, "a"))
    assert s.load_workflow("a").step_seq == 2


def test_disk_full_real_tmpfs(tmp_path: pathlib.Path) -> None:
    """On a real full file system (a tiny tmpfs), writes raise DiskFull and nothing half-written shows."""
    mnt = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        path = str(mnt / "wf.db")
        with open_store(path) as s:
            s.create_workflow(new_wf("a"))
            committed = 0
            with pytest.raises(DiskFull):
                for _ in range(200):
                    s.commit_step(step(s, "a", continuation=os.urandom(20_000)))
                    committed += 1
            assert s.load_workflow("a").step_seq == committed
        with open_store(path, owner=False) as r:
            assert r.load_workflow("a").step_seq == committed
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_barrier_returns_after_what_was_queued_before_it(file_store) -> None:
    """``barrier()`` returns once every write queued before it has committed (or failed)."""
    s = file_store
    done: list = []
    with _writer_blocked(s):
        futs = [s._writer.submit(lambda w, i=i: i) for i in range(3)]
        waiter = threading.Thread(target=lambda: done.append(s.barrier(30) or [f.done() for f in futs]))
        waiter.start()
        waiter.join(0.2)
        assert waiter.is_alive() and not done  # the writes before it are held, so is it
    waiter.join(30)
    assert done == [[True, True, True]]
    assert [f.result(30) for f in futs] == [0, 1, 2]


def test_every_write_runs_on_the_writers_thread(file_store) -> None:
    """No caller's thread ever runs a transaction: an interruption of a caller (Ctrl-C) can only
    interrupt its wait, never a commit."""
    s = file_store
    s.create_workflow(new_wf("a"))
    ran_on: list[threading.Thread] = []
    fut = s._writer.submit(lambda w: ran_on.append(threading.current_thread()) or "done")
    assert fut.result(30) == "done"
    s.commit_step(step(s, "a", continuation=b"a1", reducers=[lambda db: ran_on.append(threading.current_thread())]),
                  timeout=30)
    assert ran_on == [s._writer._thread, s._writer._thread]


def _staging(fn):
    """Run ``fn()`` on a new thread that stages what it submits ``here``, as an engine thread
    does; return what it returned."""
    out: list = []

    def run() -> None:
        stage_on_this_thread()
        out.append(fn())

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive()
    return out[0]


def test_steps_staged_by_an_engine_thread_commit_together_when_it_flushes(file_store) -> None:
    """An engine thread's steps wait, staged, without waking the writer's thread, until that
    thread flushes: then they commit in one transaction, on that thread."""
    s = file_store
    for wid in "ab":
        s.create_workflow(new_wf(wid))
    ran_on: list[threading.Thread] = []

    def where(db) -> None:
        ran_on.append(threading.current_thread())

    def stage_and_flush():
        futs = [s.submit_step(step(s, wid, continuation=wid.encode(), reducers=[where]), here=True)
                for wid in "ab"]
        staged = [f.done() for f in futs], s.staged_writes(), s.load_workflow("a").step_seq
        commits = s._writer.commits
        s.flush_staged()
        return staged, [f.exception(0) for f in futs], s._writer.commits - commits, threading.current_thread()

    staged, errors, commits, thread = _staging(stage_and_flush)
    assert staged == ([False, False], 2, 0)  # staged: nothing committed, the writer not woken
    assert errors == [None, None] and commits == 1
    assert ran_on == [thread, thread]
    assert s.staged_writes() == 0
    assert [s.load_workflow(w).continuation for w in "ab"] == [b"a", b"b"]


def test_a_step_submitted_here_by_any_other_thread_goes_to_the_writer(file_store) -> None:
    """Only an engine thread stages: from another thread ``here`` is a plain submit."""
    s = file_store
    s.create_workflow(new_wf("a"))
    ran_on: list[threading.Thread] = []
    fut = s.submit_step(step(s, "a", continuation=b"a1", reducers=[lambda db: ran_on.append(threading.current_thread())]),
                        here=True)
    assert fut.exception(30) is None
    assert ran_on == [s._writer._thread]
    assert s.staged_writes() == 0


def test_a_flush_ends_before_the_store_closes(db_path: str) -> None:
    """close() waits for a batch that an engine thread runs: its write is committed, not cut."""
    s = open_store(db_path)
    s.create_workflow(new_wf("a"))
    entered, release = threading.Event(), threading.Event()

    def slow(db) -> None:
        entered.set()
        assert release.wait(30)

    out: list = []

    def engine() -> None:
        stage_on_this_thread()
        out.append(s.submit_step(step(s, "a", continuation=b"a1", reducers=[slow]), here=True))
        s.flush_staged()

    t = threading.Thread(target=engine)
    t.start()
    assert entered.wait(30)
    closer = threading.Thread(target=s.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waits for the batch
    release.set()
    t.join(30)
    closer.join(30)
    assert not closer.is_alive() and out[0].exception(0) is None
    s2 = open_store(db_path)
    try:
        assert s2.load_workflow("a").continuation == b"a1"
    finally:
        s2.close()
