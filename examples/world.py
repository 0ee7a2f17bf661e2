"""A small game world that lives in the workflows' own database (a SQLite file or PostgreSQL).

Three kinds of code touch the world, and the split is the point of the example:

- **Reducers** (``@reducer def f(db, ...)``) are the only code that changes it. They run inside the
  workflow step's own transaction, so a step's world changes and its checkpoint commit together or
  not at all: a crash can never leave gold moved but the auction still open.
- **Procedures** (``@procedure``) read it, each with its own read-only connection, and compute
  things (damage rolls, loot). They run after the step that asked for them has committed, so they
  see what that step's reducers wrote. Their results are deterministic given their arguments,
  which keeps tests exact and lets a procedure run twice after a crash with no harm.
- **Content** (quests, dialogs, blueprints, character templates) is static data in this module.

A reducer cannot return a value (it runs during the commit). When a workflow needs to know what a
reducer decided (did the bidder have the gold? was the item free to lock?) it asks a procedure
afterwards: ``reducer(hold_gold, hold, bidder, amount)`` then ``await procedure(gold_held, hold)``.

Every table is prefixed ``world_`` so it never collides with the runtime's own tables. The SQL is
what SQLite and PostgreSQL both run (``?`` placeholders; ``INSERT ... ON CONFLICT``, ``CASE``
rather than SQLite's two-argument ``MAX``), so the same reducers run on either backend. A reducer
that reads a row and writes it back does both in one statement (``UPDATE ... SET gold = gold +
?``, ``DELETE ... RETURNING``): on PostgreSQL other steps may run at the same time, and a
separate read could be stale by the time its write lands (see the PostgreSQL guide).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actors import UnknownWorkflow, WorkflowPruned
from persistence import Store, open_store
from workflows import procedure, reducer, workflow

# --- static content -------------------------------------------------------------------------------

#: Base stats of every kind of character.
TEMPLATES: dict[str, dict[str, Any]] = {
    "hero": {"kind": "player", "hp": 100, "attack": 12, "defense": 4},
    "guard": {"kind": "npc", "hp": 80, "attack": 10, "defense": 5},
    "elder": {"kind": "npc", "hp": 50, "attack": 2, "defense": 2},
    "smith": {"kind": "npc", "hp": 60, "attack": 4, "defense": 3},
    "wolf": {"kind": "monster", "hp": 30, "attack": 6, "defense": 1},
    "bandit": {"kind": "monster", "hp": 45, "attack": 8, "defense": 2},
    "dragon": {"kind": "boss", "hp": 1000, "attack": 25, "defense": 8},
    "whelp": {"kind": "add", "hp": 120, "attack": 9, "defense": 2},
}

#: Quests: objectives (kill, collect, location) and rewards.
QUESTS: dict[str, dict[str, Any]] = {
    "wolf_cull": {
        "title": "Thin the pack",
        "objectives": [
            {"id": "wolves", "kind": "kill", "target": "wolf", "count": 3},
            {"id": "mill", "kind": "location", "target": "old_mill", "count": 1},
        ],
        "rewards": {"gold": 50, "items": ["wolfskin cloak"]},
    },
    "herbalist": {
        "title": "Healing herbs",
        "objectives": [
            {"id": "herbs", "kind": "collect", "target": "moonleaf", "count": 2},
        ],
        "rewards": {"gold": 20, "items": ["healing draught"]},
    },
}

#: Dialog trees: node -> text and options; an option's action is a list whose first word says what
#: it does: ["continue", node], ["give_quest", quest_id, node], ["open_shop"], ["end"].
DIALOGS: dict[str, dict[str, dict[str, Any]]] = {
    "elder": {
        "greeting": {
            "text": "Welcome, traveller. These are troubled times.",
            "options": [
                {"text": "Is there work for me?", "action": ["continue", "work"]},
                {"text": "Do you sell anything?", "action": ["open_shop"]},
                {"text": "Farewell.", "action": ["end"]},
            ],
        },
        "work": {
            "text": "Wolves have taken three sheep this week. Thin the pack, and look at the old mill.",
            "options": [
                {"text": "I will do it.", "action": ["give_quest", "wolf_cull", "thanks"]},
                {"text": "Tell me again.", "action": ["continue", "greeting"]},
            ],
        },
        "thanks": {
            "text": "Bless you. Come back when it is done.",
            "options": [{"text": "Farewell.", "action": ["end"]}],
        },
    },
}

#: Production blueprints: what a cycle consumes, what it yields, how long it takes (seconds).
BLUEPRINTS: dict[str, dict[str, Any]] = {
    "smelter": {"inputs": {"ore": 2}, "outputs": {"ingot": 1}, "cycle_time": 30},
    "loom": {"inputs": {"wool": 3}, "outputs": {"cloth": 1}, "cycle_time": 45},
}

#: What a boss may drop.
LOOT_TABLE = ["dragon scale", "ember gem", "ancient blade", "molten crown", "wyrm tooth"]

#: The phases of a day, with how long each lasts (seconds), as in the original design.
DAY_PHASES: list[tuple[str, float]] = [
    ("dawn", 2 * 60),
    ("day", 20 * 60),
    ("dusk", 2 * 60),
    ("night", 10 * 60),
]


# --- where procedures read the world --------------------------------------------------------------

_db: str | None = None
_reader: Store | None = None
_db_lock = threading.Lock()


def use_database(db: str | Path) -> None:
    """Tell the world's procedures which database to read: a SQLite file's path, or a
    ``postgresql://`` URL.

    Call it before opening the ``ActorSystem`` on it: recovery may run pending procedures as soon
    as the system opens.
    """
    global _db, _reader
    with _db_lock:
        old, _reader = _reader, None
        _db = db if isinstance(db, str) and "://" in db else str(db)
    if old is not None:
        old.close()


def close_database() -> None:
    """Close the procedures' read-only connections (they open again on the next read)."""
    global _reader
    with _db_lock:
        old, _reader = _reader, None
    if old is not None:
        old.close()


def reader() -> Store:
    """A read-only store on the world's database (opened on first use, then shared): the
    procedures read through it, as any application could (``read_table``, ``?`` placeholders)."""
    global _reader
    with _db_lock:
        if _reader is None:
            if _db is None:
                raise RuntimeError(
                    "the world's procedures do not know which database to read: call "
                    "examples.world.use_database(path_or_url) before opening the ActorSystem"
                )
            _reader = open_store(_db, owner=False)
        return _reader


def _one(sql: str, *params: Any) -> dict[str, Any] | None:
    rows = reader().read_table(sql, params)
    return rows[0] if rows else None


def _all(sql: str, *params: Any) -> list[dict[str, Any]]:
    return reader().read_table(sql, params)


# --- setup ----------------------------------------------------------------------------------------


@reducer
def create_world(db) -> None:
    """Create the world's tables (idempotent)."""
    db["world_characters"].create(
        {
            "id": str, "name": str, "kind": str, "template": str, "hp": int, "max_hp": int,
            "attack": int, "defense": int, "gold": int, "room": str, "status": str,
            "phase": int, "immune": int, "damage_bonus": int,
        },
        pk="id",
        defaults={"gold": 0, "status": "alive", "phase": 0, "immune": 0, "damage_bonus": 0},
        if_not_exists=True,
    )
    db["world_items"].create(
        {"id": str, "name": str, "owner": str, "locked_by": str}, pk="id", if_not_exists=True
    )
    db["world_resources"].create(
        {"owner": str, "resource": str, "qty": int}, pk=("owner", "resource"), if_not_exists=True
    )
    # Every gold coin that enters the world is minted here; the sum of purses and escrow holds
    # must always equal the sum of this table.
    db["world_mint"].create(
        {"id": int, "player": str, "amount": int, "reason": str}, pk="id", if_not_exists=True
    )
    db["world_holds"].create(
        {"id": str, "player": str, "amount": int}, pk="id", if_not_exists=True
    )
    db["world_auctions"].create(
        {
            "id": str, "item_id": str, "seller": str, "price": int, "high_bidder": str,
            "status": str, "ends_at": float,
        },
        pk="id",
        if_not_exists=True,
    )
    db["world_quests"].create(
        {"player": str, "quest": str, "status": str, "progress": str},
        pk=("player", "quest"),
        if_not_exists=True,
    )
    db["world_state"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    for log_table, cols in {
        "world_announcements": {"id": int, "text": str},
        "world_effects": {"id": int, "target": str, "effect": str},
        "world_notifications": {"id": int, "player": str, "text": str},
        "world_log": {"id": int, "source": str, "text": str},
    }.items():
        db[log_table].create(cols, pk="id", if_not_exists=True)
    db["world_ui"].create(
        {"player": str, "panel": str, "content": str}, pk=("player", "panel"), if_not_exists=True
    )
    db["world_buffs"].create(
        {"target": str, "buff": str, "stacks": int}, pk=("target", "buff"), if_not_exists=True
    )
    db["world_machines"].create(
        {"id": str, "blueprint": str, "status": str, "cycles": int}, pk="id", if_not_exists=True
    )
    db["world_raids"].create(
        {"id": str, "boss_id": str, "status": str, "reason": str}, pk="id", if_not_exists=True
    )
    db["world_loot"].create(
        {"id": int, "boss_id": str, "gold": int, "items": str}, pk="id", if_not_exists=True
    )


@reducer
def add_character(db, char_id: str, template: str, room: str = "village", gold: int = 0) -> None:
    """Add a character from a template (no-op if it exists); its gold is minted."""
    t = TEMPLATES[template]
    # Inserted unless there, in one statement: the character's gold is minted once, whoever
    # else adds it at the same time.
    cur = db.execute(
        "INSERT INTO world_characters (id, name, kind, template, hp, max_hp, attack, defense, "
        "gold, room, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, 'alive') "
        "ON CONFLICT (id) DO NOTHING",
        [char_id, char_id, t["kind"], template, t["hp"], t["hp"], t["attack"], t["defense"], room],
    )
    if cur.rowcount == 1 and gold:
        mint_gold(db, char_id, gold, "starting purse")


@reducer
def mint_gold(db, player: str, amount: int, reason: str) -> None:
    """Create ``amount`` new gold in ``player``'s purse, and record it in the mint."""
    db.execute("UPDATE world_characters SET gold = gold + ? WHERE id = ?", [amount, player])
    db["world_mint"].insert({"player": player, "amount": amount, "reason": reason})


@reducer
def give_item(db, item_id: str, name: str, owner: str) -> None:
    """Create an item owned by ``owner`` (no-op if the id exists)."""
    db.execute(
        "INSERT INTO world_items (id, name, owner, locked_by) VALUES (?, ?, ?, NULL) "
        "ON CONFLICT (id) DO NOTHING",
        [item_id, name, owner],
    )


@reducer
def give_resource(db, owner: str, resource: str, qty: int) -> None:
    """Add ``qty`` of a stackable resource to ``owner``'s stock."""
    db.execute(
        "INSERT INTO world_resources (owner, resource, qty) VALUES (?, ?, ?) "
        "ON CONFLICT (owner, resource) DO UPDATE SET qty = world_resources.qty + excluded.qty",
        [owner, resource, qty],
    )


@workflow
async def setup_world(characters: list[dict], items: list[dict], resources: list[dict]) -> int:
    """Create the world's tables and its first inhabitants, in one atomic step.

    Start it with a fixed id (``init_world`` does), so running it again is a no-op.
    """
    reducer(create_world)
    for c in characters:
        reducer(add_character, c["id"], c["template"], c.get("room", "village"), c.get("gold", 0))
    for it in items:
        reducer(give_item, it["id"], it["name"], it["owner"])
    for r in resources:
        reducer(give_resource, r["owner"], r["resource"], r["qty"])
    reducer(set_world_state, "time_of_day", "dawn")
    return len(characters)


def init_world(system: Any, characters: Sequence[dict] = (), items: Sequence[dict] = (),
               resources: Sequence[dict] = (), *, timeout: float = 30.0) -> None:
    """Point the procedures at ``system``'s file and create the world once (id ``world-setup``).

    ``characters`` are dicts with ``id``, ``template`` and optionally ``room`` and ``gold``;
    ``items`` have ``id``, ``name`` and ``owner``; ``resources`` have ``owner``, ``resource``, ``qty``.
    """
    use_database(system.db)
    try:
        ref = system.start(setup_world, list(characters), list(items), list(resources),
                           id="world-setup")
    except WorkflowPruned as pruned:
        if pruned.status == "completed":
            return  # created on an earlier run, and its record since pruned by retention
        ref = system.start(setup_world, list(characters), list(items), list(resources),
                           id="world-setup", reuse_id=True)
    try:
        ref.result(timeout=timeout)
    except UnknownWorkflow as gone:
        if gone.status != "completed":
            raise
        # Created on an earlier run, and pruned by retention as this run opened (after start()
        # found it): the world it made is there.


# --- logs and UI ----------------------------------------------------------------------------------


@reducer
def announce(db, text: str) -> None:
    """Show ``text`` to the whole world."""
    db["world_announcements"].insert({"text": text})


@reducer
def notify_player(db, player: str, text: str) -> None:
    """Show ``text`` to one player."""
    db["world_notifications"].insert({"player": player, "text": text})


@reducer
def spawn_effect(db, target: str, effect: str) -> None:
    """Play a visual effect (``hit``, ``crit``, ``defend``, ...) on ``target``."""
    db["world_effects"].insert({"target": target, "effect": effect})


@reducer
def record(db, source: str, text: str) -> None:
    """Append a line to the world log (the small example workflows use it)."""
    db["world_log"].insert({"source": source, "text": text})


@reducer
def show_ui(db, player: str, panel: str, content: Any) -> None:
    """Open (or update) a UI panel for a player: dialog, trade, quest tracker, shop."""
    db["world_ui"].upsert(
        {"player": player, "panel": panel, "content": json.dumps(content)}, pk=("player", "panel")
    )


@reducer
def close_ui(db, player: str, panel: str) -> None:
    """Close a player's UI panel."""
    db.execute("DELETE FROM world_ui WHERE player = ? AND panel = ?", [player, panel])


@reducer
def set_world_state(db, key: str, value: Any) -> None:
    """Set a world-wide fact (time of day, cycle count)."""
    db["world_state"].upsert({"key": key, "value": json.dumps(value)}, pk="key")


# --- characters -----------------------------------------------------------------------------------


@reducer
def apply_damage(db, target: str, damage: int) -> None:
    """Take ``damage`` hit points from ``target`` (never below 0; immune targets take none)."""
    db.execute(
        "UPDATE world_characters SET hp = CASE WHEN hp > ? THEN hp - ? ELSE 0 END, "
        "status = CASE WHEN hp - ? <= 0 THEN 'dead' ELSE status END "
        "WHERE id = ? AND immune = 0",
        [damage, damage, damage, target],
    )


@reducer
def spawn_entity(db, entity_id: str, template: str, room: str) -> None:
    """Bring ``entity_id`` into the world at full health (new, or back from the dead)."""
    t = TEMPLATES[template]
    db["world_characters"].upsert(
        {
            "id": entity_id, "name": entity_id, "kind": t["kind"], "template": template,
            "hp": t["hp"], "max_hp": t["hp"], "attack": t["attack"], "defense": t["defense"],
            "room": room, "status": "alive", "immune": 0, "damage_bonus": 0,
        },
        pk="id",
    )


@reducer
def despawn_entity(db, entity_id: str) -> None:
    """Remove a monster from the world (players and their gold are never despawned)."""
    db.execute("DELETE FROM world_characters WHERE id = ? AND kind != 'player'", [entity_id])


@reducer
def move_to(db, entity_id: str, room: str) -> None:
    """Move a character to a room."""
    db.execute("UPDATE world_characters SET room = ? WHERE id = ?", [room, entity_id])


@reducer
def apply_buff(db, target: str, buff: str, stacks: int) -> None:
    """Show ``buff`` on ``target`` with ``stacks`` stacks."""
    db["world_buffs"].upsert({"target": target, "buff": buff, "stacks": stacks}, pk=("target", "buff"))


@reducer
def remove_buff(db, target: str, buff: str) -> None:
    """Take ``buff`` off ``target``."""
    db.execute("DELETE FROM world_buffs WHERE target = ? AND buff = ?", [target, buff])


@procedure
def get_combatant_stats(char_id: str) -> dict[str, Any]:
    """A character's current combat stats."""
    row = _one(
        "SELECT id, kind, template, hp, max_hp, attack, defense, damage_bonus "
        "FROM world_characters WHERE id = ?",
        char_id,
    )
    if row is None:
        raise LookupError(f"no character {char_id!r} in the world")
    return row


@procedure
def calculate_damage(attacker: str, defender: str, roll: str, defending: bool = False) -> dict:
    """Roll one hit of ``attacker`` on ``defender``: ``{"damage": int, "crit": bool}``.

    ``roll`` names the throw (for example ``"combat-7:turn-3:player"``): the same roll on the same
    stats always gives the same result, so a retried procedure or a test sees the same number.
    A defender that has left the world meanwhile (a despawned add) is missed: damage 0.
    """
    a = get_combatant_stats(attacker)
    try:
        d = get_combatant_stats(defender)
    except LookupError:
        return {"damage": 0, "crit": False}
    rng = random.Random(f"{attacker}>{defender}:{roll}")
    damage = max(1, a["attack"] + a["damage_bonus"] - d["defense"] + rng.randint(0, 4))
    crit = rng.random() < 0.15
    if crit:
        damage *= 2
    if defending:
        damage = max(1, damage // 2)
    return {"damage": damage, "crit": crit}


@procedure
def get_health_pct(char_id: str) -> int:
    """A character's health as a percentage of its maximum (0 if it is gone)."""
    row = _one("SELECT hp, max_hp FROM world_characters WHERE id = ?", char_id)
    if row is None or not row["max_hp"]:
        return 0
    return row["hp"] * 100 // row["max_hp"]


# --- items, gold, auctions, trades ----------------------------------------------------------------


@reducer
def lock_items(db, lock_id: str, owner: str, item_ids: list[str]) -> None:
    """Lock the listed items for ``lock_id`` (a trade or auction) if ``owner`` has them free.

    Items that are not ``owner``'s, or already locked, are left alone: ask ``items_locked_by``
    afterwards to learn what was actually locked.
    """
    for item_id in item_ids:
        db.execute(
            "UPDATE world_items SET locked_by = ? WHERE id = ? AND owner = ? AND locked_by IS NULL",
            [lock_id, item_id, owner],
        )


@reducer
def unlock_items(db, lock_id: str, item_ids: list[str] | None = None) -> None:
    """Release the items ``lock_id`` holds (all of them, or only ``item_ids``)."""
    if item_ids is None:
        db.execute("UPDATE world_items SET locked_by = NULL WHERE locked_by = ?", [lock_id])
    else:
        for item_id in item_ids:
            db.execute(
                "UPDATE world_items SET locked_by = NULL WHERE id = ? AND locked_by = ?",
                [item_id, lock_id],
            )


@reducer
def transfer_items(db, lock_id: str, from_player: str, to_player: str, item_ids: list[str]) -> None:
    """Hand the listed items, locked by ``lock_id``, from one player to the other, unlocked."""
    for item_id in item_ids:
        db.execute(
            "UPDATE world_items SET owner = ?, locked_by = NULL "
            "WHERE id = ? AND owner = ? AND locked_by = ?",
            [to_player, item_id, from_player, lock_id],
        )


@procedure
def items_locked_by(lock_id: str) -> list[str]:
    """The ids of the items ``lock_id`` holds, sorted."""
    return [r["id"] for r in _all("SELECT id FROM world_items WHERE locked_by = ? ORDER BY id", lock_id)]


@procedure
def free_items(owner: str) -> list[str]:
    """The ids of ``owner``'s items that no trade or auction holds, sorted."""
    return [
        r["id"]
        for r in _all(
            "SELECT id FROM world_items WHERE owner = ? AND locked_by IS NULL ORDER BY id", owner
        )
    ]


@reducer
def hold_gold(db, hold_id: str, player: str, amount: int) -> None:
    """Move ``amount`` gold from ``player``'s purse into escrow, if the purse holds that much."""
    cur = db.execute(
        "UPDATE world_characters SET gold = gold - ? WHERE id = ? AND gold >= ?",
        [amount, player, amount],
    )
    if cur.rowcount == 1:
        db["world_holds"].insert({"id": hold_id, "player": player, "amount": amount})


@reducer
def release_hold(db, hold_id: str) -> None:
    """Give the gold held in escrow back to its owner."""
    # Taken and paid in one go: a hold released (or paid) by two steps at once pays out once.
    rows = db.execute("DELETE FROM world_holds WHERE id = ? RETURNING player, amount", [hold_id]).fetchall()
    for player, amount in rows:
        db.execute("UPDATE world_characters SET gold = gold + ? WHERE id = ?", [amount, player])


@reducer
def pay_hold(db, hold_id: str, payee: str) -> None:
    """Pay the gold held in escrow to ``payee``."""
    rows = db.execute("DELETE FROM world_holds WHERE id = ? RETURNING amount", [hold_id]).fetchall()
    for (amount,) in rows:
        db.execute("UPDATE world_characters SET gold = gold + ? WHERE id = ?", [amount, payee])


@procedure
def gold_held(hold_id: str) -> bool:
    """Whether the escrow hold ``hold_id`` exists (``hold_gold`` found the gold)."""
    return _one("SELECT 1 FROM world_holds WHERE id = ?", hold_id) is not None


@reducer
def open_auction(db, auction_id: str, seller: str, item_id: str, price: int, ends_at: float) -> None:
    """List an auction and lock its item (if the seller has it free)."""
    lock_items(db, auction_id, seller, [item_id])
    db["world_auctions"].upsert(
        {
            "id": auction_id, "item_id": item_id, "seller": seller, "price": price,
            "high_bidder": None, "status": "open", "ends_at": ends_at,
        },
        pk="id",
    )
    name = db.execute("SELECT name FROM world_items WHERE id = ?", [item_id]).fetchone()
    announce(db, f"Auction {auction_id}: {name[0] if name else item_id} from {seller}, starting at {price}")


@reducer
def announce_bid(db, auction_id: str, bidder: str, amount: int, ends_at: float) -> None:
    """Record the new high bid on the auction board."""
    db.execute(
        "UPDATE world_auctions SET price = ?, high_bidder = ?, ends_at = ? WHERE id = ?",
        [amount, bidder, ends_at, auction_id],
    )
    announce(db, f"Auction {auction_id}: {bidder} bids {amount}")


@reducer
def close_auction(db, auction_id: str, status: str) -> None:
    """Close the auction board entry and unlock whatever it still holds."""
    db.execute("UPDATE world_auctions SET status = ? WHERE id = ?", [status, auction_id])
    unlock_items(db, auction_id)


@procedure
def get_auction(auction_id: str) -> dict[str, Any] | None:
    """The auction board entry, or None."""
    return _one("SELECT * FROM world_auctions WHERE id = ?", auction_id)


# --- quests ---------------------------------------------------------------------------------------


@procedure
def get_quest_objectives(quest_id: str) -> list[dict[str, Any]]:
    """The quest's objectives."""
    return [dict(o) for o in QUESTS[quest_id]["objectives"]]


@procedure
def get_quest_rewards(quest_id: str) -> dict[str, Any]:
    """The quest's rewards: gold and item names."""
    return dict(QUESTS[quest_id]["rewards"])


@reducer
def assign_quest(db, player: str, quest_id: str) -> None:
    """Put a quest in the player's journal (no-op if it is already there)."""
    db.execute(
        "INSERT INTO world_quests (player, quest, status, progress) VALUES (?, ?, 'assigned', '{}') "
        "ON CONFLICT (player, quest) DO NOTHING",
        [player, quest_id],
    )


@reducer
def update_quest(db, player: str, quest_id: str, status: str, progress: dict[str, int]) -> None:
    """Write the quest's status and progress to the player's journal."""
    db["world_quests"].upsert(
        {"player": player, "quest": quest_id, "status": status, "progress": json.dumps(progress)},
        pk=("player", "quest"),
    )


@reducer
def grant_rewards(db, player: str, quest_id: str, rewards: dict[str, Any]) -> None:
    """Give a quest's rewards: minted gold and new items."""
    if rewards.get("gold"):
        mint_gold(db, player, rewards["gold"], f"quest {quest_id}")
    for k, name in enumerate(rewards.get("items", [])):
        give_item(db, f"{player}:{quest_id}:{k}", name, player)


# --- dialog ---------------------------------------------------------------------------------------


@procedure
def get_dialog_node(npc: str, node: str) -> dict[str, Any]:
    """The dialog node's text and options."""
    try:
        return json.loads(json.dumps(DIALOGS[npc][node]))
    except KeyError:
        raise LookupError(f"npc {npc!r} has no dialog node {node!r}") from None


# --- production -----------------------------------------------------------------------------------


@procedure
def check_inputs(entity_id: str, blueprint: str) -> bool:
    """Whether ``entity_id`` has the inputs for one cycle of ``blueprint``."""
    for resource, qty in BLUEPRINTS[blueprint]["inputs"].items():
        row = _one(
            "SELECT qty FROM world_resources WHERE owner = ? AND resource = ?", entity_id, resource
        )
        if row is None or row["qty"] < qty:
            return False
    return True


@reducer
def consume_inputs(db, entity_id: str, blueprint: str) -> None:
    """Take one cycle's inputs from the stock."""
    for resource, qty in BLUEPRINTS[blueprint]["inputs"].items():
        db.execute(
            "UPDATE world_resources SET qty = qty - ? WHERE owner = ? AND resource = ? AND qty >= ?",
            [qty, entity_id, resource, qty],
        )


@reducer
def deposit_outputs(db, entity_id: str, blueprint: str) -> None:
    """Add one cycle's outputs to the stock."""
    for resource, qty in BLUEPRINTS[blueprint]["outputs"].items():
        give_resource(db, entity_id, resource, qty)


@reducer
def set_machine(db, entity_id: str, blueprint: str, status: str, cycles: int) -> None:
    """Show a machine's status and how many cycles it has completed."""
    db["world_machines"].upsert(
        {"id": entity_id, "blueprint": blueprint, "status": status, "cycles": cycles}, pk="id"
    )


@procedure
def stock(owner: str, resource: str) -> int:
    """How much of ``resource`` ``owner`` has."""
    row = _one("SELECT qty FROM world_resources WHERE owner = ? AND resource = ?", owner, resource)
    return row["qty"] if row else 0


# --- the raid -------------------------------------------------------------------------------------


@reducer
def start_raid(db, raid_id: str, boss_id: str) -> None:
    """Open a raid on ``boss_id``."""
    db["world_raids"].upsert({"id": raid_id, "boss_id": boss_id, "status": "fighting", "reason": None}, pk="id")


@reducer
def end_raid(db, raid_id: str, status: str, reason: str | None = None) -> None:
    """Close the raid as ``victory`` or ``wiped``."""
    db.execute("UPDATE world_raids SET status = ?, reason = ? WHERE id = ?", [status, reason, raid_id])


@reducer
def trigger_wipe(db, raid_id: str, reason: str) -> None:
    """The raid is wiped out."""
    end_raid(db, raid_id, "wiped", reason)
    announce(db, f"The raid {raid_id} is wiped out: {reason}")


@reducer
def set_boss_phase(db, boss_id: str, phase: int) -> None:
    """Show the boss's current phase."""
    db.execute("UPDATE world_characters SET phase = ? WHERE id = ?", [phase, boss_id])


@reducer
def set_boss_immune(db, boss_id: str, immune: bool) -> None:
    """Make the boss immune to damage (or not)."""
    db.execute("UPDATE world_characters SET immune = ? WHERE id = ?", [int(immune), boss_id])


@reducer
def increase_boss_damage(db, boss_id: str, percent: int) -> None:
    """Raise the boss's damage by ``percent`` of its attack."""
    db.execute(
        "UPDATE world_characters SET damage_bonus = damage_bonus + attack * ? / 100 WHERE id = ?",
        [percent, boss_id],
    )


@reducer
def cast_fire_breath(db, boss_id: str) -> None:
    """The boss breathes fire."""
    spawn_effect(db, boss_id, "fire_breath")


@procedure
def generate_loot(boss_id: str, roll: str) -> dict[str, Any]:
    """Roll a boss's loot: the same ``roll`` always gives the same loot."""
    rng = random.Random(f"loot:{boss_id}:{roll}")
    return {"gold": rng.randrange(100, 301, 10), "items": rng.sample(LOOT_TABLE, 2)}


@reducer
def spawn_loot_chest(db, boss_id: str, loot: dict[str, Any]) -> None:
    """Put a chest with the loot where the boss fell."""
    db["world_loot"].insert({"boss_id": boss_id, "gold": loot["gold"], "items": json.dumps(loot["items"])})


@procedure
def pick_target(raid_id: str, boss_id: str, adds: list[str]) -> str | None:
    """Who a raider should hit: a living add first, then the boss; None once the fight is over."""
    raid = _one("SELECT status FROM world_raids WHERE id = ?", raid_id)
    if raid is None or raid["status"] != "fighting":
        return None
    for add in adds:
        row = _one("SELECT hp FROM world_characters WHERE id = ? AND status = 'alive'", add)
        if row is not None and row["hp"] > 0:
            return add
    boss = _one("SELECT hp FROM world_characters WHERE id = ?", boss_id)
    if boss is None or boss["hp"] <= 0:
        return None
    return boss_id
