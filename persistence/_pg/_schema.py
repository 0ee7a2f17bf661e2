"""The PostgreSQL schema, its versioned migrations, and recognising what a URL points at.

Everything actorflow keeps lives in one PostgreSQL schema of the database (``actorflow`` unless
the URL names another with ``?schema=name``), so that it never mixes with the application's own
tables (which reducers create where the connection's search_path says, ``public`` by default). Its
``meta`` table marks the schema as actorflow's (``application_id``) and holds its version
(``schema_version``): a schema that holds other tables is another application's and is refused,
never migrated, and one of a newer version, or one a development build made before 0.1.0 (no
``schema_line`` in its meta table), is refused as SQLite's are.

The tables mirror SQLite's (``persistence/_sqlite/_schema.py``) in PostgreSQL types, with what a server
needs: the step's UPDATE names no indexed column (so PostgreSQL can update the row in place, a
"HOT" update: the never-stepped index keys on a ``fresh`` flag, not on ``step_seq``), the
workflows table leaves room on its pages for that (fillfactor 80), and the tables used as queues
(inbox, timers, procedures, external) are vacuumed by row count, not by a fraction of their size.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.conninfo

from persistence._errors import ForeignDatabase, PersistenceError, ReadOnlyDatabase, SchemaTooNew
from persistence._format import APPLICATION_ID, SCHEMA_LINE, dev_build_message
from persistence._pg._ddl import QUEUE, cluster_ddl
from persistence._pg._errors import _message, connect_error, is_lost, translate_error
from persistence._urls import display_url, unsplit

PG_SCHEMA_VERSION = 3
# The oldest version a reader (``owner=False``: ``wf list``, ``wf show``, the web view) reads as
# it is: the migrations after it only add, narrow or drop indexes no reader's query names. A
# migration that changes what a reader reads raises it to its own version.
READABLE_FROM = 1
DEFAULT_SCHEMA = "actorflow"
# What marks a schema as actorflow's (the same number SQLite files carry as application_id).
MARK = str(APPLICATION_ID)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

# Every step rewrites its workflow's row: room on each page for the new version (HOT), and a
# vacuum per 5 % of dead rows.
WORKFLOWS = "fillfactor = 80, autovacuum_vacuum_scale_factor = 0.05"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_url(url: str) -> tuple[str, str]:
    """Split actorflow's own ``schema`` parameter off a ``postgresql://`` URL.

    Returns the URL for libpq and the schema name.

    Raises:
        ValueError: the URL is not a PostgreSQL URL, libpq cannot read it, or the schema name is
            not a plain identifier.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {display_url(url)!r}; use postgresql://...")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    rest = [(k, v) for k, v in query if k != "schema"]
    schema = schemas[-1] if schemas else DEFAULT_SCHEMA
    if not _IDENTIFIER.fullmatch(schema):
        raise ValueError(
            f"schema={schema!r} in {display_url(url)!r} is not a plain identifier: use letters, "
            f"digits and underscores (63 at most, not starting with a digit)."
        )
    conninfo = unsplit(parts._replace(query=urllib.parse.urlencode(rest, quote_via=urllib.parse.quote)))
    try:
        psycopg.conninfo.conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"libpq cannot read the URL {display_url(url)!r}: {exc}") from exc
    return conninfo, schema


# Connection defaults a URL may override: give up connecting after 10 s, and notice a dead host
# within seconds rather than the two hours of the kernel's keepalive default.
CONNECT_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "application_name": "actorflow",
}


def connect(
    conninfo: str, where: str, *, autocommit: bool = False, **settings: str
) -> psycopg.Connection[Any]:
    """Open a connection (errors as the store's), with ``settings`` as session parameters."""
    given = psycopg.conninfo.conninfo_to_dict(conninfo)
    params: dict[str, Any] = {k: v for k, v in CONNECT_DEFAULTS.items() if k not in given}
    if settings:
        options = " ".join(f"-c {k}={v}" for k, v in settings.items())
        params["options"] = f"{given.get('options', '')} {options}".strip()
    try:
        return psycopg.connect(conninfo, autocommit=autocommit, **params)
    except psycopg.Error as exc:
        raise connect_error(exc, where) from exc


# -- migrations --------------------------------------------------------------------------------


def _v1(cur: psycopg.Cursor[Any], s: str) -> None:
    """Create the schema: SQLite's tables in PostgreSQL types, and the cluster's, as one list of
    statements.

    A table or index added before the first release goes into this list. Once a release is made,
    a change goes into a new migration (``_v2``) appended to ``MIGRATIONS``.
    """
    from persistence._pg._appends import ddl as appends_ddl

    for sql in (
        f"CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
        f"INSERT INTO {s}.meta (key, value) VALUES {SCHEMA_LINE!r}",
        f"""CREATE TABLE {s}.workflows (
            id text PRIMARY KEY,
            type text NOT NULL,
            status text NOT NULL,
            parent_id text,
            detached boolean NOT NULL DEFAULT false,
            test_mode boolean NOT NULL DEFAULT false,
            continuation bytea,
            fingerprint text,
            waiting_on text,
            result bytea,
            error text,
            step_seq bigint NOT NULL DEFAULT 0,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            recent_steps text,
            fresh boolean NOT NULL DEFAULT false,
            finished_at double precision,
            shard integer NOT NULL
        ) WITH ({WORKFLOWS})""",
        # Partial indexes on columns a running step leaves alone: running workflows in creation
        # order (listing, recovery), and the never-stepped ones (a start whose first step has not
        # committed is work at recovery), by the flag their first step clears once.
        f"CREATE INDEX workflows_running ON {s}.workflows (created_at) WHERE status = 'running'",
        f"CREATE INDEX workflows_fresh ON {s}.workflows (id) WHERE status = 'running' AND fresh",
        f"CREATE INDEX workflows_parent ON {s}.workflows (parent_id)",
        # Listing by creation time: workflows of one status, and of one type and status, in
        # creation order with the id, so that a page of ``browse_workflows`` is a short range of
        # one index per status (ids in code point order, ``COLLATE "C"``, as Python and SQLite
        # sort them). A running step names none of these columns; status changes once, at the end.
        f'CREATE INDEX workflows_type ON {s}.workflows (type, status, created_at, id COLLATE "C")',
        f'CREATE INDEX workflows_listed ON {s}.workflows (status, created_at, id COLLATE "C")',
        # Retention: finished workflows only, oldest end first (a running step never names the
        # column, so its UPDATE stays HOT).
        f"CREATE INDEX workflows_finished ON {s}.workflows (finished_at) "
        f"WHERE finished_at IS NOT NULL",
        # Identity columns: a sequence number is never handed out twice (seqs are how the
        # runtime names what it consumes).
        f"""CREATE TABLE {s}.inbox (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            workflow_id text NOT NULL,
            kind text NOT NULL,
            name text NOT NULL,
            payload bytea NOT NULL,
            created_at double precision NOT NULL
        ) WITH ({QUEUE})""",
        f"CREATE INDEX inbox_workflow ON {s}.inbox (workflow_id, seq)",
        f"CREATE INDEX inbox_control ON {s}.inbox (workflow_id) WHERE kind != 'signal'",
        f"""CREATE TABLE {s}.waits (
            workflow_id text NOT NULL,
            name text NOT NULL,
            PRIMARY KEY (workflow_id, name)
        )""",
        f"""CREATE TABLE {s}.timers (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            workflow_id text NOT NULL,
            name text NOT NULL,
            due_at double precision NOT NULL
        ) WITH ({QUEUE})""",
        f"CREATE INDEX timers_due ON {s}.timers (due_at, id)",
        f"CREATE INDEX timers_workflow ON {s}.timers (workflow_id)",
        f"""CREATE TABLE {s}.procedures (
            key text PRIMARY KEY,
            workflow_id text NOT NULL,
            function text NOT NULL,
            args bytea NOT NULL,
            status text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0,
            result bytea,
            error text,
            next_attempt_at double precision NOT NULL DEFAULT 0,
            created_at double precision NOT NULL
        ) WITH ({QUEUE})""",
        f"CREATE INDEX procedures_workflow ON {s}.procedures (workflow_id)",
        f"CREATE INDEX procedures_pending ON {s}.procedures (next_attempt_at) "
        f"WHERE status = 'pending'",
        f"CREATE INDEX procedures_finished ON {s}.procedures (workflow_id) "
        f"WHERE status != 'pending'",
        f"""CREATE TABLE {s}.subscriptions (
            name text NOT NULL,
            filter_key text NOT NULL,
            workflow_id text NOT NULL,
            PRIMARY KEY (name, filter_key, workflow_id)
        )""",
        f"CREATE INDEX subscriptions_workflow ON {s}.subscriptions (workflow_id)",
        f"""CREATE TABLE {s}.history (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            workflow_id text NOT NULL,
            at double precision NOT NULL,
            event text NOT NULL,
            detail text
        )""",
        f"CREATE INDEX history_workflow ON {s}.history (workflow_id, seq)",
        f"""CREATE TABLE {s}.external (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind text NOT NULL,
            workflow_id text NOT NULL,
            name text,
            payload text,
            created_at double precision NOT NULL
        ) WITH ({QUEUE})""",
        # A cluster of nodes on one schema (``_cluster``): the nodes, the shard leases with their
        # epochs, the wake-ups for another shard's owner, the fence and the routing triggers.
        *cluster_ddl(s),
        # The idempotency keys of appends (``_appends``), so that no append is written twice.
        *appends_ddl(s),
        # Schedules, as SQLite has them (``persistence._schedules``), and the procedure calls
        # waiting for their limit (``@procedure(concurrency=, rate=)``).
        f"CREATE TABLE {s}.schedules (id text PRIMARY KEY, workflow text NOT NULL, "
        f"args bytea NOT NULL, cron text, every double precision, timezone text NOT NULL, "
        f"overlap text NOT NULL, catchup text NOT NULL, created_at double precision NOT NULL, "
        f"updated_at double precision NOT NULL, done_until double precision NOT NULL, "
        f"next_tick double precision, last_started text)",
        f"CREATE TABLE {s}.schedule_runs (workflow_id text PRIMARY KEY, "
        f"schedule_id text NOT NULL, tick double precision NOT NULL)",
        f"CREATE TABLE {s}.limit_waits (key text PRIMARY KEY, workflow_id text NOT NULL, "
        f"kind text NOT NULL, since double precision NOT NULL)",
        # What workflows say to the outside (``persistence/_talk.py``), and the ids pruned
        # workflows leave taken (tombstones).
        f"CREATE TABLE {s}.published (workflow_id text NOT NULL, key text NOT NULL, value bytea, "
        f"step_seq bigint NOT NULL, updated_at double precision NOT NULL, PRIMARY KEY (workflow_id, key))",
        f"CREATE TABLE {s}.asks (workflow_id text NOT NULL, ask_id text NOT NULL, name text NOT NULL, "
        f"status text NOT NULL, reply bytea, error text, created_at double precision NOT NULL, "
        f"replied_at double precision, PRIMARY KEY (workflow_id, ask_id))",
        f"CREATE TABLE {s}.tombstones (id text PRIMARY KEY, type text NOT NULL, status text NOT NULL, "
        f"ended_at double precision NOT NULL, pruned_at double precision NOT NULL)",
        f"CREATE INDEX tombstones_pruned ON {s}.tombstones (pruned_at)",
    ):
        cur.execute(sql)


def _v2(cur: psycopg.Cursor[Any], s: str) -> None:
    """Version 2: the index of answered asks, oldest reply first, which the retention sweep
    deletes past their window (``persistence/_talk.py``). An ask's row enters it once, with its
    reply."""
    cur.execute(f"CREATE INDEX asks_answered ON {s}.asks (replied_at) WHERE replied_at IS NOT NULL")


def _v3(cur: psycopg.Cursor[Any], s: str) -> None:
    """Version 3: fewer index entries written by a workflow's first and last steps (its end
    changes ``status``, so that UPDATE is not HOT and enters the new row in every index whose
    predicate it meets). ``workflows_running`` goes: ``workflows_listed`` (status, created_at, id)
    holds the same entries in the same order for ``status = 'running'``. ``workflows_parent``
    holds children only: a top-level workflow has no entry in it, at its start or its end;
    ``parent_id = ANY(...)`` uses it as before."""
    cur.execute(f"DROP INDEX {s}.workflows_running")
    cur.execute(f"DROP INDEX {s}.workflows_parent")
    cur.execute(f"CREATE INDEX workflows_parent ON {s}.workflows (parent_id) WHERE parent_id IS NOT NULL")


# Version N is reached by running MIGRATIONS[N - 1]. To change the schema after a release, append
# a function (``_v4``: the ALTER/CREATE statements from version 3 to 4) and raise
# PG_SCHEMA_VERSION; never edit a released one (schemas made by it exist).
MIGRATIONS: list[Callable[[psycopg.Cursor[Any], str], None]] = [_v1, _v2, _v3]
assert len(MIGRATIONS) == PG_SCHEMA_VERSION


def _missing_privilege(conn: Any, schema: str, where: str, exc: BaseException) -> ReadOnlyDatabase:
    """The error for a schema the connected user lacks a privilege on (``exc``: the server's)."""
    user = conn.info.user
    try:
        usage = conn.execute("SELECT has_schema_privilege(%s, 'USAGE')", (schema,)).fetchone()[0]
    except psycopg.Error:
        usage = None
    what = (
        f"USAGE on the schema {schema!r}"
        if usage is False
        else f"SELECT on the tables of the schema {schema!r}"
    )
    return ReadOnlyDatabase(
        f"the PostgreSQL user {user!r} of {where} lacks {what} ({_message(exc)}): the schema is "
        f"actorflow's or another's, this user may not look. Grant it, as the schema's owner: "
        f"GRANT USAGE, CREATE ON SCHEMA {quote(schema)} TO {quote(user)}; GRANT SELECT, INSERT, "
        f"UPDATE, DELETE ON ALL TABLES IN SCHEMA {quote(schema)} TO {quote(user)} (or connect as "
        f"the user that created it).",
        path=where,
    )


def classify(conn: psycopg.Connection[Any], schema: str, where: str) -> int:
    """The version of actorflow's schema ``schema`` here: 0 if it is missing or empty.

    Raises:
        ForeignDatabase: the schema holds tables of another application.
        SchemaTooNew: it was written by a newer actorflow.
        PersistenceError: it was made by a development build before 0.1.0.
    """
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname",
            (schema,),
        )
    ]
    if not tables:
        return 0
    facts: dict[str, str] = {}
    if "meta" in tables:
        try:
            with conn.transaction():  # a savepoint: a meta table of another shape fails alone
                facts = {
                    str(k): str(v)
                    for k, v in conn.execute(
                        f"SELECT key, value FROM {quote(schema)}.meta "
                        f"WHERE key IN ('application_id', 'schema_version', %s)",
                        (SCHEMA_LINE[0],),
                    )
                }
        except psycopg.errors.InsufficientPrivilege as exc:
            # Not another application's schema: one this user may not read (no USAGE on the
            # schema, or no SELECT on its tables). Say so, not "another application's".
            raise _missing_privilege(conn, schema, where, exc) from exc
        except psycopg.Error as exc:
            if is_lost(exc, conn):
                raise
            facts = {}
    if facts.get("application_id") != MARK:
        shown = ", ".join(tables[:8]) + (", ..." if len(tables) > 8 else "")
        raise ForeignDatabase(
            f"schema {schema!r} of {where} holds tables of another application ({shown}) and no "
            f"actorflow marker; actorflow will not touch it. Name another schema in the URL "
            f"(?schema=name; it is created if missing), or use another database.",
            path=where,
        )
    try:
        version = int(facts.get("schema_version", ""))
    except ValueError:
        raise PersistenceError(
            f"schema {schema!r} of {where} is actorflow's, but its meta table holds no readable "
            f"schema_version ({facts.get('schema_version')!r}); it was edited by hand. Restore "
            f"the database from a backup.",
            path=where,
        ) from None
    if facts.get(SCHEMA_LINE[0]) != SCHEMA_LINE[1]:
        raise PersistenceError(
            dev_build_message(
                f"schema {schema!r} of {where}",
                version,
                f"drop it (DROP SCHEMA {quote(schema)} CASCADE) or name another in the URL "
                f"(?schema=name), and start the system again",
            ),
            path=where,
        )
    if version > PG_SCHEMA_VERSION:
        raise SchemaTooNew(f"{where} (schema {schema})", found=version, supported=PG_SCHEMA_VERSION)
    return version


def migrate(conn: psycopg.Connection[Any], schema: str, where: str) -> int:
    """Bring ``schema`` to ``PG_SCHEMA_VERSION``, one transaction per migration; return the
    version found before.

    Openers on several processes may race: each migration runs under a transaction-level
    advisory lock named after the schema, and the version is read again under it.
    """
    found: int | None = None
    s = quote(schema)
    while True:
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (f"actorflow-migrate:{schema}",),
                )
                version = classify(conn, schema, where)
                if found is None:
                    found = version
                if version >= PG_SCHEMA_VERSION:
                    return found
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
                with conn.cursor() as cur:
                    MIGRATIONS[version](cur, s)
                version += 1
                conn.execute(
                    f"INSERT INTO {s}.meta (key, value) VALUES (%s, %s), (%s, %s), (%s, %s) "
                    f"ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    (
                        "application_id",
                        MARK,
                        "schema_version",
                        str(version),
                        f"migrated_to_{version}_at",
                        repr(time.time()),
                    ),
                )
        except psycopg.Error as exc:
            raise translate_error(exc, where, conn) from exc


def not_initialised(schema: str, where: str) -> PersistenceError:
    """The error for a reader that finds no actorflow schema yet."""
    return PersistenceError(
        f"{where} holds no actorflow data yet (no schema {schema!r}): nothing has run on it. Start "
        f"an ActorSystem on it once (that creates the schema), then read it.",
        path=where,
    )
