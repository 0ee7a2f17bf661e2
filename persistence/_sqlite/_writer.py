"""The writer's transaction protocol on a SQLite connection (``persistence._writer`` runs the loop)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import sqlite_utils

from persistence._errors import StorageIOError
from persistence._log import Log
from persistence._sql import SQLITE
from persistence._sqlite._schema import translate_error
from persistence._writer import Writer


class _Answer:
    """The rows of a statement that returned rows, read at once (a SQLite statement left with
    rows unread would stay in progress, and COMMIT would refuse to run)."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows


# The context of a transaction on a connection no reader shares a lock with (one, reused).
_NO_GATE = contextlib.nullcontext()


class SqliteWriter(Writer):
    """The writer on a SQLite connection: ``BEGIN IMMEDIATE``, statements answered at once.

    Args:
        conn: The write connection (``isolation_level=None``); the writer closes it.
        path: The database path, for error messages.
        gate: A lock held across each transaction, when readers must not overlap writes (the
            shared-cache in-memory database has table locks, not WAL snapshots).
    """

    def __init__(
        self, conn: sqlite3.Connection, path: str, gate: threading.RLock | None = None, *,
        log: Log | None = None, watch: bool = False,
    ) -> None:
        self.conn = conn
        # With ``watch``: the files this connection writes, as (device, inode), checked at each
        # transaction. One removed (or replaced) under the running system would take every
        # write acknowledged from then on with it when the process ends.
        self._files = {f: _identity(f) for f in (path, f"{path}-wal")} if watch else {}
        # What reducers receive: sqlite-utils on this very connection, inside the transaction.
        self.db = sqlite_utils.Database(conn, execute_plugins=False)
        self._gate = gate
        super().__init__(path, SQLITE, name="actorflow-writer", log=log)

    def execute(self, template: str, params: Any = (), *, wait: bool = False) -> Any:
        cur = self.conn.execute(SQLITE.sql(template), params)
        if cur.description is not None:
            return _Answer(cur.fetchall(), cur.rowcount)
        return cur

    def insert_id(self, template: str, column: str, params: Any, *, wait: bool = False) -> Any:
        cur = self.conn.execute(SQLITE.sql(template), params)
        return _Answer([(cur.lastrowid,)] if cur.rowcount == 1 else [], cur.rowcount)

    def executemany(self, template: str, rows: list[tuple[Any, ...]]) -> None:
        self.conn.executemany(SQLITE.sql(template), rows)

    def query_one(self, template: str, params: Any = ()) -> tuple[Any, ...] | None:
        rows = self.conn.execute(SQLITE.sql(template), params).fetchall()
        return rows[0] if rows else None

    def query_all(self, template: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.conn.execute(SQLITE.sql(template), params).fetchall()
        return rows

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return self._gated() if self._gate is not None else _NO_GATE

    @contextlib.contextmanager
    def _gated(self) -> Iterator[None]:
        """The gate, held until a transaction that failed is rolled back: a reader let in before
        the rollback found the tables it wrote locked (``DatabaseBusy``: a reducer that raised,
        read meanwhile by ``idle()`` or ``status()``)."""
        assert self._gate is not None
        with self._gate:
            try:
                yield
            except BaseException:
                self._rollback()
                raise

    def gone(self) -> StorageIOError | None:
        """The error to raise if a file this writer watches was removed or replaced; else None."""
        for f, known in self._files.items():
            if known is None:
                continue
            try:
                st = os.stat(f)
            except OSError:
                st = None
            if st is None or (st.st_dev, st.st_ino) != known:
                return StorageIOError(
                    f"the database file {f} was removed or replaced (or its directory was) while "
                    f"this system ran; nothing more is written, since a write would go to a file "
                    f"no one can open once this process ends (and another system could open a new "
                    f"one at {self.path}). Shut the system down and restore the database from a "
                    f"backup: what was written since the last backup is lost with the file.",
                    path=self.path,
                )
        return None

    def _begin(self) -> None:
        gone = self.gone()
        if gone is not None:
            raise gone
        self.conn.execute("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        self.conn.execute("COMMIT")

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def _savepoint(self) -> None:
        self.conn.execute("SAVEPOINT op")

    def _release_savepoint(self) -> None:
        self.conn.execute("RELEASE op")

    def _undo_savepoint(self) -> bool:
        if not self.conn.in_transaction:
            return False  # an error (disk full, I/O) that ended the transaction
        self.conn.execute("ROLLBACK TO op")
        self.conn.execute("RELEASE op")
        return True

    def _ended(self) -> bool:
        return not self.conn.in_transaction

    def _error(self, exc: BaseException, committing: bool = False) -> BaseException:
        return translate_error(exc, self.path)

    def _close_connection(self) -> None:
        self._rollback()
        self.conn.close()


def _identity(path: str) -> tuple[int, int] | None:
    """The (device, inode) of the file at ``path``; None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
