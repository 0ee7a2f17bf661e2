"""Combat, and the guards who patrol, fight and come back from the dead."""

from __future__ import annotations

from workflows import (
    Event,
    broadcast,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    timer,
    workflow,
    workflow_id,
)

from .world import (
    apply_damage,
    calculate_damage,
    get_combatant_stats,
    move_to,
    spawn_effect,
    spawn_entity,
)


@workflow
async def combat(player_id: str, enemy_id: str) -> str:
    """Fight turn by turn until one side falls or the player flees.

    Each turn the player attacks, defends or flees (signals ``attack``, ``defend``, ``flee``); a
    player who does nothing for 30 seconds defends. Then the enemy strikes back. Returns
    ``"victory"``, ``"defeat"`` or ``"fled"``. A victory broadcasts ``enemy_killed`` filtered by
    ``[player, enemy template]``, which is how quests hear about it.
    """
    player = await procedure(get_combatant_stats, player_id)
    enemy = await procedure(get_combatant_stats, enemy_id)
    player_hp, enemy_hp = player["hp"], enemy["hp"]
    # Rolls are named by fight and turn, so a retried damage procedure rolls the same number.
    fight = workflow_id()
    turn = 0

    while True:
        turn += 1
        defending = False
        match await select(
            timer("turn_timeout", 30), signal("attack"), signal("defend"), signal("flee")
        ):
            case Event("attack"):
                hit = await procedure(calculate_damage, player_id, enemy_id, f"{fight}:{turn}:player")
                reducer(apply_damage, enemy_id, hit["damage"])
                reducer(spawn_effect, enemy_id, "crit" if hit["crit"] else "hit")
                enemy_hp -= hit["damage"]
                if enemy_hp <= 0:
                    reducer(spawn_effect, enemy_id, "death")
                    broadcast(
                        "enemy_killed",
                        [player_id, enemy["template"]],
                        {"target": enemy["template"], "enemy": enemy_id},
                    )
                    return "victory"
            case Event("defend") | Event("turn_timeout"):
                defending = True
                reducer(spawn_effect, player_id, "defend")
            case Event("flee"):
                reducer(spawn_effect, player_id, "flee")
                return "fled"

        hit = await procedure(
            calculate_damage, enemy_id, player_id, f"{fight}:{turn}:enemy", defending
        )
        reducer(apply_damage, player_id, hit["damage"])
        reducer(spawn_effect, player_id, "crit" if hit["crit"] else "hit")
        player_hp -= hit["damage"]

        # Let the animation play before the next turn.
        await timer("anim_delay", 0.3)
        if player_hp <= 0:
            reducer(spawn_effect, player_id, "death")
            return "defeat"


@workflow
async def respawn(entity_id: str, template: str, room: str, delay_secs: float) -> str:
    """After ``delay_secs``, bring ``entity_id`` back at full health in ``room``."""
    await timer("spawn", delay_secs)
    reducer(spawn_entity, entity_id, template, room)
    return entity_id


@workflow
async def guard_instinct(fight_id: str, swing_secs: float) -> None:
    """An NPC's side of a fight: attack every ``swing_secs`` until the fight ends.

    It never returns by itself; the patrol runs it as the losing arm of a ``select`` against the
    fight, so it is cancelled the moment the fight is over.
    """
    while True:
        await timer("swing", swing_secs)
        send(fight_id, "attack")


@workflow
async def patrol(guard_id: str, waypoints: list[dict], home: str) -> None:
    """Walk a guard along ``waypoints`` for ever, fighting whatever threat is signalled.

    Each waypoint is ``{"room": str, "travel": seconds}``. A ``threat_detected`` signal (payload:
    the enemy's id) interrupts the walk: the guard fights (a ``combat`` child, with the guard's
    instinct attacking for it), is respawned at home if it lost, walks home, and goes on to the
    next waypoint. The loop never ends and that is fine: a step resumes from the saved locals, not
    by replaying history, so a patrol that ran for a month costs what one that ran for a minute
    costs.
    """
    await timer("start_patrol", 2)
    fights = 0
    while True:
        for waypoint in waypoints:
            reducer(move_to, guard_id, waypoint["room"])
            match await select(timer("arrival", waypoint["travel"]), signal("threat_detected")):
                case Event("threat_detected", enemy_id):
                    fights += 1
                    fight_id = f"{workflow_id()}:fight-{fights}"
                    # The instinct child loses the select when the fight ends, and is cancelled.
                    match await select(
                        spawn(combat, guard_id, enemy_id, id=fight_id),
                        spawn(guard_instinct, fight_id, 2.0),
                    ):
                        case Event("combat", "defeat"):
                            await spawn(respawn, guard_id, "guard", home, 30)
                    reducer(move_to, guard_id, home)
                    await timer("arrival", 5)
                    continue
            await timer("wait", 3)
