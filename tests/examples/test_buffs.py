"""The buff workflow: refresh, stack, dispel, expire."""

from __future__ import annotations

from actors import Status
from examples.buffs import buff

from .support import T


def stacks(view, target, name):
    return view.value("SELECT stacks FROM world_buffs WHERE target = ? AND buff = ?", target, name)


def test_stacks_then_expires(system, view):
    """Stacking adds to the count shown on the target; expiry removes the buff."""
    ref = system.start(buff, "alice", "haste", 30, test_mode=True)
    system.idle(timeout=T)
    assert stacks(view, "alice", "haste") == 1
    ref.debug_send_signal("stack", 2)
    system.idle(timeout=T)
    assert stacks(view, "alice", "haste") == 3
    ref.debug_fire_timer("expire")
    assert ref.result(timeout=T) == {"final_stacks": 3, "ended_by": "expired"}
    assert stacks(view, "alice", "haste") is None


def test_dispel_ends_the_buff_early(system, view):
    """A dispel ends the buff at once and takes it off the target."""
    ref = system.start(buff, "bob", "shield", 30, test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("refresh")
    ref.debug_send_signal("dispel")
    assert ref.result(timeout=T) == {"final_stacks": 1, "ended_by": "dispelled"}
    assert stacks(view, "bob", "shield") is None


def test_refresh_restarts_the_duration_on_the_clock(system, clock, view):
    """A refresh re-arms the expiry for the full duration from the moment it arrives."""
    ref = system.start(buff, "alice", "haste", 10)
    system.idle(timeout=T)
    clock.advance(8)
    system.idle(timeout=T)
    ref.signal("refresh")
    system.idle(timeout=T)
    clock.advance(8)  # 16 s since the start, 8 since the refresh
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    assert stacks(view, "alice", "haste") == 1
    clock.advance(2)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == {"final_stacks": 1, "ended_by": "expired"}
