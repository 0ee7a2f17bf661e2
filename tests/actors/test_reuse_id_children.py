"""A workflow started under a pruned id (``start(..., reuse_id=True)``, SPEC §10) is a new workflow:
the children of the pruned one, still running, are not its children. Their outcomes do not wake it,
it does not list them (``wf show``, ``info()``, the web view's tree), and they end as the children of
a pruned parent do, which is expected (no mistake in their history). Pruning unlinks a pruned
workflow's children (their ``parent_id``), whether by ``prune()`` or by retention."""

from __future__ import annotations

import json

from actors import ActorSystem, Status
from persistence import (
    CHILD,
    COMPLETED,
    DropCause,
    Dropped,
    NewWorkflow,
    OutSignal,
    StepWrite,
    dumps,
    open_store,
)
from workflows import gather, select, signal, spawn, timer, workflow

from .runtime_support import T, reader
from .test_cli import wf

MINUTE = 60.0


@workflow
async def cleans_up_slowly(seconds: float) -> str:
    """Cancelled, it still runs for ``seconds`` (its ``finally`` awaits a timer)."""
    try:
        await signal("never")
    finally:
        await timer("cleanup", after=seconds)
    return "never"


@workflow
async def leaves_attached_child(seconds: float) -> str:
    """Ends at once; its attached child, cancelled by the select, cleans up for ``seconds``."""
    await select(spawn(cleans_up_slowly, seconds, id="kid"), timer("t", after=0))
    return "parent done"


@workflow
async def waits_for_go() -> str:
    return f"child got {await signal('go')}"


@workflow
async def leaves_detached_child() -> str:
    """Ends at once; its detached child runs on."""
    await select(spawn(waits_for_go, id="kid", detached=True), timer("t", after=0))
    return "parent done"


@workflow
async def new_incarnation() -> list:
    """The workflow started under the pruned id: awaits a signal and a timer, nothing of a child."""
    return list(await gather(signal("a"), timer("tt", after=10 * MINUTE)))


def events(ref) -> list[str]:
    return [e.event for e in ref.history()]


def test_an_attached_childs_outcome_does_not_reach_a_new_workflow_under_its_pruned_parents_id(db, clock) -> None:
    """The old parent's child, cancelled and still cleaning up when its parent is pruned, ends
    after a new workflow took the id: the new one takes no step for it, and the child ends
    cancelled with no mistake in its history."""
    with ActorSystem(db, clock=clock) as system:
        old = system.start(leaves_attached_child, 10.0, id="p")
        assert old.result(timeout=T) == "parent done"
        system.idle(timeout=T)
        kid = system.get("kid")
        assert kid.status() is Status.RUNNING  # cleaning up
        assert system.prune(older_than=0) == 1
        assert kid.info().parent_id is None  # unlinked from the pruned parent

        new = system.start(new_incarnation, id="p", reuse_id=True)
        system.idle(timeout=T)
        clock.advance(11)  # the child's cleanup ends: it ends cancelled
        system.idle(timeout=T)
        assert kid.status() is Status.CANCELLED
        assert "signal_dropped" not in events(kid)
        assert events(new) == ["started"]  # not woken by the old child's outcome
        with reader(db) as store:
            assert store.inbox("p") == []

        new.signal("a", 1)
        clock.advance(10 * MINUTE)
        assert new.result(timeout=T) == [1, None]


def test_a_detached_child_of_a_pruned_workflow_is_not_a_child_of_the_new_one(db, clock, capsys) -> None:
    """``wf show``, ``info()``, ``workflows()`` and the web view's tree (``children_of``) do not
    give the new workflow the old one's detached child; the child's outcome does not wake it."""
    with ActorSystem(db, clock=clock) as system:
        old = system.start(leaves_detached_child, id="q")
        assert old.result(timeout=T) == "parent done"
        system.idle(timeout=T)
        clock.advance(1)
        assert system.prune(older_than=0) == 1
        new = system.start(new_incarnation, id="q", reuse_id=True)
        system.idle(timeout=T)

        kid = system.get("kid")
        assert kid.info().parent_id is None
        assert [w.id for w in system.workflows() if w.parent_id == "q"] == []
        code, out, _ = wf(capsys, "show", "q", "--db", db, "--json")
        assert code == 0 and json.loads(out)["children"] == []
        with reader(db) as store:
            assert store.children_of(["q"], 10) == {"q": []}
            assert store.list_workflows(parent_id="q") == []

        kid.signal("go", 7)
        assert kid.result(timeout=T) == "child got 7"
        system.idle(timeout=T)
        assert "signal_dropped" not in events(kid)
        assert events(new) == ["started"]
        assert new.status() is Status.RUNNING


def test_a_child_of_a_pruned_parent_ends_normally(db, clock) -> None:
    """No new workflow under the id: the children of the pruned parent (an attached one cleaning
    up, a detached one) end as they would, without a mistake in their history."""
    with ActorSystem(db, clock=clock) as system:
        system.start(leaves_attached_child, 10.0, id="p").result(timeout=T)
        system.idle(timeout=T)
        assert system.prune(older_than=0) == 1
        clock.advance(11)
        system.idle(timeout=T)
        kid = system.get("kid")
        assert kid.status() is Status.CANCELLED
        assert "signal_dropped" not in events(kid)
        assert system.prune(older_than=0) == 1  # the child

        system.start(leaves_detached_child, id="q").result(timeout=T)
        system.idle(timeout=T)
        assert system.prune(older_than=0) == 1
        kid = system.get("kid")
        kid.signal("go", 3)
        assert kid.result(timeout=T) == "child got 3"
        system.idle(timeout=T)
        assert "signal_dropped" not in events(kid)
        assert events(kid)[-1] == "completed"


def test_retention_unlinks_the_children_of_what_it_prunes(db, clock, capsys) -> None:
    """The automatic prune of retention is the same prune: a new workflow under the id of a parent
    it deleted neither lists nor hears from that parent's children."""
    with ActorSystem(db, clock=clock, retention=MINUTE) as system:
        system.start(leaves_attached_child, 5 * MINUTE, id="p").result(timeout=T)
        system.idle(timeout=T)
        clock.advance(MINUTE + 1)
        system.idle(timeout=T)
        assert [w.id for w in system.workflows()] == ["kid"]  # the parent went by retention
        kid = system.get("kid")
        assert kid.info().parent_id is None

        new = system.start(new_incarnation, id="p", reuse_id=True)
        system.idle(timeout=T)
        code, out, _ = wf(capsys, "show", "p", "--db", db, "--json")
        assert code == 0 and json.loads(out)["children"] == []
        clock.advance(5 * MINUTE)  # the child's cleanup ends
        system.idle(timeout=T)
        assert kid.status() is Status.CANCELLED
        assert "signal_dropped" not in events(kid)
        assert events(new) == ["started"]

        new.signal("a", 2)
        clock.advance(10 * MINUTE)
        assert new.result(timeout=T) == [2, None]


def test_store_refuses_a_childs_outcome_for_a_parent_its_row_does_not_name(db) -> None:
    """At the store: pruning unlinks the children; an ending child's outcome for a new workflow
    under its pruned parent's id is dropped as for a pruned parent (expected, nothing written),
    not as a full inbox; an outcome for the parent its row names goes in."""
    def wf_record(wid: str, parent_id: str | None = None) -> NewWorkflow:
        return NewWorkflow(id=wid, type="mod:wf", continuation=dumps(wid), fingerprint="fp",
                           parent_id=parent_id, created_at=1.0)

    def end(store, wid: str, parent_id: str, at: float):
        seq = store.load_workflow(wid).step_seq
        return store.commit_step(StepWrite(workflow_id=wid, step_seq=seq + 1, updated_at=at,
                                           status=COMPLETED, result=dumps(1),
                                           signals=[OutSignal(parent_id, wid, dumps(("ok", 1)), CHILD)]))

    with open_store(db) as store:
        store.create_workflow(wf_record("p"))
        store.commit_step(StepWrite(workflow_id="p", step_seq=1, updated_at=1.0,
                                    new_workflows=[wf_record("c1", "p"), wf_record("c2", "p")]))
        ack = end(store, "c1", "p", 2.0)  # linked: delivered
        assert [(d.workflow_id, d.kind, d.name) for d in ack.delivered] == [("p", CHILD, "c1")]
        store.commit_step(StepWrite(workflow_id="p", step_seq=2, updated_at=3.0, status=COMPLETED,
                                    result=dumps(0)))
        assert sorted(store.prune_finished(3.0)) == ["c1", "p"]
        assert store.load_workflow("c2").parent_id is None
        store.create_workflow(wf_record("p"))  # the id reused

        ack = end(store, "c2", "p", 4.0)
        assert ack.delivered == []
        assert ack.dropped == [("p", Dropped(DropCause.ENDED, status="pruned"))]
        assert [(wid, str(why), why.expected) for wid, why in ack.dropped] == [("p", "workflow pruned", True)]
        assert store.inbox("p") == []
        assert store.history("c2") == []
