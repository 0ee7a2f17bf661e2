"""Timers on the virtual clock, and test mode, where they fire only when told.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import datetime
import threading

import pytest

from actors import (
    Status,
    TimerNotArmed,
)

from . import flows
from .runtime_support import T

pytestmark = pytest.mark.usefixtures("fresh_flows")


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


def test_a_virtual_clock_advances_by_a_timedelta_as_timers_take_one(system, clock):
    """``clock.advance(timedelta(hours=1))`` as ``timer(after=timedelta(...))``: it raised TypeError."""
    ref = system.start(flows.sleeper, 3600)
    system.idle(timeout=T)
    before = clock.now()
    assert clock.advance(datetime.timedelta(minutes=59, seconds=59)) == before + 3599
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(datetime.timedelta(seconds=1))
    system.idle(timeout=T)
    assert ref.result(timeout=T) == 3600
    with pytest.raises(ValueError, match="seconds >= 0"):
        clock.advance(datetime.timedelta(seconds=-1))


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


def test_debug_fire_timer_checks_its_name_and_timeout_before_it_fires_anything(system, clock):
    """A timeout that is no number of seconds, or a negative one, and a name that is no string,
    are refused before anything is sent, as ``ask``'s and ``result``'s are: the timer stays armed.
    (A timeout of ``"1"`` fired the timer, then raised "'>' not supported between instances";
    ``-1`` fired it and raised "no outcome within -1s"; ``5`` said no timer 5 was armed.)
    ``None`` waits without bound; a timeout that runs out says what was not answered."""
    ref = system.start(flows.sleeper, 10, test_mode=True)
    system.idle(timeout=T)
    for bad, error, says in (
        ("1", TypeError, "debug_fire_timer.. timeout must be a number of seconds"),
        (-1, ValueError, "debug_fire_timer.. timeout must be a number of seconds.*nothing was sent"),
        (float("nan"), ValueError, "debug_fire_timer.. timeout must be a number of seconds"),
    ):
        with pytest.raises(error, match=says):
            ref.debug_fire_timer("wake", timeout=bad)
    with pytest.raises(TypeError, match="timer name must be a non-empty string, got 5"):
        ref.debug_fire_timer(5)  # type: ignore[arg-type]
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    assert "timer 'wake'" in (ref.info().waiting_on or "")
    ref.debug_fire_timer("wake", timeout=None)
    assert ref.result(timeout=T) == 0


def test_debug_fire_timer_that_runs_out_of_time_names_the_workflow_and_timer(db, clock, monkeypatch):
    """With ``timeout=0``, while the actors' thread is busy, the firing is handed to the workflow
    and not waited for: the ``TimeoutError`` names the workflow and the timer, and says the timer
    still fires (it said "no outcome within 0s")."""
    from actors import ActorSystem

    from .runtime_support import Inside

    Inside.one_actor_thread(monkeypatch)
    flows.HOLD.clear()
    flows.HOLDING.clear()
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.sleeper, 10, test_mode=True)
        busy = system.start(flows.holds_its_thread)
        system.idle(timeout=T)
        # (signal() returns once the step it wakes has committed: sent from a thread of its own)
        sender = threading.Thread(target=busy.signal, args=("go",))
        sender.start()
        try:
            assert flows.HOLDING.wait(T)
            with pytest.raises(
                TimeoutError,
                match=rf"workflow '{ref.id}' did not take the firing of its timer 'wake' within 0s",
            ):
                ref.debug_fire_timer("wake", timeout=0)
        finally:
            flows.HOLD.set()
            sender.join(T)
        assert busy.result(timeout=T) == "let go"
        assert ref.result(timeout=T) == 0
