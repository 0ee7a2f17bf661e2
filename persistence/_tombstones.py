"""Tombstones: what pruning leaves of a finished workflow (id, type, status, when it ended), so
that its id stays taken for the system's ``id_retention`` (SPEC §10). Written by the prune's own
transaction, for the workflows it deletes; deleted once older than the id retention."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persistence._sql import IN_CHUNK

if TYPE_CHECKING:
    from persistence._writer import Writer

# Upserted: a workflow started again under a tombstone's id (``reuse_id=True``) and pruned again
# leaves its own.
BURY = (
    "INSERT INTO {s}.tombstones (id, type, status, ended_at, pruned_at) "
    "SELECT id, type, status, finished_at, ? FROM {s}.workflows WHERE {cond} AND finished_at IS NOT NULL "
    "ON CONFLICT (id) DO UPDATE SET type = excluded.type, status = excluded.status, "
    "ended_at = excluded.ended_at, pruned_at = excluded.pruned_at"
)
TOMBSTONE = "SELECT id, type, status, ended_at, pruned_at FROM {s}.tombstones WHERE id = ?"
TOMBSTONES = (
    "SELECT id, type, status, ended_at, pruned_at FROM {s}.tombstones "
    f"WHERE id IN ({', '.join(['?'] * IN_CHUNK)})"
)
EXPIRE = "DELETE FROM {s}.tombstones WHERE pruned_at <= ?"
COUNT = "SELECT count(*) FROM {s}.tombstones"
OLDEST = "SELECT min(pruned_at) FROM {s}.tombstones"


@dataclass(frozen=True)
class Tombstone:
    id: str
    type: str
    status: str
    ended_at: float
    pruned_at: float


def tombstone(row: tuple[Any, ...]) -> Tombstone:
    return Tombstone(str(row[0]), str(row[1]), str(row[2]), float(row[3]), float(row[4]))


def bury(w: Writer, ids: list[str], at: float) -> None:
    """Leave a tombstone of each of ``ids`` (finished workflows about to be deleted)."""
    cond, params = w.dialect.any_of("id", ids, "text")
    w.execute(BURY.replace("{cond}", cond), (at, *params))


def expire(w: Writer, before: float) -> int:
    """Delete the tombstones left before ``before``; how many."""
    cur = w.execute(EXPIRE, (before,), wait=True)
    return max(int(cur.rowcount), 0)
