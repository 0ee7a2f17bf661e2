"""Corpus: whole programs of a game server, each written as an application would (not one
construct at a time), run natively and restored at every suspension.

- ``raid_with_phases``: phases as an Enum, a dict of player dataclasses keyed by id, a heapq of
  (time, seq, action) tuples, a seeded ``random.Random``, a damage log shared by two
  structures, closures of a module function for a cooldown, and an inline sub-workflow
  (``await phase(state)``) that suspends inside try/finally and raises back.
- ``auction_house``: bids as frozen ordered dataclasses kept sorted by ``bisect.insort``, a
  ``Counter`` of bidders, a ``defaultdict(list)`` escrow, and a ``select`` over a signal, a
  request (answered with ``reply``) and a timer.
- ``two_player_trade``: two phases with a ``match`` on ``Event``, nested ``with`` of a user context
  manager class not held across awaits, and a module's exception hierarchy with
  ``__notes__`` and ``raise X from e`` caught after an await.
"""

from __future__ import annotations

import bisect
import enum
import heapq
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from workflows import Event, reply, request, select, signal, timer, workflow

from .diffharness import C, add
from .probes import log


class Phase(enum.Enum):
    CALM = 1
    ENRAGED = 2
    DYING = 3


class BossError(Exception):
    pass


class Wipe(BossError):
    def __init__(self, who, hp):
        super().__init__(who, hp)
        self.who = who
        self.hp = hp


@dataclass
class Player:
    pid: int
    name: str
    hp: int = 100
    log: list = field(default_factory=list)


DAMAGE = {Phase.CALM: 7, Phase.ENRAGED: 13, Phase.DYING: 21}


def cooldown(period):
    ready = [0]

    def can(t):
        if t >= ready[0]:
            ready[0] = t + period
            return True
        return False

    def peek():
        return ready[0]

    return can, peek


@workflow
async def phase(state):
    boss, players, rng = state["boss"], state["players"], state["rng"]
    queue, damage_log = state["queue"], state["dlog"]
    entered = state["phase"]
    try:
        while queue:
            t, seq, action = heapq.heappop(queue)
            await timer("tick", 1)
            if action == "hit":
                pid = rng.choice(sorted(players))
                p = players[pid]
                dmg = DAMAGE[state["phase"]] + rng.randint(0, 5)
                p.hp -= dmg
                entry = (t, pid, dmg)
                damage_log.append(entry)
                p.log.append(entry)
                if p.hp <= 0:
                    del players[pid]
                    if not players:
                        raise Wipe(p.name, p.hp)
            else:
                boss["hp"] -= 30 + rng.randint(0, 9)
            if boss["hp"] < 60 and state["phase"] is Phase.CALM:
                state["phase"] = Phase.ENRAGED
                return "phase change"
            if boss["hp"] < 20:
                state["phase"] = Phase.DYING
                return "dying"
        return "queue empty"
    finally:
        state["exits"].append((entered.name, state["phase"].name, len(damage_log)))
        await timer("phase-end", 1)


@workflow
async def raid_with_phases(seed, n_players):
    rng = random.Random(seed)
    players = {i: Player(i, f"p{i}") for i in range(n_players)}
    damage_log = []
    boss = {"hp": 150, "name": "Gorath"}
    queue = []
    seq = 0
    for t in range(12):
        seq += 1
        heapq.heappush(queue, (t + rng.random(), seq, "hit" if t % 3 else "strike"))
    state = {
        "boss": boss,
        "players": players,
        "rng": rng,
        "queue": queue,
        "dlog": damage_log,
        "phase": Phase.CALM,
        "exits": [],
    }
    can_roar, roar_ready = cooldown(3)
    roars = []
    results = []
    try:
        while state["phase"] is not Phase.DYING and queue:
            ev = await select(signal("taunt"), timer("round", 2))
            match ev:
                case Event(name="taunt", value=pid) if pid in players:
                    players[pid].hp += 5
                    log(("taunt", pid, players[pid].hp))
                case Event(name="round"):
                    pass
            t = len(damage_log)
            if can_roar(t):
                roars.append((t, roar_ready()))
            results.append(await phase(state))
            log(("after phase", state["phase"].name, boss["hp"], len(players), rng.random()))
    except Wipe as e:
        e.add_note(f"boss at {boss['hp']}")
        results.append(("wipe", e.who, e.hp, e.__notes__))
    shared = all(any(e is d for d in damage_log) for p in players.values() for e in p.log)
    return (results, roars, state["exits"], boss, sorted(players), shared,
            state["phase"] is Phase.DYING, state["dlog"] is damage_log, rng.random())


add(
    raid_with_phases,
    C(1, 3),
    C(7, 2, signals={"taunt": [0, 1, 5]}, choose=["taunt", "taunt", 1]),
    C(3, 1),
    C(1, 1),
)


@dataclass(frozen=True, order=True)
class Bid:
    amount: int
    seq: int
    bidder: str


class AuctionError(Exception):
    pass


class TooLow(AuctionError):
    pass


RESERVE = {"sword": 10, "shield": 4}
NOBODY = Bid(0, 0, "nobody")


@workflow
async def auction_house(item, rounds):
    bids = [NOBODY]
    bidders = Counter()
    escrow = defaultdict(list)
    errors = []
    seq = 0
    reserve = RESERVE[item]
    best = bids[-1]
    for r in range(rounds):
        ev = await select(signal("bid"), request("status"), timer("close", 5))
        match ev:
            case Event(name="bid", value=(who, amount)):
                seq += 1
                try:
                    if amount < max(reserve, best.amount + 1):
                        raise TooLow(who, amount)
                    b = Bid(amount, seq, who)
                    bisect.insort(bids, b)
                    escrow[who].append(b)
                    bidders[who] += 1
                    best = bids[-1]
                except TooLow as e:
                    e.add_note(f"round {r}")
                    errors.append(e)
            case Event(name="status", value=req):
                reply(req, (best.bidder, best.amount, len(bids)))
                log(("status", req.payload, best.amount))
            case Event(name="close"):
                break
        log(("round", r, best.bidder, dict(bidders), sorted(escrow)))
    await timer("settle", 1)
    winner = bids[-1]
    refunds = {who: sum(b.amount for b in bs if b is not winner) for who, bs in escrow.items()}
    return (winner, winner is best, bids[0] is NOBODY, bidders.most_common(), refunds,
            [(type(e).__name__, e.args, e.__notes__) for e in errors],
            any(winner is b for bs in escrow.values() for b in bs), escrow.default_factory is list)


add(
    auction_house,
    C(
        "sword",
        6,
        signals={
            "bid": [("ann", 12), ("bob", 11), ("bob", 15), ("cid", 3)],
            "status": ["q1", "q2"],
        },
        choose=["bid", "status", "bid", "bid", "status", "bid"],
    ),
    C("shield", 3, signals={"bid": [("ann", 5)]}, choose=["bid"]),
)


class TradeError(Exception):
    code = "two_player_trade"


class Declined(TradeError):
    code = "declined"


class Fraud(TradeError):
    code = "fraud"

    def __init__(self, who, item):
        super().__init__(who, item)
        self.who = who
        self.item = item

    def __str__(self):
        return f"{self.who} does not own {self.item}"


class Ledger:
    def __init__(self, name):
        self.name = name
        self.depth = 0
        self.entries = []

    def __enter__(self):
        self.depth += 1
        self.entries.append(("open", self.name, self.depth))
        return self

    def __exit__(self, et, ev, tb):
        self.entries.append(("close", self.name, self.depth, et.__name__ if et else None))
        self.depth -= 1
        return et is Declined


INVENTORY = {"ann": ["gem", "axe"], "bob": ["gold", "bow"]}


@workflow
async def two_player_trade(offer_a, offer_b):
    inv = {k: list(v) for k, v in INVENTORY.items()}
    ann, bob = inv["ann"], inv["bob"]
    ledger = Ledger("t")
    outer = Ledger("outer")
    failure = None
    accepted = {}
    try:
        for who, offer, bag in (("ann", offer_a, ann), ("bob", offer_b, bob)):
            ev = await select(signal(f"accept_{who}"), timer("timeout", 10))
            match ev:
                case Event(name=n, value=True) if n.startswith("accept"):
                    accepted[who] = offer
                case Event(name=n, value=False) if n.startswith("accept"):
                    with outer, ledger:
                        raise Declined(who)
                case Event(kind="timer"):
                    raise TradeError("timeout", who)
            with outer:
                with ledger as lg:
                    for item in offer:
                        if item not in bag:
                            try:
                                bag.index(item)
                            except ValueError as e:
                                raise Fraud(who, item) from e
                    lg.entries.append(("checked", who, tuple(offer)))
        await timer("commit", 1)
        for item in offer_a:
            ann.remove(item)
            bob.append(item)
        for item in offer_b:
            bob.remove(item)
            ann.append(item)
    except Fraud as e:
        e.add_note("phase one")
        await timer("rollback", 1)
        e.add_note("rolled back")
        cause = type(e.__cause__).__name__
        failure = (e.code, e.who, e.item, cause, e.__notes__, e.__suppress_context__)
        try:
            raise TradeError("wrapped") from e
        except TradeError as w:
            await timer("report", 1)
            failure += (w.__cause__ is e, w.__context__ is e)
    except TradeError as e:
        await timer("abort", 1)
        failure = (e.code, e.args)
    log(("ledger", ledger.entries, outer.entries))
    return inv, ann is inv["ann"], failure, accepted, ledger.depth, outer.depth


add(two_player_trade,
    C(["gem"], ["gold"], signals={"accept_ann": [True], "accept_bob": [True]}, choose=[0, 0]),
    C(["gem"], ["silver"], signals={"accept_ann": [True], "accept_bob": [True]}, choose=[0, 0]),
    C(["axe"], ["bow"], signals={"accept_ann": [True], "accept_bob": [False]}, choose=[0, 0]),
    C(["axe"], ["bow"], signals={"accept_ann": [True]}, choose=[0, 1]))


class CannotAfford(Exception):
    """The usual shape of an application's error: a message made of its arguments, which it
    keeps as attributes (one with a default)."""

    def __init__(self, who, price, gold=0):
        super().__init__(f"{who} needs {price} gold, has {gold}")
        self.who, self.price, self.gold = who, price, gold


class OutOfStock(Exception):
    def __init__(self, item, shop):
        super().__init__(f"{shop} has no {item}")
        self.item = item


@workflow
async def shop_refusal(gold, wants):
    refusals = []
    for item, price in wants:
        try:
            if price > gold:
                raise CannotAfford("ann", price, gold)
            if item == "dragon":
                raise OutOfStock(item, "smithy")
            gold -= price
        except (CannotAfford, OutOfStock) as e:
            e.add_note(f"while buying {item}")
            refusals.append(e)
            await timer(f"retry_{item}", 1)  # both kinds held across the await
            log(("refused", str(e), e.args, vars(e)))
    return gold, [(type(e).__name__, str(e), e.args, e.__notes__) for e in refusals]


add(shop_refusal,
    C(10, [("bread", 2), ("sword", 50), ("dragon", 1), ("ale", 3)]),
    C(100, [("dragon", 1)]))
