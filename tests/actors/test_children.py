"""Child workflows: spawn, results and failures, gather.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import pytest

from actors import (
    ActorSystem,
    Status,
)

from . import flows
from .runtime_support import (
    T,
    app_events,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


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
