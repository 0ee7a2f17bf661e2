"""The rules of a workflow instance, pure: what an arrival resumes, what it disarms, what a step
produced. No database, no actors, no threads."""

from __future__ import annotations

import threading

import pytest

from workflows import (
    Cancelled,
    CheckpointError,
    ChildFailed,
    Event,
    ProcedureFailed,
    WorkflowError,
    gather,
    info,
    procedure,
    reducer,
    select,
    signal,
    spawn,
    timer,
    workflow,
)
from workflows._context import ReducerCall
from workflows._instance import Arrival, Decision, WorkflowInstance
from workflows._step import Finished, Raised, Suspended
from workflows.testing import WorkflowHarness


@procedure
def lookup(x: int) -> int:
    return x


@reducer
def note(db, text: str) -> None:
    pass


@workflow
async def child(n: int) -> int:
    return n


@workflow
async def auction() -> object:
    try:
        return await select(timer("end", after=60), signal("bid"), spawn(child, 1), procedure(lookup, 2))
    except Cancelled:
        reducer(note, "cancelled")
        raise


@workflow
async def fan_out() -> object:
    return await gather(spawn(child, 1), spawn(child, 2), signal("go"), signal("go"))


@workflow
async def one_signal() -> object:
    first = await signal("a")
    reducer(note, f"got {first}")
    return first


@workflow
async def named_child() -> object:
    try:
        return await spawn(child, 1, id="taken")
    except WorkflowError as e:
        return f"refused: {e}"


@workflow
async def holds_a_lock() -> None:
    lock = threading.Lock()
    await signal("never")
    del lock


def _started(wf, *args) -> WorkflowInstance:
    inst = WorkflowInstance(wf.start(*args), workflow_id="w", workflow_type=wf.__workflow_key__)
    first = inst.decide()
    assert first is not None and first.first
    inst.committed(inst.run(first, now=100.0))
    for i, arm in enumerate(a for a in inst.wait.arms if a.kind == "timer"):
        arm.timer_id = 10 + i  # as the commit would number them
    return inst


def _arm(inst: WorkflowInstance, kind: str):
    return next(a for a in inst.wait.arms if a.kind == kind)


def test_a_select_resumes_with_its_earliest_arrival_and_disarms_the_other_arms() -> None:
    inst = _started(auction)
    kid = _arm(inst, "child").child_id
    late = Arrival.child(kid, True, 7, at=5.0, order=2)
    early = Arrival.signal("bid", {"amount": 3}, at=4.0, order=1)
    d = inst.decide([late, early])
    assert d.resume and d.winner is early and d.send == Event("bid", {"amount": 3}, "signal")
    assert sorted(a.kind for a in d.losers) == ["child", "procedure", "timer"]
    assert d.taken == [early]
    out = inst.run(d, now=101.0)
    assert out.result == Finished(Event("bid", {"amount": 3}, "signal"))
    assert out.loser_reason == "the select that spawned it was won by another arm"
    assert sorted(a.kind for a in out.losers) == ["child", "procedure", "timer"]


def test_a_procedure_outcome_comes_before_any_other_arrival() -> None:
    inst = _started(auction)
    key = _arm(inst, "procedure").proc_key
    d = inst.decide([Arrival.signal("bid", 1, at=-1e9), Arrival.procedure(key, True, 42)])
    assert d.send == Event("lookup", 42, "procedure")


def test_a_timer_resolves_its_select_only_by_its_own_id() -> None:
    inst = _started(auction)
    assert inst.decide([Arrival.timer(99, 150.0)]) is None  # another timer's tick: nothing
    d = inst.decide([Arrival.timer(10, 160.0)])
    assert d.send == Event("end", None, "timer")


def test_a_failed_arm_of_a_select_raises_at_the_await() -> None:
    inst = _started(auction)
    key = _arm(inst, "procedure").proc_key
    d = inst.decide([Arrival.procedure(key, False, error={"type": "KeyError", "message": "x"}, attempts=3)])
    assert isinstance(d.throw, ProcedureFailed) and d.throw.attempts == 3
    assert "failed after 3 attempt(s): KeyError: x" in str(d.throw)
    assert {a.kind for a in d.losers} == {"child", "signal", "timer"}


def test_a_cancel_comes_before_every_arrival_and_disarms_everything() -> None:
    inst = _started(auction)
    d = inst.decide([Arrival.signal("bid", 1)], cancelled=True, cancel="closing")
    assert d.resume and isinstance(d.throw, Cancelled) and d.winner is None and d.taken == []
    assert len(d.losers) == 4
    out = inst.run(d, now=101.0)
    assert isinstance(out.result, Raised) and isinstance(out.result.exception, Cancelled)
    assert [e.args for e in out.effects if isinstance(e, ReducerCall)] == [("cancelled",)]
    assert out.loser_reason == "closing"


def test_a_cancel_before_the_first_step_ends_it_without_running_its_code() -> None:
    inst = WorkflowInstance(auction.start(), workflow_id="w", workflow_type="t")
    d = inst.decide(cancelled=True, cancel=None)
    out = inst.run(d, now=0.0)
    assert isinstance(out.result, Raised) and isinstance(out.result.exception, Cancelled)
    assert out.effects == []  # its except Cancelled never ran: it never started


def test_a_gather_records_results_until_the_last_arm_and_resumes_in_arm_order() -> None:
    inst = _started(fan_out)
    kids = [a.child_id for a in inst.wait.arms if a.kind == "child"]
    before = [a.done for a in inst.wait.arms]
    d = inst.decide([Arrival.child(kids[1], True, "two", at=1.0), Arrival.signal("go", "g1", at=2.0)])
    assert not d.resume and len(d.taken) == 2
    assert [a.done for a in inst.wait.arms] == before  # deciding changes nothing
    assert [a.done for a in d.wait.arms] == [False, True, True, False]
    inst.progressed(d)
    assert inst.step_seq == 2 and inst.wait.results == {1: "two", 2: "g1"}
    # The second arm on the same signal takes the next signal of that name.
    d = inst.decide([Arrival.signal("go", "g2", at=3.0), Arrival.child(kids[0], True, "one", at=4.0)])
    assert d.resume and d.send == ["one", "two", "g1", "g2"] and d.losers == []
    assert inst.run(d, now=1.0).result == Finished(["one", "two", "g1", "g2"])


def test_two_signals_of_one_name_fill_two_gather_arms_in_one_decision() -> None:
    inst = _started(fan_out)
    d = inst.decide([Arrival.signal("go", "a", at=1.0), Arrival.signal("go", "b", at=2.0)])
    assert [a.index for a in d.wait.arms if a.done] == [2, 3]
    assert d.wait.results == {2: "a", 3: "b"}


def test_a_failed_child_of_a_gather_raises_and_the_rest_lose() -> None:
    inst = _started(fan_out)
    kids = [a.child_id for a in inst.wait.arms if a.kind == "child"]
    d = inst.decide([
        Arrival.child(kids[0], True, "one", at=1.0),
        Arrival.child(kids[1], False, error={"type": "ValueError", "message": "bad"}, at=2.0),
    ])
    assert isinstance(d.throw, ChildFailed) and d.throw.child_id == kids[1]
    assert [a.index for a in d.losers] == [2, 3]
    assert len(d.taken) == 2  # the first child's result is consumed with the step


def test_a_cancelled_child_says_so() -> None:
    inst = _started(fan_out)
    kid = next(a.child_id for a in inst.wait.arms if a.kind == "child")
    d = inst.decide([Arrival.child(kid, False, error={"type": "Cancelled", "message": "x", "cancelled": True})])
    assert "was cancelled" in str(d.throw)


def test_an_outcome_of_a_child_no_arm_awaits_is_dropped_and_a_signal_is_left() -> None:
    inst = _started(one_signal)
    stray = Arrival.child("w/gone-1.0", True, 1)
    other = Arrival.signal("b", 2)
    d = inst.decide([stray, other])
    assert not d.resume and d.dropped == [stray] and d.taken == []
    assert inst.decide([other]) is None


def test_a_single_command_takes_the_earliest_of_its_signals() -> None:
    inst = _started(one_signal)
    d = inst.decide([Arrival.signal("a", "second", at=2.0, order=9), Arrival.signal("a", "first", at=2.0, order=3)])
    assert d.send == "first" and d.losers == []
    out = inst.run(d, now=5.0)
    assert out.result == Finished("first")
    assert [e.args for e in out.effects] == [("got first",)]


def test_a_step_outcome_is_data_and_the_instance_moves_only_on_commit() -> None:
    inst = WorkflowInstance(fan_out.start(), workflow_id="p", workflow_type="t")
    out = inst.run(inst.decide(), now=10.0)
    assert isinstance(out.result, Suspended) and out.step_seq == 1
    assert [c.arm.child_id for c in out.children] == ["p/child-1.0", "p/child-1.1"]
    assert all(c.checkpoint and c.workflow_type == child.__workflow_key__ for c in out.children)
    assert out.wait.location and out.checkpoint
    assert inst.step_seq == 0 and inst.wait is None  # not committed yet
    inst.committed(out)
    assert inst.step_seq == 1 and inst.wait is out.wait


def test_a_spawn_with_a_taken_id_is_raised_at_its_await() -> None:
    inst = WorkflowInstance(named_child.start(), workflow_id="p", workflow_type="t")
    out = inst.run(inst.decide(), now=0.0, child_id_taken=lambda cid: cid == "taken")
    assert isinstance(out.result, Finished) and "a workflow with that id exists already" in out.result.value
    assert out.children == []


def test_a_continuation_that_cannot_be_checkpointed_ends_the_step_keeping_the_last_one() -> None:
    inst = WorkflowInstance(holds_a_lock.start(), workflow_id="p", workflow_type="t")
    out = inst.run(inst.decide(), now=0.0)
    assert out.keep_continuation and isinstance(out.result, Raised)
    assert isinstance(out.result.exception, CheckpointError)
    assert out.wait is None and out.children == []


def test_run_refuses_a_decision_that_does_not_resume() -> None:
    inst = _started(fan_out)
    with pytest.raises(ValueError, match="progressed"):
        inst.run(Decision(False), now=0.0)


# -- the harness goes through the same rules -------------------------------------------------------
def test_the_harness_resolves_a_select_as_the_runtime_does() -> None:
    h = WorkflowHarness(auction)
    assert h.signal("nobody") is None and not h.done
    h.signal("bid", 5)
    assert h.result() == Event("bid", 5, "signal")


def test_the_harness_fires_an_armed_timer_by_name_and_refuses_another() -> None:
    h = WorkflowHarness(auction)
    with pytest.raises(WorkflowError, match=r"armed: \['end'\]"):
        h.fire_timer("other")
    h.fire_timer("end")
    assert h.result() == Event("end", None, "timer")


def test_the_harness_gathers_signals_into_a_gather() -> None:
    h = WorkflowHarness(fan_out)
    assert h.signal("go", 1) is None and h.signal("go", 2) is None and not h.done
    assert h.wait.results == {2: 1, 3: 2}


def test_the_harness_cancel_runs_the_workflows_except_and_reports_cancelled() -> None:
    h = WorkflowHarness(auction)
    h.cancel("stop")
    assert isinstance(h.exception, Cancelled) and len(h.effects) == 1


@workflow
async def who_am_i() -> tuple[str, str, str, str, str | None]:
    me = info()
    return me.id, me.type, me.workflow_id, me.workflow_type, me.parent_id


def test_info_in_a_workflow_names_its_id_and_type_as_workflow_info_does() -> None:
    """``info()`` gives the id and type under ``WorkflowInfo``'s names too (``id``, ``type``)."""
    h = WorkflowHarness(who_am_i, workflow_id="w-1", workflow_type="shop:order")
    assert h.result() == ("w-1", "shop:order", "w-1", "shop:order", None)
