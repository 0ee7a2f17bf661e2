"""Ids that stay taken after their workflows were pruned (SPEC §10): ``start`` of such an id
raises ``WorkflowPruned``, unless ``reuse_id=True``, for the system's ``id_retention``."""

from __future__ import annotations

from persistence import Store
from persistence._tombstones import Tombstone

from ._errors import WorkflowPruned


def refuse_pruned(store: Store, workflow_id: str, now: float, id_retention: float | None) -> None:
    """Raise ``WorkflowPruned`` if a pruned workflow left ``workflow_id`` taken (a tombstone
    younger than ``id_retention``; None: any)."""
    _refuse(store.tombstone(workflow_id), now, id_retention)


def refuse_pruned_many(store: Store, workflow_ids: list[str], now: float, id_retention: float | None) -> None:
    """``refuse_pruned`` for each of ``workflow_ids`` (the first in their order is named)."""
    stones = store.tombstones(workflow_ids)
    for wid in workflow_ids:
        _refuse(stones.get(wid), now, id_retention)


def _refuse(stone: Tombstone | None, now: float, id_retention: float | None) -> None:
    if stone is None:
        return
    if id_retention is not None and stone.pruned_at <= now - id_retention:
        return  # kept past its retention: the sweep deletes it
    raise WorkflowPruned(stone.id, stone.type, stone.status, stone.ended_at)
