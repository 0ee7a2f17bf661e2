"""Discrepancies between the documentation (and SPEC) and the code, pinned as strict xfails."""

from __future__ import annotations

import pytest

from workflows import WorkflowFailed, reducer, timer, workflow


@reducer
def broken_reducer(db) -> None:
    raise RuntimeError("broken on purpose")


@workflow
async def calls_broken_reducer() -> None:
    await timer("soon", 1)
    reducer(broken_reducer)


@pytest.mark.xfail(
    strict=True,
    reason="bug: ReducerFailed names the runtime's wrapper module (actors._actor:broken_reducer) "
    "instead of the reducer's own key; actors/_actor.py _bind_reducer copies only __qualname__",
)
def test_reducer_failed_names_the_reducers_own_key(workflow_system, workflow_clock):
    """A reducer that raises is named by its own module:qualname in the workflow's error."""
    ref = workflow_system.start(calls_broken_reducer)
    workflow_system.idle(timeout=10)
    workflow_clock.advance(1)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=30)
    assert "reducer tests.docs.test_known_bugs:broken_reducer " in e.value.error_message
