"""Timers on the virtual clock, and test mode, where they fire only when told.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

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
