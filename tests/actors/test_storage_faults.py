"""Storage faults the runtime survives: a full disk, a crash at the worst moment, a failed open.

Each test runs on real files; a full disk is a small tmpfs (mounted when running as root; the
test is skipped, with the reason, where it cannot be).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from actors import ActorSystem, Status
from actors.cli import main as wf_main
from persistence import open_store

from . import fault_flows

ROOT = pathlib.Path(__file__).resolve().parents[2]
T = 30


class SmallDisk:
    """A 4 MB tmpfs, filled and freed on demand."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self, leave: int) -> None:
        """Fill the disk, leaving about ``leave`` bytes free."""
        # Unbuffered: a write the disk cannot take fails alone, with nothing left to flush at close.
        with open(self.filler, "ab", buffering=0) as f:
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)
        size = self.filler.stat().st_size
        os.truncate(self.filler, max(0, size - leave))

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[SmallDisk]:
    """A 4 MB tmpfs (root only: ``mount -t tmpfs``)."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs, and only root may mount one here")
    d = tmp_path / "disk"
    d.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(d)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield SmallDisk(d)
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


def _wf(*argv: str) -> int:
    return wf_main(list(argv))


def test_wf_signal_request_survives_a_full_disk(small_disk: SmallDisk) -> None:
    """An acknowledged `wf signal` whose append finds the disk full is kept (it was deleted: the
    small DELETE fitted where the append did not), and is delivered once space is back, by the
    running system on its own."""
    db = str(small_disk.path / "wf.db")
    with ActorSystem(db) as s:
        s.start(fault_flows.takes, "go", id="taker")
        s.idle(timeout=T)
    big = "x" * 300_000
    assert _wf("signal", "taker", "go", json.dumps(big), "--db", db) == 0  # acknowledged
    small_disk.fill(leave=60_000)
    try:
        with ActorSystem(db) as s:
            with open_store(db, owner=False) as reader:
                assert [r.name for r in reader.take_external(0)] == ["go"]  # kept, not lost
            assert s.get("taker").status() is Status.RUNNING
            small_disk.free()
            s.idle(timeout=T)
            assert s.get("taker").result(timeout=T) == big
            with open_store(db, owner=False) as reader:
                assert reader.take_external(0) == []
    finally:
        small_disk.free()


def test_failed_open_leaves_nothing_running(tmp_path: pathlib.Path) -> None:
    """An ActorSystem whose opening fails after the store opened (here its recovery meets an I/O
    error) stops every thread it started and releases the file: a later ActorSystem on the same
    file in this process opens (it got DatabaseLocked, and the threads ran on)."""
    db = str(tmp_path / "wf.db")
    with ActorSystem(db) as s:
        s.start(fault_flows.takes, "go", id="taker")
        s.idle(timeout=T)
    before = set(threading.enumerate())
    from persistence import PersistenceError, SqliteStore

    real = SqliteStore.workflows_with_work

    def broken(self):
        raise PersistenceError("disk I/O error (injected)", path=db)

    SqliteStore.workflows_with_work = broken  # type: ignore[method-assign]
    try:
        with pytest.raises(PersistenceError, match="injected"):
            ActorSystem(db)
    finally:
        SqliteStore.workflows_with_work = real  # type: ignore[method-assign]
    for t in set(threading.enumerate()) - before:
        t.join(timeout=T)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []
    with ActorSystem(db) as s:
        s.get("taker").signal("go", 5)
        assert s.get("taker").result(timeout=T) == 5


def test_open_on_a_full_disk_works_and_a_later_one_too(small_disk: SmallDisk) -> None:
    """An ActorSystem opened on a disk too full for the `wf` requests it finds opens (they are
    kept for later); after shutdown, another in the same process opens the file (a failed open
    left the file locked there)."""
    db = str(small_disk.path / "wf.db")
    with ActorSystem(db) as s:
        s.start(fault_flows.takes, "go", id="taker")
        s.idle(timeout=T)
    assert _wf("signal", "taker", "go", json.dumps("y" * 300_000), "--db", db) == 0
    small_disk.fill(leave=60_000)
    try:
        ActorSystem(db).shutdown()
        small_disk.free()
        with ActorSystem(db) as s:
            assert s.get("taker").result(timeout=T) == "y" * 300_000
    finally:
        small_disk.free()


_CRASH_AFTER_STEP = """
    import os, sys, time
    sys.path.insert(0, {root!r})
    from persistence import SqliteStore
    from actors import ActorSystem

    def crash_when_carried_out(self, seqs):
        # The owner dies after the step that carried the request out committed, before this
        # separate delete of the requests it handled (where the code deleted fire-timer ones).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.load_workflow("ticker").step_seq < 2:
            time.sleep(0.01)
        os._exit(9)

    SqliteStore.delete_external = crash_when_carried_out
    s = ActorSystem({db!r})
    s.idle(timeout=20)
    os._exit(0)  # no clean shutdown either
"""


def test_wf_fire_timer_request_is_carried_out_once_across_an_owner_crash(tmp_path: pathlib.Path) -> None:
    """A `wf fire-timer` request is deleted by the step that fires the timer: an owner that dies
    right after that step fires nothing more at the next start (the request was deleted only
    after the whole batch, so the next start fired the workflow's next timer of that name)."""
    db = str(tmp_path / "wf.db")
    with ActorSystem(db) as s:
        s.start(fault_flows.ticks, 2, id="ticker", test_mode=True)
        s.idle(timeout=T)
    assert _wf("fire-timer", "ticker", "tick", "--db", db) == 0
    code = textwrap.dedent(_CRASH_AFTER_STEP.format(root=str(ROOT), db=db))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 9), proc.stderr
    with ActorSystem(db) as s:
        s.idle(timeout=T)
        ref = s.get("ticker")
        assert ref.status() is Status.RUNNING  # one tick taken of two
        with open_store(db, owner=False) as reader:
            assert reader.take_external(0) == []
        ref.debug_fire_timer("tick")
        assert ref.result(timeout=T) == 2


_OWNER_RUN = """
    import sys
    sys.path.insert(0, {root!r})
    from actors import ActorSystem
    from tests.actors import fault_flows
    with ActorSystem({db!r}) as s:
        {start}
        {wait}
"""


def _owner_runs(db: str, start: str = "pass", limit: int = 8, wait: str = "s.idle(timeout=20)") -> list[int]:
    """Start an owner process on ``db`` (after ``start``, it does ``wait`` and shuts down) again
    and again while one dies, up to ``limit`` times; return their exit codes."""
    codes = []
    for _ in range(limit):
        code = textwrap.dedent(_OWNER_RUN.format(root=str(ROOT), db=db, start=start, wait=wait))
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
        codes.append(proc.returncode)
        start = "pass"
        if proc.returncode == 0:
            break
        assert proc.returncode == 3, proc.stderr  # the procedure took it down, nothing else
    return codes


@pytest.mark.parametrize("raises_first", [0, 1], ids=["every-attempt-dies", "first-raises-then-dies"])
def test_procedure_that_kills_its_process_runs_exactly_its_attempts(db: str, tmp_path: pathlib.Path, raises_first: int) -> None:
    """A procedure whose attempt kills the process (os._exit) runs exactly maximum_attempts times
    across restarts, the first attempt and one retried in-process included, and the workflow
    gets ProcedureFailed saying the attempts died with the process. (Counted only when it failed
    in-process, it ran at every start, forever; counted at recovery only, the first attempt, and
    an in-process retry, went uncounted: it ran maximum_attempts + 1 times.) On SQLite and on
    PostgreSQL."""
    log = tmp_path / "runs.log"
    start = f"s.start(fault_flows.calls_dying, {str(log)!r}, 3, {raises_first}, id='doomed')"
    codes = _owner_runs(db, start, wait="s.get('doomed').result(timeout=20)")
    assert codes == [3] * (3 - raises_first) + [0], codes
    assert log.read_text().count("ran") == 3
    with ActorSystem(db) as s:
        result = s.get("doomed").result(timeout=T)
    assert result.startswith("failed: procedure tests.actors.fault_flows:dies failed after 3 attempt(s)")
    assert "ended with the process running it" in result
    assert result.endswith("[actors.AttemptsDied]")  # its public name, as ProcedureTimeout's
    assert log.read_text().count("ran") == 3


def test_a_shutdown_gives_back_an_attempt_that_had_not_started(tmp_path: pathlib.Path) -> None:
    """An attempt is counted before it runs; one still waiting for its backoff when the system
    shuts down did not run, and the next start runs it as that attempt (not counted used: the
    call would fail without its last attempt)."""
    from actors.testing import VirtualClock

    db, log = str(tmp_path / "wf.db"), tmp_path / "runs.log"
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(fault_flows.calls_fails_once, str(log), id="retries")
        s.idle(timeout=T)
        assert ref.status() is Status.RUNNING and log.read_text().count("ran") == 1
    clock.advance(60)
    with ActorSystem(db, clock=clock) as s:
        s.idle(timeout=T)
        assert s.get("retries").result(timeout=T) == "ok"
    assert log.read_text().count("ran") == 2


def test_wf_cancel_lands_before_a_procedure_that_kills_its_process(tmp_path: pathlib.Path) -> None:
    """A `wf cancel` made while no system runs is carried out at the next start before the
    pending procedures run again: one that kills its process is not run again, and the workflow
    ends cancelled (recovery dispatched procedures first, so the cancel never landed)."""
    db, log = str(tmp_path / "wf.db"), tmp_path / "runs.log"
    codes = _owner_runs(db, f"s.start(fault_flows.calls_dying, {str(log)!r}, id='doomed')", limit=1)
    assert codes == [3] and log.read_text().count("ran") == 1
    assert _wf("cancel", "doomed", "--db", db) == 0
    assert _owner_runs(db, limit=1) == [0]
    assert log.read_text().count("ran") == 1
    with ActorSystem(db) as s:
        assert s.get("doomed").status() is Status.CANCELLED


def test_reducer_that_keeps_raising_says_the_workflow_failed(tmp_path: pathlib.Path) -> None:
    """The error of a workflow failed by a reducer that kept raising says what happened: the step
    was run again until the restart intensity was exceeded, then the workflow failed (it said
    "the workflow resumes from its last checkpoint", which it had just stopped doing)."""
    from actors.testing import VirtualClock
    from workflows import WorkflowFailed

    from . import flows

    clock = VirtualClock()
    with ActorSystem(str(tmp_path / "wf.db"), clock=clock) as s:
        ref = s.start(flows.faulty)
        s.idle(timeout=T)
        clock.advance(1)
        s.idle(timeout=T)
        with pytest.raises(WorkflowFailed) as info:
            ref.result(timeout=T)
    message = info.value.error_message or ""
    assert message.startswith("runtime fault after 5 restarts in 60s: reducer tests.actors.flows:bad_reducer")
    assert "resumes from its last checkpoint" not in message
    assert "fails the workflow once that has happened more often than its restart intensity" in message
    assert ref.id in message


LONE = "bad\udc80name"  # what os.fsdecode leaves of an undecodable byte


def test_lone_surrogate_in_an_id_or_a_name_is_refused_at_the_api(tmp_path: pathlib.Path) -> None:
    """An id or a name holding a lone surrogate is refused where it is given, with a ValueError
    naming the argument (it failed in the store with a raw UnicodeEncodeError)."""
    with ActorSystem(str(tmp_path / "wf.db")) as s:
        with pytest.raises(ValueError, match=r"workflow id 'bad\\udc80name' holds a lone surrogate '\\udc80' at index 3"):
            s.start(fault_flows.takes, "go", id=LONE)
        with pytest.raises(ValueError, match="workflow id"):
            s.start_many(fault_flows.takes, [("go",)], ids=[LONE])
        with pytest.raises(ValueError, match="workflow id"):
            s.get(LONE)
        ref = s.start(fault_flows.takes, "go", id="taker")
        with pytest.raises(ValueError, match="signal name 'bad"):
            ref.signal(LONE, 1)
        with pytest.raises(ValueError, match="broadcast name"):
            s.broadcast(LONE, None, 1)
        with pytest.raises(ValueError, match="timer name"):
            ref.debug_fire_timer(LONE)
        ref.signal("go", 7)
        assert ref.result(timeout=T) == 7
        assert [w.id for w in s.workflows()] == ["taker"]


def test_lone_surrogate_awaited_as_a_signal_name_fails_the_workflow_at_once(tmp_path: pathlib.Path) -> None:
    """A workflow awaiting a signal whose name holds a lone surrogate gets the ValueError where
    it builds the command, in its own code: it fails at once with that error (the store's
    UnicodeEncodeError was a runtime fault, and the workflow failed after five restarts)."""
    from structlog.testing import capture_logs

    from workflows import WorkflowFailed

    with ActorSystem(str(tmp_path / "wf.db")) as s, capture_logs() as logs:
        ref = s.start(fault_flows.takes, LONE)
        with pytest.raises(WorkflowFailed) as info:
            ref.result(timeout=T)
        s.idle(timeout=T)
    assert info.value.error_type == "ValueError"
    assert "signal name 'bad\\udc80name' holds a lone surrogate" in (info.value.error_message or "")
    assert [e for e in logs if e["event"] == "actor_restarted"] == []


@pytest.mark.parametrize("removed", ["file", "directory"])
def test_a_database_file_removed_under_a_running_system_is_not_written_on(tmp_path: pathlib.Path, removed: str) -> None:
    """The database file (with its -wal), or its directory, removed while a system runs: the
    writes would go to files no one can open once the process ends, lost with everything they
    acknowledged. They are refused instead, with a ``StorageIOError`` saying what happened and
    what to do; the workflows are not failed."""
    from persistence import StorageIOError

    d = tmp_path / "data"
    d.mkdir()
    db = str(d / "gone.db")
    s = ActorSystem(db)
    try:
        ref = s.start(fault_flows.takes, "go", id="taker")
        s.idle(timeout=T)
        if removed == "file":
            for f in d.iterdir():
                f.unlink()
        else:
            shutil.rmtree(d)
        with pytest.raises(StorageIOError) as refused:
            ref.signal("go", 1)
        assert "was removed or replaced" in str(refused.value) and "backup" in str(refused.value)
        with pytest.raises(StorageIOError):
            s.start(fault_flows.takes, "go", id="another")
    finally:
        s.shutdown()
