"""Corpus: the original design's example workflows, written in Python.

Endless workflows (patrol, production, day/night cycle) are bounded by the oracle: it cancels them
after a number of suspensions, so the case ends with ``Cancelled``.
"""

from __future__ import annotations

from workflows import (
    Cancelled,
    Event,
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

from .diffharness import C, add

# --- procedures and reducers of the examples (pure; the oracle calls procedures directly) --------


@procedure
def get_combatant_stats(entity_id):
    """Return a combatant's stats."""
    return {"health": 30 + entity_id % 7 * 5, "attack": 4 + entity_id % 3}


@procedure
def calculate_damage(attacker, defender):
    """Return the damage of one attack."""
    dmg = 5 + (attacker * 3 + defender) % 6
    return {"damage": dmg, "is_crit": dmg >= 9}


@procedure
def get_quest_objectives(quest_id):
    """Return the objectives of a quest."""
    return [("kill", "wolf", 2), ("collect", "herb", 1), ("location", "cave", 1)][: 1 + quest_id % 3]


@procedure
def get_quest_rewards(quest_id):
    """Return the rewards of a quest."""
    return {"gold": 10 * quest_id, "xp": 100}


@procedure
def check_inputs(entity_id, blueprint):
    """Return whether the inputs of a production cycle are there."""
    return (entity_id + len(blueprint["inputs"])) % 2 == 0


@procedure
def get_dialog_node(npc_id, node):
    """Return a dialog node: text and options (each an action and a next node)."""
    options = [
        {"action": ("continue", node + 1), "next": node + 1},
        {"action": ("give_quest", 7 + node), "next": node + 2},
        {"action": ("open_shop",), "next": None},
        {"action": ("end",), "next": None},
    ]
    return {"text": f"npc {npc_id} node {node}", "options": options}


@procedure
def generate_loot(boss_id):
    """Return the loot of a boss."""
    return [f"sword-{boss_id}", "gold"]


def _record(db, *args):  # reducers are recorded by the harness, never run
    raise AssertionError("reducers are recorded, not run, by the pure harness")


def spawn_effect(db, *a):
    """Show an effect."""
    return _record(db, *a)


def apply_damage(db, *a):
    """Apply damage."""
    return _record(db, *a)


def show_quest_tracker(db, *a):
    """Show the quest tracker."""
    return _record(db, *a)


def hide_quest_tracker(db, *a):
    """Hide the quest tracker."""
    return _record(db, *a)


def grant_rewards(db, *a):
    """Grant rewards."""
    return _record(db, *a)


def move_to(db, *a):
    """Move an entity."""
    return _record(db, *a)


def consume_inputs(db, *a):
    """Consume production inputs."""
    return _record(db, *a)


def deposit_outputs(db, *a):
    """Deposit production outputs."""
    return _record(db, *a)


def show_dialog(db, *a):
    """Show a dialog."""
    return _record(db, *a)


def close_dialog(db, *a):
    """Close a dialog."""
    return _record(db, *a)


def assign_quest(db, *a):
    """Assign a quest."""
    return _record(db, *a)


def open_shop_ui(db, *a):
    """Open the shop."""
    return _record(db, *a)


def announce(db, *a):
    """Announce something."""
    return _record(db, *a)


def transfer(db, *a):
    """Transfer items or gold."""
    return _record(db, *a)


def notify_player(db, *a):
    """Notify a player."""
    return _record(db, *a)


def trade_ui(db, *a):
    """Update a trade UI."""
    return _record(db, *a)


def boss_state(db, *a):
    """Change a boss's state."""
    return _record(db, *a)


def set_world_time(db, *a):
    """Set the world time."""
    return _record(db, *a)


for _f in (
    spawn_effect, apply_damage, show_quest_tracker, hide_quest_tracker, grant_rewards, move_to,
    consume_inputs, deposit_outputs, show_dialog, close_dialog, assign_quest, open_shop_ui,
    announce, transfer, notify_player, trade_ui, boss_state, set_world_time,
):  # fmt: skip
    reducer(_f)


# --- the workflows -------------------------------------------------------------------------------


@workflow
async def buff(duration_secs):
    """A buff that stacks until it expires or is dispelled."""
    stacks = 1
    while True:
        ev = await select(
            timer("expire", duration_secs), signal("refresh"), signal("stack"), signal("dispel")
        )
        if ev.name in ("expire", "dispel"):
            break
        if ev.name == "refresh":
            continue
        stacks += ev.value
    return {"final_stacks": stacks}


add(
    buff,
    C(5, returns={"final_stacks": 1}),
    C(5, signals={"stack": [2, 3]}, choose=["stack", "refresh", "stack", "dispel"], returns={"final_stacks": 6}),
    C(5, signals={"stack": [1]}, choose=["stack"], cancel_at=1, raises=Cancelled),
)


@workflow
async def combat(player_id, enemy_id):
    """Turn-based combat: select per turn, procedures for damage, reducers for effects."""
    player = await procedure(get_combatant_stats, player_id)
    enemy = await procedure(get_combatant_stats, enemy_id)
    player_hp = player["health"]
    enemy_hp = enemy["health"]
    while True:
        ev = await select(
            timer("turn_timeout", 30), signal("attack"), signal("defend"), signal("flee")
        )
        if ev.name == "turn_timeout" or ev.name == "defend":
            reducer(spawn_effect, player_id, "defend")
        elif ev.name == "attack":
            calc = await procedure(calculate_damage, player_id, enemy_id)
            reducer(apply_damage, enemy_id, calc["damage"])
            reducer(spawn_effect, enemy_id, "crit" if calc["is_crit"] else "hit")
            enemy_hp -= calc["damage"]
        elif ev.name == "flee":
            return "fled"
        enemy_calc = await procedure(calculate_damage, enemy_id, player_id)
        reducer(apply_damage, player_id, enemy_calc["damage"])
        player_hp -= enemy_calc["damage"]
        await timer("anim_delay", 0.3)
        if enemy_hp <= 0:
            return "victory"
        if player_hp <= 0:
            return "defeat"


add(
    combat,
    C(1, 2, choose=["attack"] * 20, returns="victory"),
    C(1, 5, choose=["defend"] * 20, returns="defeat"),
    C(1, 2, choose=["attack", "defend", "flee"], returns="fled"),
    C(3, 4, choose=["attack"] * 5, cancel_at=7, raises=Cancelled),
)


@workflow
async def quest(quest_id, player_id):
    """A quest: filtered subscriptions per objective, progress from signals, rewards at the end."""
    objectives = await procedure(get_quest_objectives, quest_id)
    progress = {}
    for obj in objectives:
        match obj:
            case ("kill", enemy_type, _):
                subscribe("enemy_killed", enemy_type)
            case ("collect", item_id, _):
                subscribe("item_collected", item_id)
            case ("location", location_id, _):
                subscribe("location_reached", location_id)
    reducer(show_quest_tracker, player_id, objectives)
    while True:
        event = await signal("quest")
        match event:
            case ("enemy_killed" | "item_collected" | "location_reached") as kind, target:
                key = (kind, target)
                progress[key] = progress.get(key, 0) + 1
            case "abandon":
                reducer(hide_quest_tracker, player_id)
                return "abandoned"
            case _:
                continue
        names = {"kill": "enemy_killed", "collect": "item_collected", "location": "location_reached"}
        if all(progress.get((names[k], t), 0) >= n for k, t, n in objectives):
            rewards = await procedure(get_quest_rewards, quest_id)
            reducer(grant_rewards, player_id, rewards)
            reducer(hide_quest_tracker, player_id)
            return {"completed": rewards}


add(
    quest,
    C(1, 9, signals={"quest": [("enemy_killed", "wolf"), "junk", ("enemy_killed", "wolf"), ("item_collected", "herb")]}),
    C(0, 9, signals={"quest": [("enemy_killed", "wolf"), ("enemy_killed", "wolf")]}),
    C(2, 9, signals={"quest": [("location_reached", "cave"), "abandon"]}, returns="abandoned"),
    C(2, 9, signals={"quest": ["junk"] * 3}, limit=6, raises=Cancelled),
)


@workflow
async def patrol(waypoints, home):
    """An endless patrol; a threat spawns a combat child, then the patrol walks home."""
    await timer("start_patrol", 2)
    while True:
        for waypoint in waypoints:
            reducer(move_to, workflow_id(), waypoint)
            ev = await select(timer("arrival", waypoint["travel"]), signal("threat"))
            if ev.name == "threat":
                await spawn(combat, 1, ev.value)
                reducer(move_to, workflow_id(), home)
                await timer("arrival", home["travel"])
                continue
            await timer("wait", 3)


wps = [{"name": "a", "travel": 4}, {"name": "b", "travel": 6}]
add(
    patrol,
    C(wps, {"name": "home", "travel": 1}, limit=9, raises=Cancelled),
    C(wps, {"name": "home", "travel": 1}, signals={"threat": [5]}, choose=["arrival", "threat"], limit=12, raises=Cancelled),
    C([], {"name": "home", "travel": 1}, limit=0, raises=Cancelled),
)


@workflow
async def production(entity_id, blueprint):
    """A production loop: check inputs, halt/resume, stop."""
    while True:
        ev = await select(signal("inventory_change"), signal("halt"), signal("stop"))
        if ev.name == "inventory_change":
            if not await procedure(check_inputs, entity_id, blueprint):
                continue
        elif ev.name == "halt":
            await signal("resume")
            continue
        elif ev.name == "stop":
            return "stopped"
        reducer(consume_inputs, entity_id, blueprint)
        await timer("cycle_complete", blueprint["cycle"])
        reducer(deposit_outputs, entity_id, blueprint)


bp = {"inputs": ["ore", "coal"], "cycle": 5}
add(
    production,
    C(2, bp, choose=["inventory_change", "halt", "inventory_change", "stop"], returns="stopped"),
    C(1, bp, choose=["inventory_change", "stop"], returns="stopped"),
    C(2, bp, choose=["inventory_change"] * 10, limit=8, raises=Cancelled),
)


@workflow
async def npc_dialog(npc_id, player_id, start_node):
    """A dialog tree: each node from a procedure, choices from signals, actions matched."""
    node = start_node
    while True:
        dialog = await procedure(get_dialog_node, npc_id, node)
        reducer(show_dialog, player_id, dialog["text"], len(dialog["options"]))
        ev = await select(timer("timeout", 60), signal("select_option"), signal("cancel"))
        match ev:
            case Event("timeout") | Event("cancel"):
                reducer(close_dialog, player_id)
                return "abandoned"
            case Event("select_option", choice):
                match dialog["options"][choice]["action"]:
                    case ("continue", nxt):
                        node = nxt
                    case ("give_quest", quest_id):
                        reducer(assign_quest, player_id, quest_id)
                        node = dialog["options"][choice]["next"]
                    case ("open_shop",):
                        reducer(open_shop_ui, player_id, npc_id)
                        return "opened_shop"
                    case ("end",):
                        reducer(close_dialog, player_id)
                        return "completed"


add(
    npc_dialog,
    C(4, 9, 0, signals={"select_option": [0, 1, 3]}, choose=["select_option"] * 3, returns="completed"),
    C(4, 9, 0, signals={"select_option": [2]}, choose=["select_option"], returns="opened_shop"),
    C(4, 9, 0, returns="abandoned"),
    C(4, 9, 0, signals={"select_option": [0]}, choose=["select_option", "cancel"], returns="abandoned"),
)


@workflow
async def auction(item, seller, starting_price):
    """An auction: bids raise the price and extend the end; end sells or returns the item."""
    current_bid = starting_price
    high_bidder = None
    end_time = 60
    reducer(announce, item, current_bid)
    while True:
        match await select(timer("end", end_time), signal("bid"), signal("cancel")):
            case Event("end"):
                if high_bidder is not None:
                    reducer(transfer, seller, high_bidder, item)
                    reducer(transfer, high_bidder, seller, current_bid)
                    return {"sold": high_bidder, "price": current_bid}
                reducer(transfer, "return", seller, item)
                return "no_bids"
            case Event("bid", {"bidder": bidder, "amount": amount}):
                if amount <= current_bid:
                    reducer(notify_player, bidder, "Bid too low")
                    continue
                if high_bidder is not None:
                    reducer(notify_player, high_bidder, "You've been outbid!")
                high_bidder = bidder
                current_bid = amount
                reducer(announce, item, bidder, amount)
                end_time = max(end_time // 2, 10)
            case Event("cancel"):
                if high_bidder is None:
                    reducer(transfer, "return", seller, item)
                    return "cancelled"


bids = {"bid": [{"bidder": "a", "amount": 5}, {"bidder": "b", "amount": 20}, {"bidder": "c", "amount": 30}]}
add(
    auction,
    C("sword", "s", 10, signals=bids, choose=["bid", "bid", "cancel", "bid", "end"], returns={"sold": "c", "price": 30}),
    C("sword", "s", 10, returns="no_bids"),
    C("sword", "s", 10, choose=["cancel"], returns="cancelled"),
    C("sword", "s", 10, signals=bids, choose=["bid", "bid"], cancel_at=2, raises=Cancelled),
)


@workflow
async def trade(player_a, player_b, offer_a, offer_b):
    """A two-party trade: accept/cancel/modify signals, timeout, reducers for every UI change."""
    reducer(transfer, "lock", player_a, offer_a)
    reducer(transfer, "lock", player_b, offer_b)
    reducer(trade_ui, "show", player_a, player_b)
    a_accepted = b_accepted = False
    while True:
        ev = await select(timer("timeout", 60), signal("accept"), signal("cancel"), signal("modify"))
        if ev.name == "timeout" or ev.name == "cancel":
            reducer(transfer, "unlock", player_a, offer_a)
            reducer(transfer, "unlock", player_b, offer_b)
            reducer(trade_ui, "close", player_a)
            reducer(trade_ui, "close", player_b)
            return "timeout" if ev.name == "timeout" else {"cancelled_by": ev.value}
        if ev.name == "accept":
            if ev.value == player_a:
                a_accepted = True
            if ev.value == player_b:
                b_accepted = True
            if a_accepted and b_accepted:
                reducer(transfer, player_a, player_b, offer_a)
                reducer(transfer, player_b, player_a, offer_b)
                return "completed"
            reducer(trade_ui, "accepted", ev.value)
        else:
            player, new_items = ev.value
            a_accepted = b_accepted = False
            if player == player_a:
                reducer(transfer, "unlock", player_a, offer_a)
                offer_a = new_items
                reducer(transfer, "lock", player_a, new_items)
            reducer(trade_ui, "update", player_a, player_b)


add(
    trade,
    C("a", "b", ["x"], ["y"], signals={"accept": ["a", "b"]}, choose=["accept", "accept"], returns="completed"),
    C("a", "b", ["x"], ["y"], signals={"accept": ["a", "b"], "modify": [("a", ["z"])]}, choose=["accept", "modify", "accept", "accept"]),
    C("a", "b", ["x"], ["y"], returns="timeout"),
    C("a", "b", ["x"], ["y"], signals={"cancel": ["b"]}, choose=["cancel"], returns={"cancelled_by": "b"}),
)


@workflow
async def boss_add(side):
    """A boss's add: lives a while, then dies."""
    await timer("add_life", 10)
    return side


@workflow
async def boss_fight(boss_id, raid_id):
    """A four-phase boss fight with an enrage deadline, spawned adds, and loot."""
    subscribe("health_changed", boss_id)
    subscribe("wipe", raid_id)
    enrage_deadline = 480
    phases = [(1, 70, False), (3, 30, True), (4, 0, False)]
    for phase, threshold, fire in phases:
        reducer(announce, f"phase {phase}")
        reducer(boss_state, boss_id, "phase", phase)
        if phase == 4:
            reducer(boss_state, boss_id, "damage", 50)
        while True:
            arms = [timer("enrage", enrage_deadline), signal("health_changed"), signal("wipe")]
            if fire:
                arms.append(timer("fire_breath", 15))
            ev = await select(*arms)
            if ev.name == "enrage":
                reducer(announce, "wipe", raid_id, "enrage")
                return "wipe"
            if ev.name == "fire_breath":
                reducer(boss_state, boss_id, "fire_breath")
            elif ev.name == "health_changed":
                if ev.value <= threshold:
                    break
            else:
                return "wipe"
        if phase == 1:
            reducer(announce, "phase 2")
            reducer(boss_state, boss_id, "immune", True)
            await spawn(boss_add, "left")
            await spawn(boss_add, "right")
            reducer(boss_state, boss_id, "immune", False)
    reducer(announce, "victory")
    loot = await procedure(generate_loot, boss_id)
    reducer(boss_state, boss_id, "loot", loot)
    return {"victory": loot}


add(
    boss_fight,
    C(1, 2, signals={"health_changed": [90, 60, 50, 20, 5, 0]}, choose=["health_changed", "health_changed", "fire_breath", "health_changed", "health_changed", "health_changed", "health_changed"]),
    C(1, 2, choose=["wipe"], returns="wipe"),
    C(1, 2, returns="wipe"),
    C(1, 2, signals={"health_changed": [60]}, choose=["health_changed", "fire_breath", "wipe"], returns="wipe"),
)


@workflow
async def day_night_cycle(day_length, night_length):
    """An endless day/night cycle of reducers and timers (the oracle cancels it)."""
    while True:
        for phase, length in (("dawn", 120), ("day", day_length), ("dusk", 120), ("night", night_length)):
            reducer(set_world_time, phase)
            reducer(announce, "world", phase)
            await timer("phase", length)


add(
    day_night_cycle,
    C(1200, 600, limit=9, raises=Cancelled),
    C(10, 5, limit=2, raises=Cancelled),
    C(10, 5, cancel_at=0, raises=Cancelled),
)


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add
