"""What a workflow says to the outside, stored: published values and asks with their replies.

- ``published`` (workflow_id, key) -> value: upserted by the step that publishes (last write
  wins), read by clients without the workflow's actor.
- ``asks`` (workflow_id, ask_id): one row per ask, inserted with the ask's inbox row (kind
  ``request``) in one transaction before ``ask`` is acknowledged; the step that replies sets its
  status (``ok`` or ``error``) and reply, guarded by ``status = 'pending'``, so a request is
  answered once; the step that ends the workflow sets every ask still pending to ``ended``. An
  ask asked again with the same id finds the row and waits for (or returns) its reply.

Both tables belong to their workflow (pruned with it). An answered ask's row is deleted sooner,
while its workflow runs on, once the retention sweep finds it past its window (``expire_replies``,
by the ``asks_answered`` index): a workflow that answers asks forever keeps the replies of a
window, not every one it gave. A pending ask is never deleted but with its workflow. The writes
here run inside the step's transaction (``step_writes``) or as a write of their own (``ask``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persistence import _sql
from persistence._errors import InboxFull, UnknownWorkflowId, WorkflowFinished
from persistence._types import RUNNING, Delivered, DropCause, Dropped, StepWrite
from persistence._writer import Deferred

if TYPE_CHECKING:
    from persistence._sql import Dialect
    from persistence._writer import Writer

REQUEST = "request"  # inbox kind of an ask; name = request name; payload = the pickled Request
# Statuses of an ask's row.
ASK_PENDING, ASK_OK, ASK_ERROR, ASK_ENDED = "pending", "ok", "error", "ended"

PUBLISH = (
    "INSERT INTO {s}.published (workflow_id, key, value, step_seq, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (workflow_id, key) DO UPDATE SET value = excluded.value, "
    "step_seq = excluded.step_seq, updated_at = excluded.updated_at"
)
REPLY = (
    "UPDATE {s}.asks SET status = ?, reply = ?, error = ?, replied_at = ? "
    "WHERE workflow_id = ? AND ask_id = ? AND status = 'pending'"
)
END_ASKS = (
    "UPDATE {s}.asks SET status = 'ended', error = ?, replied_at = ? "
    "WHERE workflow_id = ? AND status = 'pending'"
)
ASK_COLUMNS = "workflow_id, ask_id, name, status, reply, error, created_at, replied_at"
ASK = f"SELECT {ASK_COLUMNS} FROM {{s}}.asks WHERE workflow_id = ? AND ask_id = ?"
INSERT_ASK = (
    "INSERT INTO {s}.asks (workflow_id, ask_id, name, status, created_at) "
    "VALUES (?, ?, ?, 'pending', ?) ON CONFLICT (workflow_id, ask_id) DO NOTHING"
)
OLDEST_REPLY = "SELECT min(replied_at) FROM {s}.asks{hint} WHERE replied_at IS NOT NULL"
# Answered asks (a pending one has no replied_at), oldest reply first, a batch at a time.
EXPIRE_REPLIES = (
    "DELETE FROM {s}.asks WHERE (workflow_id, ask_id) IN (SELECT workflow_id, ask_id "
    "FROM {s}.asks{hint} WHERE replied_at IS NOT NULL AND replied_at <= ? AND status != 'pending' "
    "ORDER BY replied_at LIMIT ?{lock})"
)
STATUS = "SELECT status FROM {s}.workflows WHERE id = ?"
PUBLISHED_ONE = "SELECT value FROM {s}.published WHERE workflow_id = ? AND key = ?"
PUBLISHED_ALL = (
    "SELECT workflow_id, key, value FROM {s}.published WHERE workflow_id = ? ORDER BY key"
)


@dataclass(frozen=True)
class AskReply:
    """A reply a step stores: ``status`` ``ok`` (``value`` the pickled value) or ``error``
    (``value`` the pickled exception, if it pickles; ``error`` its JSON ``{"type","message"}``)."""

    ask_id: str
    status: str
    value: bytes | None = None
    error: str | None = None


@dataclass(frozen=True)
class AskRow:
    """An ask as stored."""

    workflow_id: str
    ask_id: str
    name: str
    status: str
    reply: bytes | None
    error: str | None
    created_at: float
    replied_at: float | None

    @property
    def answered(self) -> bool:
        return self.status != ASK_PENDING


def ask_row(row: tuple[Any, ...]) -> AskRow:
    return AskRow(
        row[0],
        row[1],
        row[2],
        row[3],
        None if row[4] is None else bytes(row[4]),
        row[5],
        float(row[6]),
        None if row[7] is None else float(row[7]),
    )


def step_writes(w: Writer, step: StepWrite) -> None:
    """The step's published values and replies: inside the step's transaction."""
    wid, at = step.workflow_id, step.updated_at
    if step.published:
        w.executemany(
            PUBLISH, [(wid, key, value, step.step_seq, at) for key, value in step.published]
        )
    if step.replies:
        w.executemany(
            REPLY, [(r.status, r.value, r.error, at, wid, r.ask_id) for r in step.replies]
        )


def asks_ended(step: StepWrite) -> tuple[str, tuple[Any, ...]]:
    """The statement (template, parameters) of a step that ends its workflow, which ends every
    ask the workflow leaves unanswered."""
    wid = step.workflow_id
    why = json.dumps(
        {
            "type": "WorkflowNotRunning",
            "status": step.status,
            "message": f"workflow {wid!r} ended ({step.status}) without replying",
        }
    )
    return END_ASKS, (why, step.updated_at, wid)


def oldest_reply_sql(dialect: Dialect) -> str:
    """The query (a template) of when the earliest answered ask still kept was answered: the
    first entry of the ``asks_answered`` index."""
    return OLDEST_REPLY.replace("{hint}", dialect.indexed("asks_answered"))


def expire_replies(w: Writer, before: float, limit: int) -> int:
    """Delete up to ``limit`` answered asks answered at or before ``before``, oldest first; how
    many. On PostgreSQL the rows are locked, skipping any another transaction holds."""
    d = w.dialect
    sql = EXPIRE_REPLIES.replace("{hint}", d.indexed("asks_answered")).replace(
        "{lock}", " FOR UPDATE SKIP LOCKED" if d.skip_locked else ""
    )
    cur = w.execute(sql, (before, limit), wait=True)
    return max(int(cur.rowcount), 0)


# The requests a workflow's inbox holds, counted up to a bound (``InboxFull`` at ``inbox_limit``).
COUNT_REQUESTS = (
    "SELECT count(*) FROM (SELECT 1 FROM {s}.inbox WHERE workflow_id = ? AND kind = ? LIMIT ?) AS x"
)


def ask(
    w: Writer, workflow_id: str, ask_id: str, name: str, payload: bytes, at: float,
    limit: int | None = None,
) -> Deferred[tuple[AskRow | None, Delivered | None]]:
    """Store an ask: its row and its request in the workflow's inbox, in this transaction; or, if
    an ask of that id is stored already, that one (nothing new is written).

    The result's ``finish()`` gives ``(row, None)`` for an ask stored before, ``(None,
    delivered)`` for a new one, or raises ``UnknownWorkflowId``/``WorkflowFinished``, or
    ``InboxFull`` when the workflow's inbox holds ``limit`` requests not taken yet (asks are
    bounded as signals are, each kind on its own: buffered signals never keep out an ask the
    workflow may await now; the writer rolls the ask's row back with it).
    """
    inserted = w.execute(INSERT_ASK, (workflow_id, ask_id, name, at), wait=True)
    if inserted.rowcount != 1:  # asked before (or at the same moment, by another caller)
        before = w.query_one(ASK, (workflow_id, ask_id))
        assert before is not None
        row = ask_row(before)
        return Deferred(lambda: (row, None))
    full = False
    if limit is not None:
        count = w.query_one(COUNT_REQUESTS, (workflow_id, REQUEST, limit))
        full = count is not None and count[0] >= limit
    cur = None if full else w.insert_id(
        _sql.DELIVER, "seq", (workflow_id, REQUEST, name, payload, at, workflow_id), wait=True
    )
    got = cur.fetchone() if cur is not None else None
    if got is None:
        status = w.query_one(STATUS, (workflow_id,))
        why = (
            Dropped(DropCause.UNKNOWN)
            if status is None
            else Dropped(DropCause.ENDED, status=status[0])
        )
        if why.cause is DropCause.UNKNOWN:
            raise UnknownWorkflowId(workflow_id, path=w.path)
        if full and status is not None and status[0] == RUNNING:
            assert limit is not None
            raise InboxFull(workflow_id, limit=limit, path=w.path, what="asks")
        raise WorkflowFinished(workflow_id, str(why.status), path=w.path)
    delivered = Delivered(workflow_id, int(got[0]), REQUEST, name, payload, at)
    return Deferred(lambda: (None, delivered))


def read_ask(
    rows: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], workflow_id: str, ask_id: str
) -> AskRow | None:
    found = rows(ASK, (workflow_id, ask_id))
    return ask_row(found[0]) if found else None


def is_running(
    rows: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]], workflow_id: str
) -> bool | None:
    """True if running, False if ended, None if there is no such workflow."""
    found = rows(STATUS, (workflow_id,))
    return None if not found else found[0][0] == RUNNING
