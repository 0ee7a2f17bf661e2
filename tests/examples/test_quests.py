"""Quests (filtered broadcasts) and NPC dialog trees."""

from __future__ import annotations

import json

from actors import Status
from examples.combat import combat
from examples.quests import npc_dialog, quest
from examples.world import calculate_damage

from .support import T


def journal(view, player, quest_id):
    row = view.rows("SELECT status, progress FROM world_quests WHERE player = ? AND quest = ?", player, quest_id)
    return (row[0][0], json.loads(row[0][1])) if row else None


def test_quest_completes_from_filtered_broadcasts(system, view):
    """Only broadcasts matching the quest's [player, target] filters reach it; rewards are granted."""
    ref = system.start(quest, "alice", "wolf_cull", test_mode=True)
    system.idle(timeout=T)
    assert journal(view, "alice", "wolf_cull") == ("active", {"wolves": 0, "mill": 0})

    # Bob's wolves and Alice's bandits are not Alice's wolf quest's business.
    assert system.broadcast("enemy_killed", ["bob", "wolf"], {"target": "wolf"}) == 0
    assert system.broadcast("enemy_killed", ["alice", "bandit"], {"target": "bandit"}) == 0
    for _ in range(3):
        assert system.broadcast("enemy_killed", ["alice", "wolf"], {"target": "wolf"}) == 1
        system.idle(timeout=T)
    assert journal(view, "alice", "wolf_cull") == ("active", {"wolves": 3, "mill": 0})
    # The wolves objective is done, so the quest unsubscribed from it.
    assert system.broadcast("enemy_killed", ["alice", "wolf"], {"target": "wolf"}) == 0

    system.broadcast("location_reached", ["alice", "old_mill"], {"target": "old_mill"})
    result = ref.result(timeout=T)
    assert result == {"outcome": "completed", "rewards": {"gold": 50, "items": ["wolfskin cloak"]}}
    assert journal(view, "alice", "wolf_cull") == ("completed", {"wolves": 3, "mill": 1})
    assert view.gold("alice") == 550
    assert view.owner("alice:wolf_cull:0") == "alice"
    assert view.rows("SELECT * FROM world_ui WHERE player = 'alice' AND panel = 'quest_tracker'") == []
    view.assert_gold_conserved()


def test_collect_objective_counts_the_payload(system, view):
    """A collect event carries a count; progress never passes the objective's target."""
    ref = system.start(quest, "bob", "herbalist", test_mode=True)
    system.idle(timeout=T)
    system.broadcast("item_collected", ["bob", "moonleaf"], {"target": "moonleaf", "count": 5})
    assert ref.result(timeout=T)["outcome"] == "completed"
    assert journal(view, "bob", "herbalist") == ("completed", {"herbs": 2})


def test_abandon_closes_the_tracker_and_keeps_progress(system, view):
    """Abandoning ends the quest with no reward and records how far it got."""
    ref = system.start(quest, "alice", "wolf_cull", test_mode=True)
    system.idle(timeout=T)
    system.broadcast("enemy_killed", ["alice", "wolf"], {"target": "wolf"})
    system.idle(timeout=T)
    ref.debug_send_signal("abandon")
    assert ref.result(timeout=T) == {"outcome": "abandoned", "progress": {"wolves": 1, "mill": 0}}
    assert journal(view, "alice", "wolf_cull") == ("abandoned", {"wolves": 1, "mill": 0})
    assert view.gold("alice") == 500


def test_a_won_fight_advances_the_quest(system, view):
    """Combat broadcasts the kill as [player, template], which is exactly what the quest hears."""
    q = system.start(quest, "alice", "wolf_cull", id="q", test_mode=True)
    fight = system.start(combat, "alice", "wolf-1", id="f", test_mode=True)
    system.idle(timeout=T)
    dealt, turn = 0, 0
    while True:
        turn += 1
        fight.debug_send_signal("attack")
        system.idle(timeout=T)
        dealt += calculate_damage("alice", "wolf-1", f"f:{turn}:player")["damage"]
        if dealt >= 30:
            break
        fight.debug_fire_timer("anim_delay")
        system.idle(timeout=T)
    assert fight.result(timeout=T) == "victory"
    system.idle(timeout=T)
    assert journal(view, "alice", "wolf_cull") == ("active", {"wolves": 1, "mill": 0})
    assert q.status() is Status.RUNNING


def dialog_panel(view, player):
    rows = view.rows("SELECT content FROM world_ui WHERE player = ? AND panel = 'dialog'", player)
    return json.loads(rows[0][0]) if rows else None


def test_dialog_gives_a_quest_and_ends(system, view):
    """Walking the tree to 'I will do it' assigns the quest; 'Farewell' closes the dialog."""
    ref = system.start(npc_dialog, "elder", "bob", test_mode=True)
    system.idle(timeout=T)
    assert dialog_panel(view, "bob")["text"].startswith("Welcome")
    ref.debug_send_signal("select_option", 0)  # Is there work for me?
    system.idle(timeout=T)
    assert dialog_panel(view, "bob")["options"] == ["I will do it.", "Tell me again."]
    ref.debug_send_signal("select_option", 0)  # I will do it.
    system.idle(timeout=T)
    assert journal(view, "bob", "wolf_cull") == ("assigned", {})
    ref.debug_send_signal("select_option", 0)  # Farewell.
    assert ref.result(timeout=T) == "completed"
    assert dialog_panel(view, "bob") is None


def test_dialog_opens_the_shop(system, view):
    """The shop option closes the dialog and opens the shop panel."""
    ref = system.start(npc_dialog, "elder", "bob", test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("select_option", 1)
    assert ref.result(timeout=T) == "opened_shop"
    assert view.rows("SELECT panel FROM world_ui WHERE player = 'bob'") == [("shop",)]


def test_dialog_rejects_a_bad_option_and_times_out(system, view):
    """An out-of-range option is refused with a notice; silence ends the dialog."""
    ref = system.start(npc_dialog, "elder", "carol", test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("select_option", 7)
    system.idle(timeout=T)
    assert view.notifications("carol") == ["There is no option 7 here."]
    assert ref.status() is Status.RUNNING
    ref.debug_fire_timer("timeout")
    assert ref.result(timeout=T) == "abandoned"
    assert dialog_panel(view, "carol") is None
