"""A float or int held by a local and by an object the checkpoint writes by value comes back as
one object, whatever holds it and on every Python.

The checkpoint writes each such number once: it must find every occurrence, also where the
object's attributes are not in a dict of their own (Python 3.13 keeps an instance's attributes
inline, where ``gc.get_referents`` of its ``__dict__`` sees none of them) and where the object's
reduce hands its items to pickle one by one (a deque, an OrderedDict, a defaultdict, a list or
dict subclass) or its state is the number itself.
"""

from __future__ import annotations

import gc
import sys
import textwrap

import pytest

import workflows
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._compiler._pickler import dumps, loads
from workflows._context import StepContext
from workflows._step import Finished, Suspended

_MODULE = """
import collections, dataclasses, types

class Box:
    pass

class Slotted:
    __slots__ = ("v",)

@dataclasses.dataclass(frozen=True)
class Point:
    v: object
    w: int = 0

@dataclasses.dataclass(slots=True)
class SlotPoint:
    v: object

class Rows(list):
    pass

class Table(dict):
    pass

class Bare:
    def __init__(self, v):
        self.v = v
    def __getstate__(self):
        return self.v
    def __setstate__(self, state):
        self.v = state
"""

# What holds the number (made from ``v``), and how the workflow reads it back.
HOLDERS = {
    "instance attribute": ("Box(); h.v = v", "h.v"),
    "instance of many attributes": ("Box(); h.a = h.b = h.c = 1; h.v = v", "h.v"),
    "instance in a list": ("[Box()]; h[0].v = v", "h[0].v"),
    "two instances": ("(Box(), Box()); h[0].v = h[1].v = v", "h[1].v"),
    "instance in an instance": ("Box(); h.inner = Box(); h.inner.v = v", "h.inner.v"),
    "__slots__ instance": ("Slotted(); h.v = v", "h.v"),
    "frozen dataclass": ("Point(v)", "h.v"),
    "dataclass with slots": ("SlotPoint(v)", "h.v"),
    "SimpleNamespace": ("types.SimpleNamespace(v=v)", "h.v"),
    "Event": ("Event('e', v)", "h.value"),
    "exception attribute": ("ValueError('x'); h.v = v", "h.v"),
    "deque": ("collections.deque([0, v])", "h[1]"),
    "OrderedDict": ("collections.OrderedDict(k=v)", "h['k']"),
    "defaultdict": ("collections.defaultdict(list, k=v)", "h['k']"),
    "OrderedDict key": ("collections.OrderedDict({v: 1})", "next(iter(h))"),
    "list subclass": ("Rows([v])", "h[0]"),
    "dict subclass": ("Table(k=v)", "h['k']"),
    "state that is the number": ("Bare(v)", "h.v"),
}
VALUES = {"nan": "float('nan')", "big int": "2 ** 70 + n", "int": "100_000 + n"}


def _workflow(holder: str, value: str):
    make, read = HOLDERS[holder]
    src = _MODULE + textwrap.dedent(
        f"""
        async def holds(n):
            v = {VALUES[value]}
            h = {make}
            await signal("go")
            return {read} is v, v is h
        """
    )
    g = {name: getattr(workflows, name) for name in workflows.__all__}
    name = "shared_" + "".join(c if c.isalnum() else "_" for c in f"{holder}_{value}")
    return compile_workflow_source(src, f"{name}.py", "holds", g)


@pytest.mark.parametrize("value", list(VALUES))
@pytest.mark.parametrize("holder", list(HOLDERS))
def test_a_number_held_by_a_local_and_by_an_object_comes_back_as_one(holder, value) -> None:
    wf = _workflow(holder, value)
    for n in range(4):  # numbers whose bytes differ (none may look like anything else)
        cont = wf.start(n)
        with StepContext().active():
            assert isinstance(step(cont), Suspended)
        back = restore(checkpoint(cont))
        with StepContext().active():
            r = step(back, None)
        assert isinstance(r, Finished) and r.value == (True, False), (holder, value, n)


def test_on_3_13_an_instance_keeps_its_attributes_inline() -> None:
    """What the tests above cover on 3.13: gc.get_referents of such an instance's __dict__ sees
    none of its values (they are the instance's own), on older Pythons all of them."""

    class Box:
        pass

    b = Box()
    b.v = 2**70
    seen = gc.get_referents(vars(b))
    assert seen == ([] if sys.version_info >= (3, 13) else [b.v])


@pytest.mark.parametrize("holder", ["instance", "deque", "OrderedDict"])
def test_the_checkpoint_pickler_writes_a_number_held_twice_once(holder) -> None:
    """``dumps`` itself (the frames aside): a NaN in a list and in the holder is one object."""

    class Box:
        pass

    import collections

    for n in range(8):
        x = float("nan") if n % 2 else 2**70 + n
        if holder == "instance":
            h: object = Box()
            h.v = x  # type: ignore[attr-defined]
        elif holder == "deque":
            h = collections.deque([x])
        else:
            h = collections.OrderedDict(v=x)
        back = loads(dumps([h, [x]], {}))
        got = back[0].v if holder == "instance" else back[0][0] if holder == "deque" else back[0]["v"]
        assert got is back[1][0], (holder, n)
