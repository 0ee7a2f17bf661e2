"""A boss fight in four phases, with adds spawned as children and a real enrage deadline."""

from __future__ import annotations

from workflows import (
    Event,
    broadcast,
    gather,
    now,
    procedure,
    reducer,
    select,
    signal,
    spawn,
    subscribe,
    timer,
    workflow,
    workflow_id,
)

from .world import (
    announce,
    apply_damage,
    calculate_damage,
    cast_fire_breath,
    despawn_entity,
    end_raid,
    generate_loot,
    get_health_pct,
    increase_boss_damage,
    pick_target,
    set_boss_immune,
    set_boss_phase,
    spawn_effect,
    spawn_entity,
    spawn_loot_chest,
    start_raid,
    trigger_wipe,
)


def add_ids(boss_id: str) -> list[str]:
    """The ids of the two adds ``boss_id`` summons in phase 2."""
    return [f"{boss_id}:add-left", f"{boss_id}:add-right"]


@workflow
async def hold_until(boss_id: str, threshold: int, enrage_at: float, breath_every: float | None = None) -> str:
    """Fight one phase: until the boss's health drops to ``threshold`` percent.

    Returns ``"next"`` when it has, ``"enrage"`` if the enrage deadline came first, ``"wipe"`` if
    the raid was wiped. ``boss_fight`` awaits it directly, so it runs inline, in the boss's own
    workflow, with the boss's subscriptions. Both timers are deadlines (``at=``): a stream of
    health updates must not keep pushing the enrage or the next fire breath back.
    """
    next_breath = None if breath_every is None else now() + breath_every
    while True:
        arms = [timer("enrage", at=enrage_at), signal("health_changed"), signal("raid_wipe")]
        if next_breath is not None:
            arms.append(timer("fire_breath", at=next_breath))
        match await select(*arms):
            case Event("enrage"):
                return "enrage"
            case Event("raid_wipe"):
                return "wipe"
            case Event("fire_breath"):
                reducer(cast_fire_breath, boss_id)
                next_breath += breath_every
            case Event("health_changed", {"hp_pct": hp}) if hp <= threshold:
                return "next"


@workflow
async def boss_add(add_id: str, raid_id: str, side: str, enrage_at: float) -> str:
    """One of the boss's adds: lives until it is killed, the raid wipes, or the boss enrages."""
    reducer(spawn_entity, add_id, "whelp", f"lair-{side}")
    subscribe("health_changed", add_id)
    subscribe("raid_wipe", raid_id)
    while True:
        match await select(timer("enrage", at=enrage_at), signal("health_changed"), signal("raid_wipe")):
            case Event("health_changed", {"hp_pct": hp}) if hp <= 0:
                reducer(spawn_effect, add_id, "death")
                return "killed"
            case Event("enrage"):
                reducer(despawn_entity, add_id)  # it flies off with its master's victory
                return "enraged"
            case Event("raid_wipe"):
                reducer(despawn_entity, add_id)
                return "wipe"


@workflow
async def boss_fight(boss_id: str, raid_id: str, enrage_after: float = 480) -> dict:
    """Fight a boss through four phases before the enrage deadline.

    The boss hears ``health_changed`` broadcasts filtered by its own id (payload
    ``{"hp_pct": n}``) and ``raid_wipe`` filtered by the raid's id. Phase 1 lasts down to 70%;
    phase 2 makes the boss immune and summons two adds (children, fought at the same time with
    ``gather``); phase 3 breathes fire every 15 seconds down to 30%; phase 4 is the burn to 0.
    Returns ``{"outcome": "victory", "loot": ...}`` or ``{"outcome": "wipe", "reason": ...}``.
    """
    subscribe("health_changed", boss_id)
    subscribe("raid_wipe", raid_id)
    enrage_at = now() + enrage_after
    reducer(start_raid, raid_id, boss_id)

    reducer(announce, "Phase 1: The boss awakens!")
    reducer(set_boss_phase, boss_id, 1)
    outcome = await hold_until(boss_id, 70, enrage_at)

    if outcome == "next":
        reducer(announce, "Phase 2: Minions, attack!")
        reducer(set_boss_phase, boss_id, 2)
        reducer(set_boss_immune, boss_id, True)
        left, right = add_ids(boss_id)
        adds = await gather(
            spawn(boss_add, left, raid_id, "left", enrage_at),
            spawn(boss_add, right, raid_id, "right", enrage_at),
        )
        reducer(set_boss_immune, boss_id, False)
        if adds != ["killed", "killed"]:
            outcome = "enrage" if "enraged" in adds else "wipe"

    if outcome == "next":
        reducer(announce, "Phase 3: Flames erupt!")
        reducer(set_boss_phase, boss_id, 3)
        outcome = await hold_until(boss_id, 30, enrage_at, 15)

    if outcome == "next":
        reducer(announce, "Phase 4: Finish him!")
        reducer(set_boss_phase, boss_id, 4)
        reducer(increase_boss_damage, boss_id, 50)
        outcome = await hold_until(boss_id, 0, enrage_at)

    if outcome == "enrage":
        reducer(trigger_wipe, raid_id, "Enrage")
        return {"outcome": "wipe", "reason": "enrage"}
    if outcome == "wipe":
        reducer(end_raid, raid_id, "wiped", "the raid fell")
        return {"outcome": "wipe", "reason": "raid fell"}

    reducer(announce, "Victory!")
    loot = await procedure(generate_loot, boss_id, raid_id)
    reducer(spawn_loot_chest, boss_id, loot)
    reducer(end_raid, raid_id, "victory")
    return {"outcome": "victory", "loot": loot}


@workflow
async def raider(player_id: str, raid_id: str, boss_id: str, swing_secs: float) -> int:
    """A raid member: hit the adds, then the boss, every ``swing_secs``, until the fight is over.

    Each hit is a reducer (the damage) and a broadcast of the target's new health, which is what
    moves the boss fight from phase to phase. Returns the number of hits.
    """
    hits = swings = 0
    while True:
        await timer("swing", swing_secs)
        target = await procedure(pick_target, raid_id, boss_id, add_ids(boss_id))
        if target is None:
            return hits
        swings += 1
        hit = await procedure(calculate_damage, player_id, target, f"{workflow_id()}:{swings}")
        if not hit["damage"]:
            continue  # the target left the fight before the blow landed
        hits += 1
        reducer(apply_damage, target, hit["damage"])
        reducer(spawn_effect, target, "crit" if hit["crit"] else "hit")
        # Read the health back after this step's damage has committed, and tell whoever listens.
        broadcast("health_changed", target, {"hp_pct": await procedure(get_health_pct, target)})
