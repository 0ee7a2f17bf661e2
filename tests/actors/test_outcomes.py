"""``result()`` of a workflow that finished in this process is answered from what its last step
committed, with no read; it stays right once the workflow is pruned (here, through ``wf prune``,
or by another node of a cluster) and once its id is started again."""

from __future__ import annotations

from typing import Any

import pytest

from actors import ActorSystem, UnknownWorkflow
from actors.testing import Cluster
from workflows import Cancelled, WorkflowFailed, signal, workflow

from .test_cli import wf

T = 30  # every wait in these tests is bounded


@workflow
async def echo(x: int) -> int:
    return x


@workflow
async def refuse(x: int) -> int:
    raise ValueError(f"refused {x}")


@workflow
async def waits() -> object:
    return await signal("go")


def count_reads(monkeypatch: pytest.MonkeyPatch, system: ActorSystem) -> list[str]:
    """The ids whose row ``system`` reads from now on."""
    store: Any = system._rt.store
    reads: list[str] = []
    load = store.load_workflow

    def counted(workflow_id: str) -> Any:
        reads.append(workflow_id)
        return load(workflow_id)

    monkeypatch.setattr(store, "load_workflow", counted)
    return reads


def test_the_outcome_of_a_workflow_that_finished_here_is_answered_without_a_read(db, clock, monkeypatch):
    with ActorSystem(db, clock=clock) as system:
        done = system.start(echo, 7)
        failed = system.start(refuse, 3)
        cancelled = system.start(waits)
        cancelled.cancel("no more")
        system.idle(T)
        reads = count_reads(monkeypatch, system)
        assert done.result(T) == 7
        with pytest.raises(WorkflowFailed) as e:
            failed.result(T)
        assert (e.value.error_type, e.value.error_message) == ("ValueError", "refused 3")
        assert "ValueError: refused 3" in (e.value.traceback or "")
        with pytest.raises(Cancelled, match="no more"):
            cancelled.result(T)
        assert reads == []
        waiting = system.start(waits)
        system.idle(T)
        waiting.signal("go", "now")
        assert waiting.result(T) == "now"
        # Read once at most: before its end, as it may have been running still.
        assert reads.count(waiting.id) <= 1
        assert len(reads) <= 1


def test_a_workflow_pruned_here_is_unknown_and_its_id_started_again_gives_the_new_outcome(db, clock):
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(echo, 1, id="twice")
        assert ref.result(T) == 1
        clock.advance(10)
        assert system.prune(older_than=0) == 1
        with pytest.raises(UnknownWorkflow):
            ref.result(T)
        again = system.start(echo, 2, id="twice", reuse_id=True)
        assert again.result(T) == 2 and ref.result(T) == 2


def test_a_workflow_pruned_by_wf_prune_through_the_running_system_is_unknown(db, clock, capsys):
    with ActorSystem(db, clock=clock, retention=None) as system:
        ref = system.start(echo, 5)
        assert ref.result(T) == 5
        clock.advance(7200)
        code, _, err = wf(capsys, "prune", "--db", db, "--older-than", "1h")
        assert (code, err) == (0, "")
        with pytest.raises(UnknownWorkflow):
            ref.result(T)


def test_a_workflow_another_node_pruned_is_unknown_to_the_node_it_finished_on(pg_store_url, clock):
    with Cluster(pg_store_url, 1, clock=clock, retention=None) as cluster:
        first = cluster["node-1"]
        alone = first.start(echo, 1)
        assert alone.result(T) == 1  # the only node: its outcome is kept
        second = cluster.add("node-2")  # seen by node-1 before it has opened
        cluster.settle()
        crowded = first.start(echo, 2)
        assert crowded.result(T) == 2
        clock.advance(10)
        assert second.prune(older_than=0) == 2
        for ref in (alone, crowded):
            with pytest.raises(UnknownWorkflow):
                ref.result(T)


def test_result_of_a_workflow_started_here_that_runs_times_out_saying_so(db, clock, monkeypatch):
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(waits)
        system.idle(T)
        reads = count_reads(monkeypatch, system)
        with pytest.raises(TimeoutError, match="did not finish within 0.2s"):
            ref.result(0.2)
        assert reads == [ref.id]  # read once, for what the error says


def test_an_end_this_process_did_not_see_is_read_from_the_store(db, clock):
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(echo, 4)
        assert ref.result(T) == 4
        outcomes = system._rt.outcomes
        outcomes.forget([ref.id])
        outcomes.started(ref.id)  # as if it still ran
        assert outcomes.running(ref.id)
        assert ref.result(T) == 4
