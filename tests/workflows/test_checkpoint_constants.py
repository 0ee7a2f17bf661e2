"""A local holding one of the module's immutable constants is that constant after a restore.

Natively ``state = IDLE`` (``IDLE = "idle mode"``), or a literal of the workflow (the module's
equal constant: CPython makes equal constants of a module one object), gives ``state is IDLE``.
A checkpoint wrote the local by value, and the restore gave back an equal copy: ``state is
IDLE`` was False after the await, in the process that took the checkpoint too, and a workflow
that tests a sentinel string by identity went the other way. A constant that a container or an
object holds too is still shared with it.
"""

from __future__ import annotations

import operator

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import native, restarted

IDLE = "idle mode"
NOT_FOUND = "<not found>"
ORIGIN = (0, "zero point")
RATE = 0.125
CAP = 10**30
same = operator.is_  # ``x is y`` without the SyntaxWarning a literal operand draws


def lookup(key):
    return NOT_FOUND if key > 2 else key


@workflow
async def holds_constants_of_the_module():
    state, found, origin, rate, cap = IDLE, lookup(5), ORIGIN, RATE, CAP
    literal = "idle mode"
    pair = (0, "zero point")
    await timer("t", 1)
    return (
        state is IDLE, found is NOT_FOUND, origin is ORIGIN, rate is RATE, cap is CAP,
        same(literal, IDLE), same(pair, ORIGIN), same(state, "idle mode"),
    )


@workflow
async def holds_a_constant_a_list_holds_too():
    pair = (2.5, 10**20)
    pairs = [pair, pair]
    made = "".join(["idle", " mode"])  # equal to IDLE, not IDLE
    await timer("t", 1)
    return pair is pairs[0], pairs[0] is pairs[1], pair[0] is pairs[1][0], made is IDLE, made == IDLE


def test_constants_of_the_module_held_in_locals_are_the_modules_after_a_restore():
    want = (True,) * 8
    assert native(holds_constants_of_the_module) == want
    assert restarted(holds_constants_of_the_module) == want
    h = WorkflowHarness(holds_constants_of_the_module, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want


def test_a_constant_shared_with_a_list_stays_shared_and_an_equal_string_stays_apart():
    want = (True, True, True, False, True)
    assert native(holds_a_constant_a_list_holds_too) == want
    assert restarted(holds_a_constant_a_list_holds_too) == want
    h = WorkflowHarness(holds_a_constant_a_list_holds_too, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want
