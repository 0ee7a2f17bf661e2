"""Failures: a workflow's own error, runtime faults, restarts and escalation.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from workflows import WorkflowFailed

from . import flows
from .runtime_support import (
    Inside,
    T,
    _chain,
    _wait_until,
    connect,
    ref_inbox,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_failure_is_reported_with_original_error(system, clock):
    """A workflow that raises ends FAILED; result() raises WorkflowFailed with type and traceback."""
    ref = system.start(flows.boom)
    system.idle(timeout=T)
    clock.advance(1)
    with pytest.raises(WorkflowFailed) as ei:
        ref.result(timeout=T)
    assert ei.value.error_type == "KeyError"
    assert "lost item" in ei.value.error_message
    assert "flows.py" in ei.value.traceback


def test_runtime_fault_restarts_then_fails_and_escalates(system, clock):
    """A reducer that raises restarts the actor with backoff; past the intensity the workflow
    fails and its parent gets ChildFailed."""
    ref = system.start(flows.parent_of_faulty)
    system.idle(timeout=T)
    with capture_logs() as logs:
        clock.advance(1)
        system.idle(timeout=T)
    assert ref.result(timeout=T).startswith("child failed: runtime fault after 5 restarts")
    restarts = [e for e in logs if e["event"] == "actor_restarted"]
    assert len(restarts) == 5
    # Bound to the workflow's id and type, as every lifecycle event.
    assert {(e["workflow_id"], e["workflow_type"]) for e in restarts} == {
        (restarts[0]["workflow_id"], "tests.actors.flows:faulty")
    }


@pytest.mark.parametrize("how", ["exit", "interrupt"])
def test_a_reducer_ended_by_system_exit_is_a_fault_like_any_error(system, clock, how):
    """A reducer whose code raises SystemExit or KeyboardInterrupt (library code calling
    sys.exit()) is a runtime fault like any error: restarted, then failed past the intensity,
    naming it; the system goes on. It failed the writer's whole batch and stopped the actor, and
    the start or signal waiting for that commit never got an answer."""
    ref = system.start(flows.exits_in_a_reducer, how)
    system.idle(timeout=T)
    clock.advance(1)
    system.idle(timeout=T)
    with pytest.raises(WorkflowFailed) as ei:
        ref.result(timeout=T)
    assert "runtime fault after 5 restarts" in ei.value.error_message
    assert ("SystemExit: leaving" if how == "exit" else "KeyboardInterrupt") in ei.value.error_message
    assert system.start(flows.adder, 2).result(timeout=T) == 8


def test_a_value_that_exits_as_the_engine_takes_it_is_a_fault_not_a_stopped_actor(system, clock):
    """A child's outcome whose unpickling calls sys.exit() as its parent takes it is a runtime
    fault of the parent (restarted, then failed past the intensity, naming it); the parent's
    actor was stopped instead, and the parent stayed running, waiting on the child, for good."""
    ref = system.start(flows.takes_what_exits_when_loaded)
    system.idle(timeout=T)
    clock.advance(60)
    system.idle(timeout=T)
    with pytest.raises(WorkflowFailed) as ei:
        ref.result(timeout=T)
    assert "runtime fault after 5 restarts" in ei.value.error_message
    assert "SystemExit raised by code run for this workflow: no loading this" in ei.value.error_message
    assert system.start(flows.adder, 2).result(timeout=T) == 8


@pytest.mark.parametrize("how", ["workflow", "reducer"])
def test_workflow_code_or_a_reducer_calling_the_system_fails_at_once(system, clock, how):
    """The system (or a ref) called from workflow code or a reducer, which run on the engine's
    thread, raises at the call, saying what to use instead; it never waits for that thread,
    and other workflows go on."""
    flows.CLIENT[:] = [system]
    try:
        target = system.start(flows.waits_once, id=f"target-{how}")
        ref = system.start(flows.calls_the_system, target.id, how)
        system.idle(timeout=T)
        ref.signal("start")
        system.idle(timeout=T)
        clock.advance(60)  # (a reducer's fault restarts the actor, with backoff, up to the limit)
        system.idle(timeout=T)
        with pytest.raises(WorkflowFailed) as ei:
            ref.result(timeout=T)
        assert "cannot be called from workflow code or a reducer" in ei.value.error_message
        assert "send()" in ei.value.error_message
        other = system.start(flows.waits_once)
        other.signal("go", 7)
        assert other.result(timeout=T) == 7
    finally:
        flows.CLIENT.clear()


def test_a_first_step_that_cannot_commit_is_a_supervised_fault(system, db):
    """A reducer failing in the first step: the workflow is created all the same (start() returns
    its ref) and the step is restarted with backoff, as any runtime fault; its effect lands once."""
    with capture_logs() as logs:
        ref = system.start(flows.faulty_first_step, "start-twice", 2, id="faulty-first")
        system.idle(timeout=T)
    assert [e["event"] for e in logs].count("actor_restarted") == 2
    assert ("workflow_started", "faulty-first") in [(e["event"], e.get("workflow_id")) for e in logs]
    ref.signal("go", "done")
    assert ref.result(timeout=T) == "done"
    con = connect(db)
    assert con.execute("SELECT count(*) FROM app_events WHERE wf = 'start-twice'").fetchone()[0] == 1


def test_a_first_step_that_never_commits_fails_the_workflow(system):
    """Past the restart intensity, a start whose first step always faults ends FAILED."""
    ref = system.start(flows.faulty_first_step, "start-always", 100)
    system.idle(timeout=T)
    with pytest.raises(WorkflowFailed, match="runtime fault after 5 restarts"):
        ref.result(timeout=T)


def test_a_fault_keeps_every_procedure_outcome_the_actor_held(db, clock):
    """Two procedure outcomes are taken together and the step that consumes them fails to commit:
    both outcomes (not only the last message's) are kept, so the restarted actor finishes."""
    from persistence import Promise

    flows.LATER.clear()
    with ActorSystem(db, clock=clock) as s:
        inside = Inside(s)
        real = inside.store_method("submit_step")
        calls: list = []
        held: list = []

        def submit_step(sw, **kw):
            calls.append(sw)
            if len(calls) == 2:  # the commit of the first outcome: held
                p = Promise()
                held.append((sw, p))
                return p
            if len(calls) == 3:  # the step that takes the other two: fails
                p = Promise()
                p.set_exception(OSError("the disk went away"))
                return p
            return real(sw, **kw)

        inside.patch_store("submit_step", submit_step)
        ref = s.start(flows.gather_procedures, id="gp")
        _wait_until(lambda: len(held) == 1, "the first outcome's commit reached the writer")
        flows.LATER.set()
        _wait_until(lambda: len(ref_inbox(s, ref.id)) == 2, "the other two outcomes queued")
        sw, p = held.pop()
        real(sw).add_done_callback(_chain(p))
        assert ref.result(timeout=T) == [2, 20, 30]
        assert len(calls) == 4


def test_the_restart_intensity_counts_on_the_systems_clock(system, clock):
    """Four restarts, then four more a virtual minute later: under the intensity (5 in 60 s of
    the system's clock), so the workflow goes on; eight at one moment would have failed it."""
    ref = system.start(flows.two_fragile_steps, "burst", 4)
    system.idle(timeout=T)
    for _ in range(2):
        with capture_logs() as logs:
            ref.signal("go")
            system.idle(timeout=T)
        assert len([e for e in logs if e["event"] == "actor_restarted"]) == 4
        clock.advance(61)
    assert ref.result(timeout=T) == "ok"
