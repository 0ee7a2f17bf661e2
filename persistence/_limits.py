"""Procedure calls waiting for their limit (``@procedure(concurrency=, rate=)``), in the store.

A call that waits is already durable: its ``procedures`` row stays pending, and a crash leaves it
to run at the next start (in order, through the limit again). This table only says, to `wf show`
and the web view (other processes), which calls are waiting and for which limit. Its rows are
written without waiting for their commit (the writer's group commit carries them), and deleted
when the call's attempt starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from persistence._sqlstore import SqlStore

WAITING = (
    "INSERT INTO {s}.limit_waits (key, workflow_id, kind, since) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, since = excluded.since"
)
STARTED = "DELETE FROM {s}.limit_waits WHERE key = ?"
OF = "SELECT key, kind FROM {s}.limit_waits WHERE workflow_id = ?"


def waiting(store: SqlStore, key: str, workflow_id: str, kind: str, since: float) -> None:
    store._write(lambda w: w.execute(WAITING, (key, workflow_id, kind, since)))


def started(store: SqlStore, key: str) -> None:
    store._write(lambda w: w.execute(STARTED, (key,)))


def waits_of(store: SqlStore, workflow_id: str) -> dict[str, str]:
    """{procedure key: "concurrency" or "rate"} of the workflow's calls waiting for a limit."""
    return {str(k): str(v) for k, v in store._rows(OF, (workflow_id,))}
