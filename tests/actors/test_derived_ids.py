"""Ids the engine makes from the user's (a child's generated id, a schedule run's) stay within
the 1,000 bytes every id is kept to, so that ``get()``, ``wf`` and the web view reach them."""

from __future__ import annotations

import pytest

from actors import ActorSystem, Status
from actors._schedules import run_id
from actors.testing import VirtualClock

from .flows import fan_out, nest
from .sched_flows import report


def test_children_of_a_long_parent_id_or_a_deep_tree_get_ids_that_get_reaches(tmp_path) -> None:
    """A child spawned without ``id=`` by a parent whose id is near the limit, and the children
    of a tree deeper than the limit allows ``/name-step.arm`` segments for, get ids of 1,000
    bytes at most, one per child and the same across a restart: each can be fetched, read and
    listed. They were started with longer ids, which ``get()`` then refused as too long."""
    clock = VirtualClock()
    db = str(tmp_path / "wf.db")
    with ActorSystem(db, clock=clock) as system:
        fan = system.start(fan_out, [1, 2, 3], id="f" * 995)
        deep = system.start(nest, 130, id="root")
        assert deep.result(timeout=60) == 130
        system.idle(timeout=30)
        clock.advance(5)
        assert fan.result(timeout=30) == [10, 20, 30]
        infos = system.workflows()
    kids = [i for i in infos if i.parent_id is not None]
    assert len(kids) == 3 + 130
    assert len({i.id for i in kids}) == len(kids)
    assert max(len(i.id.encode()) for i in kids) == 1000  # some were cut: the test reaches the limit
    with ActorSystem(db, clock=clock) as system:
        for info in kids:
            ref = system.get(info.id)
            assert ref.status() is Status.COMPLETED
            assert ref.info().parent_id == info.parent_id
            assert len(ref.history()) >= 2


def test_a_schedule_id_too_long_for_its_runs_ids_is_refused_at_schedule(tmp_path) -> None:
    """A run's id is the schedule's id, '@' and the tick: a schedule id longer than 972 bytes is
    refused by ``schedule()``, saying how long it may be, instead of starting runs under ids
    ``get()`` refuses; one of 972 bytes starts runs that ``get()`` reaches."""
    start = 1_704_067_200.0
    clock = VirtualClock(start)
    with ActorSystem(str(tmp_path / "wf.db"), clock=clock) as system:
        with pytest.raises(ValueError, match="973 bytes long.*at most 972 bytes"):
            system.schedule("s" * 973, report, "x", every=0.5)
        assert system.schedules() == []
        system.schedule("s" * 972, report, "x", every=0.5)
        clock.advance(0.5)
        system.idle(timeout=30)
        run = system.get(run_id("s" * 972, start + 0.5))
        assert len(run.id.encode()) == 1000
        assert run.result(timeout=30) == "x"
