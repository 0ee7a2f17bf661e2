"""Corpus: positions, attributes and dicts a checkpoint keeps that pickle's own rebuild moves or
drops.

- Iterators of a list, ``reversed`` list, bytearray or array whose sequence shrank below their
  position before the await, and grew back after it (a ``for`` loop over a list cleared and
  refilled): natively they go on from their old index; their ``__setstate__`` clamps it to the
  length at the restore.
- Subclasses of standard library classes whose state is written by the base's rule (a
  ``Random``'s generator, an ``Element``, a ``decimal.Context``, an ``IPv4Address``): the
  attributes set on their instances, and an ``__init__`` of their own.
- A ``staticmethod``'s or ``classmethod``'s attributes; an exception's or a function's
  ``__dict__`` held apart from it; ``sys.version_info`` and the other struct sequences of ``sys``.
"""

from __future__ import annotations

import array
import decimal
import ipaddress
import random
import sys
import xml.etree.ElementTree as ET

from workflows import timer, workflow

from .diffharness import C, add


def tick(n: int = 1):
    return timer("t", n)


@workflow
async def for_loop_over_a_list_cleared_and_refilled(n):
    xs = [1, 2, 3]
    out = []
    for x in xs:
        out.append(x)
        if x == 2:
            xs.clear()
            await tick()
            xs.extend([10, 20, 30, 40 + n])
    return out


add(for_loop_over_a_list_cleared_and_refilled, C(0), C(5), C(-3))


@workflow
async def for_loop_over_reversed_list_cleared(n):
    xs = [1, 2, 3, 4]
    out = []
    for x in reversed(xs):
        out.append(x)
        if x == 4:
            xs.clear()
            await tick()
            xs.extend([7, 8, 9 + n])
    return out


add(for_loop_over_reversed_list_cleared, C(0), C(2), C(9))


@workflow
async def held_iterators_past_the_end_of_their_sequence(n):
    xs, ys = [1, 2, 3], ["a", "b", "c"]
    it, rev, en, z = iter(xs), reversed(list(xs)), enumerate(list(ys)), zip(xs, ys, strict=False)
    next(it), next(it), next(rev), next(en), next(en), next(z)
    b = bytearray(b"abc")
    bit = iter(b)
    next(bit), next(bit)
    a = array.array("i", [1, 2, 3])
    ait = iter(a)
    next(ait), next(ait)
    xs.clear()
    del b[:], a[:]
    await tick()
    xs.extend([7, 8, 9 + n])
    b.extend(b"xyz")
    a.extend([7, 8, 9])
    return list(it), list(rev), list(en), list(z), list(bit), list(ait)


add(held_iterators_past_the_end_of_their_sequence, C(0), C(1), C(4))


@workflow
async def worklist_replaced_in_place(n):
    work = [1, 2, 3]
    out = []
    it = iter(work)
    for item in it:
        out.append(item)
        if item == 2:
            work[:] = [item]
            await tick()
            work.extend([4, 5 + n])
    return out


add(worklist_replaced_in_place, C(0), C(3), C(8))


@workflow
async def list_holding_its_own_iterator(n):
    xs: list[object] = [1, 2, 3]
    it = iter(xs)
    next(it), next(it)
    xs.append(it)
    await tick()
    return [x if x is not it else "self" for x in it], n


add(list_holding_its_own_iterator, C(0), C(1), C(2))


class Tagged(random.Random):
    pass


class SeededTagged(random.Random):
    def __init__(self, seed, tag):
        super().__init__(seed)
        self.tag = tag


class Ctx(decimal.Context):
    pass


class El(ET.Element):
    pass


class Addr(ipaddress.IPv4Address):
    pass


@workflow
async def standard_library_subclasses_keep_their_attributes(n):
    r = Tagged(5 + n)
    r.tag = "x"
    r2 = SeededTagged(n, "y")
    c = Ctx(prec=5)
    c.tag = 1
    e = El("root", {"a": "1"})
    e.extra, e.text = 2, "hi"
    addr = Addr("1.2.3.4")
    addr.host = "h"
    await tick()
    return (r.tag, r.random(), r2.tag, r2.random(), c.prec, c.tag, e.extra, e.text, e.attrib,
            str(addr), addr.host)


add(standard_library_subclasses_keep_their_attributes, C(0), C(7), C(11))


def _f():
    return 1


@workflow
async def method_wrappers_keep_their_attributes(n):
    s, c = staticmethod(_f), classmethod(_f)
    s.tag, c.tag = 7 + n, 8
    await tick()
    return s.tag, c.tag, s.__func__ is _f, s.__name__


add(method_wrappers_keep_their_attributes, C(0), C(1), C(2))


class MyError(Exception):
    pass


@workflow
async def dicts_held_apart_from_exceptions_and_functions(n):
    e = ValueError("x")
    d = e.__dict__
    e.add_note("n1")
    notes = e.__notes__
    m = MyError("y")
    m.a = 1
    md = vars(m)

    def g():
        return 1

    g.count = n
    gd = g.__dict__
    await tick()
    d["extra"] = 3
    notes.append("n2")
    md["b"] = 2
    gd["count"] += 1
    return e.__notes__, getattr(e, "extra", None), getattr(m, "b", None), m.a, g.count


add(dicts_held_apart_from_exceptions_and_functions, C(0), C(4), C(6))


@workflow
async def struct_sequences_of_sys(n):
    v, f, fl = sys.version_info, sys.float_info, sys.flags
    await tick()
    return v is sys.version_info, tuple(v[:2]), f.max, fl.optimize, n


add(struct_sequences_of_sys, C(0), C(1), C(2))


class Rows(list):
    def __iter__(self):
        return iter(["not", "these"])


@workflow
async def iterator_of_a_list_subclass_with_its_own_iter(n):
    rows = Rows([1, 2, 3])
    it = list.__iter__(rows)
    next(it)
    await tick()
    return list(it), list(rows), n


add(iterator_of_a_list_subclass_with_its_own_iter, C(0), C(1), C(2))


class Table(dict):
    def items(self):
        return [("hidden", 0)]


@workflow
async def dict_subclass_with_its_own_items(n):
    t = Table(a=1, b=n)
    await tick()
    return dict.items(t) == {"a": 1, "b": n}.items(), t.items(), sorted(t)


add(dict_subclass_with_its_own_items, C(0), C(1), C(2))


class Tags(set):
    def __iter__(self):
        return iter(sorted(set.__iter__(self), key=str, reverse=True))


@workflow
async def set_subclass_with_its_own_iter(n):
    t = Tags({"b", "a", n})
    await tick()
    return sorted(set.__iter__(t), key=str), list(t), len(t)


add(set_subclass_with_its_own_iter, C(0), C(1), C(2))
