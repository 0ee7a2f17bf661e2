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


class ExitsWhenPickled:
    """A value whose pickling calls sys.exit() (library code that exits on an error)."""

    def __reduce__(self):
        raise SystemExit("no pickling here")


class ExitsWhenRestored:
    """Pickles, and calls sys.exit() as it is unpickled."""

    def __reduce__(self):
        return (_exit_on_load, ())


def _exit_on_load():
    raise SystemExit("no restoring here")


@workflow
async def holds_a_value_that_exits_when_pickled():
    v = ExitsWhenPickled()
    await get(1)
    return type(v).__name__


@workflow
async def holds_a_value_that_exits_when_restored():
    v = ExitsWhenRestored()
    await get(1)
    return type(v).__name__


def test_a_value_whose_pickling_or_unpickling_exits_is_refused_naming_it():
    """A ``SystemExit`` raised by a value's pickling (or its unpickling) is that value's failure,
    a ``CheckpointError`` naming the variable: it went through as ``SystemExit``, which ended the
    engine's thread and left ``start()`` waiting for a commit that never came."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(holds_a_value_that_exits_when_pickled, roundtrip=True)
    msg = str(info.value)
    assert "local 'v'" in msg and "ExitsWhenPickled" in msg and "SystemExit: no pickling here" in msg, msg
    with pytest.raises(CheckpointError) as restored:
        WorkflowHarness(holds_a_value_that_exits_when_restored, roundtrip=True)
    assert "SystemExit: no restoring here" in str(restored.value), str(restored.value)


class Interrupted:
    def __reduce__(self):
        raise KeyboardInterrupt


@workflow
async def holds_an_interrupted_value():
    v = Interrupted()
    await get(1)
    return v


def test_ctrl_c_on_the_main_thread_while_pickling_is_ctrl_c():
    """An interrupt of the program (Ctrl-C arrives on the main thread) stays one: only code of
    another thread raising KeyboardInterrupt itself is the value's failure."""
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        WorkflowHarness(holds_an_interrupted_value, roundtrip=True)
    failures: list[BaseException] = []

    def elsewhere() -> None:
        try:
            WorkflowHarness(holds_an_interrupted_value, roundtrip=True)
        except BaseException as e:  # noqa: BLE001 - the test looks at what came out
            failures.append(e)

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join(30)
    assert len(failures) == 1 and isinstance(failures[0], CheckpointError), failures
