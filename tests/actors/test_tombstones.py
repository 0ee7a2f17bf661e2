"""Ids that stay taken after pruning (SPEC §10): a pruned workflow leaves a tombstone (id, type,
status, ended_at) for ``id_retention``; ``start`` of that id raises ``WorkflowPruned`` naming when
it ended, unless ``reuse_id=True``; ``wf prune`` says how many ids it keeps."""

from __future__ import annotations

import asyncio
import pickle
import time

import pytest

from actors import ActorSystem, Status, UnknownWorkflow, WorkflowPruned
from actors._retention import EXPIRE_EVERY

from . import talk_flows as tf
from .runtime_support import T, reader
from .test_cli import wf

DAY = 86400.0


def test_start_of_a_pruned_id_raises_workflow_pruned_unless_reuse_id(db, clock):
    """start, start_many and start_async of a pruned id raise WorkflowPruned (an UnknownWorkflow)
    naming its end; reuse_id=True starts a new workflow under it."""
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(tf.account, 5, id="order-1")
        ref.signal("close")
        assert ref.result(T) == 5
        ended = ref.info().updated_at
        clock.advance(10)
        assert system.prune(older_than=0) == 1
        with pytest.raises(WorkflowPruned) as e:
            system.start(tf.account, 5, id="order-1")
        assert isinstance(e.value, UnknownWorkflow)
        assert e.value.status == "completed" and e.value.ended_at == pytest.approx(ended)
        # A Status, as WorkflowNotRunning.status is, kept by a copy sent to another process.
        assert e.value.status is Status.COMPLETED
        assert pickle.loads(pickle.dumps(e.value)).status is Status.COMPLETED
        assert "order-1" in str(e.value) and "ended completed at " in str(e.value)
        assert "reuse_id=True" in str(e.value)
        with pytest.raises(WorkflowPruned):
            system.start_many(tf.account, [(1,)], ids=["order-1"])
        with pytest.raises(WorkflowPruned):
            asyncio.run(system.start_async(tf.account, 5, id="order-1"))
        with pytest.raises(UnknownWorkflow):
            system.get("order-1")  # pruned: gone, whatever its tombstone says
        again = system.start(tf.account, 7, id="order-1", reuse_id=True)
        assert again.status() is Status.RUNNING and again.ask("balance", timeout=T) == 7
        assert (
            system.start(tf.account, 9, id="order-1").ask("balance", timeout=T) == 7
        )  # running: found
    with reader(db) as store:
        stone = store.tombstone("order-1")
        assert stone is not None and stone.type.endswith(":account") and stone.status == "completed"


def test_a_tombstone_outlives_a_restart_and_goes_after_id_retention(db, clock):
    """A tombstone is durable across restarts and is deleted by the sweep once older than
    id_retention, freeing the id."""
    with ActorSystem(db, clock=clock, id_retention=DAY) as system:
        ref = system.start(tf.never_answers, id="patrol")
        ref.cancel("enough")
        system.idle(T)
        assert ref.status() is Status.CANCELLED
        clock.advance(1)
        assert system.prune(older_than=0) == 1
    with ActorSystem(db, clock=clock, id_retention=DAY) as system:
        with pytest.raises(WorkflowPruned, match="ended cancelled"):
            system.start(tf.never_answers, id="patrol")
        clock.advance(DAY + EXPIRE_EVERY + 1)
        deadline = time.monotonic() + T
        with reader(db) as store:
            while store.tombstone("patrol") is not None:  # the sweep deletes it
                assert time.monotonic() < deadline, "the tombstone was not deleted"
                system.idle(T)
                time.sleep(0.05)
        assert system.start(tf.never_answers, id="patrol").status() is Status.RUNNING


def test_id_retention_none_keeps_the_id_taken_for_good_and_zero_frees_it(db, clock):
    """id_retention=None keeps a pruned id taken for good; 0 frees it."""
    with ActorSystem(db, clock=clock, id_retention=None) as system:
        system.start(tf.progress, 0, id="a").result(T)
        clock.advance(1)
        assert system.prune(older_than=0) == 1
        clock.advance(100 * 365 * DAY)
        with pytest.raises(WorkflowPruned):
            system.start(tf.progress, 0, id="a")
    with ActorSystem(db, clock=clock, id_retention=0) as system:
        clock.advance(1)
        assert system.start(tf.progress, 0, id="a").result(T) == 0


def test_id_retention_zero_frees_an_id_as_its_workflow_is_pruned(db, clock):
    """id_retention=0 frees the id at the very time of its prune: the clock need not move on."""
    with ActorSystem(db, clock=clock, id_retention=0) as system:
        system.start(tf.progress, 0, id="b").result(T)
        clock.advance(10)
        assert system.prune(older_than=5) == 1
        assert system.start(tf.progress, 0, id="b").result(T) == 0


def test_wf_prune_says_how_many_ids_it_keeps(db, capsys):
    """wf prune says how many ids of pruned workflows it keeps taken."""
    with ActorSystem(db) as system:
        refs = [system.start(tf.progress, 0, id=f"p{i}") for i in range(3)]
        assert [r.result(T) for r in refs] == [0, 0, 0]
    code, out, _ = wf(capsys, "prune", "--db", db, "--older-than", "0s")
    assert code == 0 and "pruned 3 finished workflows" in out
    assert "3 ids of pruned workflows kept taken" in out and "reuse_id=True" in out
    with ActorSystem(db) as system:
        with pytest.raises(WorkflowPruned):
            system.start(tf.progress, 0, id="p1")


def test_start_many_refuses_a_pruned_id_past_the_first_hundred(db, clock):
    """A pruned id at position 180 of a start_many of 200 ids (read a hundred to a statement)
    raises WorkflowPruned naming it, and nothing of the batch starts; reuse_id=True starts them."""
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(tf.account, 5, id="order-180")
        ref.signal("close")
        assert ref.result(T) == 5
        clock.advance(10)
        assert system.prune(older_than=0) == 1
        ids = [f"order-{i}" for i in range(200)]
        with pytest.raises(WorkflowPruned, match="order-180"):
            system.start_many(tf.account, [(1,)] * 200, ids=ids)
        assert list(system.workflows()) == []
        refs = system.start_many(tf.account, [(1,)] * 200, ids=ids, reuse_id=True)
        assert [r.id for r in refs] == ids
        system.idle(T)
        assert len(list(system.workflows())) == 200
