"""The design's phase-5 workflows, each driven in test mode (and a few by the virtual clock)."""

from __future__ import annotations

import pytest

from actors import Status
from examples.basics import (
    child_task,
    conditional_test,
    countdown,
    failing,
    multi_step,
    parent,
    procedure_test,
    select_test,
    simple_timer,
    spawn_test,
)
from workflows import WorkflowFailed

from .support import T, only_running


def test_simple_timer_finishes_when_its_timer_is_fired(system):
    """In test mode the timer waits until debug_fire_timer fires it."""
    ref = system.start(simple_timer, 30, id="st", test_mode=True)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    ref.debug_fire_timer("done")
    assert ref.result(timeout=T) == "done"


def test_simple_timer_fires_by_the_virtual_clock(system, clock):
    """Outside test mode the timer fires when the clock reaches its due time, and not before."""
    ref = system.start(simple_timer, 30)
    system.idle(timeout=T)
    clock.advance(29)
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "done"


def test_multi_step_runs_its_steps_in_order(system, view):
    """Each fired timer advances one step, and each step leaves its line in the world log."""
    ref = system.start(multi_step, test_mode=True)
    system.idle(timeout=T)
    for name in ("first", "second"):
        ref.debug_fire_timer(name)
        system.idle(timeout=T)
    assert view.log("multi_step") == ["first step done", "second step done"]
    ref.debug_fire_timer("third")
    assert ref.result(timeout=T) == ["first", "second", "third"]
    assert view.log("multi_step") == ["first step done", "second step done", "third step done"]


def test_countdown_announces_every_number(system, view):
    """Each tick is the same named timer, armed again each time round the loop."""
    ref = system.start(countdown, 3, test_mode=True)
    system.idle(timeout=T)
    for _ in range(3):
        ref.debug_fire_timer("tick")
        system.idle(timeout=T)
    assert ref.result(timeout=T) == "liftoff"
    assert view.log("countdown") == ["3", "2", "1", "liftoff"]


def test_countdown_on_the_virtual_clock_takes_one_second_per_number(system, clock, view):
    """On the virtual clock the countdown moves one number per advanced second."""
    ref = system.start(countdown, 3)
    system.idle(timeout=T)
    assert view.log("countdown") == ["3"]
    clock.advance(1)
    system.idle(timeout=T)
    assert view.log("countdown") == ["3", "2"]
    # One jump of two seconds fires only the tick due now: the next is armed from the new time.
    clock.advance(2)
    system.idle(timeout=T)
    assert view.log("countdown") == ["3", "2", "1"]
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "liftoff"


def test_failing_ends_failed_with_the_original_error(system):
    """A workflow that raises ends FAILED; result() raises WorkflowFailed naming the error."""
    ref = system.start(failing, "out of mana", test_mode=True)
    system.idle(timeout=T)
    ref.debug_fire_timer("before_failing")
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=T)
    assert e.value.error_type.endswith("ExampleError")
    assert "out of mana" in str(e.value)
    assert ref.status() is Status.FAILED


def test_procedure_test_uses_the_procedure_result(system, view):
    """The workflow suspends on the procedure and resumes with its return value."""
    ref = system.start(procedure_test, 2, 3, test_mode=True)
    assert ref.result(timeout=T) == 5
    assert view.log("procedure_test") == ["2 + 3 = 5"]


def test_spawn_test_waits_for_its_child(system):
    """The parent resumes with the child's result once the child finishes."""
    ref = system.start(spawn_test, 10, test_mode=True)
    system.idle(timeout=T)
    child = only_running(system, simple_timer)
    assert child.info().parent_id == ref.id
    assert child.info().test_mode
    child.debug_fire_timer("done")
    assert ref.result(timeout=T) == "child said done"


def test_select_test_signal_wins(system):
    """A signal that arrives before the timeout wins the select."""
    ref = system.start(select_test, 60, test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("go", "now")
    assert ref.result(timeout=T) == "go: now"


def test_select_test_timer_wins(system):
    """The timeout wins when it fires first; the losing signal arm is disarmed."""
    ref = system.start(select_test, 60, test_mode=True)
    system.idle(timeout=T)
    ref.debug_fire_timer("timeout")
    assert ref.result(timeout=T) == "timed out"


def test_select_test_timer_wins_on_the_virtual_clock(system, clock):
    """On the virtual clock the timeout fires after exactly its delay."""
    ref = system.start(select_test, 60)
    system.idle(timeout=T)
    clock.advance(60)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == "timed out"


def test_conditional_test_signal_branch(system, view):
    """The true branch awaits a signal and uses its payload."""
    ref = system.start(conditional_test, True, test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("value", 42)
    assert ref.result(timeout=T) == "signal 42"
    assert view.log("conditional_test") == ["signal 42"]


def test_conditional_test_timer_branch(system, view):
    """The false branch awaits a timer instead."""
    ref = system.start(conditional_test, False, test_mode=True)
    system.idle(timeout=T)
    ref.debug_fire_timer("wait")
    assert ref.result(timeout=T) == "timer"
    assert view.log("conditional_test") == ["timer"]


def test_parent_adds_up_its_children_one_after_another(system, view):
    """The parent spawns each child only after the previous one returned, and sums the results."""
    ref = system.start(parent, 3, test_mode=True)
    system.idle(timeout=T)
    for i in range(3):
        child = only_running(system, child_task)
        assert child.info().parent_id == ref.id
        child.debug_fire_timer("complete")
        system.idle(timeout=T)
        assert view.log(f"task_{i}") == [f"returns {10 * (i + 1)}"]
    assert ref.result(timeout=T) == 60


def test_init_world_of_a_world_pruned_as_it_runs_again_returns(system, monkeypatch):
    """``init_world`` on a database whose ``world-setup`` completed on an earlier run, pruned by
    retention between ``start()`` (which found it) and its ``result()``: the world it made is
    there, so it returns (it raised ``UnknownWorkflow``)."""
    from examples import world

    from .conftest import CHARACTERS, ITEMS, RESOURCES

    start = system.start

    def start_then_prune(*args, **kwargs):
        ref = start(*args, **kwargs)
        assert system.prune(older_than=0) == 1  # the completed world-setup, pruned
        return ref

    monkeypatch.setattr(system, "start", start_then_prune)
    world.init_world(system, CHARACTERS, ITEMS, RESOURCES, timeout=T)
