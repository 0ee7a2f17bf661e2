"""``PgStore``: the ``Store`` on a PostgreSQL database (``postgresql://`` URL).

The same data, writes and reads as ``SqliteStore``, in a schema of its own (``_schema``), with
the group-commit writer of ``_writer`` (pipelined, READ COMMITTED) and a pool of read-only
connections. One running system owns a schema at a time, as one owns a SQLite file: the owner
holds a session advisory lock named after the schema, which the server releases the moment the
owner's session ends (a crash included).

``durability="full"`` commits with ``synchronous_commit=on`` (a commit is on the server's disk
before it is acknowledged); ``"normal"`` with ``synchronous_commit=off``: a crash of the
*database server* can lose the last fraction of a second of acknowledged commits (at most three
times ``wal_writer_delay``, 0.6 s by default), while a crash of this process loses nothing in
either mode, and the database stays consistent in both.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg_pool

from persistence._errors import DatabaseLocked, PersistenceError
from persistence._pg._errors import ConnectionLost, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._schema import (
    CONNECT_DEFAULTS,
    PG_SCHEMA_VERSION,
    classify,
    connect,
    migrate,
    not_initialised,
    parse_url,
    quote,
)
from persistence._pg._writer import PgWriter
from persistence._sql import postgresql
from persistence._sqlstore import Query, SqlStore
from persistence._urls import display_url

T = TypeVar("T")

SYNCHRONOUS_COMMIT = {"normal": "off", "full": "on"}
READER_POOL = 8
# Readers wait this long for a connection of the pool, then connect on their own.
POOL_TIMEOUT = 5.0
# changed() says True at least this often (seconds), whatever it was told.
CHANGED_EVERY = 1.0


def _owner_key(schema: str) -> str:
    return f"actorflow-owner:{schema}"


# Seconds a new owner waits for the owner lock of a session that is ending.
OWNER_LOCK_GRACE = 1.0


class PgStore(SqlStore):
    """The store on a PostgreSQL database. Build it with ``open_store("postgresql://...")``.

    With ``owner=True`` it owns the URL's schema (one running system per schema) and every write
    goes through the writer thread. With ``owner=False`` it only reads, and may ``post_external``
    requests for the owner.
    """

    def __init__(
        self,
        url: str,
        *,
        durability: str = "normal",
        owner: bool = True,
        inbox_limit: int = 10_000,
    ) -> None:
        if durability not in SYNCHRONOUS_COMMIT:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, SYNCHRONOUS_COMMIT))}, got "
                f"{durability!r}"
            )
        if not isinstance(inbox_limit, int) or inbox_limit < 1:
            raise ValueError(f"inbox_limit must be a positive int, got {inbox_limit!r}")
        self.url = url
        self._conninfo, self.schema = parse_url(url)
        self.path = display_url(url)
        self.durability = durability
        self.owner = owner
        self.inbox_limit = inbox_limit
        self._s = quote(self.schema)
        self.dialect = postgresql(self._s)
        self._channel = f"af_external_{self.schema}"[:63]
        self._closed = False
        self._close_lock = threading.Lock()
        self._writer: PgWriter | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._ext_conn: psycopg.Connection[Any] | None = None
        self._ext_lock = threading.Lock()
        self._changed_lock = threading.Lock()
        self._seen_commits = 0
        self._changed_at = 0.0
        self._first_connect = True
        try:
            if owner:
                self._writer = PgWriter(self._connect_writer, self.schema, self.path)
                self._listen()
            else:
                with connect(self._conninfo, self.path, autocommit=True) as conn:
                    version = self._translated(lambda: classify(conn, self.schema, self.path), conn)
                if version == 0:
                    raise not_initialised(self.schema, self.path)
                if version < PG_SCHEMA_VERSION:
                    raise PersistenceError(
                        f"{self.path} has actorflow schema version {version} in schema "
                        f"{self.schema!r}, older than this actorflow's {PG_SCHEMA_VERSION}; start "
                        f"the system on it once (owner=True) to migrate it, then read it.",
                        path=self.path,
                    )
            given = psycopg.conninfo.conninfo_to_dict(self._conninfo)
            options = f"{given.get('options', '')} -c default_transaction_read_only=on".strip()
            self._pool = psycopg_pool.ConnectionPool(
                self._conninfo, min_size=1, max_size=READER_POOL, open=False,
                name=f"actorflow-readers-{self.schema}",
                kwargs={**{k: v for k, v in CONNECT_DEFAULTS.items() if k not in given},
                        "autocommit": True, "options": options,
                        "application_name": "actorflow-reader"},
                timeout=POOL_TIMEOUT,
            )
            self._pool.open(wait=False)
        except BaseException:
            self._close_connections()
            raise

    # -- opening ------------------------------------------------------------------------------
    def _translated(self, fn: Callable[[], T], conn: Any = None) -> T:
        try:
            return fn()
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc

    def _connect_writer(self) -> psycopg.Connection[Any]:
        """A write connection: durability set, schema migrated (first time), owner lock held."""
        conn = connect(
            self._conninfo, self.path, autocommit=True,
            synchronous_commit=SYNCHRONOUS_COMMIT[self.durability],
        )
        try:
            if self._first_connect:
                migrate(conn, self.schema, self.path)
            # A session that just ended (an owner closed or killed a moment ago) keeps its lock
            # until its server process has exited: give it a second before calling it an owner.
            deadline = time.monotonic() + OWNER_LOCK_GRACE
            while True:
                got = self._translated(lambda: conn.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                    (_owner_key(self.schema),),
                ).fetchone(), conn)
                if got and got[0]:
                    break
                if time.monotonic() >= deadline:
                    raise self._locked(conn)
                time.sleep(0.05)
            facts = [("owner_pid", str(os.getpid())), ("owner_host", socket.gethostname()),
                     ("owner_since", time.strftime("%Y-%m-%dT%H:%M:%S%z")),
                     ("owner_backend_pid", str(conn.info.backend_pid))]
            self._translated(lambda: conn.execute(
                f"INSERT INTO {self._s}.meta (key, value) SELECT * FROM unnest(%s::text[], "
                f"%s::text[]) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                ([k for k, _ in facts], [v for _, v in facts]),
            ), conn)
        except BaseException:
            conn.close()
            raise
        self._first_connect = False
        return conn

    def _locked(self, conn: psycopg.Connection[Any]) -> DatabaseLocked:
        facts = dict(conn.execute(
            f"SELECT key, value FROM {self._s}.meta WHERE key IN "
            f"('owner_pid', 'owner_host', 'owner_since')"
        ).fetchall())
        pid = facts.get("owner_pid")
        return DatabaseLocked(
            f"{self.path} (schema {self.schema})",
            pid=int(pid) if pid and pid.isdigit() else None, host=facts.get("owner_host"),
            since=facts.get("owner_since"),
        )

    def _listen(self) -> None:
        self._listener = connect(self._conninfo, self.path, autocommit=True)
        self._translated(lambda: self._listener.execute(  # type: ignore[union-attr]
            f"LISTEN {quote(self._channel)}"
        ))

    # -- lifecycle ----------------------------------------------------------------------------
    def _close_connections(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()  # its connection's session, and so the owner lock, ends
        finally:
            for conn in (self._listener, self._ext_conn):
                if conn is not None:
                    conn.close()
            if self._pool is not None:
                self._pool.close()

    def __repr__(self) -> str:
        role = "owner" if self.owner else "reader"
        return f"<PgStore {self.path} schema={self.schema} {role}{' closed' if self._closed else ''}>"

    def owner_info(self) -> dict[str, object] | None:
        """The running owner of the schema (pid, host, since), or None if none runs."""
        def run(conn: psycopg.Connection[Any]) -> dict[str, object] | None:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                "((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)",
                (_owner_key(self.schema),),
            ).fetchone()
            if not row or not row[0]:
                return None
            facts = dict(conn.execute(
                f"SELECT key, value FROM {self._s}.meta WHERE key IN "
                f"('owner_pid', 'owner_host', 'owner_since')"
            ).fetchall())
            pid = facts.get("owner_pid")
            return {"pid": int(pid) if pid and pid.isdigit() else None,
                    "host": facts.get("owner_host"), "since": facts.get("owner_since")}

        return self._read(run)

    # -- plumbing -----------------------------------------------------------------------------
    def _read(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        self._check_open()
        assert self._pool is not None
        try:
            with self._pool.connection(timeout=POOL_TIMEOUT) as conn:
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    err = translate_error(exc, self.path, conn)
                    if not isinstance(err, ConnectionLost):
                        raise err from exc
        except psycopg_pool.PoolTimeout:
            pass
        # The pooled connection was lost, or the pool has none to give (the server went away and
        # the pool is between two attempts): a connection of its own for this read, so that a
        # server that is back answers at once. It says why, if it cannot connect either.
        conn = connect(self._conninfo, self.path, autocommit=True,
                       default_transaction_read_only="on")
        try:
            return fn(conn)
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc
        finally:
            conn.close()

    def _snapshot(self, fn: Callable[[Query], T]) -> T:
        def run(c: psycopg.Connection[Any]) -> T:
            with c.transaction():
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return fn(lambda template, params: c.execute(self.dialect.sql(template), params).fetchall())

        return self._read(run)

    def _notify_owner(self, conn: Any, seq: int) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (self._channel, str(seq)))

    def _external(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` on this (not owning) store's own autocommit connection; reconnect once if
        the connection was lost."""
        with self._ext_lock:
            for attempt in (1, 2):
                if self._ext_conn is None or self._ext_conn.closed:
                    self._ext_conn = connect(self._conninfo, self.path, autocommit=True)
                conn = self._ext_conn
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    err = translate_error(exc, self.path, conn)
                    if isinstance(err, ConnectionLost) and attempt == 1:
                        conn.close()
                        continue
                    raise err from exc
        raise AssertionError("unreachable")

    def changed(self) -> bool:
        """True if a request may have come in since the last call: this store committed, a
        ``post_external`` notified, or a second has passed (a notification sent while the
        listener was away is not kept by the server)."""
        self._check_open()
        with self._changed_lock:
            now = time.monotonic()
            commits = self._writer.commits if self._writer is not None else 0
            seen = commits != self._seen_commits or now - self._changed_at >= CHANGED_EVERY
            self._seen_commits = commits
            listener = self._listener
            if listener is not None:
                try:
                    for _ in listener.notifies(timeout=0.0):
                        seen = True
                except psycopg.Error:
                    seen = True
                    try:
                        self._listener = None
                        listener.close()
                        self._listen()
                    except PersistenceError:
                        pass  # the server is away: the poll above stands in until it is back
            if seen:
                self._changed_at = now
            return seen

    def owns(self, workflow_id: str) -> bool:
        """True: an owning PgStore owns every workflow of its schema (one node per schema; a
        cluster's shard leases come with several nodes)."""
        return True

    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (``?`` placeholders, as for reducers); rows as dicts."""
        return self._read(lambda conn: list(PgDatabase(conn).query(sql, params)))

