"""Quests (filtered subscriptions) and NPC dialog trees."""

from __future__ import annotations

from workflows import (
    Event,
    procedure,
    reducer,
    select,
    signal,
    subscribe,
    timer,
    unsubscribe,
    workflow,
)

from .world import (
    assign_quest,
    close_ui,
    get_dialog_node,
    get_quest_objectives,
    get_quest_rewards,
    grant_rewards,
    notify_player,
    show_ui,
    update_quest,
)

#: Which broadcast signal advances each kind of objective. Broadcasts are filtered by
#: ``[player, target]``, so a quest only hears about its own player's wolves.
SIGNAL_FOR = {"kill": "enemy_killed", "collect": "item_collected", "location": "location_reached"}


@workflow
async def quest(player_id: str, quest_id: str) -> dict:
    """Track one player's quest until every objective is met, or the player abandons it.

    The quest subscribes only to the events its objectives need (for example ``enemy_killed``
    with filter ``[player_id, "wolf"]``); the game broadcasts each event with
    ``system.broadcast(name, [player, target], {"target": target, "count": n})`` and only matching
    quests wake up. ``abandon`` is sent to the quest directly.
    """
    objectives = await procedure(get_quest_objectives, quest_id)
    progress = {o["id"]: 0 for o in objectives}
    for o in objectives:
        subscribe(SIGNAL_FOR[o["kind"]], [player_id, o["target"]])

    reducer(update_quest, player_id, quest_id, "active", progress)
    reducer(show_ui, player_id, "quest_tracker", {"quest": quest_id, "progress": progress})

    while True:
        match await select(
            signal("enemy_killed"),
            signal("item_collected"),
            signal("location_reached"),
            signal("abandon"),
        ):
            case Event("abandon"):
                reducer(update_quest, player_id, quest_id, "abandoned", progress)
                reducer(close_ui, player_id, "quest_tracker")
                return {"outcome": "abandoned", "progress": progress}
            case Event(name, {"target": target} as news):
                for o in objectives:
                    if SIGNAL_FOR[o["kind"]] == name and o["target"] == target:
                        progress[o["id"]] = min(o["count"], progress[o["id"]] + news.get("count", 1))
                        if progress[o["id"]] == o["count"]:
                            # Done with this objective: stop being woken by its events.
                            unsubscribe(name, [player_id, target])
                reducer(update_quest, player_id, quest_id, "active", progress)
                reducer(show_ui, player_id, "quest_tracker", {"quest": quest_id, "progress": progress})

        if all(progress[o["id"]] >= o["count"] for o in objectives):
            rewards = await procedure(get_quest_rewards, quest_id)
            reducer(grant_rewards, player_id, quest_id, rewards)
            reducer(update_quest, player_id, quest_id, "completed", progress)
            reducer(close_ui, player_id, "quest_tracker")
            return {"outcome": "completed", "rewards": rewards}


@workflow
async def npc_dialog(npc_id: str, player_id: str, start_node: str = "greeting") -> str:
    """Walk a player through an NPC's dialog tree.

    Each node's options are shown in the player's dialog panel; the player answers with the
    ``select_option`` signal (the option's index) or ``cancel``, and walks away after 60 seconds
    of silence. Returns ``"completed"``, ``"opened_shop"`` or ``"abandoned"``.
    """
    node = start_node
    while True:
        dialog = await procedure(get_dialog_node, npc_id, node)
        options = dialog["options"]
        reducer(
            show_ui,
            player_id,
            "dialog",
            {"npc": npc_id, "text": dialog["text"], "options": [o["text"] for o in options]},
        )

        match await select(timer("timeout", 60), signal("select_option"), signal("cancel")):
            case Event("timeout") | Event("cancel"):
                reducer(close_ui, player_id, "dialog")
                return "abandoned"
            case Event("select_option", int(choice)) if 0 <= choice < len(options):
                match options[choice]["action"]:
                    case ["continue", next_node]:
                        node = next_node
                    case ["give_quest", quest_id, next_node]:
                        reducer(assign_quest, player_id, quest_id)
                        node = next_node
                    case ["open_shop"]:
                        reducer(close_ui, player_id, "dialog")
                        reducer(show_ui, player_id, "shop", {"npc": npc_id})
                        return "opened_shop"
                    case ["end"]:
                        reducer(close_ui, player_id, "dialog")
                        return "completed"
            case Event("select_option", choice):
                reducer(notify_player, player_id, f"There is no option {choice!r} here.")
