"""The schema, its versioned migrations, and recognising what kind of file we were handed.

``PRAGMA application_id`` marks a file as actorflow's (so another application's SQLite file is
refused, never migrated), ``PRAGMA user_version`` is the schema version, and the ``meta`` table
keeps facts about the file (its schema line, creation, the owning process). Version 1 is the
first released schema; files of development builds before it (versions 1 to 5 of an earlier
numbering, without the ``schema_line`` mark) are refused, never migrated.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import sqlite_utils

from persistence._errors import (
    CorruptDatabase,
    DatabaseBusy,
    DiskFull,
    ForeignDatabase,
    PersistenceError,
    ReadOnlyDatabase,
    SchemaTooNew,
    StorageIOError,
)
from persistence._format import (
    APPLICATION_ID,
    SCHEMA_LINE,
    dev_build_message,
)

SCHEMA_VERSION = 3
# The oldest version a reader (``owner=False``: ``wf list``, ``wf show``, the web view) reads as
# it is: the migrations after it only add, narrow or drop indexes no reader's query names, and
# store a table's rows in another layout with the same columns. A migration that changes what a
# reader reads raises it to its own version.
READABLE_FROM = 1


# What workflows say to the outside (``persistence/_talk.py``), and the ids pruned workflows
# leave taken (tombstones).
TALK_DDL = (
    "CREATE TABLE published (workflow_id TEXT NOT NULL, key TEXT NOT NULL, value BLOB, "
    "step_seq INTEGER NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (workflow_id, key))",
    "CREATE TABLE asks (workflow_id TEXT NOT NULL, ask_id TEXT NOT NULL, name TEXT NOT NULL, "
    "status TEXT NOT NULL, reply BLOB, error TEXT, created_at REAL NOT NULL, replied_at REAL, "
    "PRIMARY KEY (workflow_id, ask_id))",
    "CREATE TABLE tombstones (id TEXT PRIMARY KEY, type TEXT NOT NULL, status TEXT NOT NULL, "
    "ended_at REAL NOT NULL, pruned_at REAL NOT NULL)",
    "CREATE INDEX tombstones_pruned ON tombstones(pruned_at)",
)


def _v1(db: sqlite_utils.Database) -> None:
    """Create the schema: every table and index, as one list of statements.

    A table or index added before the first release goes into this list. Once a release is made,
    a change goes into a new migration (``_v2``) appended to ``MIGRATIONS``.
    """
    for sql in (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
        f"INSERT INTO meta (key, value) VALUES {SCHEMA_LINE!r}",
        # ``recent_steps``: the workflow's newest steps, one line of JSON per step
        # (``[at, event, detail]``, ``at`` in whole milliseconds), newest last, at most
        # ``RECENT_STEPS``; written by the UPDATE every step makes anyway, so the step history
        # costs no page of its own (a row in the history table costs two per commit).
        # ``finished_at``: the system clock's time of the step that ended the workflow (NULL while
        # it runs); no continuation is kept past the end.
        """CREATE TABLE workflows (
            id TEXT PRIMARY KEY,
            type TEXT NOT NULL,
            status TEXT NOT NULL,
            parent_id TEXT,
            detached INTEGER NOT NULL DEFAULT 0,
            test_mode INTEGER NOT NULL DEFAULT 0,
            continuation BLOB,
            fingerprint TEXT,
            waiting_on TEXT,
            result BLOB,
            error TEXT,
            step_seq INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            recent_steps TEXT,
            finished_at REAL
        )""",
        # Partial indexes, so that a step (which rewrites step_seq) touches neither: running
        # workflows in creation order (listing, recovery), and the never-stepped ones (a start
        # whose first step has not committed yet is work to do at recovery).
        "CREATE INDEX workflows_running ON workflows(created_at) WHERE status = 'running'",
        "CREATE INDEX workflows_fresh ON workflows(id) WHERE status = 'running' AND step_seq = 0",
        "CREATE INDEX workflows_parent ON workflows(parent_id)",
        # Listing by creation time (``browse_workflows``, the web view), by index at any size:
        # workflows of one status (and of one type and status) in creation order, with the id to
        # break ties and to match an id prefix on the index alone. Steps leave these columns
        # alone (status changes once, at the end), so a step touches neither index.
        "CREATE INDEX workflows_type ON workflows(type, status, created_at, id)",
        "CREATE INDEX workflows_listed ON workflows(status, created_at, id)",
        # Finished workflows only, oldest end first: the retention sweep and ``prune``. Steps of
        # running workflows never name the column, so they never touch it.
        "CREATE INDEX workflows_finished ON workflows(finished_at) WHERE finished_at IS NOT NULL",
        # AUTOINCREMENT so a sequence number is never handed out twice, even after the newest
        # row was consumed: seqs are how the runtime names what it consumes.
        "CREATE TABLE inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, workflow_id TEXT NOT NULL, "
        "kind TEXT NOT NULL, name TEXT NOT NULL, payload BLOB NOT NULL, created_at REAL NOT NULL)",
        "CREATE INDEX inbox_workflow ON inbox(workflow_id, seq)",
        # Cancels and child outcomes are always work; they are few, so a partial index finds them.
        "CREATE INDEX inbox_control ON inbox(workflow_id) WHERE kind != 'signal'",
        """CREATE TABLE waits (
            workflow_id TEXT NOT NULL,
            name TEXT NOT NULL,
            PRIMARY KEY (workflow_id, name)
        )""",
        "CREATE TABLE timers (id INTEGER PRIMARY KEY AUTOINCREMENT, workflow_id TEXT NOT NULL, "
        "name TEXT NOT NULL, due_at REAL NOT NULL)",
        "CREATE INDEX timers_due ON timers(due_at)",
        "CREATE INDEX timers_workflow ON timers(workflow_id)",
        """CREATE TABLE procedures (
            key TEXT PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            function TEXT NOT NULL,
            args BLOB NOT NULL,
            status TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0,
            result BLOB,
            error TEXT,
            next_attempt_at REAL NOT NULL DEFAULT 0.0,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX procedures_workflow ON procedures(workflow_id)",
        "CREATE INDEX procedures_pending ON procedures(next_attempt_at) WHERE status = 'pending'",
        "CREATE INDEX procedures_finished ON procedures(workflow_id) WHERE status != 'pending'",
        """CREATE TABLE subscriptions (
            name TEXT NOT NULL,
            filter_key TEXT NOT NULL,
            workflow_id TEXT NOT NULL,
            PRIMARY KEY (name, filter_key, workflow_id)
        )""",
        "CREATE INDEX subscriptions_workflow ON subscriptions(workflow_id)",
        """CREATE TABLE history (
            seq INTEGER PRIMARY KEY,
            workflow_id TEXT NOT NULL,
            at REAL NOT NULL,
            event TEXT NOT NULL,
            detail TEXT
        )""",
        "CREATE INDEX history_workflow ON history(workflow_id, seq)",
        "CREATE TABLE external (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
        "workflow_id TEXT NOT NULL, name TEXT, payload TEXT, created_at REAL NOT NULL)",
        # Schedules (``persistence._schedules``): each one's definition and its ``done_until``
        # (every tick at or before it is done: started or skipped), and the tick each scheduled
        # workflow was started for (deleted with its workflow).
        "CREATE TABLE schedules (id TEXT PRIMARY KEY, workflow TEXT NOT NULL, args BLOB NOT NULL, "
        "cron TEXT, every REAL, timezone TEXT NOT NULL, overlap TEXT NOT NULL, "
        "catchup TEXT NOT NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, "
        "done_until REAL NOT NULL, next_tick REAL, last_started TEXT)",
        "CREATE TABLE schedule_runs (workflow_id TEXT PRIMARY KEY, schedule_id TEXT NOT NULL, "
        "tick REAL NOT NULL)",
        # Procedure calls waiting for their limit (``@procedure(concurrency=, rate=)``), as `wf
        # show` and the web view tell it; the call itself is its pending ``procedures`` row.
        "CREATE TABLE limit_waits (key TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, "
        "kind TEXT NOT NULL, since REAL NOT NULL)",
        # What workflows say to the outside (``persistence/_talk.py``), and the ids pruned
        # workflows leave taken (tombstones).
        *TALK_DDL,
    ):
        db.execute(sql)


# Answered asks only, oldest reply first: the retention sweep deletes those past their window
# (``persistence/_talk.py``). An ask's row enters it once, with its reply.
ASKS_ANSWERED = "CREATE INDEX asks_answered ON asks(replied_at) WHERE replied_at IS NOT NULL"


def _v2(db: sqlite_utils.Database) -> None:
    """Version 2: the index of answered asks, by when they were answered."""
    db.execute(ASKS_ANSWERED)


def _v3(db: sqlite_utils.Database) -> None:
    """Version 3: fewer pages written by a workflow's first and last steps.

    Each index a step changes is a page of its own in that step's commit (written to the WAL,
    checksummed and synced): a workflow's end wrote 9.4 pages where its other steps write about 1.

    - ``workflows_running`` goes: ``workflows_listed`` (status, created_at, id) holds the same
      entries in the same order for ``status = 'running'``, and was updated by the same steps.
    - ``workflows_parent`` holds children only: a top-level workflow (most of them) has no entry
      to write at its start. ``parent_id = ?`` and ``parent_id IN (...)`` use it as before.
    - ``waits`` is stored in its primary key (``WITHOUT ROWID``): one B-tree, not a table and
      its key's index, for the rows every waiting step writes and its end deletes.
    """
    for sql in (
        "DROP INDEX workflows_running",
        "DROP INDEX workflows_parent",
        "CREATE INDEX workflows_parent ON workflows(parent_id) WHERE parent_id IS NOT NULL",
        "CREATE TABLE waits_v3 (workflow_id TEXT NOT NULL, name TEXT NOT NULL, "
        "PRIMARY KEY (workflow_id, name)) WITHOUT ROWID",
        "INSERT INTO waits_v3 (workflow_id, name) SELECT workflow_id, name FROM waits",
        "DROP TABLE waits",
        "ALTER TABLE waits_v3 RENAME TO waits",
    ):
        db.execute(sql)


# Version N is reached by running MIGRATIONS[N - 1]. To change the schema after a release, append
# a function (``_v4``: the ALTER/CREATE statements from version 3 to 4) and raise SCHEMA_VERSION;
# never edit a released one (files made by it exist).
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2, _v3]
assert len(MIGRATIONS) == SCHEMA_VERSION



def _is_sqlite_error(exc: BaseException, *codes: int) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in codes


SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_NOTADB = 26


def classify(conn: sqlite3.Connection, path: str) -> int:
    """Check that ``conn`` holds an actorflow database (or an empty file); return its version.

    Raises:
        CorruptDatabase: the file is not a SQLite database, or is malformed.
        ForeignDatabase: the file belongs to another application.
        SchemaTooNew: the file's schema is newer than this code reads.
        PersistenceError: the file was made by a development build before 0.1.0.
    """
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
    except sqlite3.DatabaseError as exc:
        if _is_sqlite_error(exc, SQLITE_NOTADB, SQLITE_CORRUPT):
            raise CorruptDatabase(
                f"{path} is not a usable SQLite database ({exc}); it is damaged or is some other "
                f"kind of file. Restore it from a backup, or use the path of another actorflow "
                f"database.",
                path=path,
            ) from exc
        raise
    if app_id != APPLICATION_ID:
        if app_id != 0 or tables:
            shown = ", ".join(sorted(tables)[:8]) or "none"
            raise ForeignDatabase(
                f"{path} is a SQLite database of another application (application_id "
                f"{app_id:#x}, tables: {shown}); actorflow will not touch it. Pass the path of "
                f"an actorflow database, or of a file that does not exist yet.",
                path=path,
            )
        if version != 0:
            # No tables, but a schema version someone set: another program's mark, not ours
            # (migrating from "version N" would run the migrations after N on a file without
            # their tables).
            raise ForeignDatabase(
                f"{path} is not an actorflow database: it has no tables and no actorflow "
                f"application_id, but its user_version is {version}, so another program marked "
                f"it; actorflow will not touch it. Pass the path of an actorflow database, or of "
                f"a file that does not exist yet.",
                path=path,
            )
        return 0  # an empty SQLite file: ours to initialise
    if version > 0 and not _released_line(conn, tables):
        remedy = "move the file away (or delete it) and start the system again on its path"
        raise PersistenceError(dev_build_message(path, version, remedy), path=path)
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(path, found=version, supported=SCHEMA_VERSION)
    return version


def _released_line(conn: sqlite3.Connection, tables: list[str]) -> bool:
    """Whether the file's meta table marks it as one of the released schema line."""
    if "meta" not in tables:
        return False
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (SCHEMA_LINE[0],)).fetchone()
    return row is not None and row[0] == SCHEMA_LINE[1]


def migrate(conn: sqlite3.Connection, path: str, version: int) -> None:
    """Bring the schema from ``version`` to ``SCHEMA_VERSION``, one transaction per migration."""
    db = sqlite_utils.Database(conn, execute_plugins=False)
    while version < SCHEMA_VERSION:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read inside the write lock: another opener may have migrated meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current != version:
                conn.execute("ROLLBACK")
                version = current
                continue
            MIGRATIONS[version](db)
            version += 1
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {version}")
            db.table("meta").upsert_all(
                [
                    {"key": "schema_version", "value": str(version)},
                    {"key": f"migrated_to_{version}_at", "value": repr(time.time())},
                ],
                pk="key",
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def not_initialised(path: str) -> PersistenceError:
    """Build the error for a reader that finds a file with no actorflow schema yet."""
    return PersistenceError(
        f"{path} holds no actorflow data yet (no schema): nothing has run on it. Start an "
        f"ActorSystem on it once (that creates the schema), then read it.",
        path=path,
    )


def translate_error(exc: BaseException, path: str) -> BaseException:
    """Map a SQLite error to the store's error for it; other exceptions are returned unchanged."""
    if isinstance(exc, PersistenceError) or not isinstance(exc, sqlite3.Error):
        return exc
    err: PersistenceError
    if _is_sqlite_error(exc, SQLITE_FULL):
        err = DiskFull(
            f"the disk holding {path} is full (or the database reached its page limit): {exc}. "
            f"Nothing of the failed write was committed; free some space and retry.",
            path=path,
        )
    elif _is_sqlite_error(exc, SQLITE_READONLY):
        err = ReadOnlyDatabase(
            f"{path} cannot be written ({exc}); make the file and its directory writable, or "
            f"open it with owner=False to read it.",
            path=path,
        )
    elif _is_sqlite_error(exc, SQLITE_CORRUPT, SQLITE_NOTADB):
        err = CorruptDatabase(
            f"{path} is damaged ({exc}); restore it from a backup.",
            path=path,
        )
    elif _is_sqlite_error(exc, SQLITE_BUSY, SQLITE_LOCKED):
        err = DatabaseBusy(
            f"{path} stayed locked by another connection past the busy timeout ({exc}); "
            f"retry, and check that no other program holds a long write transaction on it.",
            path=path,
        )
    elif _is_sqlite_error(exc, SQLITE_IOERR):
        err = StorageIOError(
            f"an I/O error on {path} ({exc}); nothing of the failed write was committed. Check "
            f"the disk and the file system it is on, then retry.",
            path=path,
        )
    else:
        err = PersistenceError(f"SQLite error on {path}: {type(exc).__name__}: {exc}", path=path)
    err.__cause__ = exc
    return err
