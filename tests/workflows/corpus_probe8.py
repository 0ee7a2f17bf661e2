"""Corpus: game-server programs of probe 8, run natively and restored at every await (and in a
new interpreter, test_restart_subprocess).

- Iterators held mid-iteration across awaits: dict, dict view, reversed dict, set, str, bytes,
  tuple, range and reversed range, deque (a mutation still raises), list subclass, a
  sequence-protocol class, enumerate/zip/map/filter objects, ``iter(callable, sentinel)`` over a
  stateful object, a closure, a partial of ``next`` and ``list.pop``; one iterator consumed by
  a for loop and by ``next`` in its body; itertools objects (3.11).
- Objects: one instance in two locals and a container, ``__slots__`` with and without
  ``__dict__``, properties with setters, ``cached_property``, ``__getstate__``/``__setstate__``,
  ``__reduce__``, dataclasses with ``default_factory`` and ``__post_init__``, Flag, IntFlag,
  StrEnum, self-referencing containers, a sentinel ``object()``, bound methods in a registry.
- Classes, enums, namedtuples, TypedDicts, ABCs and exceptions made in the workflow; closures
  and ``nonlocal`` (from a method of a class made in the workflow too) across awaits; late
  binding of lambdas made in loops and comprehensions that await.
- Awaits in augmented assignments to subscripts, slices and attributes, f-string format specs,
  chained comparisons, short-circuits, conditional expressions, comprehensions (nested, with a
  walrus), ``with`` headers, ``assert``, ``del``, starred calls, match subjects and guards.
- Library values: ``random.Random``, datetimes, ``struct_time``, ``array``, ``bytearray`` and
  memoryviews (cast, 2-D, readonly, released), heapq, Counter, ChainMap and ``new_child``,
  MappingProxyType, Fraction, Decimal contexts with flags and traps, ``deque(maxlen)``,
  ``graphlib.TopologicalSorter``, ``LoggerAdapter``, ``inspect.Signature``.
- Fixed finding: zones hashed by their name, keyed by each other in dicts, sets and
  OrderedDicts they hold (a world map), were accepted by the checkpoint and failed to restore
  (the restore hashed a zone whose state was not back yet).
- Fixed finding: subclasses of ``tuple``, ``int`` and ``float`` whose ``__new__`` takes other
  arguments than the value it makes (``Vec2(*xy)``, ``Money(gold, silver)``,
  ``Celsius(fahrenheit)``) came back with their ``__new__`` applied to their value again.
"""

from __future__ import annotations

import abc
import array
import collections
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import graphlib
import heapq
import inspect
import itertools
import logging
import operator
import random
import sys
import time
import typing
from collections import ChainMap, Counter, deque
from decimal import Decimal, localcontext
from fractions import Fraction
from types import MappingProxyType, SimpleNamespace

from workflows import Cancelled, Event, gather, select, signal, timer, workflow

from .diffharness import C, add
from .probes import Recorder, get, log


def tick(n=1):
    return timer("t", n)


# --- iterators held mid-iteration -----------------------------------------------------------


@workflow
async def loot_roll_iterators(n):
    """Several iterators of different kinds held half-consumed across awaits."""
    loot = {"sword": 3, "shield": 2, "potion": 9, "gem": 1}
    names = iter(loot)
    vals = iter(loot.values())
    items = iter(loot.items())
    first = next(names), next(vals), next(items)
    await tick()
    loot["potion"] += n  # value change, no resize
    rest = list(names), list(vals), list(items)
    s = "ABCDEF"
    si = iter(s)
    next(si)
    rg = iter(range(n, n + 20, 3))
    next(rg)
    rev = reversed([1, 2, 3, 4])
    next(rev)
    await tick()
    return first, rest, list(si), list(rg), list(rev)


add(loot_roll_iterators, C(0), C(5))


@workflow
async def patrol_with_builtin_iterators(n):
    """enumerate/zip/map/filter/reversed objects held mid-iteration."""
    waypoints = [(0, 0), (n, 1), (2, n), (3, 3), (n, n)]
    en = enumerate(waypoints, start=10)
    z = zip(waypoints, "abcde")  # noqa: B905
    m = map(lambda p: p[0] + p[1], waypoints)
    f = filter(lambda p: p[0] == n, waypoints)
    out = [next(en), next(z), next(m)]
    await tick()
    out.append(next(f, None))
    await tick()
    out += [list(en), list(z), list(m), list(f)]
    return out


add(patrol_with_builtin_iterators, C(2), C(0))


class Dice:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def __call__(self):
        return self.r.randint(1, 6)


@workflow
async def dice_until_six(seed):
    """iter(callable, sentinel) held across awaits; the callable is a stateful object."""
    d = Dice(seed)
    rolls = iter(d, 6)
    got = []
    for r in rolls:
        got.append(r)
        await tick()
        if len(got) > 30:
            break
    return got, d()


add(dice_until_six, C(1), C(7), C(42))


@workflow
async def inventory_views(n):
    """dict views held across awaits see later changes; set operations on them."""
    inv = {"arrow": 20, "bolt": 5}
    keys = inv.keys()
    vals = inv.values()
    its = inv.items()
    await tick()
    inv["rope"] = n
    del inv["bolt"]
    await tick()
    return sorted(keys), sorted(vals), sorted(its), keys & {"rope", "x"}, len(its), vals.mapping == inv


add(inventory_views, C(1), C(3))


# --- objects and identity -------------------------------------------------------------------


class Hero:
    __slots__ = ("name", "hp", "_buffs")
    count = 0

    def __init__(self, name, hp):
        self.name = name
        self.hp = hp
        self._buffs = []
        Hero.count += 1

    @property
    def alive(self):
        return self.hp > 0

    @property
    def buffs(self):
        return tuple(self._buffs)


@workflow
async def buff_stack_shared(n):
    """An object in two locals and a container stays one object; __slots__ and properties."""
    h = Hero("ann", 10 + n)
    party = [h, Hero("bob", 5)]
    leader = h
    roster = {"lead": h}
    await tick()
    leader.hp -= 7
    leader._buffs.append("haste")
    await tick()
    party[0]._buffs.append("shield")
    await tick()
    return (h.hp, h.buffs, roster["lead"] is party[0] is leader, h.alive, party[1].alive)


add(buff_stack_shared, C(0), C(3))


class Trade:
    def __init__(self, a, b):
        self.a, self.b = a, b
        self.items = []
        self.cache = {}

    def __getstate__(self):
        return {"a": self.a, "b": self.b, "items": self.items}

    def __setstate__(self, st):
        self.__dict__.update(st)
        self.cache = {"restored": True}


@workflow
async def trade_with_getstate(n):
    """A class with __getstate__/__setstate__ (the user's own rule)."""
    t = Trade("ann", "bob")
    t.items.append(("sword", n))
    await tick()
    t.items.append(("gold", n * 2))
    return t.a, t.b, t.items


add(trade_with_getstate, C(1), C(2))


class Coin:
    def __init__(self, amount, kind):
        self.amount = amount
        self.kind = kind

    def __reduce__(self):
        return (Coin, (self.amount, self.kind))

    def __repr__(self):
        return f"Coin({self.amount}, {self.kind})"


@workflow
async def purse_with_reduce(n):
    """Objects with __reduce__, shared in two containers."""
    c = Coin(n, "gold")
    purse = [c, c, Coin(1, "silver")]
    bank = {"main": c}
    await tick()
    c.amount += 5
    return repr(purse), purse[0] is purse[1], bank["main"] is purse[0]


add(purse_with_reduce, C(1), C(9))


@dataclasses.dataclass
class Quest:
    name: str
    steps: list = dataclasses.field(default_factory=list)
    tags: set = dataclasses.field(default_factory=set)
    done: bool = False
    progress: int = dataclasses.field(init=False)

    def __post_init__(self):
        self.progress = len(self.steps)


@workflow
async def quest_log_dataclasses(n):
    q1 = Quest("wolves", ["a", "b"])
    q2 = Quest("herbs")
    q2.steps.append("x")
    await tick()
    q1.tags.add("hunt")
    q2.done = n > 1
    board = {q.name: q for q in (q1, q2)}
    await tick()
    return dataclasses.asdict(q1), dataclasses.astuple(q2), board["wolves"] is q1, q1 == Quest("wolves", ["a", "b"], {"hunt"})


add(quest_log_dataclasses, C(1), C(2))


class Status(enum.Flag):
    NONE = 0
    POISON = enum.auto()
    STUN = enum.auto()
    BURN = enum.auto()


class Phase(enum.Enum):
    CALM = 1
    RAGE = 2
    ENRAGE = 3


@workflow
async def boss_status_flags(n):
    s = Status.NONE
    phase = Phase.CALM
    hist = []
    for turn in range(4):
        s |= [Status.POISON, Status.STUN, Status.BURN, Status.POISON][turn]
        await tick()
        if Status.STUN in s and turn > n:
            s &= ~Status.STUN
            phase = Phase(min(phase.value + 1, 3))
        hist.append((s.value, phase.name))
    return hist, s, phase, {s: 1}[s]


add(boss_status_flags, C(0), C(2))


@workflow
async def self_referencing_inventory(n):
    bag = {"name": "bag", "items": []}
    bag["items"].append(bag)
    lst = [1, 2]
    lst.append(lst)
    await tick()
    bag["items"].append(n)
    lst[0] = n
    return bag["items"][0] is bag, lst[2] is lst, lst[0], len(bag["items"])


add(self_referencing_inventory, C(1), C(4))


# --- closures -------------------------------------------------------------------------------


@workflow
async def cooldown_closures(n):
    """Closures over workflow locals, rebinding through nonlocal across awaits."""
    charges = n

    def use():
        nonlocal charges
        charges -= 1
        return charges

    def refill(k):
        nonlocal charges
        charges += k

    a = use()
    await tick()
    refill(3)
    b = use()
    await tick()
    charges *= 2
    c = use()
    return a, b, c, charges


add(cooldown_closures, C(1), C(5))


@workflow
async def callables_zoo(n):
    """partial, itemgetter, attrgetter, methodcaller, lambdas, bound methods held across awaits."""
    hero = SimpleNamespace(name="ann", hp=n, pos=SimpleNamespace(x=1, y=2))
    by_hp = operator.attrgetter("hp", "pos.x")
    second = operator.itemgetter(1, 0)
    upper = operator.methodcaller("replace", "a", "A")
    dmg = functools.partial(lambda base, mult, bonus=0: base * mult + bonus, 3, bonus=n)
    push = [].append
    await tick()
    hero.hp += 10
    push(1)
    await tick()
    return by_hp(hero), second(["x", "y"]), upper(hero.name), dmg(2), push.__self__


add(callables_zoo, C(1), C(4))


# --- exceptions -----------------------------------------------------------------------------


class RaidError(Exception):
    pass


@workflow
async def held_cause_chain(n):
    try:
        try:
            {}["boss"]
        except KeyError as e:
            raise RaidError("no boss") from e
    except RaidError as err:
        held = err
    held2 = None
    await tick()
    try:
        try:
            1 / (n - 1)
        except ZeroDivisionError:
            raise RaidError("div")
    except RaidError as err2:
        held2 = err2
    await tick()
    return (type(held.__cause__).__name__, held.__suppress_context__,
            type(held2.__context__).__name__ if held2 else None, held2 and held2.__cause__)


add(held_cause_chain, C(0), C(1))


@workflow
async def except_star_outside_await(n):
    errors = []
    await tick()
    try:
        raise ExceptionGroup("raid", [ValueError(n), KeyError("x"), TypeError("t")])
    except* ValueError as eg:
        errors.append(("v", [str(e) for e in eg.exceptions]))
    except* (KeyError, TypeError) as eg:
        errors.append(("kt", sorted(type(e).__name__ for e in eg.exceptions)))
        held = eg
    await tick()
    return errors, repr(held)


add(except_star_outside_await, C(1), C(2))


@workflow
async def match_guards_awaiting(n):
    out = []
    for ev in [("hit", 5), ("heal", n), ("move", (1, 2)), ("hit", 50)]:
        match ev:
            case ("hit", dmg) if dmg > await get(10):
                out.append(("big", dmg))
            case ("hit", dmg):
                out.append(("small", dmg))
            case ("heal", amt) if amt and await get(True):
                out.append(("heal", amt))
            case ("move", (x, y)):
                out.append(("move", x + y + await get(0)))
            case _:
                out.append("other")
    return out


add(match_guards_awaiting, C(0), C(3))


# --- awaits in expressions ------------------------------------------------------------------


@workflow
async def awaits_everywhere(n):
    calls = []

    def f(k):
        calls.append(k)
        return k

    scores = {"a": 1, "b": 2}
    scores[f("a")] += await get(n)
    obj = SimpleNamespace(v=1)
    obj.v *= await get(3)
    lst = [1, 2, 3]
    lst[f(1)] -= await get(5)
    msg = f"{n} -> {await get(n * 2)!r:>5}"
    both = (await get(0)) or (await get(n))
    cond = await get("a") if n else await get("b")
    comp = [await get(i) for i in range(3) if i != n]
    dcomp = {k: await get(v) for k, v in scores.items()}
    walrus = [y for x in range(5) if (y := x * n) > 2]
    assert await get(True), await get("never")
    del scores[await get("b")]
    return calls, scores, obj.v, lst, msg, both, cond, comp, dcomp, walrus


add(awaits_everywhere, C(0), C(2))


class Torch:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        log(("lit", self.name))
        return self

    def __exit__(self, *a):
        log(("out", self.name))
        return False


@workflow
async def with_header_awaits(n):
    with Torch(await get("t1")) as t, Torch("t2"):
        await tick()
        name = t.name
    return name


add(with_header_awaits, C(0))


@workflow
async def class_in_workflow(n):
    class Mob:
        kills = 0

        def __init__(self, hp):
            self.hp = hp

        def hit(self, d):
            self.hp -= d
            if self.hp <= 0:
                Mob.kills += 1
            return self.hp

    mobs = [Mob(3), Mob(n)]
    await tick()
    r = [m.hit(3) for m in mobs]
    await tick()
    return r, Mob.kills, type(mobs[0]) is Mob, Mob.__name__


add(class_in_workflow, C(1), C(5))


# --- select / gather ------------------------------------------------------------------------


@workflow
async def matchmaking_select(n):
    queue = deque(maxlen=3)
    for i in range(5):
        ev = await select(signal("join"), timer("tick", 5))
        match ev:
            case Event("join", who):
                queue.append(who)
            case Event("tick", _):
                queue.append(f"bot{i}")
        if len(queue) == queue.maxlen and n:
            res = await gather(get(list(queue)), timer("countdown", 1))
            queue.clear()
            log(res)
    return list(queue), queue.maxlen


add(matchmaking_select, C(0), C(1, signals={"join": ["ann", "bob"]}, choose=["join", "tick", "join"]))


# --- stdlib values --------------------------------------------------------------------------


@workflow
async def economy_values(n):
    rng = random.Random(n)
    first = rng.random()
    t0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    dur = dt.timedelta(minutes=5)
    arr = array.array("i", [1, 2, 3])
    ba = bytearray(b"loot")
    mv = memoryview(ba)
    heap = [(5, "e"), (1, "a"), (3, "c")]
    heapq.heapify(heap)
    ctr = Counter("aabbbc")
    base = {"hp": 10}
    cm = ChainMap({"hp": 20}, base)
    proxy = MappingProxyType(base)
    price = Fraction(1, 3)
    gold = Decimal("1.10")
    await tick()
    with localcontext() as ctx:
        ctx.prec = 3
        tax = gold / Decimal(7)
    arr.append(n)
    ba[0] = ord("L")
    base["mp"] = 5
    ctr["a"] += n
    heapq.heappush(heap, (0, "z"))
    await tick()
    return (first, rng.random(), t0 + dur * n, list(arr), bytes(ba), mv.tobytes(), mv.obj is ba,
            heapq.heappop(heap), ctr.most_common(2), dict(cm), dict(proxy), price * n, tax)


add(economy_values, C(1), C(3))


# --- batch 2: more iterators, objects and expressions ----------------------------------------


@workflow
async def more_iterators(n):
    """Set, deque, tuple, bytes, reversed dict/range iterators and a callable_iterator over a
    partial of next, held mid-iteration."""
    st = {"a", "b", "c", "d"}
    si = iter(st)
    got_s = [next(si)]
    dq = deque([1, 2, 3, 4], maxlen=6)
    di = iter(dq)
    next(di)
    tp = iter((n, n + 1, n + 2))
    next(tp)
    bi = iter(b"xyz")
    next(bi)
    rd = reversed({"k1": 1, "k2": 2, "k3": 3})
    next(rd)
    rr = reversed(range(n, n + 10, 2))
    next(rr)
    src = iter([5, 4, 3, 0, 9])
    ci = iter(functools.partial(next, src, None), 0)
    next(ci)
    await tick()
    got_s += list(si)
    return sorted(got_s), list(di), list(tp), list(bi), list(rd), list(rr), list(ci), list(src)


add(more_iterators, C(0), C(3))


@workflow
async def shared_iterator_two_consumers(n):
    """One iterator consumed by a for loop and by next() inside the loop, across awaits."""
    moves = iter(["n", "e", "s", "w", "n", "n", "e"][n:])
    path = []
    for m in moves:
        await tick()
        path.append(m)
        nxt = next(moves, None)
        if nxt:
            path.append(nxt.upper())
    zipped = zip(*[iter(range(6))] * 2)  # noqa: B905
    first = next(zipped)
    await tick()
    return path, first, list(zipped)


add(shared_iterator_two_consumers, C(0), C(2))


@workflow
async def map_over_two_and_zip_strict(n):
    a = [1, 2, 3]
    b = [10, 20, 30]
    m = map(operator.add, a, b)
    z = zip(a, b, strict=True)
    e = enumerate(zip(a, "xyz"))  # noqa: B905
    next(m), next(z), next(e)
    await tick()
    a[2] = n
    await tick()
    return list(m), list(z), list(e)


add(map_over_two_and_zip_strict, C(0), C(7))


class Slime:
    __slots__ = ("hp", "__dict__")

    def __init__(self, hp):
        self.hp = hp

    def split(self):
        child = Slime(self.hp // 2)
        self.hp -= child.hp
        child.parent = self
        return child


@workflow
async def slimes_with_slots_and_dict(n):
    s = Slime(8 + n)
    kids = [s.split(), s.split()]
    s.tag = "mother"
    await tick()
    kids[0].hp += 1
    return s.hp, [k.hp for k in kids], kids[1].parent is s, s.tag, vars(kids[0])["parent"] is s


add(slimes_with_slots_and_dict, C(0), C(4))


class Stats:
    base_crit = 5

    def __init__(self):
        self._atk = 1

    @property
    def atk(self):
        return self._atk

    @atk.setter
    def atk(self, v):
        log(("set atk", v))
        self._atk = max(0, v)

    @functools.cached_property
    def crit(self):
        log("crit computed")
        return self.base_crit * 2


@workflow
async def property_setters_and_cached(n):
    st = Stats()
    st.atk += await get(n)
    c1 = st.crit
    await tick()
    c2 = st.crit
    st.atk -= 100
    return st.atk, c1, c2


add(property_setters_and_cached, C(2))


@workflow
async def runtime_made_types(n):
    """namedtuple, Enum functional API, make_dataclass, NamedTuple class made in the workflow."""
    Pos = collections.namedtuple("Pos", "x y")
    Color = enum.Enum("Color", "RED GREEN BLUE")
    Item = dataclasses.make_dataclass("Item", [("name", str), ("qty", int, dataclasses.field(default=1))])
    p = Pos(n, 2)
    c = Color.GREEN
    it = Item("gem")
    await tick()
    it.qty += n
    return (tuple(p._replace(y=9)), p.x, c.name, c is Color.GREEN, Color(3).name, repr(it), type(it) is Item,
            isinstance(p, Pos))


add(runtime_made_types, C(1), C(3))


@workflow
async def sentinel_identity(n):
    MISSING = object()
    table = {"a": 1, "b": MISSING}
    slot = table["b"]
    await tick()
    got = table.get("zz", MISSING)
    return got is MISSING, slot is MISSING, table["b"] is MISSING, n


add(sentinel_identity, C(1))


class Knight:
    def __init__(self, name):
        self.name = name
        self.hp = 10

    def take(self, d):
        self.hp -= d
        return self.hp


@workflow
async def bound_method_registry(n):
    k = Knight("k")
    handlers = {"hit": k.take, "name": k.__class__.__name__}
    cb = handlers["hit"]
    await tick()
    cb(n)
    handlers["hit"](1)
    return k.hp, cb.__self__ is k, handlers["hit"].__self__ is k


add(bound_method_registry, C(2))


@workflow
async def comprehension_closures_late_binding(n):
    fs = [lambda: i for i in range(3) if await get(True)]  # noqa: B023
    gs = []
    for j in range(3):
        gs.append(lambda: j)  # noqa: B023
        await tick()
    hs = [lambda i=i: i * n for i in range(3)]
    await tick()
    return [f() for f in fs], [g() for g in gs], [h() for h in hs]


add(comprehension_closures_late_binding, C(2))


@workflow
async def walrus_and_nested_comprehensions(n):
    last = None
    vals = [(last := await get(i)) for i in range(n + 1)]
    grid = [[await get(i * j) for j in range(2)] for i in range(2)]
    total = 0
    evens = [t for t in range(6) if (total := total + t) and t % 2 == 0]
    return vals, last, grid, evens, total


add(walrus_and_nested_comprehensions, C(0), C(2))


@workflow
async def exotic_targets(n):
    calls = []

    def k(x):
        calls.append(x)
        return x

    grid = [[0, 0], [0, 0]]
    grid[k(0)][k(1)] += await get(5)
    hero = SimpleNamespace(stats={"str": 1})
    hero.stats[k("str")] *= await get(3)
    lst = [1, 2, 3, 4]
    lst[k(1):k(3)] += await get([9])
    first, *rest = await get([n, 2, 3])
    lst[0], lst[1] = lst[1], await get(n)
    a = 2
    chained = k(1) < await get(a) < k(3)
    fmt = f"{n:{await get(5)}}|"
    sl = lst[await get(1):]
    st = {await get(1), n}
    d = {**{"x": 1}, "y": await get(2), **(await get({"z": 3}))}
    neg = not await get(n)
    return calls, grid, hero.stats, lst, first, rest, chained, fmt, sl, sorted(st), d, neg


add(exotic_targets, C(0), C(2))


@workflow
async def decimal_context_held(n):
    ctx = decimal.Context(prec=4, rounding=decimal.ROUND_DOWN)
    a = ctx.divide(Decimal(1), Decimal(3))
    ctx.traps[decimal.DivisionByZero] = False
    b = ctx.divide(Decimal(1), Decimal(0))
    await tick()
    flags = sorted(k.__name__ for k, v in ctx.flags.items() if v)
    c = ctx.power(Decimal(2), Decimal(n))
    return a, b, flags, c, ctx.prec, ctx.rounding


add(decimal_context_held, C(3))


@workflow
async def memoryview_of_array(n):
    arr = array.array("h", [1, 2, 3])
    mv = memoryview(arr)
    ba = bytearray(b"abcd")
    mb = memoryview(ba)
    await tick()
    arr[0] = n
    ba[1] = ord("Z")
    return mv.tolist(), mv.format, mb.tobytes(), mb.obj is ba, mv.obj is arr


add(memoryview_of_array, C(5))


@workflow
async def counters_and_chains(n):
    loot = Counter(gold=5, gem=n)
    spent = Counter(gold=2)
    left = loot - spent
    defaults = {"vol": 5, "lang": "en"}
    user = {"vol": 9}
    cfg = ChainMap(user, defaults)
    child = cfg.new_child({"lang": "fr"})
    view = MappingProxyType(user)
    ns = SimpleNamespace(cfg=cfg, view=view)
    await tick()
    user["vol"] = 1
    defaults["extra"] = n
    loot.update(gem=1)
    await tick()
    return (left, loot.total(), child["lang"], child["vol"], child.parents.maps[0] is user,
            dict(ns.view), ns.cfg is cfg, cfg.maps[1] is defaults, child["extra"])


add(counters_and_chains, C(0), C(2))


@workflow
async def heap_of_dataclasses(n):
    @dataclasses.dataclass(order=True)
    class Job:
        prio: int
        name: str = dataclasses.field(compare=False)

    h = []
    for i, nm in enumerate(["a", "b", "c"]):
        heapq.heappush(h, Job((i * 7 + n) % 5, nm))
        await tick()
    top = heapq.heappop(h)
    await tick()
    return repr(top), [heapq.heappop(h).name for _ in range(len(h))]


add(heap_of_dataclasses, C(0), C(3))


class Element(enum.IntFlag):
    FIRE = 1
    ICE = 2
    BOLT = 4


class Rank(enum.StrEnum):
    BRONZE = "bronze"
    GOLD = "gold"


@workflow
async def enum_flags_and_strenum(n):
    weak = Element.FIRE | Element.ICE
    resist = {Element.BOLT: 0.5, weak: 2.0}
    rank = Rank.GOLD if n else Rank.BRONZE
    ranks = {rank, Rank.BRONZE}
    await tick()
    weak |= Element.BOLT
    return weak, list(resist.items()), rank.upper(), sorted(ranks), Element(3) in resist, int(weak)


add(enum_flags_and_strenum, C(0), C(1))


@workflow
async def gather_failure_cancels(n):
    try:
        r = await gather(get(1), timer("slow", 100), get(n))
    except Exception as e:
        r = ("failed", type(e).__name__)
    ev = await select(timer("a", 5), signal("go"), get(3))
    return r, ev.name


add(gather_failure_cancels, C(1), C(2, fail_at=frozenset({0})), C(3, choose=["go"], signals={"go": ["x"]}))


@workflow
async def exception_reraised_with_traceback(n):
    try:
        [][n]
    except IndexError as e:
        err = e
    await tick()
    err.add_note(f"while looting {n}")
    try:
        raise err
    except IndexError as again:
        same = again is err
        notes = again.__notes__
    await tick()
    try:
        raise RuntimeError("wrap") from None
    except RuntimeError as w:
        sup = w.__suppress_context__, w.__context__ is None
    return same, notes, sup


add(exception_reraised_with_traceback, C(3))


@workflow
async def try_finally_return_override(n):
    def inner():
        try:
            return "body"
        finally:
            log("inner finally")

    out = []
    for i in range(3):
        try:
            if i == n:
                raise KeyError(i)
            out.append(await get(i))
        except KeyError:
            await tick()
            continue
        finally:
            out.append(("fin", i))
    else:
        out.append("else")
    return out, inner()


add(try_finally_return_override, C(1), C(5))


class Wallet:
    def __init__(self):
        self.coins = 0

    def __iadd__(self, k):
        log(("iadd", k))
        self.coins += k
        return self


@workflow
async def inplace_operator_identity(n):
    w = Wallet()
    same = w
    w += await get(n)
    lst = [1]
    alias = lst
    lst += [await get(2)]
    t = (1,)
    t_alias = t
    t += (await get(3),)
    return w is same, w.coins, alias, lst is alias, t, t_alias


add(inplace_operator_identity, C(4))


# --- batch 3: control flow and scopes -------------------------------------------------------





def attempt(f):
    """What calling ``f`` gives: ("ok", value) or ("raise", type name, message)."""
    try:
        return ("ok", f())
    except Exception as e:
        return ("raise", type(e).__name__, str(e))


@dataclasses.dataclass
class Hit:
    src: str
    dmg: int


@workflow
async def combat_log_match(n):
    """match over events: class, mapping (**rest), sequence, or-patterns with captures, guards
    that await and bind with a walrus."""
    out = []
    events = [Hit("orc", 5), {"type": "loot", "gold": 3, "x": 1}, ("buff", "haste"), [1, 2, n], 7, None]
    for e in events:
        match await get(e):
            case Hit(src="orc", dmg=d) if d > await get(n):
                out.append(("orc", d))
            case Hit(dmg=d):
                out.append(("hit", d))
            case {"type": "loot", "gold": g, **rest}:
                out.append(("loot", g, rest))
            case ("buff", "haste" | "slow" as b) | ("debuff", b):
                out.append(("buff", b))
            case [*_, last] if (big := last * 2) > await get(3):
                out.append(("seq", big))
            case int(x) | float(x) if x > 5:
                out.append(("num", x))
            case None:
                out.append("none")
            case other:
                out.append(("other", other))
    return out


add(combat_log_match, C(0), C(5))


@workflow
async def chat_until_closed(n):
    """A walrus in a while condition that awaits, with else; a walrus on a select's Event."""
    msgs = []
    while (m := await signal("chat")) is not None:
        msgs.append(m)
        if len(msgs) > 5:
            break
    else:
        msgs.append("closed")
    if (ev := await select(timer("a", 1), signal("go"))).name == "go":
        msgs.append(("go", ev.value))
    return msgs


add(chat_until_closed, C(0, signals={"chat": ["hi", "yo"]}),
    C(1, signals={"chat": ["a"], "go": [1]}, choose=["go"]))


@workflow
async def wave_loop_finally_leaps(n):
    """return, continue and break through two finally blocks that await."""
    out = []
    for i in range(4):
        try:
            try:
                if i == n:
                    return out
                await tick()
            finally:
                out.append(("in", i))
                if i == 1:
                    continue  # noqa: B012
                await tick()
        finally:
            out.append(("out", i))
            if i == 2:
                break  # noqa: B012
    return out, "end"


add(wave_loop_finally_leaps, C(0), C(1), C(3), C(9))


class Pair:
    def __init__(self, n):
        self.n = n

    def __enter__(self):
        log("enter")
        return (self.n, self.n + 1)

    def __exit__(self, *a):
        log(("exit", a[0] is not None))
        return a[0] is KeyError


@workflow
async def torch_pair_with_tuple_target(n):
    with Pair(n) as (a, b), Recorder(await get("r")):
        await tick()
        if n:
            raise KeyError(n)
    return a, b


add(torch_pair_with_tuple_target, C(0), C(1))


@workflow
async def spell_args_starred(n):
    def cast(*a, **k):
        return a, sorted(k.items())

    return cast(*await get([1, n]), 9, *(await get([3])), x=await get(1), **await get({"y": n}))


add(spell_args_starred, C(2))


@workflow
async def dungeon_depth(n):
    """A workflow awaiting itself inline, recursively."""
    if n <= 0:
        return [await get(0)]
    rest = await dungeon_depth(n - 1)
    return [n] + rest


add(dungeon_depth, C(3))


@workflow
async def handler_with_inner_try(n):
    """A bare raise in a handler after an inner try that awaited and handled its own error."""
    try:
        raise ValueError(n)
    except ValueError:
        try:
            await tick()
            raise KeyError("inner")
        except KeyError:
            await tick()
        try:
            raise
        except ValueError as e:
            caught = (type(e.__context__).__name__ if e.__context__ else None, e.args)
    return caught


add(handler_with_inner_try, C(2))


@workflow
async def combo_counters(n):
    """A closure two levels deep rebinding a workflow variable and its own through nonlocal;
    a method of a class made in the workflow rebinding a workflow variable through nonlocal."""
    total = 0

    def outer():
        inner_count = 0

        def inner(k):
            nonlocal total, inner_count
            total += k
            inner_count += 1
            return inner_count

        return inner

    f = outer()
    f(n)
    await tick()
    f(2)
    g = outer()
    hp = n * 10

    class Boss:
        def hit(self, d):
            nonlocal hp
            hp -= d
            return hp

    b = Boss()
    b.hit(1)
    await tick()
    r = b.hit(2)
    hp += 100
    return total, f(0), g(1), total, r, b.hit(1), hp


add(combo_counters, C(3))


@workflow
async def class_body_sees_workflow(n):
    """A class body reading workflow variables; a method reading one rebound later; a class
    attribute shadowing a workflow variable for the body only."""
    bonus = n * 2
    hp = 5

    class Cfg:
        hp = 10
        base = 10
        total = base + bonus
        names = [f"{k}{bonus}" for k in "ab"]

        def get(self):
            return self.total + bonus, hp

    c = Cfg()
    await tick()
    bonus = 100
    hp = 7
    return c.get(), Cfg.total, Cfg.names, Cfg.hp


add(class_body_sees_workflow, C(3))


@workflow
async def range_checks_short_circuit(n):
    calls = []

    def t(v):
        calls.append(v)
        return v

    r1 = t(1) < await get(n) < t(3)
    r2 = t(5) < await get(n) < t(6) < await get(10)
    r3 = t(0) == await get(0) != t(1) and await get(n) or t("x")
    return r1, r2, r3, calls


add(range_checks_short_circuit, C(0), C(2), C(5))


@workflow
async def grid_slices_and_powers(n):
    calls = []

    def t(v):
        calls.append(v)
        return v

    a = list(range(8))
    a[t(0):t(8):t(2)] = [await get(x) for x in range(4)]
    b = [[1, 2], [3, 4]]
    b[t(1)][t(0)] **= await get(2)
    s = "ab"
    s *= await get(n)
    return a, b, s, calls


add(grid_slices_and_powers, C(2))


@workflow
async def handlers_from_comprehensions(n):
    fs = {k: (lambda v, k=k: v + k) for k in range(3) if await get(k) != n}
    hs = [lambda: k2 for k2 in [await get(1), await get(2)]]  # noqa: B023
    grid = [[lambda: (i, j) for j in range(2) if await get(1)] for i in range(2)]  # noqa: B023
    cnt = 0
    vals = [(cnt := cnt + await get(k)) for k in range(3)]
    return ({k: f(10) for k, f in fs.items()}, [h() for h in hs], [[f() for f in row] for row in grid],
            vals, cnt)


add(handlers_from_comprehensions, C(1))


@workflow
async def regen_until_cancelled(n):
    done = []
    try:
        while True:
            ev = await select(signal("hit"), timer("regen", 3))
            done.append(ev.name)
    except Cancelled as c:
        done.append(("cancelled", str(c)))
        await tick()
    finally:
        done.append("cleanup")
    return done


add(regen_until_cancelled,
    C(0, cancel_at=3, signals={"hit": [1, 2]}, choose=["hit", "regen", "hit"], raises=None))


@workflow
async def raid_commands_as_values(n):
    """Commands built into lists and dicts, held across an await, awaited later (twice)."""
    players = ["a", "b", "c"][: n + 1]
    cmds = [get(p) for p in players]
    pending = get("later")
    await tick()
    res = await gather(*cmds)
    r2 = await pending
    again = await pending
    sel = await select(*[signal(f"s{i}") for i in range(2)], timer("to", 3))
    byname = {p: get(p, name=f"f{p}") for p in players}
    res3 = await gather(*byname.values())
    return res, r2, again, sel.name, res3


add(raid_commands_as_values, C(0), C(2))


class _Torch:
    def __enter__(self):
        return "torch"

    def __exit__(self, *a):
        return False


@workflow
async def patrol_targets(n):
    """for targets that are an attribute, subscripts and a starred name, with awaits in the
    body; a with target that is an attribute; chained and starred assignments from awaits."""
    hero = SimpleNamespace(pos=None)
    trail = []
    for hero.pos in [(0, 0), (1, n)]:
        await tick()
        trail.append(hero.pos)
    grid = {}
    for grid["a"], grid["b"] in [(1, 2), (3, 4)]:
        await tick()
        trail.append(dict(grid))
    for head, *rest in [[1, 2, 3], [4]]:
        trail.append((head, rest, await get(n)))
    with _Torch() as hero.torch:
        await tick()
    x = y = await get(n)
    a, *mid, z = await get([1, 2, 3, 4])
    return trail, hero.pos, hero.torch, x, y, a, mid, z


add(patrol_targets, C(2))


@workflow
async def unbound_names_after_awaits(n):
    """A nested function reading a workflow variable not bound yet, bound, deleted; an except
    name captured by a lambda, read after the handler; a variable deleted through nonlocal."""
    def f():
        return later  # noqa: F821

    r1 = attempt(f)
    await tick()
    later = n
    r2 = attempt(f)
    del later
    r3 = attempt(f)
    try:
        raise KeyError(n)
    except KeyError as e:  # noqa: F841 (the lambda reads it)
        g = lambda: e  # noqa: F821, E731
        await tick()
        r4 = attempt(lambda: repr(g()))
    r5 = attempt(lambda: repr(g()))
    x = n

    def kill():
        nonlocal x
        del x

    kill()
    await tick()
    try:
        r6 = x
    except NameError as err:
        r6 = (type(err).__name__, str(err))
    return r1, r2, r3, r4, r5, r6


add(unbound_names_after_awaits, C(1))


# --- batch 4: iterators and library values ---------------------------------------------------


class Party(list):
    pass


class Seq:
    def __init__(self, xs):
        self.xs = xs

    def __getitem__(self, i):
        return self.xs[i]

    def __len__(self):
        return len(self.xs)


@workflow
async def party_iterators(n):
    """Iterators of a list subclass, of a sequence-protocol class (forward and reversed), of a
    deque (a mutation raises after the restore as natively), of a set that grew, of a closure
    iter(callable, sentinel) and iter(list.pop, 0)."""
    p = Party([1, 2, 3])
    p.name = "x"
    it = iter(p)
    next(it)
    rv = reversed(p)
    next(rv)
    s = Seq([1, 2, 3, 4])
    si = iter(s)
    next(si)
    sr = reversed(s)
    next(sr)
    d = deque([1, 2, 3, 4], maxlen=4)
    d.rotate(1)
    di = iter(d)
    next(di)
    st = {1, 2, 3}
    sti = iter(st)
    next(sti)
    k = 0

    def step():
        nonlocal k
        k += 1
        return k

    ci = iter(step, n + 3)
    next(ci)
    stack = [0, 3, 2, 1]
    pi = iter(stack.pop, 0)
    next(pi)
    await tick()
    p.append(n)
    s.xs.append(n)
    d.append(n)
    st.add(99)
    return (list(it), list(rv), p.name, list(si), list(sr), attempt(lambda: list(di)),
            attempt(lambda: list(sti)), list(ci), k, list(pi), stack)


add(party_iterators, C(5))


@workflow
async def iterators_after_value_changes(n):
    d = {"a": 1, "b": 2, "c": 3}
    ks = d.keys()
    it = iter(ks)
    next(it)
    await tick()
    d["b"] = n
    rk = reversed(ks)
    e = enumerate("abc", start=2**70)
    next(e)
    z = zip("ab", "xyz")  # noqa: B905
    next(z)
    next(z)
    await tick()
    out = []
    for k, v in d.items():
        await tick()
        d["c"] = v * 10
        out.append((k, v))
    return list(it), list(rk), list(e), attempt(lambda: next(z)), out


add(iterators_after_value_changes, C(2))


def _itertools_case(wf, *cases):
    """itertools objects held across an await are kept on 3.11 only (refused from 3.12)."""
    if sys.version_info < (3, 12):
        return add(wf, *cases)
    return wf


@workflow
async def loot_tables_itertools(n):
    data = [("a", 1), ("a", 2), ("b", 3), ("b", 4), ("c", 5)]
    g = itertools.groupby(data, key=operator.itemgetter(0))
    k, grp = next(g)
    first = next(grp)
    a, b = itertools.tee(iter(range(6)), 2)
    next(a)
    next(a)
    next(b)
    cy = itertools.cycle("abc")
    next(cy)
    isl = itertools.islice(range(100), 2, 30, 7)
    next(isl)
    acc = itertools.accumulate([1, 2, 3, 4], initial=100)
    next(acc)
    pr = itertools.product("ab", repeat=2)
    next(pr)
    tw = itertools.takewhile(lambda x: x < 3, [1, 2, 5, 1])
    next(tw)
    await tick()
    rest = list(grp)
    k2, grp2 = next(g)
    await tick()
    return (k, first, rest, k2, list(grp2), list(a), next(b), list(b), [next(cy) for _ in range(4)],
            list(isl), list(acc), list(pr), list(tw))


_itertools_case(loot_tables_itertools, C(1))


@workflow
async def runtime_made_kinds(n):
    """namedtuple, Enum functional API, make_dataclass, typing.NamedTuple and TypedDict, an ABC
    with a registered class, a local Flag and IntEnum with _missing_, an exception class with
    its own __init__, a dataclass whose default_factory closes over a workflow list."""
    Pos = collections.namedtuple("Pos", "x y")
    Color = enum.Enum("Color", "RED GREEN BLUE")
    Item = dataclasses.make_dataclass("Item", [("name", str), ("qty", int, dataclasses.field(default=1))])

    class Pos2(typing.NamedTuple):
        x: int
        y: int = 0

        def moved(self, d):
            return self._replace(x=self.x + d)

    class Shape(abc.ABC):
        @abc.abstractmethod
        def area(self): ...

    class Sq(Shape):
        def __init__(self, s):
            self.s = s

        def area(self):
            return self.s ** 2

    class Foreign:
        pass

    Shape.register(Foreign)

    class Buff(enum.Flag):
        HASTE = enum.auto()
        SHIELD = enum.auto()
        REGEN = enum.auto()

    class Tier(enum.IntEnum):
        LOW = 1
        HIGH = 2

        @classmethod
        def _missing_(cls, v):
            return cls.LOW

    class Defeated(Exception):
        def __init__(self, boss, hp):
            super().__init__(f"{boss} at {hp}")
            self.boss = boss
            self.hp = hp

    start = [n]

    @dataclasses.dataclass
    class Bag:
        items: list = dataclasses.field(default_factory=lambda: list(start))

        def __post_init__(self):
            self.items.append("init")

    p, c, it, p2, sq = Pos(n, 2), Color.GREEN, Item("gem"), Pos2(n), Sq(n)
    bf, t, b1 = Buff.HASTE | Buff.REGEN, Tier(n), Bag()
    try:
        raise Defeated("dragon", n)
    except Defeated as e:
        held = e
    await tick()
    it.qty += n
    start.append(99)
    try:
        raise held
    except Defeated as w:
        r = (str(w), w.boss, w.hp, w.args)
    return (tuple(p._replace(y=9)), c.name, c is Color.GREEN, Color(3).name, repr(it), type(it) is Item,
            tuple(p2.moved(2)), Pos2._field_defaults, sq.area(), isinstance(Foreign(), Shape),
            attempt(lambda: Shape()), bf.value, bf is (Buff.HASTE | Buff.REGEN), (bf | Buff.SHIELD).value,
            t.name, Tier(77) is Tier.LOW, r, b1.items, Bag().items)


add(runtime_made_kinds, C(1), C(2))


class Vec2(tuple):
    def __new__(cls, *xy):
        return super().__new__(cls, xy)

    def __add__(self, other):
        return Vec2(*(a + b for a, b in zip(self, other, strict=True)))


class Money(int):
    def __new__(cls, gold, silver=0):
        self = super().__new__(cls, gold * 100 + silver)
        self.label = f"{gold}g{silver}s"
        return self


class Celsius(float):
    def __new__(cls, fahrenheit):
        return super().__new__(cls, (fahrenheit - 32) * 5 / 9)


class Squad(frozenset):
    def __new__(cls, leader, *others):
        self = super().__new__(cls, [leader, *others])
        self.leader = leader
        return self


class CombatLog(deque):
    def __init__(self, owner):
        super().__init__(maxlen=3)
        self.owner = owner


class Price(Fraction):
    def __new__(cls, gold, per):
        return super().__new__(cls, gold, per)


@workflow
async def value_subclasses(n):
    """Subclasses of tuple, int, float, frozenset, deque and Fraction with a __new__ or
    __init__ of their own taking other arguments than the value they make."""
    v = Vec2(n, 2)
    m = Money(n, 5)
    c = Celsius(212)
    sq = Squad(7, 3)  # (ints: a frozenset of strings has another order in another process)
    lg = CombatLog("me")
    lg.extend([1, 2, 3, 4])
    pr = Price(3, 6)
    await tick()
    v = v + Vec2(1, 1)
    return (tuple(v), type(v).__name__, int(m), m.label, float(c), sorted(sq), sq.leader, list(lg),
            lg.maxlen, lg.owner, str(pr))


add(value_subclasses, C(3), C(0))


@workflow
async def quest_graph_and_adapters(n):
    ts = graphlib.TopologicalSorter({"boss": {"key", "door"}, "door": {"key"}, "key": set()})
    ts.prepare()
    first = ts.get_ready()
    lg = logging.LoggerAdapter(logging.getLogger("game.raid"), {"raid": n})

    def handler(a, b=2, *, c: int = 3):
        return a

    sig = inspect.signature(handler)
    await tick()
    ts.done(*first)
    second = ts.get_ready()
    await tick()
    ts.done(*second)
    return first, second, ts.get_ready(), ts.is_active(), lg.extra, lg.logger.name, str(sig)


add(quest_graph_and_adapters, C(1))


@workflow
async def buffers_and_views(n):
    """A memoryview keeps its bytearray from resizing after a restore; released, it does not;
    cast and 2-D views, readonly views; dates, times and struct_time."""
    ba = bytearray(b"abc")
    mv = memoryview(ba)
    await tick()
    r1 = attempt(lambda: ba.append(n))
    mv.release()
    r2 = attempt(lambda: ba.append(n))
    await tick()
    r3 = attempt(lambda: mv[0])
    arr = array.array("i", [1, 2, 3])
    mc = memoryview(arr).cast("B")
    g = bytearray(range(6))
    m2 = memoryview(g).cast("B", (2, 3))
    ro = memoryview(bytearray(b"xy")).toreadonly()
    st = time.gmtime(86400 * n)
    t = dt.time(12, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)), fold=1)
    await tick()
    arr[0] = 256 + n
    g[4] = 99
    return (r1, r2, r3, bytes(ba), mc.tolist()[:8], mc.nbytes, m2.tolist(), m2.strides, ro.readonly,
            tuple(st), t.fold, t.utcoffset())


add(buffers_and_views, C(1))


class Zone:
    """A zone of a world map, hashed by its name, linked to its neighbours by dicts and sets
    keyed by the zones themselves."""

    def __init__(self, name):
        self.name = name
        self.exits = {}
        self.near = set()
        self.route = collections.OrderedDict()

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, Zone) and other.name == self.name

    def link(self, other, cost):
        self.exits[other] = cost
        other.exits[self] = cost
        self.near.add(other)
        other.near.add(self)
        self.route[other] = cost


@workflow
async def world_map_zones(n):
    """Zones keyed by each other (dicts, sets, OrderedDicts) across awaits; a path search over
    them after each restore."""
    zones = {name: Zone(name) for name in "abcde"}
    z = zones
    z["a"].link(z["b"], 2)
    z["b"].link(z["c"], n)
    await tick()
    z["c"].link(z["d"], 1)
    z["a"].link(z["d"], 7)
    await tick()
    z["d"].link(z["e"], 2)
    dist, todo = {z["a"]: 0}, [(0, "a")]
    while todo:
        d, name = heapq.heappop(todo)
        for nxt, cost in zones[name].exits.items():
            if d + cost < dist.get(nxt, 10**9):
                dist[nxt] = d + cost
                heapq.heappush(todo, (d + cost, nxt.name))
        await tick()
    return sorted((k.name, v) for k, v in dist.items()), sorted(x.name for x in z["d"].near), list(
        k.name for k in z["a"].route)


add(world_map_zones, C(1), C(9))
