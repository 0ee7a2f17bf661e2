"""``open_store``: a SQLite file or a PostgreSQL URL, opened by its backend."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from persistence._errors import PersistenceError
from persistence._log import SystemLog
from persistence._sqlite._store import SqliteStore
from persistence._types import Store

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_scheme(path: str | os.PathLike[str]) -> None:
    """A URL of a scheme other than ``postgresql://`` is an error saying so (it would be taken
    for a file's path: ``sqlite:///x.db``, ``postgresql+psycopg://...``); so is an empty path
    (it named the current directory)."""
    if isinstance(path, (str, os.PathLike)) and not os.fspath(path):
        raise PersistenceError(
            "the database path is empty: give a SQLite file's path (game.db), \":memory:\" or a "
            "postgresql:// URL",
            path=None,
        )
    if isinstance(path, str) and (m := _SCHEME.match(path)) and m.group(1).lower() not in ("postgresql", "postgres"):
        raise PersistenceError(
            f"the database {path!r} is a URL of scheme {m.group(1)!r}, which actorflow does not "
            f"open: give a SQLite file's path (game.db, not sqlite:///game.db) or a "
            f"postgresql:// URL (psycopg is the driver: postgresql://, not postgresql+psycopg://)",
            path=None,
        )


def open_store(
    path: str | os.PathLike[str],
    *,
    durability: str = "normal",
    owner: bool = True,
    inbox_limit: int = 10_000,
    node_id: str | None = None,
    node_ttl: float = 10.0,
    local_time: Callable[[], float] | None = None,
    _log: SystemLog | None = None,
) -> Store:
    """Open (creating or migrating if needed) the actorflow database at ``path``.

    Args:
        path: The database file, ``":memory:"`` for a throwaway in-process database, or a
            ``postgresql://`` URL (``?schema=name`` names the PostgreSQL schema actorflow keeps
            its tables in, ``actorflow`` by default; needs the ``postgres`` extra, from a checkout:
            ``pip install -e '.[postgres]'``).
        durability: ``"normal"`` survives a process crash (SQLite synchronous=NORMAL;
            PostgreSQL synchronous_commit=off, where a crash of the database server can lose the
            last fraction of a second); ``"full"`` survives a power loss too (synchronous=FULL,
            one fsync per group commit; synchronous_commit=on).
        owner: Own the database (one running system per file, or per PostgreSQL schema) and
            write. ``False`` opens it for reading and ``post_external`` only, while an owner may
            be running.
        inbox_limit: The most signals a workflow may hold buffered before appends raise
            ``InboxFull``.
        node_id: On PostgreSQL, this process's node name in the cluster on the schema (default:
            host name and process id); a SQLite file's one owner is the one node of its
            cluster of one, under this name.
        node_ttl: On PostgreSQL, how old a node's heartbeat may get (seconds) before the others
            declare it dead and take its shards over.
        local_time: The clock a node measures the database's against (tests give it a skew).

    Raises:
        DatabaseLocked, ForeignDatabase, SchemaTooNew, CorruptDatabase, ReadOnlyDatabase,
        DiskFull, PersistenceError: see each error's message for what to do.
    """
    check_scheme(path)
    if isinstance(path, str) and path.startswith(("postgresql://", "postgres://")):
        try:
            from persistence._pg._store import PgStore
        except ImportError as exc:
            raise PersistenceError(
                f"opening a PostgreSQL URL needs psycopg, which is not installed ({exc}); "
                "install the postgres extra from a checkout with pip install -e '.[postgres]'.",
                path=None,
            ) from exc
        return PgStore(path, durability=durability, owner=owner, inbox_limit=inbox_limit,
                       node_id=node_id, node_ttl=node_ttl, local_time=local_time, _log=_log)
    return SqliteStore(path, durability=durability, owner=owner, inbox_limit=inbox_limit,
                       node_id=node_id, _log=_log)
