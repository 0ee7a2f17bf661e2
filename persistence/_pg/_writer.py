"""The PostgreSQL writer: the group-commit loop of ``persistence/_writer.py`` on a psycopg
connection, pipelined, at READ COMMITTED.

What a server changes, all of it in the transaction protocol this class implements:

- The connection runs in pipeline mode: a batch's statements are sent without waiting for each
  answer (writes return a ``Deferred`` that reads its results after the batch's sync), so a batch
  costs a few round trips, not one per statement. A write that needs an answer at once (a
  reducer's read) syncs there. A server error shows at a sync, whichever write's statement
  caused it, so only the careful pass (a sync per write) can tell whose it is.
- Deadlocks and serialization failures (40P01, 40001) roll the batch back and run it again,
  after a short pause, a few times before running it write by write.
- A lost connection before COMMIT loses nothing: the writer connects again (taking the owner's
  lock again) and runs the batch again. Once COMMIT is sent, the batch is never run again on the
  client's word: any failure from then on (a lost connection, and as much an error psycopg does
  not say is one, such as ``cannot exit pipeline mode while busy``, a busy or broken pipeline)
  leaves the outcome unknown to the client, not to the server. Every transaction learns its id
  (``txid_current()``, from the first statement of its first write, ``execute_xid``: a node's
  fence, or the incarnation it writes as; asked apart only if no write gave it, before COMMIT
  goes), and the writer closes the connection the failure came on, connects again and asks
  ``txid_status`` whether it committed (``commit_status``). If it did, the batch's writes are
  settled as committed (a signal appended is not appended again); if it did not, the batch runs
  again; only if the server cannot tell (it stays away) do the writes fail with
  ``ConnectionLost`` (``maybe_committed``). What each settled is counted in ``outcomes``.
- Statements are prepared on the server (psycopg's default: at a statement's fifth run), which
  spares the server parsing and planning each of a step's statements anew. psycopg's record of
  what it prepared can part from the server's: a statement whose run prepares it is skipped by
  the server when an earlier statement of its pipeline failed (a fenced step), and psycopg does
  not notice. A statement the server does not have (``InvalidSqlStatementName``) is therefore
  taken as a lost connection: the writer connects again (a new session, a new record) and runs
  the batch again; nothing of the failed transaction was written. BEGIN, COMMIT and the
  savepoints are never prepared, so that a COMMIT cannot fail this way.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.errors
import psycopg.pq

from persistence._errors import PersistenceError, StorageUnavailable
from persistence._log import Log
from persistence._pg._errors import ConnectionLost, Retryable, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._schema import quote
from persistence._sql import postgresql
from persistence._writer import Writer

# Reconnecting after a lost connection: attempts, and the pause before each (seconds).
RECONNECTS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0)
# How long a transaction whose COMMIT's answer was lost may stay "in progress" on the server (its
# session has not ended yet) before its outcome is called unknown (seconds).
OUTCOME_WAIT = 10.0


def commit_status(
    conn: psycopg.Connection[Any], xid: int, wait: float = OUTCOME_WAIT, backend: int | None = None
) -> bool | None:
    """Ask the server, on ``conn`` (a connection other than the one the COMMIT went on), whether
    transaction ``xid`` committed (True), did not (False), or cannot be told (None: the id is too
    old). Raises ``psycopg.Error`` if ``conn`` fails (ask again on another).

    While its session has not ended, the transaction is "in progress"; after ``wait`` seconds of
    that, its session (``backend``, the server process the COMMIT went to) is terminated, which
    settles it (committed, or rolled back), and asked again for as long; without ``backend``,
    or if it stays undecided, None."""
    deadline = time.monotonic() + wait
    while True:
        row = conn.execute("SELECT txid_status(%s)", (xid,)).fetchone()
        status = row[0] if row else None
        if status in ("committed", "aborted"):
            return bool(status == "committed")
        if status != "in progress":
            return None  # too old to tell (NULL)
        if time.monotonic() >= deadline:
            if backend is None:
                return None
            # A session that does not end by itself (a backend stuck on a dead client), if it
            # still runs that very transaction.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s "
                "AND backend_xid = (%s::bigint %% 4294967296)::text::xid",
                (backend, xid),
            )
            deadline, backend = time.monotonic() + wait, None
        time.sleep(0.02)  # its session is ending: the server has not decided yet


def commit_unknown(exc: BaseException, where: str, conn: Any = None) -> ConnectionLost:
    """The store's error for ``exc``, raised once a COMMIT was sent: its outcome is unknown
    (``maybe_committed``), whatever ``exc`` says, until the server is asked."""
    err = translate_error(exc, where, conn, committing=True)
    if isinstance(err, ConnectionLost):
        return err
    lost = ConnectionLost(
        f"a COMMIT on the PostgreSQL server at {where} was sent and then failed "
        f"({type(exc).__name__}: {' '.join(str(exc).split()) or 'no message'}); whether it was "
        f"written is unknown until the server is asked. The store asks it on a new connection "
        f"and never runs the transaction again before it knows.",
        path=where, maybe_committed=True,
    )
    lost.__cause__ = exc
    return lost


class PgWriter(Writer):
    """The writer on a PostgreSQL connection.

    Args:
        connect: Opens (and sets up: durability, owner lock) a new write connection; called at
            start and after a connection is lost.
        schema: The schema of the store's tables.
        path: The URL (no password), for messages.
    """

    pipelined = True

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], schema: str, path: str, *,
        log: Log | None = None,
    ) -> None:
        self._connect = connect
        self.schema = schema
        self.conn: psycopg.Connection[Any] = connect()
        self._backend: int | None = self.conn.info.backend_pid  # the session's server process
        self.db = PgDatabase(self.conn, self.sync)
        self._pipeline: Any = None
        # The open transaction's id, once the server has answered (see ``_commit_outcome``).
        self._xid_cur: psycopg.Cursor[Any] | None = None
        self._xid: int | None = None
        # COMMIT of the open transaction was sent: from then on its outcome is the server's.
        self._commit_sent = False
        # How batches whose COMMIT's outcome was unknown were settled: "committed" and
        # "aborted" (by the server's word), "unknown" (the server could not tell).
        self.outcomes: dict[str, int] = {"committed": 0, "aborted": 0, "unknown": 0}
        super().__init__(path, postgresql(quote(schema)), name="actorflow-pg-writer", log=log)

    # -- what writes call ---------------------------------------------------------------------
    def execute(self, template: str, params: Any = None, *, wait: bool = False) -> psycopg.Cursor[Any]:
        cur = self.conn.cursor()
        cur.execute(self.dialect.sql(template), params)
        if wait:
            self.sync()
        return cur

    def insert_id(self, template: str, column: str, params: Any, *, wait: bool = False) -> Any:
        return self.execute(f"{template} RETURNING {column}", params, wait=wait)

    def execute_xid(self, template: str, params: Any = None) -> psycopg.Cursor[Any]:
        """Send a statement whose last column is ``txid_current()``: the transaction learns its
        id from the first such statement that is answered (no statement of its own for it)."""
        cur = self.execute(template, params)
        if self._xid is None and self._xid_cur is None:
            self._xid_cur = cur
        return cur

    def executemany(self, template: str, rows: list[tuple[Any, ...]]) -> None:
        # One statement per row, pipelined (psycopg's executemany would sync its own pipeline).
        sql = self.dialect.sql(template)
        for row in rows:
            self.conn.execute(sql, row)

    def query_one(self, template: str, params: Any = None) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.execute(template, params).fetchone()
        return row

    def query_all(self, template: str, params: Any = None) -> list[tuple[Any, ...]]:
        return list(self.execute(template, params).fetchall())

    def sync(self) -> None:
        if self._pipeline is not None:
            self._pipeline.sync()
            if self._xid is None and self._xid_cur is not None:
                cur, self._xid_cur = self._xid_cur, None
                try:
                    row = cur.fetchone()
                except psycopg.Error:
                    row = None  # that statement failed (a fenced write): the next one tells
                self._xid = int(row[-1]) if row else None

    def transient(self, exc: BaseException) -> bool:
        return isinstance(self._error(exc), (Retryable, ConnectionLost))

    # -- the transaction protocol ---------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        try:
            with self.conn.pipeline() as pipeline:
                self._pipeline = pipeline
                yield
        finally:
            self._pipeline = None

    def _begin(self) -> None:
        self._commit_sent = False
        self._xid = None
        self._xid_cur = None
        self.conn.execute("BEGIN", prepare=False)

    def _commit(self) -> None:
        if self._xid is None:
            # No write told the transaction's id (none opened with ``execute_xid``, or each
            # that did failed): asked now, answered before COMMIT goes.
            self._xid_cur = self.conn.execute("SELECT txid_current()")
            self.sync()
        self._commit_sent = True
        self.conn.execute("COMMIT", prepare=False)

    def _in_transaction(self) -> bool:
        return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _rollback(self) -> None:
        self.db.forget()
        if self._commit_sent:
            # The COMMIT went: nothing is left to roll back, and the connection it went on is in
            # a state nobody can vouch for (a pipeline that would not exit). Its outcome is asked
            # on a new connection.
            with contextlib.suppress(Exception):
                self.conn.close()
            return
        if self.conn.closed:
            return
        with contextlib.suppress(psycopg.Error):
            if self._in_transaction():
                self.conn.execute("ROLLBACK", prepare=False)

    def _savepoint(self) -> None:
        self.conn.execute("SAVEPOINT op", prepare=False)

    def _release_savepoint(self) -> None:
        self.conn.execute("RELEASE SAVEPOINT op", prepare=False)

    def _undo_savepoint(self) -> bool:
        with contextlib.suppress(psycopg.Error):
            self.sync()  # the failed statement's answer, so that the pipeline takes more
        self.conn.execute("ROLLBACK TO SAVEPOINT op", prepare=False)
        self.conn.execute("RELEASE SAVEPOINT op", prepare=False)
        self.sync()
        self.db.forget()
        return True

    def _error(self, exc: BaseException, committing: bool = False) -> BaseException:
        if committing and self._commit_sent and isinstance(exc, Exception):
            return commit_unknown(exc, self.path, self.conn)
        committing = False  # failed before COMMIT went (asking the transaction's id): not written
        if isinstance(exc, psycopg.errors.InvalidSqlStatementName):
            # psycopg ran a statement by a name the server does not know (see the module's
            # docstring): only a new session sets that right.
            err = ConnectionLost(
                f"the writer's session on {self.path} lost track of a prepared statement "
                f"({exc}); the transaction was rolled back, nothing of it was written. The "
                f"writer connects again and runs it again.",
                path=self.path, maybe_committed=committing,
            )
            err.__cause__ = exc
            return err
        return translate_error(exc, self.path, self.conn, committing=committing)

    def _unattributed(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.Error)

    def _retryable(self, err: BaseException) -> bool:
        return isinstance(err, Retryable)

    def _lost(self, err: BaseException) -> bool:
        return isinstance(err, ConnectionLost)

    def _reconnect(self, cause: BaseException) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
        last: BaseException = cause
        for pause in RECONNECTS:
            time.sleep(pause)
            try:
                self.conn = self._connect()
                self._backend = self.conn.info.backend_pid
            except PersistenceError as exc:
                last = exc
                if not isinstance(exc, StorageUnavailable):
                    raise  # refused for good (owner lock taken, authentication): say so
                continue
            self.db = PgDatabase(self.conn, self.sync)
            self.log.warning("store_reconnected", path=self.path, cause=str(cause))
            return
        raise last

    def _commit_outcome(self, cause: BaseException) -> bool | None:
        xid, backend = self._xid, self._backend
        self._commit_sent = False
        committed: bool | None = None
        for _ in RECONNECTS:
            try:
                self._reconnect(cause)
            except BaseException:  # noqa: BLE001 - the server stays away: it cannot tell
                break
            if xid is None:
                break
            try:
                committed = commit_status(self.conn, xid, backend=backend)
                break
            except psycopg.Error as exc:  # the connection that asks went too: a new one asks
                cause = exc
        verdict = {True: "committed", False: "aborted", None: "unknown"}[committed]
        self.outcomes[verdict] += 1
        self.log.warning("store_commit_answer_lost", outcome=verdict, committed=committed,
                    xid=xid, cause=str(cause))
        return committed

    def _close_connection(self) -> None:
        with contextlib.suppress(Exception):
            if self._in_transaction():
                self.conn.rollback()
            # The server frees a closed session's locks when its backend exits, a moment after
            # close() returns: an owner opened next in this process could still find the
            # schema locked. Giving the owner lock up first makes close() the end of ownership.
            self.conn.execute("SELECT pg_advisory_unlock_all()")
        with contextlib.suppress(Exception):
            self.conn.close()
