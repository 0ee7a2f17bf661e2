"""Ids that stay taken after their workflows were pruned (SPEC §10): ``start`` of such an id
raises ``WorkflowPruned``, unless ``reuse_id=True``, for the system's ``id_retention``."""

from __future__ import annotations

from persistence import Store

from ._errors import WorkflowPruned


def refuse_pruned(store: Store, workflow_id: str, now: float, id_retention: float | None) -> None:
    """Raise ``WorkflowPruned`` if a pruned workflow left ``workflow_id`` taken (a tombstone
    younger than ``id_retention``; None: any)."""
    stone = store.tombstone(workflow_id)
    if stone is None:
        return
    if id_retention is not None and stone.pruned_at <= now - id_retention:
        return  # kept past its retention: the sweep deletes it
    raise WorkflowPruned(workflow_id, stone.type, stone.status, stone.ended_at)
