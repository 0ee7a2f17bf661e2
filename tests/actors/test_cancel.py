"""Cancellation: finally blocks that await, a cancel caught, a cancel that reaches children.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import pytest

from actors import Status
from workflows import Cancelled

from . import flows
from .runtime_support import (
    T,
    app_events,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_cancel_runs_finally_which_may_await(system, clock, db):
    """cancel() raises Cancelled at the await; the finally block runs its reducers and awaits."""
    ref = system.start(flows.guarded, "x", id="g1")
    system.idle(timeout=T)
    ref.cancel("player left")
    system.idle(timeout=T)
    assert app_events(db, "g1") == ["locked", "unlocked"]
    clock.advance(1)
    system.idle(timeout=T)
    with pytest.raises(Cancelled) as cancelled:
        ref.result(timeout=T)
    assert cancelled.value.reason == "player left"
    assert ref.status() is Status.CANCELLED
    assert app_events(db, "g1") == ["locked", "unlocked", "cleaned"]


@pytest.mark.parametrize("reason", [None, "", "cancelled"])
def test_result_raises_cancelled_with_the_reason_given(system, reason):
    """result() raises Cancelled whose reason is the one the cancel gave: a cancel with no
    reason (or an empty one) gave the reason "cancelled", the default text of its message."""
    ref = system.start(flows.waits_once)
    system.idle(timeout=T)
    ref.cancel(reason)
    with pytest.raises(Cancelled) as cancelled:
        ref.result(timeout=T)
    assert cancelled.value.reason == reason
    assert str(cancelled.value) == (reason or "cancelled")


def test_result_s_cancelled_names_the_workflow_as_its_other_errors_do(db, clock):
    """The Cancelled that result() and result_async() raise carries the workflow's id (as
    WorkflowFailed does), in the process that ran it and in a later one reading its record, and
    keeps it in a copy; one raised at a workflow's await (and caught there) is as it was."""
    import asyncio
    import pickle

    from actors import ActorSystem

    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.waits_once, id="w-1")
        system.idle(timeout=T)
        ref.cancel("no longer needed")
        with pytest.raises(Cancelled) as here:
            ref.result(timeout=T)
        caught = system.start(flows.catches_cancel, id="c-1")
        system.idle(timeout=T)
        caught.cancel("because")
        assert caught.result(timeout=T) == "caught because"  # caught in the workflow, as before
    assert (here.value.workflow_id, here.value.reason, str(here.value)) == ("w-1", "no longer needed", "no longer needed")
    copy = pickle.loads(pickle.dumps(here.value))
    assert (copy.workflow_id, copy.reason) == ("w-1", "no longer needed")
    with ActorSystem(db, clock=clock) as system:
        with pytest.raises(Cancelled) as later:
            system.get("w-1").result(timeout=T)
        assert later.value.workflow_id == "w-1" and later.value.reason == "no longer needed"

        async def main() -> Cancelled:
            try:
                await system.get("w-1").result_async(timeout=T)
            except Cancelled as e:
                return e
            raise AssertionError("result_async() returned")

        assert asyncio.run(main()).workflow_id == "w-1"
    raised = Cancelled("bob left")  # as a workflow's own code makes one
    assert raised.workflow_id is None and raised.args == ("bob left",)
    assert pickle.loads(pickle.dumps(raised)).workflow_id is None


def test_a_second_cancel_leaves_the_cleanup_of_the_first_alone(system, clock, db):
    """A cancel requested again while the workflow runs the cleanup of the first (both players
    leave, a client retries) is taken and changes nothing: the finally block runs to its end, and
    the history says the request came again. Across a restart too: the wait it is in remembers."""
    ref = system.start(flows.guarded, "x", id="g2")
    system.idle(timeout=T)
    ref.cancel("bob left")
    system.idle(timeout=T)
    ref.cancel("alice left")
    system.idle(timeout=T)
    assert app_events(db, "g2") == ["locked", "unlocked"]
    clock.advance(1)
    system.idle(timeout=T)
    with pytest.raises(Cancelled, match="bob left"):
        ref.result(timeout=T)
    assert app_events(db, "g2") == ["locked", "unlocked", "cleaned"]
    cancels = [e.detail for e in ref.history() if e.event == "cancel"]
    assert cancels == [{"reason": "bob left", "armed": ["timer cleanup"]}, {"reason": "alice left", "again": True}]


def test_a_cancel_after_a_restart_leaves_the_cleanup_alone(db, clock):
    from actors import ActorSystem

    with ActorSystem(db, clock=clock) as system:
        ref = system.start(flows.guarded, "x", id="g3")
        system.idle(timeout=T)
        ref.cancel("bob left")
        system.idle(timeout=T)
    with ActorSystem(db, clock=clock) as system:
        ref = system.get("g3")
        ref.cancel("alice left")
        system.idle(timeout=T)
        clock.advance(1)
        system.idle(timeout=T)
        with pytest.raises(Cancelled, match="bob left"):
            ref.result(timeout=T)
    assert app_events(db, "g3") == ["locked", "unlocked", "cleaned"]


def test_cancel_can_be_caught(system):
    """except Cancelled catches cancellation like any exception."""
    ref = system.start(flows.catches_cancel)
    system.idle(timeout=T)
    ref.cancel("because")
    assert ref.result(timeout=T) == "caught because"


def test_cancel_reaches_children(system):
    """Cancelling a parent cancels the child it waits on."""
    ref = system.start(flows.parent_of_sleeper)
    system.idle(timeout=T)
    ref.cancel("stop")
    system.idle(timeout=T)
    assert system.get("the-child").status() is Status.CANCELLED
    assert ref.status() is Status.CANCELLED


def test_cancel_of_a_finished_workflow_says_so_plainly(system, db):
    """Cancelling a workflow that has finished is a WorkflowNotRunning naming it and its status
    (the message once read "cannot cancel 'cancel'")."""
    from actors import WorkflowNotRunning

    ref = system.start(flows.collect, 0, id="done")
    assert ref.result(timeout=T) == []
    with pytest.raises(WorkflowNotRunning) as e:
        ref.cancel("too late")
    assert str(e.value) == "cannot cancel it: workflow 'done' has already finished (completed)"
    assert e.value.status is Status.COMPLETED
