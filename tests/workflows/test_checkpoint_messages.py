"""What a refusal at the checkpoint tells the user to do fits what is refused.

A value that is a part of an expression, computed before an await later in that expression
(``pair(threading.Lock(), await get(1))``), is held across the await though no variable holds
it: the error says so and how to reorder the expression, rather than the advice for a context
manager left open across an await (a lock has ``__enter__`` and ``__exit__`` too).
"""

from __future__ import annotations

import threading

import pytest

from workflows import CheckpointError, workflow
from workflows.testing import WorkflowHarness

from .probes import get


def pair(a, b):
    return type(a).__name__, b


@workflow
async def lock_made_before_an_await_in_one_call():
    return pair(threading.Lock(), await get(1))


def test_a_part_of_an_expression_held_across_its_await_is_explained_as_such():
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(lock_made_before_an_await_in_one_call, roundtrip=True)
    msg = str(info.value)
    assert "an intermediate value of an expression (_thread.lock)" in msg, msg
    assert "await get(1)" in msg
    assert "await first into a variable (v = await ...)" in msg, msg
    assert "context manager" not in msg, msg
