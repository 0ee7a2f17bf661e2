"""``SqliteStore``: the ``Store`` on one SQLite file (or a throwaway in-memory database)."""

from __future__ import annotations

import collections
import contextlib
import os
import sqlite3
import threading
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from persistence._errors import (
    CorruptDatabase,
    ForeignDatabase,
    PersistenceError,
    ReadOnlyDatabase,
)
from persistence._log import SystemLog
from persistence._solo import SoloCluster
from persistence._sql import SQLITE
from persistence._sqlite import _schema
from persistence._sqlite._ownership import OwnerLock, current_owner
from persistence._sqlite._schema import (
    SCHEMA_VERSION,
    classify,
    migrate,
    not_initialised,
    translate_error,
)
from persistence._sqlite._writer import SqliteWriter
from persistence._sqlstore import Query, SqlStore, recent_steps

__all__ = ["SqliteStore", "recent_steps"]

T = TypeVar("T")

DURABILITY = {"normal": "NORMAL", "full": "FULL"}
MEMORY = ":memory:"
# Readers kept open between reads; more are opened while many threads read at once.
READER_POOL = 8
BUSY_TIMEOUT = 10.0

class SqliteStore(SqlStore):
    """The store on one SQLite file, in WAL mode, with one group-commit writer thread.

    Build it with ``open_store``. With ``owner=True`` it owns the file (an exclusive lock; one
    running system per file) and every write goes through the writer thread. With
    ``owner=False`` it only reads, and may ``post_external`` requests for the owner.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: str = "normal",
        owner: bool = True,
        inbox_limit: int = 10_000,
        node_id: str | None = None,
        _log: SystemLog | None = None,
    ) -> None:
        # The logger of the system that opens it, for its writer (None: a store of no system).
        self._store_log = _log.part("store") if _log is not None else None
        if durability not in DURABILITY:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, DURABILITY))}, got {durability!r}"
            )
        if not isinstance(inbox_limit, int) or inbox_limit < 1:
            raise ValueError(f"inbox_limit must be a positive int, got {inbox_limit!r}")
        self.memory = str(path) == MEMORY
        self.path = MEMORY if self.memory else os.path.abspath(os.fspath(path))
        self.durability = durability
        self.owner = owner
        self.inbox_limit = inbox_limit
        self._closed = False
        self._solo = SoloCluster(self, node_id)  # its owner holds the whole file: one shard
        self._close_lock = threading.Lock()
        self._readers: collections.deque[sqlite3.Connection] = collections.deque()
        self._lock: OwnerLock | None = None
        self._writer: SqliteWriter | None = None
        self._ext_conn: sqlite3.Connection | None = None
        self._ext_lock = threading.Lock()
        self._dv_lock = threading.Lock()
        self._dv_conn: sqlite3.Connection | None = None
        self._dv_last = 0
        # A reader of a file in a read-only directory with no write-ahead log left: SQLite cannot
        # create the -shm file it reads through, and nothing can change the file, so readers open
        # it immutable.
        self._immutable = False
        # A reader's connections are read-only to SQLite itself (``mode=ro``): closing the last
        # connection to a file then never checkpoints its write-ahead log into it nor deletes
        # the log, so reading a backup (or a file no system runs on) leaves it as it was.
        self._read_only = False
        # Shared-cache memory databases lock whole tables instead of giving readers snapshots:
        # reads and write transactions take turns on this gate (throwaway use only).
        self._gate: threading.RLock | None = threading.RLock() if self.memory else None
        if self.memory:
            self._uri = f"file:actorflow-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self._open_memory()
        elif owner:
            self._open_owner()
        else:
            self._open_reader_only()

    def cluster(self) -> SoloCluster:
        return self._solo

    # -- opening ------------------------------------------------------------------------------
    def _connect(self, *, timeout: float = BUSY_TIMEOUT, write: bool = False) -> sqlite3.Connection:
        if self.memory:
            return sqlite3.connect(
                self._uri, uri=True, isolation_level=None, check_same_thread=False
            )
        if self._immutable:
            return sqlite3.connect(
                f"file:{urllib.parse.quote(self.path)}?immutable=1", uri=True,
                isolation_level=None, check_same_thread=False, timeout=timeout,
            )
        if self._read_only and not write:
            return sqlite3.connect(
                f"file:{urllib.parse.quote(self.path)}?mode=ro", uri=True,
                isolation_level=None, check_same_thread=False, timeout=timeout,
            )
        return sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=timeout
        )

    def _check_directory(self) -> str:
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise PersistenceError(
                f"cannot open {self.path}: the directory {directory} does not exist; create it "
                f"first or pass another path.",
                path=self.path,
            )
        if os.path.isdir(self.path):
            raise PersistenceError(
                f"cannot open {self.path}: it is a directory; pass the path of a database file.",
                path=self.path,
            )
        return directory

    def _open_memory(self) -> None:
        conn = self._connect()
        migrate(conn, self.path, classify(conn, self.path))
        self._writer = SqliteWriter(conn, self.path, self._gate, log=self._store_log)
        self._dv_last = self._writer.commits

    def _open_owner(self) -> None:
        directory = self._check_directory()
        self._lock = OwnerLock(self.path)
        self._lock.acquire(self._solo.node_id, self._solo.started_at)
        conn: sqlite3.Connection | None = None
        try:
            if os.path.exists(self.path) and not os.access(self.path, os.W_OK):
                raise ReadOnlyDatabase(
                    f"{self.path} is read-only; make it writable to run a system on it, or open "
                    f"it with owner=False to read it.",
                    path=self.path,
                )
            if not os.access(directory, os.W_OK):
                raise ReadOnlyDatabase(
                    f"the directory {directory} of {self.path} is read-only, and SQLite needs to "
                    f"create its -wal and -shm files there; make it writable, or open the file "
                    f"with owner=False to read it.",
                    path=self.path,
                )
            self._check_sidecars()
            conn = self._connect()
            version = classify(conn, self.path)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise PersistenceError(
                    f"{self.path} could not be switched to WAL mode (got {mode!r}); put it on a "
                    f"local file system that supports shared memory.",
                    path=self.path,
                )
            conn.execute(f"PRAGMA synchronous = {DURABILITY[self.durability]}")
            conn.execute("PRAGMA journal_size_limit = 67108864")
            conn.execute("PRAGMA cache_size = -32000")
            migrate(conn, self.path, version)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [(f"owner_{k}", str(v)) for k, v in self._lock.info.items()],
            )
            conn.execute("COMMIT")
            self._writer = SqliteWriter(conn, self.path, log=self._store_log, watch=True)
            conn = None
            self._dv_conn = self._connect()
            self._dv_last = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
        except BaseException as exc:
            if conn is not None:
                conn.close()
            err = translate_error(exc, self.path)
            # Another application's file, or no database at all: leave no lock file beside it.
            self._lock.release(remove=isinstance(err, (ForeignDatabase, CorruptDatabase)))
            if err is exc:
                raise
            raise err from exc

    def _check_sidecars(self) -> None:
        """Make the -wal and -shm files writable if a reader left them read-only (SQLite gives
        them the file's mode, and the file was read-only then), or say which one is in the way.

        Without this the owner's first write failed with a message blaming the file and its
        directory, both writable.
        """
        for suffix in ("-wal", "-shm"):
            side = self.path + suffix
            if not os.path.exists(side) or os.access(side, os.W_OK):
                continue
            try:
                st = os.stat(side)
                if st.st_uid != os.geteuid():
                    raise PermissionError(f"owned by uid {st.st_uid}")
                os.chmod(side, (os.stat(self.path).st_mode | 0o600) & 0o7777)
            except OSError as exc:
                raise ReadOnlyDatabase(
                    f"{side} is read-only ({exc}), though {self.path} and its directory are "
                    f"writable: a reader opened the file while it was read-only and SQLite gave "
                    f"its {suffix} file the same mode. Make {side} writable (or delete it while no "
                    f"process has the database open), then start the system again.",
                    path=self.path,
                ) from exc

    def _open_reader_only(self) -> None:
        directory = self._check_directory()
        if not os.path.exists(self.path):
            raise PersistenceError(
                f"no database at {self.path}; check the path (--db), or start a system on it "
                f"first.",
                path=self.path,
            )
        # A file this user may not write (or in a directory it may not write), with no -shm
        # file yet: SQLite would create one (read-only, as the file is, and left behind to stop
        # the owner later) or fail to. With no owner running and no write-ahead log, nothing can
        # change the file, so it is read immutable.
        read_only = not os.access(directory, os.W_OK) or not os.access(self.path, os.W_OK)
        if read_only and not os.path.exists(self.path + "-shm") and current_owner(self.path) is None:
            wal = self.path + "-wal"
            if not os.access(directory, os.W_OK) and os.path.exists(wal) and os.path.getsize(wal) > 0:
                raise ReadOnlyDatabase(
                    f"{self.path} cannot be read here: its directory {directory} is read-only, "
                    f"and SQLite must create {self.path}-shm to read the write-ahead log {wal} "
                    f"that is not yet in the file. Copy the database and its -wal file to a "
                    f"writable directory, or make this one writable.",
                    path=self.path,
                )
            self._immutable = not (os.path.exists(wal) and os.path.getsize(wal) > 0)
        self._read_only = True
        conn = None
        try:
            conn = self._connect()
            version = classify(conn, self.path)
            if version == 0:
                raise not_initialised(self.path)
            if version < _schema.READABLE_FROM:
                raise PersistenceError(
                    f"{self.path} has schema version {version}, older than this actorflow's "
                    f"{SCHEMA_VERSION}; start the system on it once (owner=True) to migrate it, "
                    f"then read it.",
                    path=self.path,
                )
            conn.execute("PRAGMA query_only = 1")
            self._readers.append(conn)
            conn = None
            self._dv_conn = self._connect()
            self._dv_last = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
        except BaseException as exc:
            if conn is not None:
                conn.close()
            err = translate_error(exc, self.path)
            if err is exc:
                raise
            raise err from exc

    # -- lifecycle ----------------------------------------------------------------------------
    def _close_connections(self) -> None:
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            for conn in (self._dv_conn, self._ext_conn):
                if conn is not None:
                    conn.close()
            while self._readers:
                self._readers.pop().close()
            if self._lock is not None:
                self._lock.release()

    def __repr__(self) -> str:
        role = "owner" if self.owner else "reader"
        return f"<SqliteStore {self.path} {role}{' closed' if self._closed else ''}>"

    def owner_info(self) -> dict[str, object] | None:
        """Return the running owner of the file (pid, host, since), or None if none runs."""
        if self.memory:
            return None
        return current_owner(self.path)

    # -- plumbing -----------------------------------------------------------------------------
    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        try:
            conn = self._readers.pop()
        except IndexError:
            conn = self._connect()
            conn.execute("PRAGMA query_only = 1")
        try:
            gate = self._gate if self._gate is not None else contextlib.nullcontext()
            with gate:
                return fn(conn)
        except sqlite3.Error as exc:
            # (A reader on a file put in place of the removed one finds no tables: say why.)
            gone = self._writer.gone() if isinstance(self._writer, SqliteWriter) else None
            raise (gone or translate_error(exc, self.path)) from exc
        finally:
            if self._closed or len(self._readers) >= READER_POOL:
                conn.close()
            else:
                self._readers.append(conn)


    def _snapshot(self, fn: Callable[[Query], T]) -> T:
        def run(c: sqlite3.Connection) -> T:
            c.execute("BEGIN")
            try:
                return fn(lambda template, params: c.execute(SQLITE.sql(template), params).fetchall())
            finally:
                c.execute("COMMIT")

        return self._read(run)

    def _external(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a short write transaction of a store that does not own the file.

        It waits (busy_timeout) for the owner's writer to finish its current commit.
        """
        with self._ext_lock:
            if self._ext_conn is None:
                self._ext_conn = self._connect(write=True)
            conn = self._ext_conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    value = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise translate_error(exc, self.path) from exc
            return value


    def changed(self) -> bool:
        """True if another connection committed since the last call (PRAGMA data_version).

        Commits of this store's own writer count as "another connection" too: the check is for
        cheap polling, and a false positive costs one indexed read.
        """
        self._check_open()
        if self.memory:
            assert self._writer is not None
            with self._dv_lock:
                now = self._writer.commits
                seen, self._dv_last = self._dv_last, now
                return now != seen
        assert self._dv_conn is not None
        with self._dv_lock:
            try:
                version: int = self._dv_conn.execute("PRAGMA data_version").fetchone()[0]
            except sqlite3.Error as exc:
                raise translate_error(exc, self.path) from exc
            seen, self._dv_last = self._dv_last, version
            return version != seen


    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (the reader connections refuse writes); rows as dicts."""

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            cur = conn.execute(sql, params)
            if cur.description is None:
                return []
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur]

        return self._read(run)
