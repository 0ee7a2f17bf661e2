"""The boss fight: phases driven by filtered broadcasts, adds as children, a real enrage deadline."""

from __future__ import annotations

import json

from actors import Status
from examples.raid import add_ids, boss_add, boss_fight, raider
from examples.world import generate_loot

from .support import T, running


def boss(view):
    return view.rows("SELECT phase, immune, damage_bonus FROM world_characters WHERE id = 'dragon'")[0]


def raid_status(view, raid_id):
    return view.value("SELECT status FROM world_raids WHERE id = ?", raid_id)


def health(system, target, pct):
    """What a raider does after a hit: broadcast the target's health to whoever listens."""
    n = system.broadcast("health_changed", target, {"hp_pct": pct})
    system.idle(timeout=T)
    return n


def test_boss_fight_through_all_four_phases(system, view):
    """Health broadcasts move the boss from phase to phase; killing both adds ends phase 2; victory drops loot."""
    ref = system.start(boss_fight, "dragon", "raid-1", id="boss-1", test_mode=True)
    system.idle(timeout=T)
    assert boss(view) == (1, 0, 0)
    assert raid_status(view, "raid-1") == "fighting"

    assert health(system, "dragon", 85) == 1
    assert boss(view)[0] == 1
    health(system, "dragon", 70)
    assert boss(view) == (2, 1, 0)  # phase 2: immune while the adds live
    adds = running(system, boss_add)
    assert sorted(a.info().parent_id for a in adds) == ["boss-1", "boss-1"]
    left, right = add_ids("dragon")
    assert view.rows("SELECT id FROM world_characters WHERE kind = 'add' ORDER BY id") == [(left,), (right,)]

    health(system, left, 0)
    assert boss(view)[0] == 2 and ref.status() is Status.RUNNING
    health(system, right, 0)
    assert boss(view) == (3, 0, 0)

    ref.debug_fire_timer("fire_breath")
    system.idle(timeout=T)
    assert view.effects("dragon").count("fire_breath") == 1
    health(system, "dragon", 30)
    assert boss(view) == (4, 0, 12)  # +50% of its 25 attack
    health(system, "dragon", 0)

    result = ref.result(timeout=T)
    assert result == {"outcome": "victory", "loot": generate_loot("dragon", "raid-1")}
    chest = view.rows("SELECT gold, items FROM world_loot WHERE boss_id = 'dragon'")
    assert chest == [(result["loot"]["gold"], json.dumps(result["loot"]["items"]))]
    assert raid_status(view, "raid-1") == "victory"
    # A finished workflow's subscriptions are gone.
    assert system.broadcast("health_changed", "dragon", {"hp_pct": 0}) == 0


def test_a_wipe_during_the_adds_ends_the_fight(system, view):
    """A raid_wipe broadcast reaches the boss's adds (children) as well; the boss reports a wipe."""
    ref = system.start(boss_fight, "dragon", "raid-2", test_mode=True)
    system.idle(timeout=T)
    health(system, "dragon", 60)
    assert len(running(system, boss_add)) == 2
    # The boss and both adds are subscribed; the boss holds it in its inbox while it awaits the adds.
    assert system.broadcast("raid_wipe", "raid-2", {}) == 3
    assert ref.result(timeout=T) == {"outcome": "wipe", "reason": "raid fell"}
    assert raid_status(view, "raid-2") == "wiped"
    assert running(system, boss_add) == []


def test_enrage_is_a_deadline_that_health_updates_do_not_push_back(system, clock, view):
    """On the clock the boss enrages 480 s after the pull, however many signals arrived meanwhile."""
    ref = system.start(boss_fight, "dragon", "raid-3")
    system.idle(timeout=T)
    for pct in (95, 90, 85, 80):
        clock.advance(100)
        health(system, "dragon", pct)
    assert ref.status() is Status.RUNNING
    clock.advance(79)  # 479 s
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(1)
    system.idle(timeout=T)
    assert ref.result(timeout=T) == {"outcome": "wipe", "reason": "enrage"}
    assert view.rows("SELECT status, reason FROM world_raids WHERE id = 'raid-3'") == [("wiped", "Enrage")]


def test_fire_breath_every_15_seconds_in_phase_3(system, clock, view):
    """The fire breath is a deadline too: it keeps its 15 s rhythm while health updates stream in."""
    ref = system.start(boss_fight, "dragon", "raid-4")
    system.idle(timeout=T)
    health(system, "dragon", 65)
    for add in add_ids("dragon"):
        health(system, add, 0)
    assert boss(view)[0] == 3
    for step in range(1, 4):
        clock.advance(10)
        health(system, "dragon", 60 - step)
        clock.advance(5)
        system.idle(timeout=T)
        assert view.effects("dragon").count("fire_breath") == step
    assert ref.status() is Status.RUNNING


def test_raiders_fight_until_the_boss_enrages(system, clock, view):
    """Raiders hit the boss on their own timers and stop when the raid is over."""
    boss_ref = system.start(boss_fight, "dragon", "raid-5", 60, id="boss-5")
    members = [system.start(raider, p, "raid-5", "dragon", 2.0, id=f"raider-{p}") for p in ("alice", "bob")]
    system.idle(timeout=T)
    for _ in range(31):
        clock.advance(2)
        system.idle(timeout=T)
    assert boss_ref.result(timeout=T) == {"outcome": "wipe", "reason": "enrage"}
    clock.advance(2)
    system.idle(timeout=T)
    hits = [m.result(timeout=T) for m in members]
    assert all(h >= 25 for h in hits), hits
    assert view.hp("dragon") < 1000
    assert view.value("SELECT COUNT(*) FROM world_effects WHERE effect IN ('hit', 'crit')") == sum(hits)
