"""Storage faults are not workflow faults: on a real full disk (a tiny tmpfs) the engine keeps
what it acknowledged, retries with backoff, says so once, and resumes by itself once there is room
again, timer-driven workflows included, with no restart of the process."""

from __future__ import annotations

import errno
import os
import pathlib
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from actors.testing import VirtualClock
from persistence import StorageUnavailable
from workflows import Status

from . import flows
from .runtime_support import Inside

T = 30  # every wait in these tests is bounded


@pytest.fixture
def tiny_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """A 4 MB tmpfs, unmounted afterwards."""
    mnt = tmp_path / f"tiny-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (mounting needs root): {out.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: pathlib.Path) -> pathlib.Path:
    """Take every free block of the file system; the file returned gives them back."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError as e:
                assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def _failed_commits(system: ActorSystem, workflow_id: str) -> list[int]:
    """Count the steps of ``workflow_id`` whose commit failed for a reason of the storage."""
    inside = Inside(system)
    real = inside.store_method("submit_step")
    failed: list[int] = []

    def submit_step(sw, **kw):
        p = real(sw, **kw)
        if sw.workflow_id == workflow_id:
            p.add_done_callback(lambda p: isinstance(p.exception(0), StorageUnavailable) and failed.append(sw.step_seq))
        return p

    inside.patch_store("submit_step", submit_step)
    return failed


def _wait_until(cond, what: str, timeout: float = T) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_full_disk_is_waited_out_and_every_acknowledged_signal_and_timer_goes_on(tiny_disk) -> None:
    clock = VirtualClock(1_700_000_000.0)
    with capture_logs() as logs, ActorSystem(str(tiny_disk / "wf.db"), clock=clock) as s:
        sleeper = s.start(flows.sleeper, 10, id="sleeper")
        items = s.start(flows.collect, 40, id="items")
        s.idle(timeout=T)
        failed = _failed_commits(s, "sleeper")
        filler = _fill(tiny_disk)
        acknowledged, refused = [], 0
        for i in range(40):  # every signal is made durable, or its sender is told it was not
            try:
                items.signal("item", i)
                acknowledged.append(i)
            except StorageUnavailable:
                refused += 1
        assert refused, "the disk never filled up"
        clock.advance(10)  # the sleeper's timer falls due while nothing can be written
        # Far more failed attempts than the restart intensity allows a faulting workflow.
        _wait_until(lambda: len(failed) >= 9, "the sleeper's step kept being retried")
        assert sleeper.status() is Status.RUNNING
        filler.unlink()
        s.idle(timeout=T)
        assert sleeper.result(timeout=T) == 10  # its timer fired once there was room
        for i in range(40 - len(acknowledged)):
            items.signal("item", 100 + i)
        got = items.result(timeout=T)
        assert got[: len(acknowledged)] == acknowledged and len(got) == 40
    events = [e["event"] for e in logs]
    assert events.count("storage_unavailable") == 1 and events.count("storage_recovered") == 1
    assert "actor_restarted" not in events and "workflow_restart_intensity_exceeded" not in events


def test_a_procedure_attempt_that_fails_on_a_full_disk_is_retried_once_there_is_room(tiny_disk) -> None:
    """A procedure's attempt fails while the disk is full: the executor cannot write the retry,
    waits it out, and the call is retried and returns once there is room, with no restart."""
    clock = VirtualClock(1_700_000_000.0)
    flows.HELD_FLAKY.clear()
    flows.FLAKY_FAILS.clear()
    try:
        with capture_logs() as logs, ActorSystem(str(tiny_disk / "wf.db"), clock=clock) as s:
            ref = s.start(flows.uses_held_flaky, "disk", id="held")
            filler = _fill(tiny_disk)
            flows.HELD_FLAKY.set()  # the first attempt fails now, and its retry cannot be written
            met = ("procedure_storage_unavailable", "procedure_bookkeeping_failed")
            _wait_until(lambda: any(e["event"] in met for e in logs), "the retry's write met the full disk")
            filler.unlink()

            def retried() -> bool:
                clock.advance(1)  # the retry's backoff, on the workflow clock
                return flows.FLAKY_FAILS.get("disk", 0) >= 2

            _wait_until(retried, "the attempt was retried once there was room")
            assert ref.result(timeout=T) == "ok after 2"
        events = [e["event"] for e in logs]
        assert events.count("procedure_storage_unavailable") == 1
        assert events.count("procedure_storage_recovered") == 1
        assert "procedure_bookkeeping_failed" not in events
    finally:
        flows.HELD_FLAKY.clear()
        flows.FLAKY_FAILS.clear()


def test_once_storage_recovers_every_waiting_workflow_goes_on_at_once(tiny_disk, monkeypatch) -> None:
    """After a full disk is freed, the first write that commits ends the episode and every
    workflow waiting out its backoff tries again at once: timer workflows ran behind by up to the
    longest backoff each (and ``wf show`` listed their timers overdue). The backoff is made far
    longer than the test's waits, so only the recovery can have woken them."""
    import actors._runtime as system_module

    monkeypatch.setattr(system_module, "STORAGE_BACKOFF", 120.0)
    monkeypatch.setattr(system_module, "STORAGE_BACKOFF_MAX", 120.0)
    clock = VirtualClock(1_700_000_000.0)
    with capture_logs() as logs, ActorSystem(str(tiny_disk / "wf.db"), clock=clock) as s:
        sleepers = [s.start(flows.sleeper, 10, id=f"sleeper-{i}") for i in range(5)]
        s.idle(timeout=T)
        failed = [_failed_commits(s, r.id) for r in sleepers]
        filler = _fill(tiny_disk)
        clock.advance(10)  # every timer falls due while nothing can be written
        _wait_until(lambda: all(failed), "every sleeper's step failed on the full disk")
        filler.unlink()
        fresh = s.start(flows.waits_once, id="fresh")  # a write that commits: storage is back
        assert [r.result(timeout=T) for r in sleepers] == [10] * 5
        fresh.signal("go", 1)
        assert fresh.result(timeout=T) == 1
    events = [e["event"] for e in logs]
    assert events.count("storage_unavailable") == 1 and events.count("storage_recovered") == 1
