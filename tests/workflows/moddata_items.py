"""Module-level data of a user module of which a workflow's module imports only a list of
instances (``from .moddata_items import MONSTERS``): test_checkpoint_foreign_instances holds
what they hold across an await."""

from __future__ import annotations


class Monster:
    def __init__(self, name: str) -> None:
        self.name = name
        self.loot: list = []


MONSTERS = [Monster("orc"), Monster("troll")]
