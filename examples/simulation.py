"""Directors: long-running workflows that keep the demo world busy.

Each director owns one corner of the world and runs for ever, starting the game workflows as
children (an auction and its bidders, a trade and the haggling around it, a buff and whoever fiddles
with it). Because the directors are workflows too, the world keeps going across a crash exactly
where it was: a kill -9 in the middle of an auction resumes that auction, with its bids, its escrow
and its deadline, and never starts a second copy of anything.

The players' behaviour is scripted with ``random.Random(seed)`` kept in the workflow's locals: the
generator's state is saved with every checkpoint like any other local, so a director resumed after
a crash goes on drawing the numbers it would have drawn.
"""

from __future__ import annotations

import random

from workflows import (
    gather,
    procedure,
    reducer,
    send,
    spawn,
    timer,
    workflow,
    workflow_id,
)

from .buffs import buff
from .combat import patrol
from .daynight import day_night_cycle
from .economy import auction, production, trade
from .raid import boss_fight, raider
from .world import free_items, get_auction, give_item, give_resource, spawn_entity

GOODS = ["iron dagger", "silk scarf", "old map", "lucky coin", "silver ring", "bone flute"]
BUFFS = ["haste", "shield", "regeneration", "might"]


# --- auctions -------------------------------------------------------------------------------------


@workflow
async def bidder(auction_id: str, player: str, max_price: int, seed: str) -> int:
    """A scripted bidder: now and then, outbid the high bidder, up to ``max_price``.

    Reads the auction board (a procedure) and bids with ``send``. Returns the number of bids.
    """
    rng = random.Random(seed)
    bids = 0
    while True:
        await timer("think", rng.uniform(2, 12))
        board = await procedure(get_auction, auction_id)
        if board is None:
            continue
        if board["status"] != "open":
            return bids
        if board["high_bidder"] == player:
            continue
        amount = board["price"] + rng.randrange(5, 30, 5)
        if amount > max_price:
            return bids
        send(auction_id, "bid", {"bidder": player, "amount": amount})
        bids += 1


@workflow
async def auction_house(seller: str, bidders: list[str], seed: str) -> None:
    """Put one of ``seller``'s items up for auction, again and again, with a few bidders each time."""
    rng = random.Random(seed)
    me = workflow_id()
    lots = 0
    while True:
        await timer("restock", rng.uniform(5, 20))
        lots += 1
        lot = f"{me}:lot-{lots}"
        free = await procedure(free_items, seller)
        if not free:
            # Nothing left to sell: the seller crafts something new.
            reducer(give_item, lot, rng.choice(GOODS), seller)
            continue
        crowd = rng.sample(bidders, rng.randint(1, min(3, len(bidders))))
        await gather(
            spawn(auction, rng.choice(free), seller, rng.randrange(10, 60, 5), 60, id=lot),
            *[
                spawn(bidder, lot, who, rng.randrange(40, 200, 10), f"{seed}:{lots}:{who}", id=f"{lot}:{who}")
                for who in crowd
            ],
        )


# --- trades ---------------------------------------------------------------------------------------


@workflow
async def haggle(trade_id: str, player_a: str, player_b: str, plan: str, seed: str) -> str:
    """The two players' side of a trade: both accept, one cancels, or both walk away."""
    rng = random.Random(seed)
    await timer("consider", rng.uniform(3, 20))
    if plan == "deal":
        send(trade_id, "accept", player_a)
        await timer("consider", rng.uniform(1, 10))
        send(trade_id, "accept", player_b)
    elif plan == "cancel":
        send(trade_id, "cancel", rng.choice([player_a, player_b]))
    # "walk_away": say nothing; the trade gives up after 60 seconds of silence.
    return plan


@workflow
async def trade_desk(player_a: str, player_b: str, seed: str) -> None:
    """Two players who keep trading one item each, with a scripted outcome each time."""
    rng = random.Random(seed)
    me = workflow_id()
    trades = 0
    while True:
        await timer("break", rng.uniform(10, 40))
        offer_a = await procedure(free_items, player_a)
        offer_b = await procedure(free_items, player_b)
        if not offer_a or not offer_b:
            continue
        trades += 1
        trade_id = f"{me}:trade-{trades}"
        plan = rng.choice(["deal", "deal", "deal", "cancel", "walk_away"])
        await gather(
            spawn(trade, player_a, player_b, [rng.choice(offer_a)], [rng.choice(offer_b)], id=trade_id),
            spawn(haggle, trade_id, player_a, player_b, plan, f"{seed}:{trades}"),
        )


# --- guards and monsters --------------------------------------------------------------------------


@workflow
async def monster_spawner(room: str, patrol_id: str, seed: str) -> None:
    """Now and then a monster appears in ``room`` and the patrol is told about it."""
    rng = random.Random(seed)
    me = workflow_id()
    spawned = 0
    while True:
        await timer("lurk", rng.uniform(20, 90))
        spawned += 1
        kind = rng.choice(["wolf", "wolf", "bandit"])
        # A few ids per spawner, reused: a slain monster's id comes back as a new monster.
        monster = f"{me}:{kind}-{spawned % 3}"
        reducer(spawn_entity, monster, kind, room)
        send(patrol_id, "threat_detected", monster)


# --- buffs ----------------------------------------------------------------------------------------


@workflow
async def buff_fiddler(buff_id: str, seed: str) -> str:
    """Someone refreshes, stacks or dispels a buff once in its lifetime (or forgets it)."""
    rng = random.Random(seed)
    await timer("later", rng.uniform(5, 40))
    action = rng.choice(["stack", "stack", "refresh", "dispel", "nothing"])
    if action != "nothing":
        send(buff_id, action, rng.randint(1, 3))
    return action


@workflow
async def buff_caster(target: str, seed: str) -> None:
    """Keep putting buffs on ``target``, one at a time."""
    rng = random.Random(seed)
    me = workflow_id()
    casts = 0
    while True:
        await timer("cooldown", rng.uniform(5, 30))
        casts += 1
        buff_id = f"{me}:buff-{casts}"
        await gather(
            spawn(buff, target, rng.choice(BUFFS), rng.choice([20, 30, 60]), id=buff_id),
            spawn(buff_fiddler, buff_id, f"{seed}:{casts}"),
        )


# --- production -----------------------------------------------------------------------------------


@workflow
async def supply_run(entity_id: str, resource: str, production_id: str, seed: str) -> None:
    """Deliver raw materials to a production line now and then, and tell it."""
    rng = random.Random(seed)
    while True:
        await timer("deliver", rng.uniform(30, 120))
        reducer(give_resource, entity_id, resource, rng.randint(2, 6))
        send(production_id, "inventory_changed")


# --- the raid -------------------------------------------------------------------------------------


@workflow
async def raid_night(boss_id: str, members: list[str], enrage_after: float, seed: str) -> None:
    """Pull the boss with a raid, again and again, resting between attempts."""
    rng = random.Random(seed)
    me = workflow_id()
    pulls = 0
    while True:
        pulls += 1
        raid_id = f"{me}:pull-{pulls}"
        reducer(spawn_entity, boss_id, "dragon", "lair")
        await gather(
            spawn(boss_fight, boss_id, raid_id, enrage_after, id=f"{raid_id}:boss"),
            *[spawn(raider, m, raid_id, boss_id, rng.uniform(1.5, 3.0), id=f"{raid_id}:{m}") for m in members],
        )
        await timer("rest", 120)


# --- everything at once ---------------------------------------------------------------------------


def population(scale: float = 1.0) -> dict[str, list[dict]]:
    """The demo world's first inhabitants, items and stock, for ``setup_world``."""
    n_heroes = max(8, int(40 * scale))
    n_guards = max(2, int(15 * scale))
    n_smiths = max(2, int(10 * scale))
    characters = [{"id": f"hero-{i}", "template": "hero", "gold": 300} for i in range(n_heroes)]
    characters += [{"id": f"guard-{i}", "template": "guard", "room": "barracks"} for i in range(n_guards)]
    characters += [{"id": f"smith-{i}", "template": "smith", "room": "forge"} for i in range(n_smiths)]
    characters.append({"id": "dragon", "template": "dragon", "room": "lair"})
    items = [
        {"id": f"hero-{i}:item-{k}", "name": GOODS[(i + k) % len(GOODS)], "owner": f"hero-{i}"}
        for i in range(n_heroes)
        for k in range(3)
    ]
    resources = [{"owner": f"smith-{i}", "resource": "ore", "qty": 4} for i in range(n_smiths)]
    return {"characters": characters, "items": items, "resources": resources}


def directors(seed: int, scale: float = 1.0) -> list[tuple[str, object, tuple]]:
    """The world's long-running workflows as ``(fixed id, workflow, args)``.

    Fixed ids make starting them idempotent: on a restart ``system.start`` finds each one already
    in the file and starts nothing new.
    """
    pop = population(scale)
    heroes = [c["id"] for c in pop["characters"] if c["template"] == "hero"]
    guards = [c["id"] for c in pop["characters"] if c["template"] == "guard"]
    smiths = [c["id"] for c in pop["characters"] if c["template"] == "smith"]
    rooms = ["gate", "bridge", "market", "well", "mill", "orchard", "crossroads"]
    out: list[tuple[str, object, tuple]] = []
    out.append(("world-daynight", day_night_cycle, ()))
    n_houses = max(2, int(12 * scale))
    for i in range(n_houses):
        seller = heroes[i % len(heroes)]
        crowd = [h for h in heroes if h != seller][i : i + 6] or heroes[:3]
        out.append((f"auction-house-{i}", auction_house, (seller, crowd, f"{seed}:house:{i}")))
    for i in range(0, len(heroes) - 1, 4):
        out.append((f"trade-desk-{i // 4}", trade_desk, (heroes[i], heroes[i + 1], f"{seed}:desk:{i}")))
    for i, guard in enumerate(guards):
        route = [{"room": rooms[(i + k) % len(rooms)], "travel": 10 + 5 * k} for k in range(3)]
        out.append((f"patrol-{i}", patrol, (guard, route, "barracks")))
        out.append((f"spawner-{i}", monster_spawner, (route[1]["room"], f"patrol-{i}", f"{seed}:spawn:{i}")))
    for i, hero in enumerate(heroes):
        out.append((f"buffs-{hero}", buff_caster, (hero, f"{seed}:buff:{i}")))
    for i, smith in enumerate(smiths):
        out.append((f"production-{smith}", production, (smith, "smelter")))
        out.append((f"supply-{smith}", supply_run, (smith, "ore", f"production-{smith}", f"{seed}:supply:{i}")))
    out.append(("raid-night", raid_night, ("dragon", heroes[-5:], 480, f"{seed}:raid")))
    return out
