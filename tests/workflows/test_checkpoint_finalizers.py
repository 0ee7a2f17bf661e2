"""What a restore cannot give back as it was is refused at the await, naming the variable.

- An instance of a class with a ``__del__``, or one a weak reference points to (a
  ``weakref.finalize``, a ``WeakValueDictionary`` entry): a restore makes a new object, so the
  finalizer ran for the copy the restore discarded (a passivated workflow loaded again), or,
  after a crash, never, and the weak reference did not follow the copy.
- A ctypes array (pointer, structure) type made at run time (``c_int * 3``): the checkpoint was
  accepted and the restore failed. One defined at module level, and a ``c_int``, are kept.
- decimal's current context (``decimal.getcontext()``): it is the thread's, and a restore gave
  back a copy that no arithmetic used.
- A set of frozen dataclasses (or of instances whose own ``__hash__`` reads a field) where a field
  hashes by identity (a NaN, an instance made in the workflow): accepted, then its table could
  not be rebuilt. A field that the class's ``__hash__`` does not read is no reason to refuse.
"""

from __future__ import annotations

import ctypes
import dataclasses
import decimal
import gc
import weakref

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

LOG: list[object] = []
CACHE: weakref.WeakValueDictionary[str, object] = weakref.WeakValueDictionary()
IntArray3 = ctypes.c_int * 3


class Resource:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __del__(self) -> None:
        LOG.append(("del", self.tag))


class Plain:
    pass


@workflow
async def holds_an_object_with_del():
    r = Resource("a")
    await timer("t", 1)
    return r.tag


@workflow
async def holds_an_object_with_a_finalizer():
    o = Plain()
    weakref.finalize(o, LOG.append, "fin")
    await timer("t", 1)
    return type(o).__name__


@workflow
async def holds_a_temporary_directory_open_across_an_await():
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        before = os.path.isdir(d)
        await timer("t", 1)
        after = os.path.isdir(d)
    return before, after


@workflow
async def holds_a_function_with_a_finalizer():
    def f():
        return 1

    weakref.finalize(f, LOG.append, "f finalized")
    await timer("t", 1)
    return f()


WATCHED = Plain()


@workflow
async def holds_a_live_finalizer():
    fin = weakref.finalize(WATCHED, LOG.append, "watched finalized")
    await timer("t", 1)
    return fin.alive


@workflow
async def holds_an_object_in_a_weak_cache():
    item = Plain()
    CACHE["item"] = item
    await timer("t", 1)
    return CACHE.get("item") is item


@workflow
async def holds_a_ctypes_array_of_a_type_made_at_run_time():
    arr = (ctypes.c_int * 4)(1, 2, 3, 4)  # (c_int * 3 is IntArray3: ctypes makes it once)
    await timer("t", 1)
    return list(arr)


@workflow
async def holds_an_array_of_a_type_equal_to_a_module_global():
    arr = (ctypes.c_int * 3)(1, 2, 3)  # ctypes makes c_int * 3 once: IntArray3
    await timer("t", 1)
    return list(arr)


@workflow
async def holds_ctypes_values_of_module_types():
    i = ctypes.c_int(5)
    arr = IntArray3(1, 2, 3)
    await timer("t", 1)
    arr[0] += i.value
    return i.value, list(arr)


@workflow
async def holds_the_current_decimal_context():
    c = decimal.getcontext()
    await timer("t", 1)
    c.prec = 3
    return str(decimal.Decimal(1) / decimal.Decimal(7))


@dataclasses.dataclass(frozen=True)
class Pos:
    x: float
    y: float


class Tagged:
    def __init__(self, key, owner):
        self.key, self.owner = key, owner

    def __eq__(self, other):
        return isinstance(other, Tagged) and other.key == self.key

    def __hash__(self):
        return hash(self.key)


@workflow
async def holds_a_set_of_dataclasses_one_with_a_nan():
    spots = {Pos(float(i), 0.0) for i in range(40)}
    spots.add(Pos(float("nan"), 1.0))
    await timer("t", 1)
    return len(spots)


@workflow
async def holds_a_set_of_objects_hashed_by_a_field_that_holds_an_identity():
    class Tag:
        pass

    tags = {Tagged(Tag(), None) for _ in range(3)}
    await timer("t", 1)
    return len(tags)


@workflow
async def holds_a_set_of_objects_hashed_by_a_key_beside_an_owner():
    owner = Plain()
    units = {Tagged(i, owner) for i in range(40)}
    await timer("t", 1)
    return sorted(u.key for u in units), all(u.owner is owner for u in units)


@pytest.mark.parametrize(
    ("wf", "variable", "says"),
    [
        (holds_an_object_with_del, "r", "Resource has a __del__, which would run for each copy"),
        (holds_an_object_with_a_finalizer, "o", "a weak reference points to this Plain"),
        (holds_an_object_in_a_weak_cache, "item", "a weak reference points to this Plain"),
        (holds_a_temporary_directory_open_across_an_await, None,
         "the context manager of the with at line"),
        (holds_a_temporary_directory_open_across_an_await, None,
         "a weakref.finalize is registered on this tempfile.TemporaryDirectory"),
        (holds_a_function_with_a_finalizer, "f", "a weakref.finalize is registered on this function"),
        (holds_a_live_finalizer, "fin", "a live weakref.finalize is registered in this process only"),
        (holds_a_ctypes_array_of_a_type_made_at_run_time, "arr",
         "c_int_Array_4 is a ctypes type made at run time"),
        (holds_the_current_decimal_context, "c", "decimal's current context (decimal.getcontext()) belongs to the thread"),
        (holds_a_set_of_dataclasses_one_with_a_nan, "spots", "set"),
        (holds_a_set_of_objects_hashed_by_a_field_that_holds_an_identity, "tags", "set"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_what_a_restore_would_give_back_otherwise_is_refused_at_the_await(wf, variable, says):
    LOG.clear()
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    err = info.value
    assert err.variable == variable, str(err)
    assert says in str(err) and "await timer(" in str(err), str(err)
    del info, err
    gc.collect()
    CACHE.clear()


def test_the_refused_workflows_run_natively_and_without_checkpoints():
    LOG.clear()
    h = WorkflowHarness(holds_an_object_with_del, roundtrip=False)
    h.fire_timer("t")
    assert h.result() == "a"
    gc.collect()
    assert LOG.count(("del", "a")) == 1


def test_a_ctypes_type_made_at_run_time_that_is_a_module_global_is_kept():
    h = WorkflowHarness(holds_an_array_of_a_type_equal_to_a_module_global, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == [1, 2, 3]


def test_ctypes_values_of_module_types_are_kept():
    h = WorkflowHarness(holds_ctypes_values_of_module_types, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (5, [6, 2, 3])


def test_a_set_of_objects_hashed_by_a_field_beside_one_hashed_by_identity_is_kept():
    h = WorkflowHarness(holds_a_set_of_objects_hashed_by_a_key_beside_an_owner, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (list(range(40)), True)
