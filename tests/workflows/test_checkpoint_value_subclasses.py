"""Instances of a subclass of ``int``, ``float``, ``str``, ``bytes`` or ``tuple`` whose class has a
``__new__`` of its own that takes other arguments than the value it makes come back with their
value and attributes, in this process and in a new interpreter.

Pickle writes such an instance as the value the base holds (``tuple``'s ``__getnewargs__``:
``(tuple(self),)``) and calls the class's own ``__new__`` with it at the restore. A
``Vec2(*xy)`` then came back as ``Vec2((3, 2))``, a 1-tuple holding the pair, a
``Money(gold, silver)`` worth 305 as ``Money(305)``, 30500, and a ``Celsius(fahrenheit)`` as a
temperature converted a second time: silently. A ``Vec(x, y)`` was refused. They are made as
their base makes them, from the value; a class that says what its ``__new__`` takes
(``__getnewargs__``, as a ``namedtuple`` does) is still made by it.
"""

from __future__ import annotations

import collections

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import Oracle, compare, resume_in_a_new_interpreter, run_compiled, run_native


class Vec2(tuple):
    def __new__(cls, *xy):
        return super().__new__(cls, xy)

    def __add__(self, other):
        return Vec2(*(a + b for a, b in zip(self, other, strict=True)))


class Vec(tuple):
    __slots__ = ()

    def __new__(cls, x, y):
        return super().__new__(cls, (x, y))


class Money(int):
    def __new__(cls, gold, silver=0):
        self = super().__new__(cls, gold * 100 + silver)
        self.label = f"{gold}g{silver}s"
        return self


class Celsius(float):
    def __new__(cls, fahrenheit):
        return super().__new__(cls, (fahrenheit - 32) * 5 / 9)


class Rune(bytes):
    def __new__(cls, *codes):
        return super().__new__(cls, bytes(codes))


class Shout(str):
    def __new__(cls, *words):
        return super().__new__(cls, " ".join(words).upper())


Pos = collections.namedtuple("Pos", "x y")


class Said(str):
    """Says what its ``__new__`` takes: made by it again at the restore."""

    def __new__(cls, text, times=1):
        return super().__new__(cls, text * times)

    def __getnewargs__(self):
        return (str(self), 1)


@workflow
async def loot_values(n):
    v = Vec2(n, 2)
    w = Vec(n, 5)
    m = Money(n, 5)
    c = Celsius(212)
    r = Rune(65, 66 + n)
    s = Shout("boss", "near")
    p = Pos(n, 1)
    said = Said("ab", 2)
    pair = [v, v]
    await timer("t", 1)
    v = v + Vec2(1, 1)
    return (tuple(v), type(v).__name__, tuple(w), int(m), m.label, float(c), bytes(r), str(s),
            tuple(p), type(p).__name__, str(said), pair[0] is pair[1])


WANT = ((4, 3), "Vec2", (3, 5), 305, "3g5s", 100.0, b"AE", "BOSS NEAR", (3, 1), "Pos", "abab", True)


def test_value_subclasses_with_their_own_new_keep_their_value():
    native = run_native(loot_values, (3,), Oracle())
    restored = run_compiled(loot_values, (3,), Oracle(), roundtrip=True)
    assert not compare(native, restored, with_chain=True, label="restored")
    assert restored.outcome == ("return", WANT)


def test_value_subclasses_keep_their_value_in_a_new_interpreter():
    h = WorkflowHarness(loot_values, 3, roundtrip=False)
    got = resume_in_a_new_interpreter(h.checkpoint(), module=__name__, workflow_type="k")
    assert got == WANT


class Token:
    """A plain class whose ``__new__`` takes an argument: pickle calls it with none."""

    def __new__(cls, v):
        self = super().__new__(cls)
        self.v = v
        return self


@workflow
async def holds_token(n):
    t = Token(n)
    await timer("t", 1)
    return t.v


def test_a_plain_class_whose_new_needs_arguments_is_still_refused():
    with pytest.raises(CheckpointError, match=r"local 't'.*__getnewargs__"):
        WorkflowHarness(holds_token, 1, roundtrip=True)
