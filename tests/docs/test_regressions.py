"""Regressions of discrepancies once found between the documentation and the code."""

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


def test_reducer_failed_names_the_reducers_own_key(workflow_system, workflow_clock):
    """A reducer that raises is named by its own module:qualname in the workflow's error."""
    ref = workflow_system.start(calls_broken_reducer)
    workflow_system.idle(timeout=10)
    workflow_clock.advance(1)
    with pytest.raises(WorkflowFailed) as e:
        ref.result(timeout=30)
    assert "reducer tests.docs.test_regressions:broken_reducer " in e.value.error_message
