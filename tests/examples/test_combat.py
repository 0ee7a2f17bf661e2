"""Combat, respawn and patrol, with the damage they leave in the world."""

from __future__ import annotations

from actors import Status
from examples.combat import combat, guard_instinct, patrol, respawn
from examples.world import calculate_damage

from .support import T, only_running, running


def roll(attacker, defender, key, defending=False):
    """What the damage procedure rolls: deterministic, so the test can predict it."""
    return calculate_damage(attacker, defender, key, defending)["damage"]


def test_attacks_until_victory(system, view):
    """Each attack hurts the enemy and the enemy strikes back, until the enemy falls."""
    ref = system.start(combat, "alice", "wolf-1", id="fight-1", test_mode=True)
    system.idle(timeout=T)
    dealt = taken = 0
    for turn in range(1, 20):
        ref.debug_send_signal("attack")
        system.idle(timeout=T)
        dealt += roll("alice", "wolf-1", f"fight-1:{turn}:player")
        if dealt >= 30:
            break
        taken += roll("wolf-1", "alice", f"fight-1:{turn}:enemy")
        assert view.hp("alice") == 100 - taken
        ref.debug_fire_timer("anim_delay")
        system.idle(timeout=T)
    assert ref.result(timeout=T) == "victory"
    assert view.hp("wolf-1") == 0
    assert view.value("SELECT status FROM world_characters WHERE id = 'wolf-1'") == "dead"
    assert view.hp("alice") == 100 - taken
    assert view.effects("wolf-1")[-1] == "death"


def test_flee_ends_the_fight(system, view):
    """Fleeing ends the fight with nobody hurt."""
    ref = system.start(combat, "alice", "wolf-1", test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("flee")
    assert ref.result(timeout=T) == "fled"
    assert view.hp("alice") == 100 and view.hp("wolf-1") == 30
    assert view.effects("alice") == ["flee"]


def test_a_player_who_does_not_act_defends(system, view):
    """When the turn times out the player defends, and the enemy's hit is halved."""
    ref = system.start(combat, "alice", "wolf-1", id="fight-2", test_mode=True)
    system.idle(timeout=T)
    ref.debug_fire_timer("turn_timeout")
    system.idle(timeout=T)
    halved = roll("wolf-1", "alice", "fight-2:1:enemy", True)
    assert halved <= roll("wolf-1", "alice", "fight-2:1:enemy") // 2 + 1
    assert view.hp("alice") == 100 - halved
    assert view.effects("alice")[0] == "defend"
    assert ref.status() is Status.RUNNING


def test_defeat_on_the_virtual_clock(system, clock, view):
    """A player who never acts keeps defending as each 30 s turn times out, and finally falls."""
    ref = system.start(combat, "carol", "dragon", id="fight-3")
    system.idle(timeout=T)
    taken, turn = 0, 0
    while taken < 100:
        turn += 1
        clock.advance(30)
        system.idle(timeout=T)
        taken += roll("dragon", "carol", f"fight-3:{turn}:enemy", True)
        assert view.hp("carol") == max(0, 100 - taken)
        clock.advance(0.3)
        system.idle(timeout=T)
    assert ref.result(timeout=T) == "defeat"
    assert view.value("SELECT status FROM world_characters WHERE id = 'carol'") == "dead"
    assert view.hp("dragon") == 1000


def test_respawn_brings_the_entity_back_at_full_health(system, view):
    """After its delay, respawn puts the entity back in the world at full health."""
    ref = system.start(respawn, "wolf-7", "wolf", "forest", 60, test_mode=True)
    system.idle(timeout=T)
    assert view.hp("wolf-7") is None
    ref.debug_fire_timer("spawn")
    assert ref.result(timeout=T) == "wolf-7"
    assert view.rows("SELECT hp, room, status FROM world_characters WHERE id = 'wolf-7'") == [
        (30, "forest", "alive")
    ]


def test_patrol_walks_fights_and_goes_home(system, view):
    """A threat interrupts the walk with a fight child; afterwards the guard walks home."""
    waypoints = [{"room": "gate", "travel": 10}, {"room": "bridge", "travel": 20}]
    ref = system.start(patrol, "guard-1", waypoints, "barracks", id="patrol-1", test_mode=True)
    system.idle(timeout=T)
    ref.debug_fire_timer("start_patrol")
    system.idle(timeout=T)
    room = "SELECT room FROM world_characters WHERE id = 'guard-1'"
    assert view.value(room) == "gate"
    ref.debug_fire_timer("arrival")
    system.idle(timeout=T)
    ref.debug_fire_timer("wait")
    system.idle(timeout=T)
    assert view.value(room) == "bridge"

    ref.debug_send_signal("threat_detected", "wolf-1")
    system.idle(timeout=T)
    fight = only_running(system, combat)
    assert fight.id == "patrol-1:fight-1"
    instinct = only_running(system, guard_instinct)
    instinct.debug_fire_timer("swing")  # the guard's instinct attacks for it
    system.idle(timeout=T)
    assert view.hp("wolf-1") == 30 - roll("guard-1", "wolf-1", "patrol-1:fight-1:1:player")
    fight.debug_fire_timer("anim_delay")
    fight.debug_send_signal("flee")
    system.idle(timeout=T)
    assert fight.result(timeout=T) == "fled"
    # The fight ended, so the instinct lost the select and was cancelled.
    assert instinct.status() is Status.CANCELLED
    assert running(system, guard_instinct) == []
    assert view.value(room) == "barracks"

    ref.debug_fire_timer("arrival")  # home; then on to the next waypoint
    system.idle(timeout=T)
    assert view.value(room) == "gate"
    assert ref.status() is Status.RUNNING
