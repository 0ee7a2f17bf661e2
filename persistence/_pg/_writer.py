"""The PostgreSQL writer: the group-commit loop of ``persistence/_writer.py`` on a psycopg
connection, pipelined, at READ COMMITTED.

What a server changes, all of it in the transaction protocol this class implements:

- The connection runs in pipeline mode: a batch's statements are sent without waiting for each
  answer (writes return a ``Deferred`` that reads its results after the batch's sync), so a batch
  costs a few round trips, not one per statement. A write that needs an answer at once (a
  reducer's read) syncs there. A server error shows at a sync, whichever write's statement
  caused it, so only the careful pass (a sync per write) can tell whose it is.
- One round trip per commit: under ``server_checks`` (the optimistic pass) a step's checks are
  made by the server (``expect``: the guarded UPDATE, the rows it consumes, its inserts, each
  touched as many rows as it must, or ``af_expect`` fails the transaction), so a batch of sealed
  writes (``Deferred.sealed``: steps that send nothing elsewhere; their timers' ids are drawn
  ahead, ``timer_ids``) sends its statements and one sync, and waits once; it sends neither
  BEGIN nor COMMIT: statements sent in a pipeline with no sync between them are one transaction,
  which the sync commits (BEGIN goes only before a sync that comes earlier, ``_open_block``, and
  then COMMIT ends the block). A failed check fails the pass, and the careful pass, which
  checks on the client, tells whose write it was and why. Such a transaction inserts a commit
  token of the writer's choosing (``af_commits``): what says afterwards whether it committed, as
  its id, never answered, cannot.
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
  ``txid_status`` whether it committed (``commit_status``), or looks its token up
  (``token_status``). If it did, the batch's writes are
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
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.errors
import psycopg.generators
import psycopg.pq

from persistence._errors import PersistenceError, StorageUnavailable
from persistence._log import Log
from persistence._pg._errors import ConnectionLost, Retryable, is_lost, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._schema import quote
from persistence._sql import postgresql
from persistence._writer import Writer

# Reconnecting after a lost connection: attempts, and the pause before each (seconds).
RECONNECTS = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0)
# Sessions asked, one after another, whether a COMMIT whose answer was lost committed: each may
# be lost too (a server restarting, sessions being terminated); the answer is the server's to
# give, so it is asked again rather than the batch failed as unknown.
COMMIT_LOOKUPS = 20
# How long a transaction whose COMMIT's answer was lost may stay "in progress" on the server (its
# session has not ended yet) before its outcome is called unknown (seconds).
OUTCOME_WAIT = 10.0
# A writer's commit tokens kept: each is asked for at most once, just after its COMMIT was sent.
TOKENS_KEPT = 1024
# Timer ids drawn ahead at a time (``timer_ids``).
TIMER_IDS = 256


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


def token_status(
    conn: psycopg.Connection[Any], schema: str, writer: int, token: int, backend: int | None,
    started: Any, wait: float = OUTCOME_WAIT,
) -> bool | None:
    """Ask the server, on ``conn``, whether the transaction that inserted commit token ``token``
    of ``writer`` committed (True) or not (False); None if it cannot be told.

    The token is there once the transaction committed. While its session (``backend``, started
    at ``started``) lives, it may still commit: after ``wait`` seconds that session is
    terminated, and once it has ended, a token not there was never written."""
    deadline = time.monotonic() + wait
    while True:
        alive = backend is not None and conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND backend_start = %s", (backend, started)
        ).fetchone() is not None
        found = conn.execute(
            f"SELECT 1 FROM {schema}.af_commits WHERE writer = %s AND token = %s", (writer, token)
        ).fetchone() is not None
        if found:
            return True
        if not alive:
            return False  # the session had ended before the look: its outcome is final
        if time.monotonic() >= deadline:
            conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
            deadline = time.monotonic() + wait
        time.sleep(0.02)


class _EndingBatch(threading.local):
    """Whether this thread is ending one of the writer's batches (leaving its pipeline)."""

    on = False


_ENDING = _EndingBatch()
_PIPELINE_END = "error ignored terminating %r: %s"


class _QuietBatchEnd(logging.Filter):
    """psycopg logs a WARNING when a pipeline is left on an error raised in it and its end
    fails too ("error ignored terminating <Pipeline>: pipeline aborted"). For a batch of the
    writer, that error is the batch's own, which the writer handles (runs the batch again,
    write by write, and reports each write's outcome to its caller): the line says nothing an
    operator can act on, and went to stderr of an application that configured no logging.
    Other pipelines (the application's own) are logged as psycopg does."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_ENDING.on and record.msg == _PIPELINE_END)


logging.getLogger("psycopg").addFilter(_QuietBatchEnd())


class CaughtDatabaseError(Exception):
    """A reducer returned after catching an error of the database that aborted the transaction."""


def _backend_start(conn: psycopg.Connection[Any]) -> Any:
    row = conn.execute("SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
    return row[0] if row else None


def _server_refused(exc: BaseException, conn: Any) -> bool:
    """True if ``exc`` is the server's answer that it failed a statement, at severity ERROR: the
    transaction is aborted and the session goes on. Anything else (FATAL or PANIC, whatever its
    SQLSTATE, a connection lost, a client-side failure) may have come after the COMMIT applied."""
    return (
        isinstance(exc, psycopg.Error)
        and getattr(exc, "sqlstate", None) is not None
        and exc.diag.severity_nonlocalized == "ERROR"
        and not is_lost(exc, conn)
    )


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


# A sealed batch's commit token, when it goes with the batch's last checked writes (a template).
_INSERT_TOKEN = "INSERT INTO {s}.af_commits (writer, token) VALUES (?, ?)"


# The most rows one INSERT carries (its parameters stay far below the protocol's 65,535).
_ROWS_PER_INSERT = 500
_GROUPS: dict[str, str | None] = {}


def _values_group(sql: str) -> str | None:
    """The ``(%s, ...)`` (or ``(?, ...)``) group that ends ``sql`` if it is ``INSERT ... VALUES
    (%s, ...)`` with nothing after it (no ``ON CONFLICT``, no ``RETURNING``), so that more rows
    are more groups; else None."""
    found = _GROUPS.get(sql, "")
    if found == "":
        head, sep, group = sql.rpartition(" VALUES ")
        plain = (
            sep
            and head.startswith("INSERT INTO ")
            and group.startswith("(")
            and group.endswith(")")
            and group[1:-1].replace("%s", "").replace("?", "").replace(",", "").strip() == ""
        )
        found = _GROUPS[sql] = group if plain else None
    return found


def _inserts(sql: str, group: str, rows: list[tuple[Any, ...]]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """``rows`` as INSERTs of several rows each (``sql`` ends with its one VALUES ``group``)."""
    for i in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[i : i + _ROWS_PER_INSERT]
        yield sql + (", " + group) * (len(chunk) - 1), tuple(p for row in chunk for p in row)


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
        self._backend_start = _backend_start(self.conn)  # (a pid is reused; pid and start are not)
        # Commit tokens (``_commit_sealed``): this writer's own number, and its last token.
        self.token_writer = secrets.randbits(62)
        self._tokens = 0
        self._token: int | None = None  # the open transaction's, once it is sealed
        self._schema_q = quote(schema)
        self._timer_ids: list[int] = []
        self._draw_timer_ids = (
            f"SELECT nextval(pg_get_serial_sequence('{self._schema_q}.timers', 'id')) "
            f"FROM generate_series(1, ?)"
        )
        self._insert_token = f"INSERT INTO {self._schema_q}.af_commits (writer, token) VALUES (%s, %s)"
        self._trim_tokens = f"DELETE FROM {self._schema_q}.af_commits WHERE writer = %s AND token <= %s"
        # The tokens of writers gone for a day (each trims only its own while it runs).
        self.conn.execute(f"DELETE FROM {self._schema_q}.af_commits WHERE at < now() - interval '1 day'")
        self.db = PgDatabase(self.conn, self.sync)
        self._pipeline: Any = None
        # Checked writes not sent yet (``expect``), and the fence that goes with them.
        self._expects: list[tuple[str, Any, int]] = []
        self._expects_fence: tuple[Any, ...] | None = None
        # Writes whose answers nobody reads, held to go in the statement of the checked writes
        # held (``add_rows``) or of the next (``write_after``).
        self._held: list[tuple[str, tuple[Any, ...]]] = []
        # The open transaction's id, once the server has answered (see ``_commit_outcome``).
        self._xid_cur: psycopg.Cursor[Any] | None = None
        self._xid: int | None = None
        # COMMIT of the open transaction was sent: from then on its outcome is the server's.
        self._commit_sent = False
        # BEGIN was sent in the open transaction (``_open_block``).
        self._block = False
        # How batches whose COMMIT's outcome was unknown were settled: "committed" and
        # "aborted" (by the server's word), "unknown" (the server could not tell).
        self.outcomes: dict[str, int] = {"committed": 0, "aborted": 0, "unknown": 0}
        super().__init__(path, postgresql(quote(schema)), name="actorflow-pg-writer", log=log)

    # -- what writes call ---------------------------------------------------------------------
    def execute(self, template: str, params: Any = None, *, wait: bool = False) -> psycopg.Cursor[Any]:
        if self._expects or self._held:
            self._send_expects()
        cur = self._send(template, params)
        if wait:
            self.sync()
        return cur

    def _send(self, template: str, params: Any) -> psycopg.Cursor[Any]:
        cur = self.conn.cursor()
        cur.execute(self.dialect.sql(template), params)
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
        # A plain INSERT of several rows as one statement of several VALUES (the history a step
        # moves out of its row, 17 lines at once, costs what one line does); anything else one
        # statement per row, pipelined (psycopg's executemany would sync its own pipeline).
        if self._expects or self._held:
            self._send_expects()
        sql = self.dialect.sql(template)
        group = _values_group(sql) if len(rows) > 1 else None
        if group is None:
            for row in rows:
                self.conn.execute(sql, row)
            return
        for text, params in _inserts(sql, group, rows):
            self.conn.execute(text, params)

    def expect(self, template: str, params: Any, rows: int) -> None:
        # Answered by the transaction's one sync; a miss fails it (EXPECT_SQLSTATE). Held until
        # the next statement of another kind: checked writes sent one after another (a step's
        # guard, the rows it consumes, the rows it inserts: never the same rows) go as one.
        if not self._expects:
            if self._held:  # another step's writes, sent after what came before: on their own
                self._send_expects()
            if self.fence_next is not None:
                self._expects_fence, self.fence_next = self.fence_next, None
        self._expects.append((template, params, rows))

    def add_rows(self, template: str, rows: list[tuple[Any, ...]]) -> None:
        # Held, as one INSERT of several rows, for the statement of the checked writes held or
        # of the next writes held (at the latest, the commit token's).
        group = _values_group(template) if self.server_checks and rows else None
        if group is None:
            self.executemany(template, rows)
            return
        self._held.extend(_inserts(template, group, rows))

    def write_after(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        # After what was sent or held, in a statement of their own, which the commit token (or
        # the next step's writes) may join.
        if not self.server_checks:
            super().write_after(statements)
            return
        if self._expects or self._held:
            self._send_expects()
        self._held.extend(statements)

    def write_with(self, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
        # Held as ``write_after``'s are, but without sending the checked writes held first: they
        # go in the statement of those, if any.
        if not self.server_checks:
            super().write_with(statements)
            return
        self._held.extend(statements)

    def send_held(self) -> None:
        """Send the writes held (``expect``, ``add_rows``, ``write_after``): a write's own, before
        the next write's."""
        if self._expects or self._held:
            self._send_expects()

    def _send_expects(self, unchecked: tuple[str, tuple[Any, ...]] | None = None) -> None:
        """Send the checked writes held by ``expect``: one statement, each write a data-modifying
        ``WITH`` of it, each count checked by ``af_expect``; the step's fence (a cluster's, taken
        by its first write) goes with them, and its last column is then the transaction's id.
        ``unchecked``: a write (template, parameters) that goes with them, its count unchecked, as
        the writes held by ``add_rows`` and ``write_after`` do."""
        expects, fence, held = self._expects, self._expects_fence, self._held
        self._expects, self._expects_fence, self._held = [], None, []
        if unchecked is not None:
            held = [*held, unchecked]
        if not expects:  # unchecked writes only: the last one is the statement, the rest its WITH
            *first, (last, last_params) = held
            before: tuple[Any, ...] = ()
            for _t, params in first:
                before += tuple(params)
            withs = ", ".join(f"u{k} AS ({template})" for k, (template, _p) in enumerate(first))
            self._send(f"WITH {withs} {last}" if first else last, (*before, *last_params))
            return
        if len(expects) == 1 and fence is None and not held:
            template, params, rows = expects[0]
            self._send(f"WITH q AS ({template} RETURNING 1) SELECT {{s}}.af_expect(count(*), ?) FROM q",
                       (*params, rows))
            return
        ctes = [f"q{k} AS ({template} RETURNING 1)" for k, (template, _p, _r) in enumerate(expects)]
        checks = [f"{{s}}.af_expect((SELECT count(*) FROM q{k}), ?)" for k in range(len(expects))]
        values: tuple[Any, ...] = ()
        for _t, params, _r in expects:
            values += tuple(params)
        for k, (template, params) in enumerate(held):
            ctes.append(f"u{k} AS ({template})")
            values += tuple(params)
        values += tuple(rows for _t, _p, rows in expects)
        if fence is None:
            self._send(f"WITH {', '.join(ctes)} SELECT {', '.join(checks)}", values)
            return
        cur = self._send(
            f"WITH f AS (SELECT {{s}}.af_fence(?, ?, ?) AS v, txid_current() AS x), {', '.join(ctes)} "
            f"SELECT {', '.join(checks)}, (SELECT max(x) FROM f)",
            (*fence, *values),
        )
        if self._xid is None and self._xid_cur is None:
            self._xid_cur = cur

    def timer_ids(self, n: int) -> list[int]:
        # Taken from the timers table's identity sequence, TIMER_IDS at a time (a value drawn
        # is never drawn again, committed or not): one round trip per TIMER_IDS timers.
        pool = self._timer_ids
        while len(pool) < n:
            pool.extend(int(r[0]) for r in self.query_all(self._draw_timer_ids, (TIMER_IDS,)))
        taken, self._timer_ids = pool[:n], pool[n:]
        return taken

    def query_one(self, template: str, params: Any = None) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.execute(template, params).fetchone()
        return row

    def query_all(self, template: str, params: Any = None) -> list[tuple[Any, ...]]:
        return list(self.execute(template, params).fetchall())

    def sync(self) -> None:
        if self._expects or self._held:
            self._send_expects()
        if self._pipeline is not None:
            self._open_block()  # else the server would commit what was sent at this sync
            self._flush_output()
            self._pipeline.sync()
            if self._xid is None and self._xid_cur is not None:
                cur, self._xid_cur = self._xid_cur, None
                try:
                    row = cur.fetchone()
                except psycopg.Error:
                    row = None  # that statement failed (a fenced write): the next one tells
                self._xid = int(row[-1]) if row else None

    def _flush_output(self) -> None:
        """Send the server every byte of the statements sent so far, before a sync waits for
        their answers.

        psycopg's pipeline sync flushes the connection's output once and then waits for answers
        only: a statement larger than the socket takes at once (a payload of a megabyte or more)
        is left partly in libpq's buffer, the server waits for its end, the client for its answer,
        and the writer hung for good. Sent whole first (reading what the server sends
        meanwhile), and then the sync goes on a socket that takes it.
        """
        pgconn = self.conn.pgconn
        if pgconn.flush() != 0:
            self.conn.wait(psycopg.generators.send(pgconn))

    def transient(self, exc: BaseException) -> bool:
        return isinstance(self._error(exc), (Retryable, ConnectionLost))

    def reducer_returned(self) -> None:
        # The error the reducer's db saw is what tells: the connection's transaction status
        # says INERROR only once the pipeline has read the server's answer to its sync.
        if (self.db.failed is not None
                or self.conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR):
            raise CaughtDatabaseError(
                "it caught an error of one of its statements and returned: on PostgreSQL such "
                "an error aborts the whole transaction, so the step cannot commit. Let the error "
                "propagate, or test first for what would fail (to_regclass('t') for a table "
                "that may not exist)"
            )

    # -- the transaction protocol ---------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        try:
            with self.conn.pipeline() as pipeline:
                self._pipeline = pipeline
                try:
                    yield
                except BaseException:
                    if not self._commit_sent:
                        # psycopg ends a pipeline with a sync, also after an error: with no
                        # transaction block, that sync would commit what the batch sent so far.
                        # BEGIN makes it a block that the sync leaves open, for ROLLBACK.
                        with contextlib.suppress(psycopg.Error):
                            self._open_block()
                    _ENDING.on = True  # the pipeline's end may fail too: see _QuietBatchEnd
                    raise
        finally:
            _ENDING.on = False
            self._pipeline = None

    def _begin(self) -> None:
        # BEGIN is sent only before the transaction's first sync (``_open_block``): statements
        # sent in a pipeline with none are one transaction already, which the pipeline's sync
        # commits, so a batch of sealed writes needs neither BEGIN nor COMMIT.
        self._expects, self._expects_fence, self._held = [], None, []
        self._commit_sent = False
        self._block = False
        self._token = None
        self._xid = None
        self._xid_cur = None

    def _open_block(self) -> None:
        """Send BEGIN, once per transaction, before anything that would end it or needs a
        transaction block: a sync (the server commits at a sync the statements sent before it
        when no BEGIN came; reducers run after one), a savepoint. Sent after statements of the
        transaction, BEGIN makes them part of its block: the server started the transaction
        with the first of them."""
        if not self._block:
            self._block = True
            self.conn.execute("BEGIN", prepare=False)

    def _commit(self) -> None:
        if self._expects or self._held:
            self._send_expects()
        if self._xid is None:
            # No write told the transaction's id (none opened with ``execute_xid``, or each
            # that did failed): asked now, answered before COMMIT goes.
            self._xid_cur = self.conn.execute("SELECT txid_current()")
            self.sync()
        self._open_block()
        self._commit_sent = True
        self.conn.execute("COMMIT", prepare=False)

    def _commit_sealed(self) -> None:
        # COMMIT goes with the statements, unanswered: the transaction's id may never come back
        # if the connection is lost now, so a token of this client's choosing, inserted by the
        # transaction, is what tells afterwards whether it committed (``_commit_outcome``).
        self._tokens += 1
        self._token = self._tokens
        if self._expects or self._held:  # with the last writes held, in their statement
            self._send_expects((_INSERT_TOKEN, (self.token_writer, self._token)))
        else:
            self.conn.execute(self._insert_token, (self.token_writer, self._token), prepare=True)
        if self._tokens % TOKENS_KEPT == 0:  # this writer's older tokens: no longer asked for
            self.conn.execute(self._trim_tokens, (self.token_writer, self._tokens - TOKENS_KEPT))
        self._commit_sent = True
        if self._block:
            self.conn.execute("COMMIT", prepare=False)  # answered as the pipeline ends, with the rest
        # Else nothing synced the statements yet: they are one transaction, which the pipeline's
        # sync, as it ends, commits (or rolls back, if one of them failed).

    def _in_transaction(self) -> bool:
        return self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _rollback(self) -> None:
        self._expects, self._expects_fence, self._held = [], None, []
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
        self._open_block()
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
        if committing and self._commit_sent and self._token is not None and _server_refused(exc, self.conn):
            # A batch of sealed writes: the server failed a statement before its COMMIT (a
            # check, a fence), so it skipped the rest, COMMIT included: nothing was written.
            self._commit_sent = False
        elif committing and self._commit_sent and isinstance(exc, Exception):
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
                self._backend_start = _backend_start(self.conn)
            except PersistenceError as exc:
                last = exc
                if not isinstance(exc, StorageUnavailable):
                    raise  # refused for good (owner lock taken, authentication): say so
                continue
            except psycopg.Error as exc:  # the new session was lost at once: another try
                with contextlib.suppress(Exception):
                    self.conn.close()
                last = exc
                continue
            self.db = PgDatabase(self.conn, self.sync)
            self.log.warning("store_reconnected", path=self.path, cause=str(cause))
            return
        raise last

    def _commit_outcome(self, cause: BaseException) -> bool | None:
        xid, backend, started = self._xid, self._backend, self._backend_start
        token = self._token
        self._commit_sent = False
        committed: bool | None = None
        for _ in range(COMMIT_LOOKUPS):
            try:
                self._reconnect(cause)
            except BaseException:  # noqa: BLE001 - the server stays away: it cannot tell
                break
            if xid is None and token is None:
                break
            try:
                if token is not None:
                    committed = token_status(self.conn, self._schema_q, self.token_writer, token,
                                             backend, started)
                else:
                    assert xid is not None
                    committed = commit_status(self.conn, xid, backend=backend)
                break
            except psycopg.Error as exc:  # the connection that asks went too: a new one asks
                cause = exc
        verdict = {True: "committed", False: "aborted", None: "unknown"}[committed]
        self.outcomes[verdict] += 1
        self.log.warning("store_commit_answer_lost", outcome=verdict, committed=committed,
                    xid=xid, token=token, cause=str(cause))
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
