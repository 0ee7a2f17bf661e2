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


@workflow
async def lock_in_a_local():
    lk = threading.Lock()
    await get(1)
    return type(lk).__name__


@workflow
async def lock_held_by_a_local_and_a_with():
    lk = threading.Lock()
    with lk:
        await get(1)


@workflow
async def lock_as_a_with_manager():
    with threading.Lock():
        await get(1)


def test_a_lock_in_a_local_gets_the_advice_for_a_value_not_for_a_with():
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(lock_in_a_local, roundtrip=True)
    msg = str(info.value)
    assert "local 'lk' (_thread.lock)" in msg
    assert "del it before the await" in msg and "'with' body" not in msg, msg


@pytest.mark.parametrize("wf", [lock_held_by_a_local_and_a_with, lock_as_a_with_manager])
def test_a_lock_a_with_holds_open_across_an_await_gets_the_advice_for_a_with(wf):
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    assert "keep the awaits out of its 'with' body" in str(info.value), str(info.value)


class _Bag:
    def __init__(self, items):
        self.items = items


@workflow
async def _closure_beside_the_refused_value():
    seen = []

    def observe(v):  # closes over the workflow's variables: reaches every one of them
        seen.append(v)

    index = {observe: 1}
    bag = _Bag(frozenset([iter([1]), iter([2, 3])]))
    await get(0)
    return len(bag.items), index[observe]


def test_the_variable_named_is_the_one_holding_the_refused_value_not_a_closure_reaching_it():
    """A function made in the workflow (or a dict keyed by one) reaches every variable through
    its closure: the refusal names the variable that holds the value, each tried alone first."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(_closure_beside_the_refused_value, roundtrip=True)
    assert info.value.variable == "bag", str(info.value)
    assert "list_iterator" in str(info.value)
