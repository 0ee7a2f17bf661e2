"""psycopg's errors as the store's: the same ``PersistenceError`` classes SQLite's map to, each
with what happened, on which server and database, and what to do.

``where`` in every message is the URL with its password left out (``display_url``).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import psycopg

from persistence._errors import (
    CorruptDatabase,
    DatabaseBusy,
    DiskFull,
    Fenced,
    PersistenceError,
    ReadOnlyDatabase,
    StorageIOError,
    StorageUnavailable,
)

# The SQLSTATE the fence raises (``_cluster``): a write for a shard whose lease this node lost.
FENCED_SQLSTATE = "AF001"
# A check the server made for a write failed (``af_expect``): the careful pass tells whose.
EXPECT_SQLSTATE = "AF002"


def _fenced_shard(detail: str) -> int:
    """The shard number the fence's message names ("... shard 12 ..."), or -1."""
    words = detail.split()
    for i, w in enumerate(words[:-1]):
        if w == "shard" and words[i + 1].isdigit():
            return int(words[i + 1])
    return -1


def _fenced_epoch(detail: str) -> int | None:
    """The epoch the fence's message names ("... (epoch 3) ..."): the one the refused write held."""
    words = detail.replace("(", " ").replace(")", " ").split()
    for i, w in enumerate(words[:-1]):
        if w == "epoch" and words[i + 1].isdigit():
            return int(words[i + 1])
    return None


class ServerUnreachable(StorageUnavailable):
    """No connection to the server could be made (down, restarting, unreachable, full): it may
    pass, so the runtime tries again after a backoff."""


class ConnectionLost(StorageUnavailable):
    """The connection to the server broke (server restarted, session terminated, network).

    Nothing of the transaction that was open on it committed, unless ``maybe_committed`` (the
    connection broke during COMMIT itself, and the server may have committed before the reply
    was lost).
    """

    def __init__(self, message: str, *, path: str | None, maybe_committed: bool = False) -> None:
        super().__init__(message, path=path)
        self.maybe_committed = maybe_committed


class Retryable(DatabaseBusy):
    """A serialization failure (40001) or deadlock (40P01): the transaction was rolled back and
    running it again is expected to succeed (the writer does, a few times, before giving up)."""


def _message(exc: BaseException) -> str:
    text = str(exc).strip()
    return " ".join(text.split()) or type(exc).__name__


# Connection-level SQLSTATEs: class 08, and the server going away under the session.
_LOST_STATES = ("57P01", "57P02", "57P03", "57P05")
_LOST_TEXT = (
    "server closed the connection",
    "terminating connection",
    "connection is lost",
    "connection already closed",
    "the connection is closed",
    "consuming input failed",
    "sending query failed",
    "connection not open",
    "ssl syscall error",
    "broken pipe",
    "connection reset",
)


def is_lost(exc: BaseException, conn: Any = None) -> bool:
    """True if ``exc`` means the connection broke (not that a statement failed)."""
    if not isinstance(exc, psycopg.Error):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    if state.startswith("08") or state in _LOST_STATES:
        return True
    if conn is not None and getattr(conn, "broken", False):
        return True
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        text = str(exc).lower()
        return any(t in text for t in _LOST_TEXT)
    return False


# What a server at max_connections answers a new connection (PostgreSQL 13 to 17; its
# reserved slots' wording changed in 16).
_FULL_TEXT = ("too many clients", "remaining connection slots are reserved")


def connect_error(exc: BaseException, where: str) -> BaseException:
    """The store's error for a connection attempt to ``where`` that raised ``exc``."""
    if isinstance(exc, PersistenceError) or not isinstance(exc, psycopg.Error):
        return exc
    text = str(exc)
    low = text.lower()
    state = getattr(exc, "sqlstate", None) or ""
    detail = _message(exc)
    parts = urllib.parse.urlsplit(where)
    database = urllib.parse.unquote(parts.path.lstrip("/")) or "(the user's default)"
    err: PersistenceError
    if state in ("28P01", "28000") or "authentication failed" in low or "no password supplied" in low:
        err = PersistenceError(
            f"the PostgreSQL server at {where} refused the login: authentication failed "
            f"({detail}). Check the user name and password in the URL (or PGPASSWORD / "
            f"~/.pgpass), and that pg_hba.conf lets this user connect from here.",
            path=where,
        )
    elif 'role "' in low and "does not exist" in low:
        # The server answered: it knows no such login (psycopg gives no SQLSTATE for it).
        user = urllib.parse.unquote(parts.username or "") or "(the operating system user's name)"
        err = PersistenceError(
            f"the PostgreSQL server at {where} refused the login: it has no role {user!r} "
            f"({detail}). Check the user name in the URL (without one, PGUSER or the operating "
            f"system user's name is used), or create the role first (createuser {user}, or "
            f"CREATE ROLE ... LOGIN).",
            path=where,
        )
    elif state == "3D000" or ("database" in low and "does not exist" in low):
        err = PersistenceError(
            f"the PostgreSQL server at {where} has no database {database!r} ({detail}). Create "
            f"it first (createdb {database}, or CREATE DATABASE), or fix the database name in "
            f"the URL.",
            path=where,
        )
    elif state == "42501" or "permission denied" in low:
        err = ReadOnlyDatabase(
            f"the PostgreSQL user of {where} may not connect to or write this database "
            f"({detail}); grant it CONNECT and CREATE (or use a user that has them).",
            path=where,
        )
    elif state == "53300" or any(t in low for t in _FULL_TEXT):
        # psycopg gives no SQLSTATE for a refused connection: the server's words tell.
        err = ServerUnreachable(
            f"the PostgreSQL server at {where} is full: it has max_connections sessions open "
            f"and took no new one ({detail}). Close idle sessions (pg_stat_activity lists "
            f"them), give each node fewer connections, or raise max_connections on the server; "
            f"the store tries again meanwhile.",
            path=where,
        )
    elif state == "57P03" or "starting up" in low or "shutting down" in low:
        err = ServerUnreachable(
            f"the PostgreSQL server at {where} took no new connection ({detail}); it is "
            f"starting up or shutting down. The store tries again meanwhile.",
            path=where,
        )
    else:
        err = ServerUnreachable(
            f"cannot reach the PostgreSQL server at {where} ({detail}). Check that the server "
            f"runs and that the host, port (or socket directory) in the URL are right.",
            path=where,
        )
    err.__cause__ = exc
    return err


def translate_error(exc: BaseException, where: str, conn: Any = None, *,
                    committing: bool = False) -> BaseException:
    """Map a psycopg error raised on an open connection to the store's error for it.

    ``committing``: the error came from COMMIT, so a lost connection may have committed.
    Other exceptions are returned unchanged.
    """
    if isinstance(exc, PersistenceError) or not isinstance(exc, psycopg.Error):
        return exc
    state = getattr(exc, "sqlstate", None) or ""
    detail = _message(exc)
    err: PersistenceError
    if is_lost(exc, conn):
        err = ConnectionLost(
            f"the connection to the PostgreSQL server at {where} was lost ({detail}); "
            + (
                "the COMMIT's outcome is unknown, it may or may not have been written."
                if committing
                else "the transaction open on it was rolled back by the server, nothing of it "
                "was written."
            )
            + " The store reconnects on its next use; if this repeats, check the server and "
            "the network.",
            path=where,
            maybe_committed=committing,
        )
    elif state == FENCED_SQLSTATE:
        err = Fenced(
            f"{detail} (on {where}); the shard moved to another node, which goes on with its "
            f"workflows from their last committed step.",
            path=where, shard=_fenced_shard(detail), epoch=_fenced_epoch(detail),
        )
    elif state in ("40001", "40P01"):
        err = Retryable(
            f"the PostgreSQL server at {where} rolled the transaction back to resolve a "
            f"{'deadlock' if state == '40P01' else 'serialization conflict'} with another "
            f"transaction ({detail}); nothing of it was written, and running it again is safe.",
            path=where,
        )
    elif state in ("53100",) or "no space left" in detail.lower():
        err = DiskFull(
            f"the PostgreSQL server at {where} is out of disk space ({detail}). Nothing of the "
            f"failed write was committed; free space on the server and retry.",
            path=where,
        )
    elif state.startswith("58"):
        err = StorageIOError(
            f"the PostgreSQL server at {where} reports a system error ({detail}), an I/O error "
            f"of its disk most likely; nothing of the failed write was committed. Check the "
            f"server's log and disk.",
            path=where,
        )
    elif state in ("25006",):
        err = ReadOnlyDatabase(
            f"the PostgreSQL server at {where} is read-only here ({detail}): a standby, or a "
            f"read-only session. Point the URL at the primary server to write.",
            path=where,
        )
    elif state == "42501":
        err = ReadOnlyDatabase(
            f"the PostgreSQL user of {where} lacks a privilege this needs ({detail}); grant it "
            f"(USAGE and CREATE on the schema, and rights on its tables), or use another user.",
            path=where,
        )
    elif state in ("XX001", "XX002"):
        err = CorruptDatabase(
            f"the PostgreSQL server at {where} reports damaged data ({detail}); restore the "
            f"database from a backup, or repair it (REINDEX for a damaged index).",
            path=where,
        )
    elif state in ("57014",):
        err = PersistenceError(
            f"a statement on the PostgreSQL server at {where} was cancelled ({detail}): it ran "
            f"past statement_timeout or was cancelled by an administrator; nothing of the "
            f"transaction was written.",
            path=where,
        )
    else:
        err = PersistenceError(
            f"PostgreSQL error on {where}: {type(exc).__name__}"
            f"{f' ({state})' if state else ''}: {detail}",
            path=where,
        )
    err.__cause__ = exc
    return err
