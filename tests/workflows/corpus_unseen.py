"""Corpus: game-server workflows written without looking at the checkpoint's code.

Buffs, patrols, auctions, trades, inventories, cooldowns, matchmaking, leaderboards, rate
limiters and quests, written as a game server writes them: enums and flags, dataclasses with
``__post_init__``, NamedTuples, heaps, sorted lists, itertools objects, partials, ``lru_cache``d
module functions, ``random.Random`` instances, Decimal and Fraction money, zoneinfo clocks,
compiled patterns, arrays, bytearrays, Counters and ChainMaps, classes made in the workflow,
objects with their own ``__eq__``/``__hash__``/``__reduce__``, cycles between objects. Each one
awaits signals and timers between mutations and logs what depends on identity and state.
(What a checkpoint refuses among such programs: test_unseen_refusals.)
"""

from __future__ import annotations

import array
import bisect
import collections
import dataclasses
import datetime as dt
import enum
import functools
import heapq
import itertools
import operator
import random
import re
import string
import sys
import typing
from collections import ChainMap, Counter, OrderedDict, defaultdict, deque
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from zoneinfo import ZoneInfo

from workflows import select, signal, timer, workflow

from .diffharness import C, add
from .probes import get, log

# itertools objects held across an await pickle on 3.11; their pickling is deprecated in 3.12 and
# removed in 3.14, so from 3.12 the checkpoint refuses them (test_unseen_refusals checks that
# these programs are refused there, naming the variable). An itertools.count is kept on every
# version (its next value and step are read from its repr): those programs are in the corpus.
ITERTOOLS_HELD: list = []


def add_itertools(wf, *cases):
    """Register a program that holds an itertools object across an await."""
    if sys.version_info < (3, 12):
        return add(wf, *cases)
    ITERTOOLS_HELD.append((wf, cases[0]))
    return wf


# ---------------------------------------------------------------------------------------------
# Module-level game data


class Element(enum.Enum):
    FIRE = "fire"
    ICE = "ice"
    POISON = "poison"


class Status(enum.Flag):
    NONE = 0
    STUNNED = enum.auto()
    SLOWED = enum.auto()
    BURNING = enum.auto()
    SHIELDED = enum.auto()


class Phase(enum.IntEnum):
    LOBBY = 1
    RUNNING = 2
    ENDED = 3


class Rarity(str, enum.Enum):  # noqa: UP042 - a str mixin, as game code writes it
    COMMON = "common"
    RARE = "rare"
    EPIC = "epic"


class Vec(typing.NamedTuple):
    x: int
    y: int

    def __add__(self, other):  # noqa: D105 - vector addition, not tuple concatenation
        return Vec(self.x + other.x, self.y + other.y)


Bid = collections.namedtuple("Bid", "amount bidder seq")


@dataclass
class Buff:
    name: str
    turns: int
    power: int = 1
    tags: set = field(default_factory=set)

    def __post_init__(self):
        self.tags.add(self.name[0])
        self.max_turns = self.turns


@dataclass(order=True)
class QueueEntry:
    priority: int
    seq: int
    player: str = field(compare=False)


@dataclass(frozen=True)
class ItemId:
    kind: str
    n: int


@dataclass(eq=False)
class Player:
    name: str
    hp: int = 100
    party: typing.Any = None


class Coin:
    """A value object with its own equality and hash (equal by denomination)."""

    def __init__(self, denom):
        self.denom = denom
        self.minted = 0

    def __eq__(self, other):
        return isinstance(other, Coin) and other.denom == self.denom

    def __hash__(self):
        return hash(("coin", self.denom))

    def __repr__(self):
        return f"Coin({self.denom})"


class Ticket:
    """A record that pickles through ``__reduce__`` and counts its rebuilds."""

    made = 0

    def __init__(self, number, holder):
        self.number = number
        self.holder = holder

    def __reduce__(self):
        return (Ticket, (self.number, self.holder))


class Wallet:
    """State through ``__getstate__``/``__setstate__``, with a derived cache."""

    def __init__(self, owner):
        self.owner = owner
        self.coins = []
        self._total = 0

    def add(self, n):
        self.coins.append(n)
        self._total += n

    def __getstate__(self):
        return {"owner": self.owner, "coins": self.coins}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._total = sum(self.coins)


class SlotMob:
    __slots__ = ("name", "hp", "__weakref__")

    def __init__(self, name, hp):
        self.name = name
        self.hp = hp


class Node:
    """A linked node (cycles between locals)."""

    def __init__(self, v):
        self.v = v
        self.next = None
        self.prev = None


@functools.lru_cache(maxsize=256)
def xp_for_level(level):
    return level * level * 10


def damage(base, mult, *, crit=1):
    return base * mult * crit


@functools.singledispatch
def describe(x):
    return f"thing {x!r}"


@describe.register
def _(x: int):
    return f"number {x}"


WORD = re.compile(r"(?P<cmd>\w+)\s+(?P<arg>\d+)")
TZ = ZoneInfo("Europe/Berlin")


# ---------------------------------------------------------------------------------------------
# Buffs and status effects


@workflow
async def buff_ticker(n):
    """Buffs tick down each turn; expired ones leave; tags set in __post_init__ survive."""
    buffs = [Buff("haste", n), Buff("regen", n + 1, power=2)]
    by_name = {b.name: b for b in buffs}
    for turn in range(n + 2):
        await timer("turn", 1)
        for b in buffs:
            b.turns -= 1
        buffs = [b for b in buffs if b.turns > 0]
        log((turn, [(b.name, b.turns, b.max_turns, sorted(b.tags)) for b in buffs]))
    return [by_name[k] is b for k in by_name for b in buffs if b.name == k], len(by_name)


add(buff_ticker, C(1))


@workflow
async def status_flags(x):
    """Flag combinations accumulate across signals; membership and iteration after restore."""
    st = Status.NONE
    history = []
    for _ in range(3):
        hit = await signal("hit")
        st |= Status[hit] if hit else Status.NONE
        history.append(st)
        await timer("tick", 1)
        st &= ~Status.STUNNED
    log([(s.value, Status.STUNNED in s, s is history[i]) for i, s in enumerate(history)])
    return st.value, [m.name for m in Status if m in st and m.value]


add(
    status_flags,
    C(1, signals={"hit": ["STUNNED", "BURNING", "SLOWED"]}),
    C(2, signals={"hit": ["SHIELDED", None, "STUNNED"]}),
)


@workflow
async def element_resist_table(x):
    """A dict keyed by enum members and a defaultdict of Counters across awaits."""
    resist = {Element.FIRE: 0.5, Element.ICE: 1.0}
    taken = defaultdict(Counter)
    for _ in range(3):
        e = await signal("dmg")
        el = Element(e)
        taken["hero"][el] += int(10 * resist.get(el, 2.0))
        await timer("t", 1)
    log(sorted((k.value, v) for k, v in taken["hero"].items()))
    log(taken["hero"].most_common(1))
    return Element.FIRE in resist, list(taken) == ["hero"]


add(
    element_resist_table,
    C(1, signals={"dmg": ["fire", "ice", "fire"]}),
    C(2, signals={"dmg": ["poison", "poison", "ice"]}),
)


@workflow
async def shared_buff_object(n):
    """The same Buff held by two players stays one object: a tick on one shows on the other."""
    shield = Buff("shield", 3)
    a = Player("a")
    b = Player("b")
    a.party = [shield]
    b.party = [shield]
    await timer("t", 1)
    a.party[0].turns -= n
    await signal("go")
    log((b.party[0].turns, a.party[0] is b.party[0]))
    return b.party[0].turns


add(shared_buff_object, C(1))


# ---------------------------------------------------------------------------------------------
# Patrols and movement


@workflow
async def patrol_cycle(n):
    """A guard walks a cycle of waypoints; the itertools.cycle position survives."""
    route = itertools.cycle([Vec(0, 0), Vec(1, 0), Vec(1, 1)])
    pos = next(route)
    seen = [pos]
    for _ in range(n + 3):
        await timer("step", 1)
        pos = next(route)
        seen.append(pos)
    log(seen)
    return pos


add_itertools(patrol_cycle, C(1))


@workflow
async def patrol_counter_ids(n):
    """Entity ids from itertools.count survive a restore without repeating."""
    ids = itertools.count(100, 5)
    spawned = {}
    for k in range(n + 2):
        await timer("spawn", 1)
        spawned[next(ids)] = f"mob{k}"
    log(spawned)
    return next(ids)


add(patrol_counter_ids, C(1))


@workflow
async def waypoint_chain(n):
    """itertools.chain over two legs, partly consumed before each await."""
    legs = itertools.chain([Vec(0, 1), Vec(0, 2)], [Vec(n, 2), Vec(n, 3)])
    out = [next(legs)]
    await timer("t", 1)
    out.append(next(legs))
    await timer("t", 1)
    out.extend(legs)
    log(out)
    return len(out)


add_itertools(waypoint_chain, C(1))


@workflow
async def patrol_islice(n):
    """itertools.islice over a count: a bounded patrol of tiles."""
    tiles = itertools.islice(itertools.count(n), 0, 20, 3)
    got = []
    for _ in range(3):
        got.append(next(tiles))
        await timer("t", 1)
    got.extend(tiles)
    return got


add_itertools(patrol_islice, C(1))


@workflow
async def vector_path(n):
    """NamedTuple vectors with their own __add__, accumulated across signals."""
    pos = Vec(0, 0)
    path = [pos]
    for _ in range(3):
        d = await signal("move") or (1, 0)
        pos = pos + Vec(*d)
        path.append(pos)
    await timer("t", 1)
    log([p._asdict() for p in path])
    return pos, pos._replace(y=n), type(pos).__name__


add(vector_path, C(1, signals={"move": [(0, 1), (2, 2)]}))


@workflow
async def random_wander(seed):
    """A random.Random(seed) instance keeps its state across awaits."""
    rng = random.Random(seed)
    steps = []
    for _ in range(4):
        await timer("t", 1)
        steps.append(rng.randint(0, 100))
        steps.append(rng.choice("NSEW"))
    log(steps)
    return rng.random()


add(random_wander, C(1))


@workflow
async def shuffled_loot(seed):
    """Shuffle a loot table with a seeded Random; the state advances identically."""
    rng = random.Random(seed)
    table = list(string.ascii_lowercase[:8])
    rng.shuffle(table)
    await timer("t", 1)
    first = rng.sample(table, 3)
    await signal("open")
    gauss = round(rng.gauss(0, 1), 9)
    return table, first, gauss, rng.getstate()[1][:3]


add(shuffled_loot, C(7))


# ---------------------------------------------------------------------------------------------
# Auctions and trades


@workflow
async def auction_house(reserve):
    """Bids kept in a heap (max by negated amount) and in a sorted list via bisect."""
    heap = []
    ladder = []
    seq = itertools.count()
    while True:
        ev = await select(signal("bid"), timer("close", 30))
        if ev.name == "close" or ev.value is None:
            break
        who, amount = ev.value
        n = next(seq)
        heapq.heappush(heap, (-amount, n, Bid(amount, who, n)))
        bisect.insort(ladder, (amount, who))
    if not heap:
        return None
    best = heap[0][2]
    log((best, best is heap[0][2], [b for _, b in ladder]))
    return best.amount >= reserve, best.bidder, next(seq)


add(
    auction_house,
    C(
        10,
        signals={"bid": [("ann", 5), ("bob", 12), ("cy", 9)]},
        choose=["bid", "bid", "bid", "bid"],
    ),
    C(10, signals={"bid": [("ann", 15)]}, choose=["bid", "bid"]),
    C(10),
)


@workflow
async def decimal_trade(qty):
    """Decimal prices with a local context, quantized across awaits."""
    price = Decimal("19.995")
    fee = Decimal("0.025")
    total = Decimal(0)
    for _ in range(qty):
        await timer("fill", 1)
        with localcontext() as ctx:
            ctx.prec = 6
            total += (price * (1 + fee)).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    await signal("settle")
    return str(total), total.as_tuple(), Decimal("NaN").is_nan()


add(decimal_trade, C(1))


@workflow
async def fraction_split(n):
    """Loot split in Fractions between party members; shares held in a dict."""
    pot = Fraction(100, 3)
    shares = {}
    members = ["a", "b", "c"][: n + 1]
    for m in members:
        await timer("t", 1)
        shares[m] = pot / len(members)
    log({k: (v.numerator, v.denominator) for k, v in shares.items()})
    return sum(shares.values()) == pot, str(pot)


add(fraction_split, C(1))


@workflow
async def trade_window(x):
    """Two inventories (Counters) and an escrow (a ChainMap over both offers)."""
    mine = Counter(gold=10, gem=2)
    theirs = Counter(gold=3, sword=1)
    offer_a, offer_b = {}, {}
    escrow = ChainMap(offer_a, offer_b)
    for _ in range(2):
        item, side = await signal("offer") or ("gold", "a")
        (offer_a if side == "a" else offer_b)[item] = (offer_a if side == "a" else offer_b).get(
            item, 0
        ) + 1
        await timer("t", 1)
    log(dict(escrow))
    mine.subtract(offer_a)
    theirs.subtract(offer_b)
    mine.update(offer_b)
    theirs.update(offer_a)
    return +mine, +theirs, escrow.maps[0] is offer_a, len(escrow)


add(
    trade_window,
    C(1, signals={"offer": [("gold", "a"), ("sword", "b")]}),
    C(2, signals={"offer": [("gem", "a"), ("gem", "a")]}),
)


@workflow
async def escrow_chainmap_child(x):
    """ChainMap.new_child layering: writes go to the newest layer, reads fall through."""
    defaults = {"tax": 5, "fee": 1}
    cm = ChainMap(defaults)
    cm2 = cm.new_child()
    await timer("t", 1)
    cm2["tax"] = x
    await timer("t", 1)
    defaults["fee"] = 9
    log((dict(cm2), cm2.parents.maps[0] is defaults, cm.maps[0] is cm2.maps[1]))
    return cm2["fee"], cm["tax"]


add(escrow_chainmap_child, C(1))


@workflow
async def trade_ledger_frozen(x):
    """Frozensets of (slot, item number) pairs as trade keys. Their elements hash as ints do,
    the same under every hash seed, so whether the order can be kept does not depend on it."""
    a = frozenset({(1, 1), (2, x)})
    b = frozenset({(2, x), (1, 1)})
    ledger = {a: "pending"}
    await signal("ok")
    ledger[b] = "done"
    await timer("t", 1)
    log((len(ledger), ledger[a], a == b, sorted(slot for slot, _ in a)))
    return (2, x) in a, hash(a) == hash(b)


add(trade_ledger_frozen, C(1))


# ---------------------------------------------------------------------------------------------
# Inventories


@workflow
async def inventory_slots(n):
    """An array.array of slot counts and a bytearray of flags, sliced across awaits."""
    counts = array.array("H", [0] * 8)
    flags = bytearray(8)
    for i in range(n + 2):
        slot = await signal("pick")
        slot = i if slot is None else slot
        counts[slot] += 1
        flags[slot] = 1
        await timer("t", 1)
    head = flags[:4]
    head[0] = 7
    log((counts.tolist(), bytes(flags), bytes(head), counts.typecode, counts.itemsize))
    return sum(counts), flags.count(1)


add(inventory_slots, C(1, signals={"pick": [3, 3, 5]}))


@workflow
async def inventory_coins_custom_eq(n):
    """Coins equal by denomination: a set dedups them; the first one put in is the one kept."""
    c1 = Coin(5)
    c1.minted = 1
    c2 = Coin(5)
    c2.minted = 2
    purse = {c1}
    await timer("t", 1)
    purse.add(c2)
    counts = {c1: 1}
    counts[c2] = counts[c2] + n
    await timer("t", 1)
    (only,) = purse
    k = next(iter(counts))
    log((len(purse), only is c1, only.minted, k is c1, counts[Coin(5)]))
    return only.minted, k.minted


add(inventory_coins_custom_eq, C(1))


@workflow
async def inventory_ordered(n):
    """An OrderedDict used as an LRU of recently used items (move_to_end, popitem)."""
    recent = OrderedDict()
    for item in ["potion", "sword", "shield", "potion", "bow"][: n + 3]:
        recent[item] = recent.get(item, 0) + 1
        recent.move_to_end(item)
        if len(recent) > 3:
            recent.popitem(last=False)
        await timer("use", 1)
    log(list(recent.items()))
    return next(reversed(recent))


add(inventory_ordered, C(1))


@workflow
async def inventory_wallet_state(n):
    """A class with __getstate__/__setstate__ rebuilding a derived cache."""
    w = Wallet("hero")
    for i in range(n + 1):
        w.add(i * 10)
        await timer("t", 1)
    alias = w
    w.add(5)
    await signal("s")
    return alias._total, w is alias, w.coins


add(inventory_wallet_state, C(1))


@workflow
async def inventory_tickets_reduce(n):
    """Objects with __reduce__ shared between two lists stay shared."""
    t = Ticket(n, "ann")
    queue = [t, Ticket(n + 1, "bob")]
    vip = [t]
    await timer("t", 1)
    vip[0].holder = "cy"
    await timer("t", 1)
    return queue[0].holder, queue[0] is vip[0]


add(inventory_tickets_reduce, C(1))


@workflow
async def inventory_grid_nested(n):
    """A grid as a list of lists built by multiplication of one row: the rows are one list."""
    row = [0] * 3
    grid = [row] * 3
    safe = [list(row) for _ in range(3)]
    await timer("t", 1)
    grid[0][n] = 9
    safe[0][n] = 9
    await timer("t", 1)
    return grid, safe, grid[1] is grid[2]


add(inventory_grid_nested, C(1))


# ---------------------------------------------------------------------------------------------
# Cooldowns and rate limiters


@workflow
async def cooldown_deque(n):
    """A sliding window of use times in a bounded deque."""
    window = deque(maxlen=3)
    denied = 0
    for i in range(n + 4):
        t = await signal("cast")
        t = i * 2 if t is None else t
        if len(window) == window.maxlen and t - window[0] < 5:
            denied += 1
        else:
            window.append(t)
        await timer("t", 1)
    return list(window), window.maxlen, denied


add(cooldown_deque, C(1))


@dataclass
class TokenBucket:
    capacity: int
    rate: Fraction
    tokens: Fraction = Fraction(0)
    last: float = 0.0

    def __post_init__(self):
        self.tokens = Fraction(self.capacity)

    def take(self, now):
        self.tokens = min(
            Fraction(self.capacity), self.tokens + self.rate * Fraction(now - self.last)
        )
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


@workflow
async def rate_limiter_bucket(n):
    """A token bucket dataclass with Fraction tokens across timed requests."""
    bucket = TokenBucket(2, Fraction(1, 4))
    grants = []
    for i in range(n + 4):
        await timer("req", 1)
        grants.append(bucket.take(float(i)))
    return grants, str(bucket.tokens), bucket.last


add(rate_limiter_bucket, C(1))


@workflow
async def cooldown_by_ability(n):
    """A dict of ability -> ready time, and a partial that binds the global cooldown."""
    ready = dict.fromkeys(["slash", "heal", "dash"], 0)
    gcd = functools.partial(max, 2)
    used = []
    for t in range(n + 3):
        ability = await signal("use") or "slash"
        if ready[ability] <= t:
            used.append(ability)
            ready[ability] = t + gcd(n)
        await timer("t", 1)
    log((ready, gcd.args, gcd.func is max))
    return used


add(cooldown_by_ability, C(1))


@workflow
async def rate_limit_partial_damage(n):
    """A partial over a module function with keywords, kept across an await."""
    crit_hit = functools.partial(damage, crit=2)
    weak = functools.partial(damage, 1)
    await timer("t", 1)
    a = crit_hit(10, n)
    await timer("t", 1)
    return a, weak(n), crit_hit.keywords, crit_hit.func is damage


add(rate_limit_partial_damage, C(1))


@workflow
async def xp_table_cache(n):
    """An lru_cache'd module function: the cache survives (it is the module's)."""
    before = xp_for_level.cache_info().currsize
    fn = xp_for_level
    await timer("t", 1)
    total = sum(fn(level) for level in range(1, n + 3))
    await timer("t", 1)
    after = xp_for_level.cache_info()
    log((fn is xp_for_level, after.currsize - before >= 0))
    return total


add(xp_table_cache, C(1))


# ---------------------------------------------------------------------------------------------
# Matchmaking and queues


@workflow
async def matchmaking_heap(n):
    """Order-comparable dataclass entries in a heap; popping in priority, then arrival order."""
    q = []
    seq = 0
    for name in ["ann", "bob", "cy", "dee"][: n + 2]:
        prio = await signal("join")
        heapq.heappush(q, QueueEntry(prio or 5, seq, name))
        seq += 1
        await timer("t", 1)
    first = q[0]
    matches = []
    while len(q) >= 2:
        a, b = heapq.heappop(q), heapq.heappop(q)
        matches.append((a.player, b.player))
        await timer("match", 1)
    return matches, first.player, [e.player for e in q]


add(matchmaking_heap, C(1, signals={"join": [3, 1, 2]}))


@workflow
async def matchmaking_elo_buckets(n):
    """Players bucketed by rating with bisect into a sorted list of cut-offs."""
    cuts = [1000, 1200, 1500]
    buckets = defaultdict(list)
    for _ in range(3):
        p = await signal("player") or ("x", 1100)
        buckets[bisect.bisect_right(cuts, p[1])].append(p[0])
        await timer("t", 1)
    return dict(buckets), buckets.default_factory is list


add(matchmaking_elo_buckets, C(1, signals={"player": [("a", 900), ("b", 1600), ("c", 1200)]}))


@workflow
async def lobby_phases(n):
    """An IntEnum phase machine: comparisons and arithmetic on members across awaits."""
    phase = Phase.LOBBY
    trail = [phase]
    while phase < Phase.ENDED:
        await timer("phase", 1)
        phase = Phase(phase + 1)
        trail.append(phase)
    log([(p.name, p is Phase(int(p))) for p in trail])
    return phase == 3, phase is Phase.ENDED


add(lobby_phases, C(1))


@workflow
async def party_cycle_refs(n):
    """Players referring to their party list, and the party to its players (a cycle)."""
    party = []
    for name in ["ann", "bob"][: n + 1]:
        p = Player(name)
        p.party = party
        party.append(p)
        await timer("t", 1)
    leader = party[0]
    await signal("s")
    leader.hp -= 30
    return [p.hp for p in party], leader.party is party, all(p.party is party for p in party)


add(party_cycle_refs, C(1))


@workflow
async def team_groupby(n):
    """itertools.groupby over players sorted by team, consumed across awaits."""
    roster = sorted([("red", "ann"), ("blue", "bob"), ("red", "cy"), ("blue", "dee")][: n + 2])
    groups = itertools.groupby(roster, key=operator.itemgetter(0))
    out = []
    team, members = next(groups)
    out.append((team, [m for _, m in members]))
    await timer("t", 1)
    for team, members in groups:
        out.append((team, [m for _, m in members]))
        await timer("t", 1)
    return out


add_itertools(team_groupby, C(1))


@workflow
async def queue_generator_expression(n):
    """A generator of queued players held across an await (cannot be checkpointed: copied out)."""
    waiting = ["ann", "bob", "cy"]
    names = [w.upper() for w in waiting]
    await timer("t", 1)
    gen = list(w for w in names if w != "BOB")
    await timer("t", 1)
    return gen, n


add(queue_generator_expression, C(1))


# ---------------------------------------------------------------------------------------------
# Leaderboards


@workflow
async def leaderboard_sorted(n):
    """A leaderboard kept sorted with bisect.insort keyed by negated score."""
    board = []
    for _ in range(n + 2):
        entry = await signal("score")
        if entry is None:
            entry = ("anon", n)
        bisect.insort(board, (-entry[1], entry[0]))
        await timer("t", 1)
    return [(name, -s) for s, name in board[:3]]


add(leaderboard_sorted, C(1, signals={"score": [("a", 5), ("b", 9), ("c", 7)]}))


@workflow
async def leaderboard_counter(n):
    """A Counter of kills, most_common after a restore with ties in insertion order."""
    kills = Counter()
    for _ in range(4):
        who = await signal("kill") or "bot"
        kills[who] += 1
        await timer("t", 1)
    return kills.most_common(), kills.total()


add(leaderboard_counter, C(1, signals={"kill": ["b", "a", "b", "a"]}))


@workflow
async def leaderboard_weekly_reset(n):
    """Reset times computed in a zoneinfo zone across a DST change."""
    start = dt.datetime(2026, 3, 28, 12, 0, tzinfo=TZ)
    resets = []
    t = start
    for _ in range(n + 2):
        await timer("day", 1)
        t = t + dt.timedelta(days=1)
        resets.append((t.isoformat(), t.utcoffset().total_seconds(), t.tzinfo is TZ))
    return resets, t.tzname()


add(leaderboard_weekly_reset, C(1))


@workflow
async def leaderboard_season_dates(n):
    """Dates, timedeltas and a fixed-offset timezone held across awaits."""
    tz = dt.timezone(dt.timedelta(hours=n))
    season = dt.datetime(2026, 1, 1, tzinfo=tz)
    length = dt.timedelta(weeks=6)
    await timer("t", 1)
    end = season + length
    await timer("t", 1)
    return (
        end.isoformat(),
        end.tzinfo is tz,
        (end - season) // dt.timedelta(days=1),
        dt.date(2026, 2, 1) < end.date(),
    )


add(leaderboard_season_dates, C(1))


# ---------------------------------------------------------------------------------------------
# Chat, commands and parsing


def _command(pat, line):
    m = pat.fullmatch(line)
    return (m.group(1), m.group(2)) if m else None


@workflow
async def chat_command_parser(n):
    """A compiled pattern held across awaits, matching incoming chat commands."""
    pat = re.compile(r"/(\w+)(?:\s+(\d+))?")
    seen = []
    for _ in range(3):
        line = await signal("chat") or "/idle"
        seen.append(_command(pat, line))
        await timer("t", 1)
    return seen, pat.pattern, pat is re.compile(r"/(\w+)(?:\s+(\d+))?")


add(chat_command_parser, C(1, signals={"chat": ["/give 5", "hello", "/kick"]}))


@workflow
async def chat_module_pattern(n):
    """A module-level compiled pattern and its groupindex across awaits."""
    pat = WORD
    await timer("t", 1)
    out = pat.match(f"warp {n}").groupdict()
    await timer("t", 1)
    return out, pat is WORD, dict(pat.groupindex)


add(chat_module_pattern, C(1))


@workflow
async def chat_filter_translate(n):
    """str.maketrans tables and a set of banned words."""
    table = str.maketrans("aeio", "4310")
    banned = {"noob", "bot"}
    out = []
    for _ in range(3):
        msg = await signal("msg") or "hi bot"
        words = [("***" if w in banned else w.translate(table)) for w in msg.split()]
        out.append(" ".join(words))
        banned.add(msg.split()[0])
        await timer("t", 1)
    return out, sorted(banned)


add(chat_filter_translate, C(1, signals={"msg": ["you noob", "you are bot"]}))


@workflow
async def singledispatch_describe(n):
    """A singledispatch module function used before and after awaits."""
    fn = describe
    a = fn(n)
    await timer("t", 1)
    b = fn("x")
    await timer("t", 1)
    return a, b, fn is describe


add(singledispatch_describe, C(1))


# ---------------------------------------------------------------------------------------------
# State machines and classes made in the workflow


@workflow
async def local_class_state_machine(n):
    """A class defined inside the workflow: instances, class attribute, and methods."""

    class Door:
        opened = 0

        def __init__(self):
            self.state = "closed"

        def toggle(self):
            self.state = "open" if self.state == "closed" else "closed"
            if self.state == "open":
                type(self).opened += 1

    d = Door()
    e = Door()
    for _ in range(n + 2):
        await timer("t", 1)
        d.toggle()
    e.toggle()
    return d.state, Door.opened, type(d) is type(e), isinstance(e, Door)


add(local_class_state_machine, C(1))


@workflow
async def local_enum_machine(n):
    """An Enum class made in the workflow; members compared by identity after restore."""
    Light = enum.Enum("Light", ["RED", "GREEN", "YELLOW"])
    nxt = {Light.RED: Light.GREEN, Light.GREEN: Light.YELLOW, Light.YELLOW: Light.RED}
    cur = Light.RED
    trail = []
    for _ in range(n + 3):
        await timer("t", 1)
        cur = nxt[cur]
        trail.append(cur.name)
    return trail, cur is Light[cur.name], len(Light)


add(local_enum_machine, C(1))


@workflow
async def local_dataclass_post_init(n):
    """A dataclass defined in the workflow with __post_init__ and a default_factory."""

    @dataclass
    class Quest:
        title: str
        steps: list = field(default_factory=list)

        def __post_init__(self):
            self.slug = self.title.lower().replace(" ", "-")

    q = Quest("Slay Rat")
    for i in range(n + 1):
        await timer("t", 1)
        q.steps.append(i)
    q2 = dataclasses.replace(q, title="Slay Bat")
    await timer("t", 1)
    return q.slug, q2.slug, q.steps is q2.steps, dataclasses.asdict(q)


add(local_dataclass_post_init, C(1))


@workflow
async def local_namedtuple_quests(n):
    """A typing.NamedTuple class made in the workflow, with a default."""

    class Reward(typing.NamedTuple):
        gold: int
        item: str = "none"

    rewards = [Reward(n), Reward(n * 2, "gem")]
    await timer("t", 1)
    rewards.append(rewards[0]._replace(item="hat"))
    await timer("t", 1)
    return [tuple(r) for r in rewards], Reward._fields, type(rewards[2]) is Reward


add(local_namedtuple_quests, C(1))


@workflow
async def local_class_with_eq_hash(n):
    """A class made in the workflow with __eq__/__hash__, used as dict keys and set members."""

    class Pos:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __eq__(self, o):
            return (self.x, self.y) == (o.x, o.y)

        def __hash__(self):
            return hash((self.x, self.y))

    visited = {Pos(0, 0): 1}
    seen = {Pos(0, 0)}
    for i in range(n + 1):
        await timer("t", 1)
        p = Pos(i, i)
        visited[p] = visited.get(p, 0) + 1
        seen.add(p)
    return sorted(v for v in visited.values()), len(seen), Pos(0, 0) in seen


add(local_class_with_eq_hash, C(1))


@workflow
async def local_class_slots_and_property(n):
    """A workflow-local class with __slots__ and a property."""

    class Mob:
        __slots__ = ("hp", "_armor")

        def __init__(self, hp):
            self.hp = hp
            self._armor = 2

        @property
        def effective(self):
            return self.hp + self._armor

    m = Mob(10)
    await timer("t", 1)
    m.hp -= n
    await timer("t", 1)
    return m.effective, hasattr(m, "__dict__")


add(local_class_slots_and_property, C(1))


@workflow
async def module_slots_weakref_slot(n):
    """A module class with __slots__ including __weakref__."""
    mobs = [SlotMob("rat", 5), SlotMob("bat", 7)]
    boss = mobs[1]
    await timer("t", 1)
    boss.hp -= n
    await timer("t", 1)
    return [(m.name, m.hp) for m in mobs], mobs[1] is boss


add(module_slots_weakref_slot, C(1))


@workflow
async def state_machine_table(n):
    """A transition table of (state, event) tuples to states, with an enum state."""

    class S(enum.Enum):
        IDLE = 0
        CHASE = 1
        ATTACK = 2

    table = {(S.IDLE, "see"): S.CHASE, (S.CHASE, "near"): S.ATTACK, (S.ATTACK, "lost"): S.IDLE}
    s = S.IDLE
    trail = []
    for _ in range(4):
        ev = await signal("ev")
        s = table.get((s, ev), s)
        trail.append(s.name)
        await timer("t", 1)
    return trail, s in S, s is S(s.value)


add(state_machine_table, C(1, signals={"ev": ["see", "near", "lost", "see"]}))


@workflow
async def rarity_str_enum(n):
    """A str-mixin enum used as a dict key and compared with plain strings."""
    drops = {Rarity.COMMON: 0, Rarity.RARE: 0}
    for _ in range(3):
        r = Rarity(await signal("drop") or "common")
        drops[r] = drops.get(r, 0) + 1
        await timer("t", 1)
    return {k.value: v for k, v in drops.items()}, drops.get("rare"), Rarity.EPIC in drops


add(rarity_str_enum, C(1, signals={"drop": ["rare", "epic", "rare"]}))


# ---------------------------------------------------------------------------------------------
# Cycles, identity and sharing


@workflow
async def linked_ring(n):
    """A doubly linked ring of nodes referencing each other across locals."""
    nodes = [Node(i) for i in range(n + 2)]
    for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True):
        a.next = b
        b.prev = a
    head = nodes[0]
    await timer("t", 1)
    head.next.v = 99
    await timer("t", 1)
    walk, cur = [], head
    for _ in range(len(nodes) + 1):
        walk.append(cur.v)
        cur = cur.next
    return walk, cur is head, head.prev.next is head


add(linked_ring, C(1))


@workflow
async def self_referencing_containers(n):
    """A list that contains itself and a dict that contains itself."""
    lst = [n]
    lst.append(lst)
    d = {"n": n}
    d["self"] = d
    await timer("t", 1)
    lst.append(d)
    await timer("t", 1)
    return lst[1] is lst, lst[2]["self"] is d, repr(lst)[:20]


add(self_referencing_containers, C(1))


@workflow
async def bound_method_held(n):
    """A bound method of a local held across an await stays bound to that same object."""
    w = Wallet("x")
    add_coin = w.add
    await timer("t", 1)
    add_coin(n)
    await timer("t", 1)
    add_coin(2)
    return w.coins, add_coin.__self__ is w


add(bound_method_held, C(1))


@workflow
async def closure_counter_local(n):
    """A closure made in the workflow with a nonlocal counter."""

    def make():
        count = 0

        def hit():
            nonlocal count
            count += 1
            return count

        return hit

    hit = make()
    other = hit
    await timer("t", 1)
    hit()
    await timer("t", 1)
    other()
    return hit(), hit is other


add(closure_counter_local, C(1))


@workflow
async def lambda_sort_keys(n):
    """Lambdas as sort keys held in a dict across awaits."""
    keys = {"hp": lambda p: p[1], "name": lambda p: p[0]}
    party = [("bob", 5), ("ann", 9), ("cy", 1)]
    await timer("t", 1)
    by = await signal("sort") or "hp"
    await timer("t", 1)
    return sorted(party, key=keys[by]), keys[by](party[0])


add(lambda_sort_keys, C(1, signals={"sort": ["name"]}))


@workflow
async def shared_small_objects(n):
    """Shared tuples, strings and bytes between locals; `is` relations after restore."""
    tag = "-".join(["guild", str(n)])
    pair = (tag, [n])
    others = [pair, pair]
    blob = bytes(range(n + 3))
    refs = {"a": blob, "b": blob}
    await timer("t", 1)
    pair[1].append(0)
    await timer("t", 1)
    return others[0] is others[1], others[1][0] is tag, refs["a"] is refs["b"], others[0][1]


add(shared_small_objects, C(1))


@workflow
async def itemgetter_attrgetter(n):
    """operator.itemgetter/attrgetter/methodcaller objects held across awaits."""
    by_hp = operator.attrgetter("hp")
    first_two = operator.itemgetter(0, 1)
    shout = operator.methodcaller("upper")
    ps = [Player("a", 10), Player("b", 5 + n)]
    await timer("t", 1)
    return [by_hp(p) for p in ps], first_two("xyz"), shout("go")


add(itemgetter_attrgetter, C(1))


@workflow
async def sorted_with_cmp_to_key(n):
    """A comparison function held across awaits, turned into a key by cmp_to_key after them."""

    def cmp(a, b):
        return (a[1] > b[1]) - (a[1] < b[1]) or (a[0] > b[0]) - (a[0] < b[0])

    rows = [("b", 2), ("a", 2), ("c", 1)]
    await timer("t", 1)
    rows.append(("d", n))
    await timer("t", 1)
    return sorted(rows, key=functools.cmp_to_key(cmp))


add(sorted_with_cmp_to_key, C(1))


@workflow
async def nested_inline_recursion(n):
    """Recursion through inline sub-workflow calls: a quest tree's rewards."""
    return await quest_tree(n, 0)


@workflow
async def quest_tree(depth, path):
    await timer("node", 1)
    if depth == 0:
        return [path]
    left = await quest_tree(depth - 1, path * 2)
    right = await quest_tree(depth - 1, path * 2 + 1)
    return left + right


add(nested_inline_recursion, C(1))


@workflow
async def inline_call_shares_state(n):
    """A sub-workflow called inline mutates a list owned by the caller; the caller sees it."""
    bag = []
    box = {"bag": bag}
    await fill_bag(bag, n)
    await timer("t", 1)
    return bag, box["bag"] is bag


@workflow
async def fill_bag(bag, n):
    for i in range(n + 1):
        await timer("t", 1)
        bag.append(i)
    return len(bag)


add(inline_call_shares_state, C(1))


@workflow
async def float_stats_shared(n):
    """Per-player float averages; the same float object in two structures."""
    avg = (n + 0.1) / 3
    stats = {"ann": avg}
    hist = [avg, avg]
    inf = float("inf")
    best = [inf]
    await timer("t", 1)
    best[0] = min(best[0], avg)
    await timer("t", 1)
    return stats["ann"] is hist[0], hist[0] is hist[1], best[0] is avg, inf in [float("inf")]


add(float_stats_shared, C(1))


@workflow
async def counter_arithmetic(n):
    """Counter addition, subtraction, intersection and union of loot bags."""
    a = Counter({"gold": 5, "gem": n})
    b = Counter({"gold": 2, "gem": 3})
    await timer("t", 1)
    plus, minus, both, either = a + b, a - b, a & b, a | b
    await timer("t", 1)
    return dict(plus), dict(minus), dict(both), dict(either), list(plus.elements())[:3]


add(counter_arithmetic, C(1))


@workflow
async def bytearray_packets(n):
    """A bytearray used as a packet buffer; slices and del across awaits."""
    buf = bytearray()
    for i in range(n + 2):
        chunk = await signal("pkt") or bytes([i, i])
        buf += chunk
        await timer("t", 1)
    header, body = buf[:2], buf[2:]
    del buf[:1]
    return bytes(header), bytes(body), bytes(buf), len(buf)


add(bytearray_packets, C(1, signals={"pkt": [b"\x01\x02", b"\x03"]}))


@workflow
async def memoryview_cast(n):
    """A memoryview cast over an array of shorts (a live view) across an await."""
    arr = array.array("h", [1, 2, 3, 4])
    mv = memoryview(arr)
    await timer("t", 1)
    arr[0] = 100 + n
    await timer("t", 1)
    return mv.tolist(), mv.format, mv.itemsize


add(memoryview_cast, C(1))


@workflow
async def select_with_deadline(n):
    """A select between a signal and a deadline timer, in a loop with state in a dataclass."""
    b = Buff("focus", 3)
    got = []
    for _ in range(n + 2):
        ev = await select(signal("ping"), timer("deadline", 5))
        got.append(ev.name)
        if ev.name == "deadline":
            b.turns -= 1
    return got, b.turns, sorted(b.tags)


add(select_with_deadline, C(1, choose=["ping", "deadline", "ping"], signals={"ping": [1, 2]}))


@workflow
async def procedure_results_in_heap(n):
    """Procedure results pushed into a heap across awaits."""
    h = []
    for i in range(n + 2):
        v = await get(i * 3 % 5)
        heapq.heappush(h, v)
    return [heapq.heappop(h) for _ in range(len(h))]


add(procedure_results_in_heap, C(1))


@workflow
async def map_and_zip_iterators(n):
    """map and zip iterators (picklable natively) partly consumed across awaits."""
    names = ["ann", "bob", "cy"]
    scores = [n, n + 1, n + 2]
    pairs = zip(names, scores, strict=True)
    upper = map(str.upper, names)
    a = next(pairs)
    b = next(upper)
    await timer("t", 1)
    return a, b, list(pairs), list(upper)


add(map_and_zip_iterators, C(1))


@workflow
async def enumerate_reversed_iter(n):
    """enumerate and reversed over a list, consumed across awaits; the list changes between."""
    loot = ["a", "b", "c", "d"]
    en = enumerate(loot, start=n)
    rv = reversed(loot)
    first = next(en), next(rv)
    await timer("t", 1)
    loot[1] = "B"
    await timer("t", 1)
    return first, list(en), list(rv)


add(enumerate_reversed_iter, C(1))


@workflow
async def list_iterator_live(n):
    """A plain list iterator over a list that grows across an await (it follows the list)."""
    wave = ["rat", "bat"]
    it = iter(wave)
    first = next(it)
    await timer("t", 1)
    wave.append("boss")
    await timer("t", 1)
    return first, list(it), n


add(list_iterator_live, C(1))


@workflow
async def itertools_accumulate_product(n):
    """accumulate, product and permutations objects across awaits."""
    acc = itertools.accumulate([1, 2, 3, 4, n])
    prod = itertools.product("ab", repeat=2)
    perm = itertools.permutations("xyz", 2)
    first = (next(acc), next(prod), next(perm))
    await timer("t", 1)
    return first, list(acc), list(prod), list(perm)


add_itertools(itertools_accumulate_product, C(1))


@workflow
async def itertools_repeat_takewhile(n):
    """repeat, takewhile, dropwhile, zip_longest, starmap and compress objects across awaits."""
    rep = itertools.repeat("wave", n + 2)
    tw = itertools.takewhile(lambda v: v < 3, [1, 2, 3, 1])
    zl = itertools.zip_longest("ab", "xyz", fillvalue="-")
    sm = itertools.starmap(pow, [(2, 3), (3, 2)])
    cp = itertools.compress("abcdef", [1, 0, 1, 0, 1, 1])
    first = (next(rep), next(zl), next(sm), next(cp))
    await timer("t", 1)
    return first, list(rep), list(tw), list(zl), list(sm), list(cp)


add_itertools(itertools_repeat_takewhile, C(1))


@workflow
async def tee_split_stream(n):
    """itertools.tee splitting one spawn stream into two consumers across awaits."""
    a, b = itertools.tee(iter([1, 2, 3, n]))
    first = next(a)
    await timer("t", 1)
    second = next(b), next(a)
    await timer("t", 1)
    return first, second, list(a), list(b)


add_itertools(tee_split_stream, C(1))


@workflow
async def deque_rotation_turns(n):
    """A turn order kept in a deque, rotated each round; a second name for it."""
    order = deque(["ann", "bob", "cy"])
    alias = order
    turns = []
    for _ in range(n + 3):
        await timer("t", 1)
        turns.append(order[0])
        order.rotate(-1)
    return turns, list(alias), alias is order


add(deque_rotation_turns, C(1))


@workflow
async def exception_kept_for_report(n):
    """An exception caught and kept across awaits, then re-raised with a note."""
    try:
        {"a": 1}["b" * n]
    except KeyError as e:
        err = e
    await timer("t", 1)
    err.add_note(f"wave {n}")
    await timer("t", 1)
    log((err.args, err.__notes__))
    raise err


add(exception_kept_for_report, C(1, raises=KeyError))


@workflow
async def exception_group_of_failures(n):
    """An ExceptionGroup of per-player failures built across awaits."""
    errs = []
    for i in range(n + 1):
        await timer("t", 1)
        errs.append(ValueError(f"player {i}"))
    eg = ExceptionGroup("wave failed", errs)
    await timer("t", 1)
    match, rest = eg.split(lambda e: "0" in str(e))
    return len(eg.exceptions), str(match.exceptions[0]), rest is None or len(rest.exceptions)


add(exception_group_of_failures, C(1))


@workflow
async def dict_views_over_inventory(n):
    """A keys view and an items view of the inventory, set operations after restore."""
    inv = {"sword": 1, "gem": n}
    keys = inv.keys()
    items = inv.items()
    await timer("t", 1)
    inv["bow"] = 2
    await timer("t", 1)
    return sorted(keys & {"bow", "axe"}), sorted(items), len(keys)


add(dict_views_over_inventory, C(1))


@workflow
async def sentinel_and_none_defaults(n):
    """A local sentinel object compared by identity across awaits."""
    missing = object()
    slots = [missing] * 3
    await timer("t", 1)
    slots[n] = "potion"
    await timer("t", 1)
    return [s is missing for s in slots], slots.count(missing)


add(sentinel_and_none_defaults, C(1), C(2))


# ---------------------------------------------------------------------------------------------
# An instance's __dict__ held apart from it


class Character:
    """A plain module class; its stats are edited through ``vars(self)``."""

    def __init__(self, name, **stats):
        self.name = name
        vars(self).update(stats)


class Hybrid:
    """A class with both __slots__ and a __dict__."""

    __slots__ = ("level", "__dict__")

    def __init__(self, level):
        self.level = level


@workflow
async def stats_edited_through_vars(n):
    """A character sheet edited through vars(hero) across awaits: the sheet is the hero's dict."""
    hero = Character("ann", str=5, dex=3)
    sheet = vars(hero)
    for _ in range(2):
        stat = await signal("train") or "str"
        sheet[stat] = sheet.get(stat, 0) + n
        await timer("rest", 1)
    hero.title = "veteran"
    log((sheet is vars(hero), sorted(sheet)))
    return hero.str, hero.dex, getattr(hero, "luck", None), sheet.get("title")


add(stats_edited_through_vars, C(1, signals={"train": ["dex", "luck"]}))


@workflow
async def local_class_dict_in_a_list(n):
    """The __dict__ of an instance of a workflow class, kept in a list with the instance."""

    class Chest:
        def __init__(self):
            self.gold = 0

    chest = Chest()
    held = [chest.__dict__, chest]
    await timer("t", 1)
    held[0]["gold"] += n
    await timer("t", 1)
    chest.gem = 1
    return chest.gold, held[0], held[0] is vars(held[1])


add(local_class_dict_in_a_list, C(2))


@workflow
async def slots_and_dict_instance_vars(n):
    """vars() of an instance with both slots and a __dict__: slots stay slots, the dict is one."""
    h = Hybrid(n)
    extra = vars(h)
    extra["aura"] = "fire"
    await timer("t", 1)
    extra["aura"] = "ice"
    h.level += 1
    await timer("t", 1)
    return h.aura, h.level, "level" in extra, extra is h.__dict__


add(slots_and_dict_instance_vars, C(1))


@workflow
async def namespace_config_vars(n):
    """vars() of a SimpleNamespace config across an await: its __dict__ cannot be assigned, and
    the held dict comes back as the restored namespace's own all the same."""
    import types as _types

    cfg = _types.SimpleNamespace(difficulty="easy", waves=n)
    snap = vars(cfg)
    await timer("t", 1)
    cfg.waves += 1
    return snap["waves"], snap is vars(cfg)


add(namespace_config_vars, C(1))


# ---------------------------------------------------------------------------------------------
# A class the workflow makes registers itself in module data (__init_subclass__)


class Ability:
    """Every subclass registers itself, as plugin systems do."""

    registered: list = []

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        Ability.registered.append(cls)


@workflow
async def ability_registers_itself(n):
    """A workflow-made Ability subclass is in the module's registry once, as itself."""
    del Ability.registered[:]

    class Fireball(Ability):
        power = n

    await timer("t", 1)
    count = sum(1 for c in Ability.registered if c.__name__ == "Fireball")
    return count, Ability.registered[-1] is Fireball, Fireball.power


add(ability_registers_itself, C(1))


# ---------------------------------------------------------------------------------------------
# Subclasses of standard containers with attributes of their own


class LootBag(Counter):
    """A Counter with an owner (Counter's own reduce leaves the owner out)."""

    def __init__(self, owner, *args, **kw):
        super().__init__(*args, **kw)
        self.owner = owner


class Roster(defaultdict):
    """A defaultdict of team lists with a season tag."""


@workflow
async def loot_bag_keeps_its_owner(n):
    """A Counter subclass and a defaultdict subclass with attributes across awaits."""
    bag = LootBag("ann", gold=n)
    roster = Roster(list)
    roster.season = 3
    for _ in range(2):
        item = await signal("loot") or "gem"
        bag[item] += 1
        roster["red"].append(item)
        await timer("t", 1)
    bag.owner = bag.owner.upper()
    return dict(bag), bag.owner, dict(roster), roster.season, type(bag).__name__


add(loot_bag_keeps_its_owner, C(2, signals={"loot": ["sword"]}))
