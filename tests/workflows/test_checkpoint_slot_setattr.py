"""Instances whose slots a class's own ``__setattr__`` guards come back with their recorded values.

- An immutable value object (``__slots__``, fields set in ``__init__`` by ``object.__setattr__``,
  a ``__setattr__`` that raises) held across an await was accepted, and every restore failed
  (pickle sets slot values with ``setattr``); the failure was reported as code that cannot be
  found, and the runtime held the workflow blocked. Its slots are now put back as recorded, by
  ``object.__setattr__``, in this process and in a new one.
- A slotted class made in the workflow whose ``__setattr__`` reads a variable of the workflow:
  the restore failed with a NameError (that variable is not back yet when the object is). Its
  ``__setattr__`` is not called by a restore now.
- A restore that fails in the application's own code (its ``__setstate__`` raises an
  AttributeError) is reported as that, naming the method, not as code missing in the process.
"""

from __future__ import annotations

import pytest

from workflows import CheckpointError, UnknownWorkflowType, timer, workflow
from workflows._compiler import restore
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


class FrozenPoint:
    """An immutable value object: ``__slots__`` and a ``__setattr__`` that refuses writes."""

    __slots__ = ("x", "y")

    def __init__(self, x, y):
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)

    def __setattr__(self, k, v):
        raise AttributeError(f"{type(self).__name__} is immutable")


class Logged:
    """A slotted class whose ``__setattr__`` records each write: a restore puts the recorded
    values back without writing them again."""

    __slots__ = ("a", "writes")

    def __init__(self):
        object.__setattr__(self, "writes", [])

    def __setattr__(self, k, v):
        self.writes.append(k)
        object.__setattr__(self, k, v)


class BrokenState:
    def __init__(self):
        self.v = 1

    def __setstate__(self, state):
        raise AttributeError("BrokenState cannot take its state back")


@workflow
async def holds_an_immutable_slotted_value():
    p = FrozenPoint(1, 2)
    await timer("t", 1)
    try:
        p.x = 5
    except AttributeError as e:
        refused = str(e)
    return p.x, p.y, refused


@workflow
async def holds_a_slotted_value_that_logs_its_writes():
    r = Logged()
    r.a = 3
    await timer("t", 1)
    return r.a, list(r.writes)


@workflow
async def holds_a_local_slotted_class_whose_setattr_reads_a_variable():
    locked = False

    class Rec:
        __slots__ = ("a",)

        def __setattr__(self, k, v):
            if locked:
                raise AttributeError("locked")
            object.__setattr__(self, k, v)

    r = Rec()
    r.a = 5
    locked = True
    await timer("t", 1)
    try:
        r.a = 6
    except AttributeError as e:
        refused = str(e)
    return r.a, refused


@workflow
async def holds_an_object_whose_setstate_raises():
    b = BrokenState()
    await timer("t", 1)
    return b.v


@pytest.mark.parametrize(
    ("wf", "expected"),
    [
        (holds_an_immutable_slotted_value, (1, 2, "FrozenPoint is immutable")),
        (holds_a_slotted_value_that_logs_its_writes, (3, ["a"])),
        (holds_a_local_slotted_class_whose_setattr_reads_a_variable, (5, "locked")),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_slots_guarded_by_the_class_setattr_come_back_as_recorded(wf, expected):
    h = WorkflowHarness(wf, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == expected


@pytest.mark.parametrize(
    ("wf", "expected"),
    [
        (holds_an_immutable_slotted_value, (1, 2, "FrozenPoint is immutable")),
        (holds_a_local_slotted_class_whose_setattr_reads_a_variable, (5, "locked")),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_slots_guarded_by_the_class_setattr_come_back_in_a_new_process(wf, expected):
    blob = WorkflowHarness(wf, roundtrip=False).checkpoint()
    out = resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__,
                                      now=0.0, answer="repr")
    assert out == repr(expected)


def test_a_restore_that_fails_in_the_applications_code_is_not_reported_as_missing_code():
    blob = WorkflowHarness(holds_an_object_whose_setstate_raises, roundtrip=False).checkpoint()
    with pytest.raises(CheckpointError) as info:
        restore(blob)
    msg = str(info.value)
    assert not isinstance(info.value, UnknownWorkflowType)
    assert "BrokenState.__setstate__" in msg and "cannot take its state back" in msg, msg
    assert "cannot be found" not in msg, msg
