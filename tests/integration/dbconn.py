"""A connection to the database a system runs on, SQLite file or PostgreSQL URL, for tests that
read (or set up) tables directly: ``?`` placeholders on both, one snapshot for several reads."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any


def is_postgres(db: str) -> bool:
    return str(db).startswith(("postgresql://", "postgres://"))


class Connection:
    """``execute(sql, params)`` with ``?``; ``snapshot()`` for reads that must agree."""

    def __init__(self, db: str) -> None:
        self.postgres = is_postgres(db)
        if self.postgres:
            import psycopg

            from persistence._pg._reducer_db import PgDatabase
            from persistence._pg._schema import parse_url

            self._pg = psycopg.connect(parse_url(db)[0], autocommit=True)
            self._db: Any = PgDatabase(self._pg)
        else:
            self._sqlite = sqlite3.connect(db, timeout=30, isolation_level=None)

    def execute(self, sql: str, params: Any = ()) -> Any:
        if self.postgres:
            return self._db.execute(*_arrays(sql, params))
        return self._sqlite.execute(sql, params)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one state of the database."""
        self.execute("BEGIN ISOLATION LEVEL REPEATABLE READ" if self.postgres else "BEGIN")
        try:
            yield
        finally:
            self.execute("COMMIT")

    def close(self) -> None:
        (self._pg if self.postgres else self._sqlite).close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(db: str) -> Connection:
    return Connection(db)


def _arrays(sql: str, params: Any) -> tuple[str, Any]:
    """``sql`` and ``params`` with each list parameter (``id = ANY(?)``, PostgreSQL's) written as
    an array of one ``?`` per item: the reducer db binds parameters as sqlite3 does, which takes
    no list."""
    if not isinstance(params, (list, tuple)) or not any(isinstance(p, list) for p in params):
        return sql, params
    parts = sql.split("?")
    assert len(parts) == len(params) + 1, "one ? per parameter"
    out: list[str] = [parts[0]]
    flat: list[Any] = []
    for p, rest in zip(params, parts[1:], strict=True):
        if isinstance(p, list):
            out.append(f"ARRAY[{', '.join('?' * len(p))}]" if p else "ARRAY[NULL]")
            flat.extend(p)
        else:
            out.append("?")
            flat.append(p)
        out.append(rest)
    return "".join(out), tuple(flat)
