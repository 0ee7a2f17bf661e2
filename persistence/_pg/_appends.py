"""Appends that cannot be written twice: every inbox append (signal, cancel, child outcome), every
broadcast and every request for the owner on PostgreSQL carries an idempotency key, kept in the
``af_appends`` table (primary key: the server refuses a second row with the same key).

The key is chosen when the write is submitted (``new_key``; for a request carried out, the
request's own seq) and stays the same whenever the writer runs that write again. The row is
inserted by the very statement that appends (a data-modifying ``WITH``), so it commits with the
append or not at all. A write that runs a second time asks first whether its key is there: if
it is, the append committed before (its COMMIT's answer was lost) and the write answers with
what was appended, appending nothing. The writer never runs a batch again once its COMMIT was
sent unless the server said it did not commit (``_writer``); the key makes even a wrong guess
there, or a race, unable to duplicate: the server refuses the second row.

Keys are kept an hour (``KEEP``), long past any retry; older ones are deleted now and then by
the appends themselves (``PRUNE_EVERY``).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from persistence import _sql, _writes
from persistence._errors import PersistenceError
from persistence._types import CANCEL, CHILD, SIGNAL, Delivered, DropCause, Dropped
from persistence._writer import Deferred, Writer

# How long a key is kept (seconds), and how many appends go between two deletions of old keys.
KEEP = 3600
PRUNE_EVERY = 1000

_REMEMBER = "INSERT INTO {s}.af_appends (key, workflow_id, seq) SELECT ?, ?, seq FROM ins"
_RECALL = "SELECT key, workflow_id, seq FROM {s}.af_appends WHERE key = ?"
_RECALL_PREFIX = "SELECT key, workflow_id, seq FROM {s}.af_appends WHERE key LIKE ? ORDER BY key"
_FORGET_OLD = f"DELETE FROM {{s}}.af_appends WHERE at < now() - interval '{KEEP} seconds'"

_counter = itertools.count(1)


def ddl(s: str) -> list[str]:
    """The table of the keys, for the (quoted) schema ``s`` (part of ``_schema``'s version 1)."""
    return [
        f"""CREATE TABLE {s}.af_appends (
            key text PRIMARY KEY,
            workflow_id text NOT NULL,
            seq bigint NOT NULL,
            at timestamptz NOT NULL DEFAULT now()
        )""",
        f"CREATE INDEX af_appends_at ON {s}.af_appends (at)",
    ]


def new_key() -> str:
    """A key for one append (random: two processes never choose the same)."""
    return uuid.uuid4().hex


def _keyed(insert: str) -> str:
    """``insert`` (an INSERT of one row, ``RETURNING seq``) with its key remembered."""
    return f"WITH ins AS ({insert} RETURNING seq), k AS ({_REMEMBER}) SELECT seq FROM ins"


def _prune(w: Writer) -> None:
    if next(_counter) % PRUNE_EVERY == 0:
        w.execute(_FORGET_OLD)


class Once:
    """One keyed write: knows whether the writer runs it again (``again``). ``retried``: the key
    is one a caller may submit again in a new write (a request's seq), so every run asks."""

    def __init__(self, key: str, *, retried: bool = False) -> None:
        self.key = key
        self.runs = 1 if retried else 0

    def again(self) -> bool:
        self.runs += 1
        return self.runs > 1


def _deliver(
    w: Writer,
    key: str,
    workflow_id: str,
    kind: str,
    name: str,
    payload: bytes,
    at: float,
    limit: int,
) -> Callable[[], Delivered | Dropped]:
    """``persistence._writes._deliver``, the key remembered with the row."""
    values = (workflow_id, kind, name, payload, at, workflow_id)
    if kind == SIGNAL:
        cur = w.execute(
            _keyed(_sql.DELIVER_BOUNDED),
            (*values, workflow_id, limit, limit, workflow_id, name, key, workflow_id),
        )
    elif kind == CHILD:
        cur = w.execute(_keyed(_sql.DELIVER_CHILD), (*values, name, key, workflow_id))
    else:
        cur = w.execute(_keyed(_sql.DELIVER), (*values, key, workflow_id))

    def result() -> Delivered | Dropped:
        row = cur.fetchone()
        if row is not None:
            return Delivered(workflow_id, int(row[0]), kind, name, payload, at)
        status = w.query_one(_sql.STATUS, (workflow_id,))
        if status is None:
            return Dropped(DropCause.UNKNOWN)
        return _writes.why_dropped(kind, status[0], limit)

    return result


def append_inbox(
    w: Writer,
    once: Once,
    workflow_id: str,
    kind: str,
    name: str,
    payload: bytes,
    at: float,
    limit: int,
    external_seq: int | None = None,
) -> Deferred[Delivered]:
    """``persistence._writes.append_inbox``, at most once by ``once``'s key."""
    if kind not in (SIGNAL, CANCEL, CHILD):
        raise PersistenceError(
            f"unknown inbox kind {kind!r} for workflow {workflow_id!r}; use one of "
            f"{', '.join((SIGNAL, CANCEL, CHILD))}.",
            path=w.path,
        )
    if once.again():
        row = w.query_one(_RECALL, (once.key,))
        if row is not None:  # appended by a run whose COMMIT's answer was lost
            done = Delivered(str(row[1]), int(row[2]), kind, name, payload, at)
            return Deferred(lambda: done)
    sent = _deliver(w, once.key, workflow_id, kind, name, payload, at, limit)
    if external_seq is not None:
        w.execute(_sql.DELETE_EXTERNAL, (external_seq,))  # undone with the append, if it fails
    _prune(w)
    return _writes.delivered(w, workflow_id, limit, sent)


def broadcast(
    w: Writer,
    once: Once,
    name: str,
    filter_key: str,
    payload: bytes,
    at: float,
    limit: int,
) -> tuple[list[Delivered], list[tuple[str, Dropped]]]:
    """``persistence._writes.broadcast``, at most once by ``once``'s key (one key per
    subscriber: ``key:workflow_id``)."""
    if once.again():
        rows = w.query_all(_RECALL_PREFIX, (f"{once.key}:%",))
        if rows:  # the whole broadcast committed before (one transaction)
            return [Delivered(str(r[1]), int(r[2]), SIGNAL, name, payload, at) for r in rows], []
    subscribers = [r[0] for r in w.query_all(_sql.BROADCAST_TO, (name, filter_key))]
    sent = [
        (wid, _deliver(w, f"{once.key}:{wid}", wid, SIGNAL, name, payload, at, limit))
        for wid in subscribers
    ]
    _prune(w)
    delivered: list[Delivered] = []
    dropped: list[tuple[str, Dropped]] = []
    for wid, result in sent:
        got = result()
        if isinstance(got, Delivered):
            delivered.append(got)
        else:
            dropped.append((wid, got))
    return delivered, dropped


def insert_external(w: Writer, once: Once, values: tuple[Any, ...]) -> int:
    """``persistence._writes.insert_external``, at most once by ``once``'s key."""
    if once.again():
        row = w.query_one(_RECALL, (once.key,))
        if row is not None:
            return int(row[2])
    cur = w.execute(_keyed(_sql.INSERT_EXTERNAL), (*values, once.key, values[1]), wait=True)
    _prune(w)
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def post_external(conn: Any, dialect: Any, once: Once, values: tuple[Any, ...]) -> int:
    """A request posted on a connection of its own (a store that does not own the schema), at
    most once by ``once``'s key; its seq."""
    if once.again():
        rows = conn.execute(dialect.sql(_RECALL), (once.key,)).fetchall()
        if rows:
            return int(rows[0][2])
    rows = conn.execute(
        dialect.sql(_keyed(_sql.INSERT_EXTERNAL)), (*values, once.key, values[1])
    ).fetchall()
    return int(rows[0][0])
