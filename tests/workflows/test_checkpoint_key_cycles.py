"""A dict or set keyed by objects whose own ``__hash__`` reads their state, held by those very
objects (rooms whose exits dict is keyed by the rooms they link to, which link back), is
restored.

A restore rebuilds an object's state after the objects its state holds: the exits dict of room
``b`` was filled while room ``a``, its key, had no state yet, so ``Room.__hash__`` failed and
the checkpoint it had accepted could not be restored. Such dicts and sets are filled once every
object is back; a dict a reduce makes to hand on (a ``Counter``'s ``dict(self)``) is written as
it is.
"""

from __future__ import annotations

import collections
import dataclasses

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import Oracle, compare, resume_in_a_new_interpreter, run_compiled, run_native


class Room:
    def __init__(self, name):
        self.name = name
        self.exits = {}
        self.near = set()

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, Room) and other.name == self.name

    def link(self, other, cost):
        self.exits[other] = cost
        other.exits[self] = cost
        self.near.add(other)
        other.near.add(self)


@dataclasses.dataclass(frozen=True)
class Tile:
    x: int
    y: int
    board: object = dataclasses.field(compare=False, hash=False, default=None, repr=False)


@dataclasses.dataclass(frozen=True)
class Item:
    name: str


@workflow
async def dungeon(n):
    a, b, c = Room("a"), Room("b"), Room("c")
    a.link(b, 1)
    b.link(c, n)
    t = Tile(1, 2)
    board = {"tiles": {t: "grass"}}
    object.__setattr__(t, "board", board)
    loot = collections.Counter({Item("gem"): n, Item("ore"): 2})
    d, e = Room("d"), Room("e")
    d.exits = collections.OrderedDict({e: 1})
    e.exits = collections.defaultdict(int, {d: n})
    await timer("t", 1)
    e.exits[a] += 1
    c.link(a, 5)
    return ({r.name: sorted((k.name, v) for k, v in r.exits.items()) for r in (a, b, c)},
            sorted(x.name for x in a.near), a.exits[b], board["tiles"][Tile(1, 2)], t.board is board,
            loot[Item("gem")], len(loot), list(d.exits.items())[0][0] is e, dict(e.exits) == {d: 3, a: 1})


WANT = ({"a": [("b", 1), ("c", 5)], "b": [("a", 1), ("c", 3)], "c": [("a", 5), ("b", 3)]},
        ["b", "c"], 1, "grass", True, 3, 2, True, True)


def test_rooms_keyed_by_each_other_are_restored():
    native = run_native(dungeon, (3,), Oracle())
    restored = run_compiled(dungeon, (3,), Oracle(), roundtrip=True)
    assert not compare(native, restored, with_chain=True, label="restored")
    assert restored.outcome == ("return", WANT)


def test_rooms_keyed_by_each_other_are_restored_in_a_new_interpreter():
    h = WorkflowHarness(dungeon, 3, roundtrip=False)
    assert resume_in_a_new_interpreter(h.checkpoint(), module=__name__, workflow_type="k") == WANT


class Vault:
    """A room whose loot is a Counter keyed by the vaults it trades with, which count it back."""

    def __init__(self, name):
        self.name = name
        self.loot = collections.Counter()

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, Vault) and other.name == self.name


@workflow
async def trading(n):
    a, b = Vault("a"), Vault("b")
    a.loot[b] += n
    b.loot[a] += 1
    await timer("t", 1)
    a.loot[b] += 1
    return a.loot[b], b.loot[a], a.loot.most_common(1)[0][0] is b, type(b.loot).__name__


def test_a_counter_keyed_by_objects_that_hold_it_is_restored():
    """A Counter's own reduce hands its items over as a new dict, which a restore filled with
    keys whose state was not back yet: the checkpoint was accepted, the restore failed."""
    native = run_native(trading, (3,), Oracle())
    restored = run_compiled(trading, (3,), Oracle(), roundtrip=True)
    assert not compare(native, restored, with_chain=True, label="restored")
    assert restored.outcome == ("return", (4, 1, True, "Counter"))
    h = WorkflowHarness(trading, 3, roundtrip=False)
    got = resume_in_a_new_interpreter(h.checkpoint(), module=__name__, workflow_type="k")
    assert got == (4, 1, True, "Counter")


class Guest:
    def __init__(self, name):
        self.name = name
        self.party = frozenset()

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, Guest) and other.name == self.name


@workflow
async def seating(n):
    a, b = Guest("a"), Guest("b")
    a.party = frozenset([b])
    b.party = frozenset([a])
    await timer("t", n)
    return len(a.party)


def test_a_frozenset_of_objects_that_hold_it_is_refused_at_the_checkpoint():
    """A frozenset is made with its elements, so one whose elements hash by their own state and
    hold it back cannot be restored: it was accepted, and its restore failed. It is refused at
    the await, naming the variable, saying to hold a set."""
    with pytest.raises(CheckpointError) as refused:
        WorkflowHarness(seating, 1, roundtrip=False).checkpoint()
    assert refused.value.variable == "a"
    assert "frozenset" in str(refused.value) and "hold a set" in str(refused.value)
