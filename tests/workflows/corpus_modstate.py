"""Corpus: objects a workflow shares with its module come back as the module's (issue 31).

Objects reachable from the module (class attributes, function defaults, ``__kwdefaults__``,
function attributes and closure cells of module-level functions, deques, defaultdicts,
OrderedDicts, SimpleNamespaces, ``__slots__`` instances, objects under tuple, enum and frozen
dataclass keys, a local function registered in a module list) are the module's objects after a
restore. Every workflow first puts the module data back as the module makes it, so the native
and the compiled runs start alike; they read back module data their earlier steps changed, so
they run in one process only (a fresh one imports the module anew).
"""

from __future__ import annotations

import enum
import types
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass

from workflows import timer, workflow

from .diffharness import C, add
from .probes import log

IN_PROCESS_ONLY = True


class Registry:
    """A class-level registry."""

    items: list = []
    by_name: dict = {}


def _with_default(x, acc=[]):  # noqa: B006 - the shared default is the point
    acc.append(x)
    return acc


def _with_kwdefault(*, acc={}):  # noqa: B006
    return acc


def _counter():
    cell = []

    def bump(x):
        cell.append(x)
        return cell

    return bump


BUMP = _counter()


def _tagged():
    return None


_tagged.seen = []


class Slotted:
    __slots__ = ("rows",)

    def __init__(self):
        self.rows = []


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@dataclass(frozen=True)
class Key:
    a: int


SLOTTED = Slotted()
QUEUE: deque = deque([[0]])
GROUPS: defaultdict = defaultdict(list)
ORDERED: OrderedDict = OrderedDict(a=[])
NS = types.SimpleNamespace(rows=[])
BY_TUPLE: dict = {(1, 2): []}
BY_ENUM: dict = {Color.RED: []}
BY_KEY: dict = {Key(1): []}
KEYS = [Key(2)]
OBSERVERS: list = []


def reset():
    Registry.items = []
    Registry.by_name = {}
    _with_default.__defaults__ = ([],)
    _with_kwdefault.__kwdefaults__ = {"acc": {}}
    BUMP.__closure__[0].cell_contents.clear()
    _tagged.seen = []
    SLOTTED.rows = []
    QUEUE.clear()
    QUEUE.append([0])
    GROUPS.clear()
    ORDERED.clear()
    ORDERED["a"] = []
    NS.rows = []
    BY_TUPLE.clear()
    BY_TUPLE[(1, 2)] = []
    BY_ENUM.clear()
    BY_ENUM[Color.RED] = []
    BY_KEY.clear()
    BY_KEY[Key(1)] = []
    OBSERVERS.clear()


def notify(x):
    return [f(x) for f in OBSERVERS]


# ---------------------------------------------------------------------------------------------
# 1. Identity of state shared with modules


@workflow
async def shares_module_state(x):
    """Locals holding objects reached from the module through every kind of path."""
    reset()
    held = {
        "class attr": Registry.items,
        "class dict": Registry.by_name,
        "default": _with_default.__defaults__[0],
        "kwdefault": _with_kwdefault.__kwdefaults__["acc"],
        "closure": BUMP.__closure__[0].cell_contents,
        "func attr": _tagged.seen,
        "slots": SLOTTED.rows,
        "deque item": QUEUE[0],
        "defaultdict": GROUPS["g"],
        "ordered": ORDERED["a"],
        "namespace": NS.rows,
        "tuple key": BY_TUPLE[(1, 2)],
        "enum key": BY_ENUM[Color.RED],
        "dataclass key": BY_KEY[Key(1)],
    }
    key = KEYS[0]
    await timer("t", 1)
    for obj in held.values():
        obj.append(x) if isinstance(obj, list) else obj.__setitem__("k", x)
    await timer("t", 1)
    log(Registry.items)
    log(Registry.by_name)
    log(_with_default(5))
    log(_with_kwdefault())
    log(BUMP(6))
    log(_tagged.seen)
    log(SLOTTED.rows)
    log(list(QUEUE))
    log(dict(GROUPS))
    log(dict(ORDERED))
    log(NS.rows)
    log((BY_TUPLE, BY_ENUM))
    log(list(BY_KEY.values()))
    log(key is KEYS[0])
    return sorted(held)


add(shares_module_state, C(1), C(2))


@workflow
async def registers_an_observer(x):
    """A local function registered in a module list: the module calls the same function."""
    reset()
    seen = []

    def observer(v):
        seen.append(v)
        return len(seen)

    OBSERVERS.append(observer)
    await timer("t", 1)
    log(notify(x))
    await timer("t", 1)
    log(notify(x + 1))
    return seen, observer in OBSERVERS


add(registers_an_observer, C(1), C(3))
