"""Helpers for the example tests: the test world's population, and reading the world back."""

from __future__ import annotations

from typing import Any

from actors import ActorSystem, Status
from examples import world

T = 30  # every blocking wait in these tests is bounded by this many seconds

CHARACTERS = [
    {"id": "alice", "template": "hero", "gold": 500},
    {"id": "bob", "template": "hero", "gold": 500},
    {"id": "carol", "template": "hero", "gold": 10},
    {"id": "guard-1", "template": "guard", "room": "gate"},
    {"id": "wolf-1", "template": "wolf", "room": "forest"},
    {"id": "dragon", "template": "dragon", "room": "lair"},
    {"id": "elder", "template": "elder"},
    {"id": "smelter-1", "template": "smith", "room": "forge"},
]
ITEMS = [
    {"id": "sword", "name": "steel sword", "owner": "carol"},
    {"id": "shield", "name": "oak shield", "owner": "alice"},
    {"id": "potion", "name": "red potion", "owner": "bob"},
    {"id": "gem", "name": "blue gem", "owner": "bob"},
]
RESOURCES = [{"owner": "smelter-1", "resource": "ore", "qty": 5}]


class WorldView:
    """Read the world straight from its database, as any application could (a read-only store:
    on SQLite and on PostgreSQL alike)."""

    def rows(self, sql: str, *params: Any) -> list[tuple]:
        return [tuple(r.values()) for r in world.reader().read_table(sql, params)]

    def value(self, sql: str, *params: Any) -> Any:
        rows = self.rows(sql, *params)
        return rows[0][0] if rows else None

    def gold(self, who: str) -> int:
        return self.value("SELECT gold FROM world_characters WHERE id = ?", who)

    def hp(self, who: str) -> int:
        return self.value("SELECT hp FROM world_characters WHERE id = ?", who)

    def owner(self, item: str) -> str:
        return self.value("SELECT owner FROM world_items WHERE id = ?", item)

    def locked_by(self, item: str) -> str | None:
        return self.value("SELECT locked_by FROM world_items WHERE id = ?", item)

    def effects(self, target: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT effect FROM world_effects WHERE target = ? ORDER BY id", target)]

    def notifications(self, player: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT text FROM world_notifications WHERE player = ? ORDER BY id", player)]

    def log(self, source: str) -> list[str]:
        return [r[0] for r in self.rows("SELECT text FROM world_log WHERE source = ? ORDER BY id", source)]

    def state(self, key: str) -> str | None:
        return self.value("SELECT value FROM world_state WHERE key = ?", key)

    def assert_gold_conserved(self) -> None:
        """Every coin is in a purse or in escrow, and every coin was minted."""
        purses = self.value("SELECT COALESCE(SUM(gold), 0) FROM world_characters")
        held = self.value("SELECT COALESCE(SUM(amount), 0) FROM world_holds")
        minted = self.value("SELECT COALESCE(SUM(amount), 0) FROM world_mint")
        assert purses + held == minted, (purses, held, minted)


def running(system: ActorSystem, wf: Any) -> list[Any]:
    """Refs to the running workflows of type ``wf``, oldest first."""
    infos = sorted(system.workflows(status=Status.RUNNING, type=wf), key=lambda i: (i.created_at, i.id))
    return [system.get(i.id) for i in infos]


def only_running(system: ActorSystem, wf: Any) -> Any:
    """The ref of the one running workflow of type ``wf``."""
    refs = running(system, wf)
    assert len(refs) == 1, [r.id for r in refs]
    return refs[0]
