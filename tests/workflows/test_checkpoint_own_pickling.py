"""An attribute that an instance's own pickling leaves out, or gives back as another object, and
that the workflow holds elsewhere too, is the instance's attribute again after a restore.

A game object pickles by a rule of its own: ``__getstate__`` drops a cache and a lock that
``__setstate__`` makes anew, or hands a copy of a list, or ``__reduce__`` passes its data to an
``__init__`` that copies it, or a reducer registered with ``copyreg`` copies a list. Natively ``c = p._cache`` stays ``p._cache`` across the await; the
restore gave back the instance by its rule, with a new cache apart from the one the local came
back as, so what the workflow put into ``c`` after the await was not in ``p._cache``, silently.
"""

from __future__ import annotations

import copyreg
import dataclasses
import threading

import pytest

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import native, restarted


class Player:
    def __init__(self, name):
        self.name = name
        self.inventory = ["potion"]
        self._cache = {}
        self._lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_lock"], state["_cache"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._cache = {}
        self._lock = threading.Lock()


class Snapshot:
    def __init__(self):
        self.items = [1]

    def __getstate__(self):
        return {"items": list(self.items)}


class Squad:
    def __init__(self, members):
        self.members = list(members)

    def __reduce__(self):
        return (Squad, (self.members,))


class Slotted:
    __slots__ = ("log", "tag")

    def __init__(self):
        self.log = []
        self.tag = "s"

    def __reduce__(self):
        return (Slotted, ())


class Connection:
    def __init__(self):
        self.sent = []


def _rebuild_connection(sent):
    c = Connection()
    c.sent = sent
    return c


copyreg.pickle(Connection, lambda c: (_rebuild_connection, (list(c.sent),)))


@workflow
async def holds_a_cache_its_getstate_drops():
    p = Player("ann")
    cache = p._cache
    cache["seen"] = 1
    bag = p.inventory
    await timer("t", 1)
    cache["hit"] = 2
    bag.append("elixir")
    return p._cache, cache is p._cache, p.inventory, bag is p.inventory


@workflow
async def holds_a_list_its_getstate_copies():
    s = Snapshot()
    items = s.items
    await timer("t", 1)
    items.append(2)
    return s.items, items is s.items


@workflow
async def holds_what_its_reduce_passes_to_a_copying_init():
    squad = Squad(["ann"])
    members = squad.members
    await timer("t", 1)
    members.append("bob")
    return squad.members, members is squad.members


@workflow
async def holds_a_slot_its_reduce_leaves_out():
    s = Slotted()
    s.log.append("start")
    held = {"log": s.log}
    await timer("t", 1)
    held["log"].append("after")
    return s.log, held["log"] is s.log


@workflow
async def holds_the_dropped_cache_in_a_container_at_two_awaits():
    players = [Player("ann"), Player("bob")]
    caches = [p._cache for p in players]
    await timer("t", 1)
    caches[1]["x"] = 1
    await timer("u", 1)
    caches[0]["y"] = 2
    return [p._cache for p in players], [c is p._cache for c, p in zip(caches, players, strict=True)]


@workflow
async def holds_what_a_copyreg_reducer_copies():
    c = Connection()
    sent = c.sent
    await timer("t", 1)
    sent.append("hello")
    return c.sent, sent is c.sent


@workflow
async def two_instances_share_a_list_their_getstate_copies():
    a, b = Snapshot(), Snapshot()
    b.items = a.items
    await timer("t", 1)
    a.items.append(2)
    return b.items, a.items is b.items


@dataclasses.dataclass(frozen=True)
class Cell:
    x: int
    y: int


class Board:
    """A set of cells, written with its table (a set of objects, changed since it was made)."""

    def __init__(self):
        self.cells = {Cell(i, i * 7 % 5) for i in range(20)}

    def __getstate__(self):
        return {"cells": set(self.cells)}


@workflow
async def holds_a_set_its_getstate_copies():
    board = Board()
    cells = board.cells
    for i in range(10):
        cells.discard(Cell(i, i * 7 % 5))
    await timer("t", 1)
    cells.add(Cell(99, 1))
    return len(board.cells), cells is board.cells


CASES = [
    (holds_a_cache_its_getstate_drops, ({"seen": 1, "hit": 2}, True, ["potion", "elixir"], True)),
    (holds_a_list_its_getstate_copies, ([1, 2], True)),
    (holds_what_its_reduce_passes_to_a_copying_init, (["ann", "bob"], True)),
    (holds_a_slot_its_reduce_leaves_out, (["start", "after"], True)),
    (holds_the_dropped_cache_in_a_container_at_two_awaits, ([{"y": 2}, {"x": 1}], [True, True])),
    (holds_what_a_copyreg_reducer_copies, (["hello"], True)),
    (two_instances_share_a_list_their_getstate_copies, ([1, 2], True)),
    (holds_a_set_its_getstate_copies, (11, True)),
]


@pytest.mark.parametrize(("wf", "want"), CASES, ids=[wf.__name__ for wf, _ in CASES])
def test_an_attribute_its_own_pickling_leaves_out_is_the_instances_after_a_restore(wf, want):
    assert native(wf) == want
    h = WorkflowHarness(wf, roundtrip=True)
    while not h.done:
        h.send(None)
    assert h.result() == want


NEW_PROCESS = [CASES[0], CASES[1], CASES[-2], CASES[-1]]


@pytest.mark.parametrize(("wf", "want"), NEW_PROCESS, ids=[wf.__name__ for wf, _ in NEW_PROCESS])
def test_an_attribute_its_own_pickling_leaves_out_is_the_instances_in_a_new_process(wf, want):
    assert restarted(wf) == want


@workflow
async def holds_only_the_instance():
    p = Player("ann")
    p._cache["seen"] = 1
    await timer("t", 1)
    return p._cache, p.inventory


def test_an_attribute_held_by_the_instance_alone_comes_back_by_its_rule():
    """Where only the instance holds its cache, the restore gives it back by its own rule."""
    h = WorkflowHarness(holds_only_the_instance, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == ({}, ["potion"])
