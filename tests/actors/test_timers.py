"""The timer service's thread: it fires in due order, and is woken only by what changes its wake-up."""

from __future__ import annotations

import threading
import time

import pytest

from actors._clock import VirtualClock
from actors._timers import TimerService
from actors._work import WorkCounter
from persistence import TimerRow

WAIT = 10.0  # upper bound on any wait below


class _CountingCondition:
    """A condition that counts the returns from ``wait``: how often the timer thread woke up."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.waiting = threading.Event()
        self.wakes = 0

    def __enter__(self):
        return self._cond.__enter__()

    def __exit__(self, *exc):
        return self._cond.__exit__(*exc)

    def notify_all(self) -> None:
        self._cond.notify_all()

    def wait(self, timeout=None):
        self.waiting.set()
        try:
            return self._cond.wait(timeout)
        finally:
            self.wakes += 1
            self.waiting.clear()


class _Running:
    """A started service whose store holds one timer, "head", due at 1010 on a clock at 1000: the
    thread loads it before it first sleeps."""

    def __init__(self) -> None:
        self.clock = VirtualClock(1000.0)
        self.fired: list[str] = []
        stored = [TimerRow(1, "w1", "head", 1010.0)]
        self.svc = TimerService(self.clock, lambda until, limit: [r for r in stored if r.due_at <= until],
                                lambda row: self.fired.append(row.name), WorkCounter())
        self.cond = _CountingCondition()
        self.svc._cond = self.cond  # type: ignore[assignment]
        self.svc.start()


@pytest.fixture
def running():
    r = _Running()
    yield r
    r.svc.stop()


def _settled(cond: _CountingCondition) -> int:
    """The wake count once the thread is asleep (nothing may have notified it meanwhile)."""
    assert cond.waiting.wait(WAIT), "the timer thread did not go back to sleep"
    with cond:
        return cond.wakes


def _until(pred, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def test_arming_behind_the_earliest_timer_does_not_wake_the_thread_and_sooner_does(running):
    svc, cond, clock, fired = running.svc, running.cond, running.clock, running.fired
    before = _settled(cond)
    # Fifty timers due after the head: the thread sleeps on (it wakes for the head anyway).
    svc.arm([TimerRow(10 + i, f"w{10 + i}", f"later-{i}", 1020.0 + i) for i in range(50)])
    for i in range(50):
        svc.call_at(1080.0 + i, lambda: None)
    time.sleep(0.05)  # room for a wake-up that should not happen
    assert _settled(cond) == before
    # One due before the head changes when the thread must wake: it is woken.
    svc.arm([TimerRow(2, "w2", "sooner", 1005.0)])
    _until(lambda: cond.wakes > before, "arming a sooner timer did not wake the thread")
    # Everything fires in due order as the clock moves.
    clock.advance(5)
    _until(lambda: fired == ["sooner"], f"fired {fired}")
    clock.advance(5)
    _until(lambda: fired == ["sooner", "head"], f"fired {fired}")
    clock.advance(100)
    _until(lambda: len(fired) == 52, f"fired {len(fired)} of 52")
    assert fired[2:] == [f"later-{i}" for i in range(50)]


def test_a_callback_due_sooner_wakes_the_thread(running):
    before = _settled(running.cond)
    ran = threading.Event()
    running.svc.call_at(1001.0, ran.set)
    _until(lambda: running.cond.wakes > before, "a sooner callback did not wake the thread")
    running.clock.advance(1)
    assert ran.wait(WAIT)
    assert running.fired == []


def test_a_fired_timer_still_stored_fires_once_until_its_workflows_shard_is_taken_over_again():
    """A fired timer is skipped by later loads while the store holds it (its step is on its way);
    if its firing went nowhere (the node no longer ran its workflow), the node's takeover of the
    shard fires it again, and only for the workflows taken over."""
    clock = VirtualClock(1000.0)
    stored = [TimerRow(1, "a", "end", 1005.0), TimerRow(2, "b", "end", 1005.0)]
    fired: list[int] = []
    svc = TimerService(clock, lambda until, limit: [r for r in stored if r.due_at <= until],
                       lambda row: fired.append(row.id), WorkCounter())
    svc.start()
    try:
        clock.advance(10)
        _until(lambda: sorted(fired) == [1, 2] and not svc.has_due(), "both timers fired")
        svc.refill()  # both still stored: their steps have not consumed them yet
        assert not svc.has_due()
        svc.refill(again=lambda wid: wid == "a")  # "a"'s shard taken over again
        _until(lambda: sorted(fired) == [1, 1, 2] and not svc.has_due(), "the timer of 'a' fired again")
        stored.clear()  # consumed
        svc.refill(again=lambda wid: True)
        assert not svc.has_due() and sorted(fired) == [1, 1, 2]
    finally:
        svc.stop()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_virtual_clock_refuses_what_no_clock_can_read(bad):
    """nan or inf would stay the clock's reading for good (no timer would fire again): refused,
    and the clock reads what it did."""
    clock = VirtualClock(100.0)
    with pytest.raises(ValueError, match="finite number of seconds"):
        clock.advance(bad)
    with pytest.raises(ValueError, match="finite number of seconds"):
        clock.set(bad)
    with pytest.raises(ValueError, match="finite number of seconds"):
        VirtualClock(bad)
    with pytest.raises(TypeError, match="takes a number of seconds"):
        clock.advance("5")  # type: ignore[arg-type]
    assert clock.now() == 100.0
    assert clock.advance(5) == 105.0
