"""Corpus: game-server shapes written as an application would, run natively and restored at every
suspension (and in a new interpreter, test_restart_subprocess).

Enums (Flag, IntEnum, aliases, members with methods) as dict keys and set elements; NamedTuples
with methods; dataclasses with ``default_factory``, ``__post_init__``, frozen and slotted ones and
``dataclasses.replace``; descriptors, properties and ``__slots__`` with inheritance; a ChainMap,
heapq queues of tuples and ordered dataclasses, ``bisect.insort`` with ``key=``, an
``itertools.count`` as a tie-breaker; ``functools.partial`` of bound methods and of lambdas closing
over locals, ``operator`` getters; closures and ``nonlocal`` counters, an event bus of nested
functions, classes, enums and NamedTuples made in the workflow; decimal, fractions, zoneinfo
datetimes, struct, array and memoryview; ExitStack, suppress and nullcontext across awaits;
exception groups, notes, causes, ``sys.exc_info()`` and a held traceback; ``re.Match`` objects;
``match`` with class patterns, walrus in comprehensions, recursion between workflows and
try/finally with awaits in the finally.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import dataclasses
import datetime
import decimal
import enum
import fractions
import functools
import heapq
import itertools
import operator
import random
import re
import struct
import sys
import traceback
import types
import typing
import zoneinfo
from collections import ChainMap, deque
from dataclasses import dataclass, field
from typing import NamedTuple

from workflows import Event, select, signal, timer, workflow

from .diffharness import C, add
from .probes import log


class Element(enum.Flag):
    NONE = 0
    FIRE = enum.auto()
    ICE = enum.auto()
    POISON = enum.auto()
    FROST = ICE  # alias


class Rank(enum.IntEnum):
    GRUNT = 1
    ELITE = 2
    BOSS = 3

    def bounty(self):
        return self.value * 10


class Vec(NamedTuple):
    x: int
    y: int

    def __add__(self, o):
        return Vec(self.x + o.x, self.y + o.y)

    def manhattan(self):
        return abs(self.x) + abs(self.y)


@dataclass
class Mob:
    name: str
    rank: Rank
    pos: Vec = Vec(0, 0)
    resist: Element = Element.NONE
    tags: set = field(default_factory=set)
    hp: int = field(default=0)
    count = 0

    def __post_init__(self):
        Mob.count += 1
        if not self.hp:
            self.hp = self.rank * 25
        self.uid = Mob.count


@dataclass(frozen=True, slots=True)
class Hit:
    amount: int
    elem: Element
    crit: bool = False


@workflow
async def boss_phases(seed):
    rng = random.Random(seed)
    start = Mob.count
    boss = Mob("lich", Rank.BOSS, resist=Element.ICE | Element.POISON)
    adds = [Mob(f"skel{i}", Rank.GRUNT, Vec(i, -i)) for i in range(3)]
    by_rank = {Rank.BOSS: [boss], Rank.GRUNT: adds}
    immune = {Element.FROST, Element.POISON}
    hits = []
    phase = 1
    while boss.hp > 0:
        ev = await select(signal("spell"), timer("swing", 2))
        match ev:
            case Event("spell", Hit(amount=a, elem=e) as h) if e in immune:
                log(("immune", e, a, h.crit))
            case Event("spell", Hit() as h):
                hits.append(h)
                boss.hp -= h.amount * (2 if h.crit else 1)
            case Event("swing"):
                h = Hit(rng.randint(3, 9), Element.FIRE, rng.random() < 0.3)
                h2 = dataclasses.replace(h, crit=not h.crit)
                hits.append(h2)
                boss.hp -= h2.amount
        if phase == 1 and boss.hp < 40:
            phase = 2
            boss.tags.add("enraged")
            boss.pos = boss.pos + Vec(1, 1)
            log(("phase2", boss.uid - start))
        if len(hits) > 12:
            break
    return (boss.hp, phase, sorted(boss.tags), boss.pos.manhattan(), [h.amount for h in hits],
            by_rank[Rank.BOSS][0] is boss, Element.FROST is Element.ICE, boss.rank.bounty(),
            [a.uid - boss.uid for a in adds], type(boss.pos).__name__)


add(boss_phases,
    C(3),
    C(5, signals={"spell": [Hit(20, Element.FIRE, True), Hit(5, Element.ICE), Hit(30, Element.FIRE)]},
      choose=["spell", "spell", "swing", "spell"]))


def _prio(p):
    return p[0]


@workflow
async def crafting_queue(orders):
    pq = []
    seq = itertools.count()
    done = []
    recipes = ChainMap({"sword": 3}, {"bow": 2, "sword": 9})
    for name, prio in orders:
        heapq.heappush(pq, (prio, next(seq), Mob(name, Rank.GRUNT)))
    made = []
    while pq:
        prio, n, item = heapq.heappop(pq)
        t = recipes.get(item.name, 1)
        await timer(f"craft{n}", t)
        bisect.insort(made, (t, item.name, n), key=operator.itemgetter(0))
        done.append(item)
        if item.name == "bow":
            recipes = recipes.new_child({"arrow": 1})
            heapq.heappush(pq, (0, next(seq), Mob("arrow", Rank.GRUNT)))
    return made, [d.name for d in done], next(seq), dict(recipes), len(recipes.maps)


add(crafting_queue, C([("sword", 2), ("bow", 1), ("axe", 3)]))






class Counter2:
    def __init__(self):
        self.n = 0

    def bump(self, by):
        self.n += by
        return self.n


@workflow
async def partials(base):
    c = Counter2()
    inc = functools.partial(c.bump, 2)
    k = base
    scale = functools.partial(lambda a, b: a * b + k, 3)
    out = []
    for i in range(3):
        out.append(inc())
        await timer("p", 1)
        k += 1
        out.append(scale(i))
    getn = operator.attrgetter("n")
    call = operator.methodcaller("bump", 10)
    pick = operator.itemgetter(0, -1)
    await timer("q", 1)
    out.append((getn(c), call(c), pick(out), inc.func.__self__ is c))
    return out


add(partials, C(1))


@workflow
async def closures_nonlocal(start):
    total = start
    history = []

    def add(x):
        nonlocal total
        total += x
        history.append(total)
        return total

    def make_acc():
        n = 0

        def acc(v):
            nonlocal n
            n += v
            return n

        return acc

    acc = make_acc()
    for i in range(4):
        add(i)
        await timer("c", 1)
        acc(i * 10)
    await timer("d", 1)
    return total, history, acc(0), add(0)


add(closures_nonlocal, C(5))


def gen_loot(rng, n):
    for i in range(n):
        yield i, rng.choice(["gold", "gem", "rope"])


@workflow
async def held_generator(seed):
    rng = random.Random(seed)
    g = iter(list(gen_loot(rng, 5)))
    got = []
    first = next(g)
    await timer("x", 1)
    for item in g:
        got.append(item)
        await timer("y", 1)
    return first, got, rng.random()


add(held_generator, C(2))


@workflow
async def ns_and_slots(n):
    st = types.SimpleNamespace(hp=n, buffs=[])
    alias = st.buffs
    for i in range(3):
        st.buffs.append(i)
        await timer("t", 1)
        st.hp -= i
    return st.hp, alias is st.buffs, vars(st)


add(ns_and_slots, C(10))


class Positive:
    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.private)

    def __set__(self, obj, value):
        if value < 0:
            raise ValueError(f"{self.private[1:]} must be >= 0, got {value}")
        setattr(obj, self.private, value)


class Unit:
    __slots__ = ("name", "_hp")

    def __init__(self, name, hp):
        self.name = name
        self._hp = hp

    @property
    def hp(self):
        return self._hp

    @hp.setter
    def hp(self, v):
        self._hp = max(0, v)

    @property
    def alive(self):
        return self._hp > 0


class Hero(Unit):
    __slots__ = ("level", "__dict__")

    def __init__(self, name, hp, level):
        super().__init__(name, hp)
        self.level = level


class Wallet:
    gold = Positive()
    gems = Positive()

    def __init__(self, gold, gems):
        self.gold = gold
        self.gems = gems


@dataclass
class Base:
    name: str
    items: list = field(default_factory=list)


@dataclass(slots=True)
class Derived(Base):
    power: int = 1


@dataclass(frozen=True)
class Coord:
    x: int
    y: int
    dist: float = field(init=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "dist", (self.x ** 2 + self.y ** 2) ** 0.5)


@workflow
async def slots_and_props(n):
    h = Hero("ann", 10, 2)
    h.title = "brave"
    w = Wallet(5, 1)
    d = Derived("blade", power=3)
    d.items.append("gem")
    c = Coord(3, 4)
    errs = []
    for i in range(n):
        await timer("tick", 1)
        h.hp -= 4
        try:
            w.gold -= 3
        except ValueError as e:
            errs.append(str(e))
            await timer("err", 1)
        d.items.append(i)
        c = dataclasses.replace(c, x=c.x + 1)
    return (h.hp, h.alive, h.title, h.level, w.gold, w.gems, vars(w), d, c, c.dist, errs,
            hasattr(d, "__dict__"))


add(slots_and_props, C(4))


@workflow
async def money_and_time(amounts):
    ctx = decimal.Context(prec=6, rounding=decimal.ROUND_HALF_EVEN)
    total = decimal.Decimal("0")
    frac = fractions.Fraction(0)
    tz = zoneinfo.ZoneInfo("Europe/Paris")
    start = datetime.datetime(2024, 3, 30, 12, 0, tzinfo=tz)
    when = start
    utc = datetime.UTC
    span = datetime.timedelta(hours=13)
    for a in amounts:
        await timer("pay", 1)
        total = ctx.add(total, ctx.divide(decimal.Decimal(a), decimal.Decimal(3)))
        frac += fractions.Fraction(a) / 7
        when = when + span
    return (total, str(total), frac, when.isoformat(), when.tzinfo is tz, when.astimezone(utc).isoformat(),
            when.utcoffset(), start.date(), ctx.prec, (when - start).total_seconds())


add(money_and_time, C(["1", "2.5", "10"]))


PACKET = struct.Struct("<HIf")


@workflow
async def binary_packets(n):
    buf = bytearray(PACKET.size * n)
    arr = array.array("i", range(5))
    view = memoryview(buf)
    for i in range(n):
        PACKET.pack_into(buf, i * PACKET.size, i, i * 1000, i / 2)
        await timer("pkt", 1)
        arr.append(i * 7)
        view[0] = 255
    out = [PACKET.unpack_from(buf, i * PACKET.size) for i in range(n)]
    await timer("fin", 1)
    arr[1] = -1
    return out, arr.tolist(), bytes(view[:4]), view.obj is buf, arr.typecode


add(binary_packets, C(3))


class Door:
    def __init__(self, name, trace):
        self.name = name
        self.trace = trace

    def __enter__(self):
        self.trace.append(("open", self.name))
        return self

    def __exit__(self, *exc):
        self.trace.append(("close", self.name, exc[0].__name__ if exc[0] else None))
        return False


@workflow
async def exit_stacks(fail):
    trace = []
    got = []
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(Door("a", trace))
        stack.callback(trace.append, "cb1")
        await timer("t1", 1)
        stack.enter_context(Door("b", trace))
        with contextlib.suppress(KeyError):
            await timer("t2", 1)
            if fail:
                {}["x"]
            got.append("not suppressed")
        with contextlib.nullcontext(a) as same:
            await timer("t3", 1)
            got.append(same is a)
    return trace, got


add(exit_stacks, C(True), C(False))


@workflow
async def pushed_stack(n):
    trace = []
    with contextlib.ExitStack() as outer:
        for i in range(n):
            outer.enter_context(Door(f"d{i}", trace))
            await timer("t", 1)
        saved = outer.pop_all()
    await timer("mid", 1)
    trace.append("between")
    with saved:
        await timer("end", 1)
    return trace


add(pushed_stack, C(3))


LINE = re.compile(r"(?P<who>\w+) hits (?P<dmg>\d+)")


@workflow
async def regex_log(lines):
    totals = {}
    for line in lines:
        m = LINE.fullmatch(line)
        if m is None:
            continue
        who, dmg = m.group("who"), int(m["dmg"])
        del m
        await timer("parse", 1)
        totals[who] = totals.get(who, 0) + dmg
    return totals


add(regex_log, C(["ann hits 5", "bob misses", "ann hits 7"]))





HOOKS = []
x = 100


class Bus:
    def __init__(self):
        self.subs = {}

    def on(self, name):
        def deco(fn):
            self.subs.setdefault(name, []).append(fn)
            return fn
        return deco

    def emit(self, name, *a):
        return [f(*a) for f in self.subs.get(name, [])]


@workflow
async def event_bus(n):
    bus = Bus()
    score = {"hits": 0}
    kills = 0
    multiplier = 1

    @bus.on("hit")
    def on_hit(dmg):
        score["hits"] += dmg * multiplier
        return score["hits"]

    @bus.on("kill")
    def on_kill(who):
        nonlocal kills
        kills += 1
        return f"{who} #{kills}"

    @bus.on("hit")
    def echo(dmg):
        return ("echo", dmg, on_hit is bus.subs["hit"][0])

    out = []
    for i in range(n):
        await timer("t", 1)
        out.append(bus.emit("hit", i))
        multiplier += 1
        if i % 2:
            out.append(bus.emit("kill", f"mob{i}"))
    return out, score, kills


add(event_bus, C(4))


@workflow
async def class_in_workflow(base):
    bonus = 5

    class Buff:
        registry = []
        x = x + 1

        def __init__(self, name, power):
            self.name = name
            self.power = power + bonus
            Buff.registry.append(self)

        def __repr__(self):
            return f"Buff({self.name}, {self.power})"

        def stronger(self, other):
            return self.power > other.power

        @classmethod
        def best(cls):
            return max(cls.registry, key=lambda b: b.power)

        @staticmethod
        def total():
            return sum(b.power for b in Buff.registry)

    a = Buff("haste", base)
    await timer("t1", 1)
    bonus = 100
    b = Buff("might", base)
    await timer("t2", 1)
    return (repr(a), repr(b), a.stronger(b), Buff.best() is b, Buff.total(), Buff.x,
            Buff.registry[0] is a, type(a) is Buff)


add(class_in_workflow, C(3))


@workflow
async def loop_lambdas(n):
    fs = []
    gs = []
    for i in range(n):
        fs.append(lambda: i)  # noqa: B023 - late binding, as natively
        gs.append(lambda i=i: i)
        await timer("l", 1)
    hs = [lambda: j for j in range(3)]  # noqa: B023 - late binding, as natively
    await timer("m", 1)
    i = 42
    return [f() for f in fs], [g() for g in gs], [h() for h in hs]


add(loop_lambdas, C(3))


@workflow
async def recursive_nested(n):
    memo = {}

    def fib(k):
        if k < 2:
            return k
        if k not in memo:
            memo[k] = fib(k - 1) + fib(k - 2)  # noqa: F821 - deleted later on purpose
        return memo[k]

    out = []
    for i in range(n):
        out.append(fib(i * 5))
        await timer("f", 1)
    g = fib
    del fib
    await timer("del", 1)
    try:
        g(30)
    except NameError as e:
        out.append(str(e))
    return out, len(memo)


add(recursive_nested, C(4))


def make_counter():
    n = 0

    def inc():
        nonlocal n
        n += 1
        return n

    def get():
        return n

    return inc, get


@workflow
async def shared_cells(k):
    inc, get = make_counter()
    inc2 = inc
    bag = {"inc": inc}
    for _i in range(k):
        inc()
        await timer("c", 1)
        bag["inc"]()
    HOOKS.append(get)
    await timer("d", 1)
    r = (get(), inc2 is inc, bag["inc"] is inc, HOOKS[-1] is get, HOOKS[-1]())
    HOOKS.clear()
    return r


add(shared_cells, C(3))


@dataclass(order=True)
class Task:
    due: float
    prio: int
    name: str = field(compare=False)
    payload: dict = field(default_factory=dict, compare=False)


@workflow
async def scheduler(seed, n):
    rng = random.Random(seed)
    pq = []
    byname = {}
    for i in range(n):
        t = Task(rng.random() * 10, rng.randint(0, 2), f"t{i}", {"i": i})
        heapq.heappush(pq, t)
        byname[t.name] = t
    ran = []
    while pq:
        t = heapq.heappop(pq)
        ev = await select(timer("due", at=1000 + t.due), signal("cancel"))
        if ev.name == "cancel":
            victim = byname.pop(ev.value, None)
            if victim in pq:
                pq.remove(victim)
                heapq.heapify(pq)
            heapq.heappush(pq, t)
            continue
        ran.append((t.name, t.payload, byname.get(t.name) is t))
        if rng.random() < 0.3 and len(ran) < 8:
            nt = Task(t.due + rng.random(), 0, t.name + "'", t.payload)
            heapq.heappush(pq, nt)
            byname[nt.name] = nt
    return ran, [t.payload is byname[t.name].payload for t in byname.values()]


add(scheduler, C(4, 5), C(9, 4, signals={"cancel": ["t1", "t3"]}, choose=["cancel", 0, "cancel"]))


class Fizzle(Exception):
    pass


@workflow
async def exc_info_in_handler(n):
    out = []
    try:
        raise Fizzle("spell", n)
    except Fizzle:
        await timer("h", 1)
        et, ev, tb = sys.exc_info()
        out.append((et.__name__, ev.args, tb is ev.__traceback__))
        out.append(type(sys.exception()).__name__)
        out.append(traceback.format_exc().splitlines()[-1])
        try:
            await timer("inner", 1)
            raise KeyError("k")
        except KeyError:
            out.append(sys.exc_info()[0].__name__)
        out.append(sys.exc_info()[0].__name__)
    out.append(sys.exc_info())
    return out


add(exc_info_in_handler, C(1))


@workflow
async def bare_reraise(n):
    try:
        try:
            raise Fizzle(n)
        except Fizzle as e:
            await timer("r", 1)
            e.add_note("seen")
            raise
    except Fizzle as f:
        return f.args, f.__notes__, traceback.format_tb(f.__traceback__)[-1].strip().splitlines()[-1]


add(bare_reraise, C(3))


@workflow
async def deleted_exc_name(n):
    e = "before"
    try:
        raise Fizzle(n)
    except Fizzle:
        await timer("x", 1)
    await timer("y", 1)
    try:
        return e
    except NameError as ne:
        await timer("z", 1)
        return ("unbound", str(ne))


add(deleted_exc_name, C(1))


@workflow
async def else_finally(mode):
    trace = []
    try:
        await timer("a", 1)
        if mode == 1:
            raise Fizzle("a")
    except Fizzle:
        trace.append("except")
        await timer("b", 1)
    else:
        trace.append("else")
        await timer("c", 1)
        if mode == 2:
            raise Fizzle("in else")
    finally:
        trace.append(("finally", sys.exc_info()[0]))
        await timer("d", 1)
        trace.append(("finally2", sys.exc_info()[0]))
    return trace


add(else_finally, C(0), C(1), C(2, raises=Fizzle))


class Tier(enum.IntFlag):
    BRONZE = 1
    SILVER = 2
    GOLD = 4


@dataclass(frozen=True, slots=True)
class Lot:
    name: str
    reserve: int
    tier: Tier = Tier.BRONZE


@dataclass(order=True)
class Offer:
    amount: int
    who: str = field(compare=False)
    lot: Lot = field(compare=False, default=None)


class Closed(Exception):
    pass


@workflow
async def auction_round(seed, lots):
    rng = random.Random(seed)
    book = {}
    sold = []
    notes = []
    for name, reserve in lots:
        lot = Lot(name, reserve, Tier(rng.choice([1, 2, 4, 3])))
        offers = book.setdefault(lot, [])
        try:
            for turn in range(3):
                ev = await select(signal("bid"), timer("tick", 1))
                if ev.name == "bid":
                    who, amt = ev.value
                else:
                    who, amt = f"bot{turn}", reserve + rng.randint(-3, 3)
                bisect.insort(offers, Offer(amt, who, lot), key=lambda o: -o.amount)
                if offers[0].amount > reserve * 2:
                    raise Closed(lot.name)
        except Closed as c:
            c.add_note(f"early close at turn {turn}")
            notes.append(c)
        finally:
            await timer("settle", 1)
            best = offers[0] if offers else None
            if best and best.amount >= lot.reserve:
                sold.append((lot, best))
    await timer("report", 1)
    return ([(lot.name, lot.tier, b.who, b.amount, b.lot is lot) for lot, b in sold],
            [(n.args, n.__notes__) for n in notes], {lt.name: len(o) for lt, o in book.items()},
            [lt.tier & Tier.GOLD for lt in book])


add(auction_round, C(3, [("sword", 10), ("bow", 2)]),
    C(5, [("gem", 4)], signals={"bid": [("ann", 20), ("bob", 3)]}, choose=["bid", "bid"]))


@workflow
async def patrol_guard(route, alerts):
    guard = types.SimpleNamespace(pos=0, seen=deque(maxlen=2), alert=0)
    path = deque(route)
    stack = contextlib.ExitStack()
    leaving = []
    stack.callback(leaving.append, "left post")
    with stack:
        while path:
            wp = path.popleft()
            ev = await select(timer("walk", 2), signal("alert"))
            match ev:
                case Event("alert", int(level)) if level > guard.alert:
                    guard.alert = level
                    path.appendleft(wp)
                    path.rotate(-1)
                case Event("alert", _):
                    guard.seen.append(("ignored", wp))
                case Event("walk"):
                    guard.pos = wp
                    guard.seen.append(wp)
        log(("done", guard.pos))
    return guard.pos, list(guard.seen), guard.alert, leaving, list(path)


add(patrol_guard, C([1, 2, 3, 4], None), C([5, 6, 7], None, signals={"alert": [2, 1, 3]}, choose=["alert", "alert", 0, "alert"]))


@workflow
async def phased_boss(hp):
    phases = iter([("calm", 0.8), ("angry", 0.4), ("dying", 0.0)])
    name, threshold = next(phases)
    transitions = []
    while hp > 0:
        try:
            dmg = await signal("hit")
        except Exception as e:
            transitions.append(("err", type(e).__name__))
            break
        hp -= dmg or 7
        while hp <= threshold * 100 and name != "dying":
            transitions.append(name)
            name, threshold = next(phases)
            await timer(f"enter_{name}", 1)
    rest = list(phases)
    return hp, name, transitions, rest


add(phased_boss, C(100, signals={"hit": [25, 30, 10, 40]}), C(30))


@workflow
async def local_types(n):
    @dataclass(frozen=True, slots=True)
    class Pos:
        x: int
        y: int

        def step(self, dx):
            return dataclasses.replace(self, x=self.x + dx)

    @dataclass
    class Unit:
        name: str
        pos: Pos
        tags: list = field(default_factory=list)

        def __post_init__(self):
            self.tags.append("new")

    class Mood(enum.Enum):
        CALM = 1
        MAD = 2

    class Pair(typing.NamedTuple):
        a: int
        b: int = 0

    class LocalError(LookupError):
        pass

    u = Unit("orc", Pos(0, 0))
    mood = Mood.CALM
    pairs = [Pair(1), Pair(2, 3)]
    errs = []
    for i in range(n):
        await timer("t", 1)
        u.pos = u.pos.step(i)
        mood = Mood.MAD if mood is Mood.CALM else Mood.CALM
        try:
            if i % 2:
                raise LocalError(i)
        except LocalError as e:
            errs.append(e)
            await timer("e", 1)
    return ((u.pos.x, u.pos.y, u.pos == Pos(u.pos.x, 0)), u.tags, mood.name, mood is Mood(mood.value), [tuple(p) for p in pairs], tuple(pairs[1]._replace(a=9)),
            [type(e).__name__ for e in errs], isinstance(errs[0], LookupError) if errs else None,
            type(u.pos).__slots__, hash(u.pos) == hash(Pos(u.pos.x, 0)))


add(local_types, C(3))
