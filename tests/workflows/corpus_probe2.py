"""Corpus: programs probing what a checkpoint keeps beyond the workflow's own locals.

Closures made by functions the workflow calls (their cells are real cells, not the workflow's
frame), shared between several functions and rebound through ``nonlocal`` across awaits; the
identity of the constants a module's code shares (a literal in the workflow is the module's
equal constant, whichever await it comes after).
"""

from __future__ import annotations

import operator

from workflows import timer, workflow

from .diffharness import C, add
from .probes import log


def tick(n: int = 1):
    return timer("t", n)


@workflow
async def closures_sharing_a_cell(n):
    """A counter's inc and get, made by a nested function: one cell shared by both."""

    def make(start):
        c = start

        def inc():
            nonlocal c
            c += 1
            return c

        def get():
            return c

        return inc, get

    inc, get = make(n)
    inc()
    await tick()
    inc()
    await tick()
    log(get())
    inc2, get2 = make(10 * n)
    inc2()
    await tick()
    return get(), inc(), get(), get2(), inc2(), get2()


add(closures_sharing_a_cell, C(0), C(3), C(-2))


@workflow
async def closure_cell_rebound_by_a_setter(xs):
    """A getter and a setter over one cell; the cell rebound to a new list after an await."""

    def box(v):
        def read():
            return v

        def write(new):
            nonlocal v
            v = new

        return read, write

    read, write = box(list(xs))
    await tick()
    write(read() + [len(xs)])
    await tick()
    alias = read()
    write(alias)
    alias.append("x")
    await tick()
    return read(), read() is alias


add(closure_cell_rebound_by_a_setter, C([]), C([1, 2]), C(["a"]))


@workflow
async def recursive_closure_sharing_its_cell(n):
    """A nested function that calls itself through the cell the other closures share."""

    def make():
        calls = []

        def fact(k):
            calls.append(k)
            return 1 if k <= 1 else k * fact(k - 1)

        def count():
            return len(calls)

        return fact, count

    fact, count = make()
    a = fact(n)
    await tick()
    b = fact(n + 1)
    await tick()
    return a, b, count()


add(recursive_closure_sharing_its_cell, C(1), C(3), C(5))



@workflow
async def closure_cell_deleted_then_rebound(n):
    """Three closures over one variable: one deletes it, one rebinds it, one reads it."""

    def make(start):
        v = start

        def get():
            return v

        def kill():
            nonlocal v
            del v

        def put(x):
            nonlocal v
            v = x

        return get, kill, put

    get, kill, put = make(n)
    if n:
        kill()
    await tick()
    try:
        first = get()
    except NameError as e:
        first = type(e).__name__
    put(first if n == 2 else 5)
    await tick()
    return first, get()


add(closure_cell_deleted_then_rebound, C(0), C(1), C(2))

MODE = "idle mode!"
ORIGIN = (0, "zero point")
RATE = 0.125
BIG = 12345678901234567890
same = operator.is_  # ``x is y`` without the SyntaxWarning a literal operand draws


@workflow
async def literals_are_the_modules_constants(n):
    """Each literal, made after an await, is the object the module's equal constant is."""
    await tick()
    log(("mode", same("idle mode!", MODE), same((0, "zero point"), ORIGIN)))
    if n > 0:
        await tick()
        log(("rate", same(0.125, RATE), same(12345678901234567890, BIG)))
    for i in range(n):
        await tick()
        mode = "idle mode!"

        def again():
            return "idle mode!", (0, "zero point")

        log((i, again()[0] is mode, again()[1] is ORIGIN))
    return n


add(literals_are_the_modules_constants, C(0), C(1), C(2))


@workflow
async def subclass_of_a_local_base_with_a_hook(n):
    """A base made in the workflow whose __init_subclass__ uses super() and class keywords only
    (no variable of the workflow): its subclasses restore anywhere, with their class state."""

    class Base:
        def __init_subclass__(cls, tag="", **kw):
            super().__init_subclass__(**kw)
            cls.tag = tag.upper()
            cls.made = getattr(cls, "made", 0) + 1

    class Item(Base, tag="sword"):
        def describe(self):
            return f"{self.tag}:{self.made}"

    it = Item()
    await tick()

    class Other(Base, tag="x" * n):
        pass

    await tick()
    return it.describe(), Other.tag, Other.made, isinstance(it, Base), Item.__mro__[1] is Base


add(subclass_of_a_local_base_with_a_hook, C(0), C(1), C(3))


class Node:
    """A graph node, compared and hashed by identity."""

    def __init__(self, name, kids=()):
        self.name = name
        self.kids = list(kids)


def helper_fn():
    return "helper"


@workflow
async def objects_indexed_by_their_id(n):
    """ids and identity hashes of objects the workflow holds, kept in dicts, lists, tuples and
    attributes across awaits: they still say which object they were."""
    leaf = Node("leaf")
    root = Node("root", [leaf, Node("mid", [leaf])] + [Node(f"k{i}") for i in range(n)])
    seen = {}  # id -> order of the first visit
    order = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            order.append(("again", node.name, seen[id(node)]))
            continue
        seen[id(node)] = len(order)
        order.append(node.name)
        await tick()
        stack.extend(node.kids)
    box = [1]
    pairs = [(id(box), "box"), (hash(leaf), "leaf"), (id(helper_fn), "fn")]
    root.tag = id(leaf)
    await tick()
    box.append(2)
    by_id = dict(pairs)
    return (
        order,
        by_id.get(id(box)),
        by_id.get(hash(leaf)),
        by_id.get(id(helper_fn)),
        root.tag == id(root.kids[0]),
        len(seen),
    )


add(objects_indexed_by_their_id, C(0), C(1), C(2))
