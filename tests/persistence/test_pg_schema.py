"""The PostgreSQL schema and its migration, and psycopg's errors as the store's, each against
the real server: what a URL points at is recognised (actorflow's, empty, another application's,
newer), and each way of failing to reach or keep the server says what happened."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from persistence import (
    ForeignDatabase,
    PersistenceError,
    ReadOnlyDatabase,
    SchemaTooNew,
    StorageUnavailable,
    _sql,
)
from persistence._pg import _schema
from persistence._pg._errors import (
    ConnectionLost,
    Retryable,
    translate_error,
)
from persistence._urls import display_url
from tests.conftest import schema_of
from tests.pgserver import PgServer, free_port, url


@pytest.fixture
def conn(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    c = psycopg.connect(pg_url, autocommit=True)
    yield c
    c.close()


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", (schema,)
    )]


def test_a_fresh_schema_is_created_and_marked(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = "af_fresh"
    try:
        assert _schema.classify(conn, schema, "here") == 0
        assert _schema.migrate(conn, schema, "here") == 0
        assert _tables(conn, schema) == [
            "af_appends", "af_commits", "af_nodes", "af_shards", "af_wakeups", "asks", "external", "history",
            "inbox", "limit_waits", "meta", "procedures", "published", "schedule_runs", "schedules",
            "subscriptions", "timers", "tombstones", "waits", "workflows",
        ]
        assert _schema.classify(conn, schema, "here") == _schema.PG_SCHEMA_VERSION
        assert _schema.migrate(conn, schema, "here") == _schema.PG_SCHEMA_VERSION  # a no-op
        meta = dict(conn.execute(f"SELECT key, value FROM {schema}.meta").fetchall())
        assert meta["application_id"] == str(0x41465731)
        assert meta["schema_version"] == str(_schema.PG_SCHEMA_VERSION) == "3"
        assert meta["schema_line"] == "release"
        assert len(_schema.MIGRATIONS) == 3
        _assert_version_3_indexes(conn, schema)
    finally:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_openers_racing_migrate_once(pg_url: str, conn: psycopg.Connection[Any]) -> None:
    schema = schema_of(pg_url)
    found: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def opener() -> None:
        with psycopg.connect(pg_url, autocommit=True) as c:
            barrier.wait(timeout=30)
            try:
                found.append(_schema.migrate(c, schema, "here"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    # One opener found the schema empty; each migration ran once, whoever ran it.
    assert found.count(0) == 1
    assert _schema.classify(conn, schema, "here") == _schema.PG_SCHEMA_VERSION
    assert conn.execute(f"SELECT count(*) FROM {schema}.meta WHERE key = 'schema_version'").fetchone() == (1,)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_a_development_build_schema_is_refused_untouched(
        conn: psycopg.Connection[Any], pg_store_url: str, version: int) -> None:
    """A schema a development build before 0.1.0 made (versions 1 to 5 of the pre-release
    numbering: actorflow's mark, no ``schema_line``) is refused as such, by the migration and by
    stores of both kinds, with what to do; nothing in it changes."""
    from persistence import open_store

    from .conftest import new_wf

    schema = schema_of(pg_store_url)
    s = _schema.quote(schema)
    with conn.transaction():
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        conn.execute(f"CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute(f"INSERT INTO {s}.meta (key, value) VALUES ('application_id', %s), "
                     f"('schema_version', %s)", (_schema.MARK, str(version)))
        conn.execute(f"CREATE TABLE {s}.workflows (id text PRIMARY KEY, "
                     f"restarts integer NOT NULL DEFAULT 0)")
        conn.execute(f"INSERT INTO {s}.workflows (id) VALUES ('old')")
    expected = (f"schema '{schema}' of here was made by a development build of actorflow from "
                f"before 0.1.0 (schema version {version} of the pre-release numbering")
    with pytest.raises(PersistenceError) as info:
        _schema.migrate(conn, schema, "here")
    assert not isinstance(info.value, (SchemaTooNew, ForeignDatabase))
    assert expected in str(info.value) and "DROP SCHEMA" in str(info.value)
    for owner in (True, False):
        with pytest.raises(PersistenceError, match="development build") as info:
            open_store(pg_store_url, owner=owner)
        assert not isinstance(info.value, SchemaTooNew)
    assert _tables(conn, schema) == ["meta", "workflows"]
    assert dict(conn.execute(f"SELECT key, value FROM {s}.meta").fetchall()) == {
        "application_id": _schema.MARK, "schema_version": str(version)}
    # Recreated, the schema works.
    conn.execute(f"DROP SCHEMA {s} CASCADE")
    with open_store(pg_store_url) as store:
        assert store.create_workflow(new_wf("a"))


def test_another_applications_schema_is_refused_untouched(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    conn.execute("CREATE TABLE players (id int)")
    with pytest.raises(ForeignDatabase, match=r"another application \(players\).*\?schema=name"):
        _schema.migrate(conn, schema, "here")
    assert _tables(conn, schema) == ["players"]


def test_a_meta_table_of_another_shape_is_another_applications(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    conn.execute("CREATE TABLE meta (id int, note text)")
    with pytest.raises(ForeignDatabase, match="meta"):
        _schema.classify(conn, schema, "here")
    conn.execute("DROP TABLE meta")
    conn.execute("CREATE TABLE meta (key text, value text)")
    conn.execute("INSERT INTO meta VALUES ('application_id', 'someone-else')")
    with pytest.raises(ForeignDatabase):
        _schema.classify(conn, schema, "here")


def _indexes(conn: psycopg.Connection[Any], schema: str) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
    )}


def _assert_version_3_indexes(conn: psycopg.Connection[Any], schema: str) -> None:
    defs = dict(conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (schema,)).fetchall())
    assert "workflows_running" not in defs
    assert defs["workflows_parent"].endswith("WHERE (parent_id IS NOT NULL)")
    assert {"asks_answered", "workflows_listed", "workflows_type"} <= set(defs)


def test_a_schema_of_version_1_is_migrated_to_version_3_by_an_owner(
    conn: psycopg.Connection[Any], pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A schema of version 1 (the first released one) keeps its data and gets the later
    versions' indexes when an owner opens it (a reader reads it as it is); its answered asks can
    then be swept, its running workflows counted and its children listed."""
    from persistence import open_store

    from .conftest import new_wf

    schema = schema_of(pg_store_url)
    with monkeypatch.context() as m:
        m.setattr(_schema, "PG_SCHEMA_VERSION", 1)
        assert _schema.migrate(conn, schema, "here") == 0
    assert _schema.classify(conn, schema, "here") == 1
    assert "asks_answered" not in _indexes(conn, schema)
    s = _schema.quote(schema)
    conn.execute(f"INSERT INTO {s}.workflows (id, type, status, created_at, updated_at) "
                 f"VALUES ('old', 'mod:wf', 'running', 1, 1)")
    conn.execute(f"INSERT INTO {s}.workflows (id, type, status, parent_id, created_at, updated_at, shard) "
                 f"SELECT 'kid', 'mod:wf', 'running', 'old', 2, 2, shard FROM {s}.workflows WHERE id = 'old'")
    with open_store(pg_store_url, owner=False) as reader:  # read as it is: later versions change indexes
        assert reader.load_workflow("old") is not None
        assert reader.running_count() == 2
    assert _schema.classify(conn, schema, "here") == 1
    with monkeypatch.context() as m:  # a version a reader cannot read as it is: refused
        m.setattr(_schema, "READABLE_FROM", 2)
        with pytest.raises(PersistenceError, match="schema version 1 in schema .*older than"):
            open_store(pg_store_url, owner=False)
    with open_store(pg_store_url) as store:
        assert store.load_workflow("old") is not None
        assert (store.oldest_reply(), store.expire_replies(1e12)) == (None, 0)
        assert store.create_workflow(new_wf("new"))
        assert store.running_count() == 3
        assert [w.id for w in store.children_of(["old"], 10)["old"]] == ["kid"]
    _assert_version_3_indexes(conn, schema)
    meta = dict(conn.execute(f"SELECT key, value FROM {s}.meta").fetchall())
    assert meta["schema_version"] == "3" and {"migrated_to_2_at", "migrated_to_3_at"} <= set(meta)


def test_a_newer_schema_version_is_refused(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    _schema.migrate(conn, schema, "here")
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaTooNew, match="schema version 99.*upgrade actorflow") as info:
        _schema.migrate(conn, schema, "here")
    assert (info.value.found, info.value.supported) == (99, _schema.PG_SCHEMA_VERSION)


def test_a_hand_edited_version_is_named(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    _schema.migrate(conn, schema, "here")
    conn.execute("UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    with pytest.raises(PersistenceError, match="no readable schema_version"):
        _schema.classify(conn, schema, "here")


def _hot_updates(url: str, schema: str, n: int, *, fresh: bool = False) -> tuple[int, int]:
    """Insert ``n`` workflows (at step 1, or never stepped) and step each once with the store's
    UPDATE, in one transaction; (updates, HOT updates) that transaction made on workflows.

    A new session each time: a session's counts of earlier transactions may not be flushed yet.
    """
    d = _sql.postgresql(_schema.quote(schema))
    step = d.sql(d.step_running)
    seq = 0 if fresh else 1
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for i in range(n):
            conn.execute(
                "INSERT INTO workflows (id, type, status, created_at, updated_at, fresh, "
                "continuation, step_seq) VALUES (%s, 'm:f', 'running', %s, %s, %s, %s, %s)",
                (f"w{i}", float(i), float(i), fresh, b"x" * 20, seq),
            )
        for i in range(n):
            cur = conn.execute(
                step, (b"y" * 20, None, '{"signal": "go"}', None, None, seq + 1, 2.0, None,
                       f"w{i}", seq)
            )
            assert cur.rowcount == 1
        row = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
            "WHERE relid = 'workflows'::regclass"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_step_updates_its_row_in_place(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    _schema.migrate(conn, schema, "here")
    assert _hot_updates(pg_url, schema, 20) == (20, 20)
    # A first step clears the fresh flag, once per workflow: that update moves index entries.
    conn.execute("DELETE FROM workflows")
    assert _hot_updates(pg_url, schema, 20, fresh=True) == (20, 0)
    # Every step, with SQLite's partial index, whose predicate names step_seq.
    conn.execute("DELETE FROM workflows")
    conn.execute(
        "CREATE INDEX sqlite_fresh ON workflows(id) WHERE status = 'running' AND step_seq = 0"
    )
    assert _hot_updates(pg_url, schema, 20) == (20, 0)


def test_queue_tables_vacuum_by_row_count(conn: psycopg.Connection[Any], pg_url: str) -> None:
    schema = schema_of(pg_url)
    _schema.migrate(conn, schema, "here")
    options = dict(conn.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind = 'r'", (schema,)
    ).fetchall())
    for table in ("inbox", "timers", "procedures", "external"):
        assert "autovacuum_vacuum_scale_factor=0" in options[table], table
        assert "autovacuum_vacuum_threshold=2000" in options[table], table
    assert "fillfactor=80" in options["workflows"]


# -- URLs ------------------------------------------------------------------------------------------


def test_the_schema_parameter_is_actorflows_own() -> None:
    conninfo, schema = _schema.parse_url("postgresql://u@h:5432/db?schema=game_1&sslmode=disable")
    assert schema == "game_1"
    assert "schema" not in conninfo and "sslmode=disable" in conninfo
    assert _schema.parse_url("postgresql://u@h/db")[1] == "actorflow"
    with pytest.raises(ValueError, match="not a plain identifier"):
        _schema.parse_url("postgresql://u@h/db?schema=a;drop")
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        _schema.parse_url("mysql://u@h/db")
    with pytest.raises(ValueError, match="libpq cannot read"):
        _schema.parse_url("postgresql://u@h/db?bogus_parameter=1")


def test_a_unix_socket_url_with_an_empty_host_part_is_read_as_given(pg_server: PgServer) -> None:
    """``postgresql:///db?host=/socket/dir`` (libpq's own form for a unix socket) keeps its
    ``//`` when the schema parameter is taken off it, and connects."""
    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): no socket directory of its own")
    given = f"postgresql:///postgres?host={pg_server.socket_dir}&port={pg_server.port}&user=postgres&schema=sock"
    conninfo, schema = _schema.parse_url(given)
    assert schema == "sock" and conninfo.startswith("postgresql:///postgres?")
    assert display_url(given).startswith("postgresql:///postgres?")
    conn = _schema.connect(conninfo, display_url(given))
    try:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        conn.close()
    assert _schema.parse_url("postgresql://")[0] == "postgresql://"  # libpq's defaults


def test_passwords_never_reach_a_message() -> None:
    assert display_url("postgresql://ann:s3cret@db.example:5432/game") == (
        "postgresql://ann@db.example:5432/game"
    )
    assert "s3cret" not in display_url("postgresql://ann@h/game?password=s3cret&sslmode=require")


# -- errors against the server --------------------------------------------------------------------


def test_a_server_that_does_not_answer(tmp_path: Any) -> None:
    dead = url(host="127.0.0.1", port=free_port(), dbname="game")
    with pytest.raises(StorageUnavailable, match=r"cannot reach the PostgreSQL server at postgresql://postgres@127\.0\.0\.1:\d+/game .*host, port"):
        _schema.connect(dead, display_url(dead))
    nosocket = url(host=str(tmp_path), port=5432, dbname="game")
    with pytest.raises(PersistenceError, match="cannot reach.*socket directory"):
        _schema.connect(nosocket, display_url(nosocket))


def test_a_wrong_password(pg_server: PgServer) -> None:
    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): its roles are its own")
    bad = pg_server.url("postgres", tcp=True, password="wrong")
    with pytest.raises(PersistenceError, match="refused the login: authentication failed.*password") as info:
        _schema.connect(bad, display_url(bad))
    assert "wrong" not in str(info.value)
    assert "wrong" not in (info.value.path or "")


def test_a_role_that_does_not_exist(pg_server: PgServer) -> None:
    """The server answered and knows no such login: said so, with the fix, not that the server
    cannot be reached (it was) and to check the host and port; refused for good, not retried."""
    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): its roles are its own")
    nobody = pg_server.url("postgres", user="no_such_player")
    with pytest.raises(PersistenceError, match="refused the login: it has no role 'no_such_player'.*createuser no_such_player") as info:
        _schema.connect(nobody, display_url(nobody))
    assert not isinstance(info.value, StorageUnavailable)
    assert "host, port" not in str(info.value)


def test_a_database_that_does_not_exist(pg_server: PgServer) -> None:
    missing = pg_server.url("no_such_game")
    with pytest.raises(PersistenceError, match="has no database 'no_such_game'.*createdb no_such_game"):
        _schema.connect(missing, display_url(missing))


def test_a_connection_lost_mid_transaction(pg_server: PgServer, pg_url: str) -> None:
    conn = _schema.connect(pg_url, "here")
    try:
        pid = conn.info.backend_pid
        conn.execute("SELECT 1")  # a transaction is open now
        pg_server.admin().execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.Error) as info:
            conn.execute("SELECT 1")
        err = translate_error(info.value, "here", conn)
        assert isinstance(err, ConnectionLost)
        assert isinstance(err, StorageUnavailable)  # the runtime retries it after a backoff
        assert not err.maybe_committed
        assert "connection to the PostgreSQL server at here was lost" in str(err)
        assert "nothing of it was written" in str(err)
        assert isinstance(translate_error(info.value, "here", conn, committing=True), ConnectionLost)
        assert "may or may not" in str(translate_error(info.value, "here", conn, committing=True))
    finally:
        conn.close()


def test_a_serialization_failure_is_retryable(pg_url: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE c (id int PRIMARY KEY, n int)")
    conn.execute("INSERT INTO c VALUES (1, 0)")
    with psycopg.connect(pg_url) as a, psycopg.connect(pg_url, autocommit=True) as b:
        a.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        a.execute("SELECT n FROM c WHERE id = 1")
        b.execute("UPDATE c SET n = 1 WHERE id = 1")
        with pytest.raises(psycopg.Error) as info:
            a.execute("UPDATE c SET n = 2 WHERE id = 1")
        err = translate_error(info.value, "here", a)
        assert isinstance(err, Retryable)
        assert isinstance(err, StorageUnavailable)
        assert "running it again is safe" in str(err)


def test_a_read_only_session(pg_url: str) -> None:
    with psycopg.connect(pg_url, options="-c default_transaction_read_only=on") as c:
        with pytest.raises(psycopg.Error) as info:
            c.execute("CREATE TABLE t (x int)")
        err = translate_error(info.value, "here", c)
        assert isinstance(err, ReadOnlyDatabase)
        assert "read-only" in str(err)


def test_other_errors_keep_their_sqlstate(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as info:
        conn.execute("SELECT * FROM no_such_table")
    err = translate_error(info.value, "here", conn)
    assert type(err) is PersistenceError
    assert "(42P01)" in str(err) and "no_such_table" in str(err)
    assert err.__cause__ is info.value


def test_a_schema_the_user_may_not_use_is_reported_as_that_privilege(
    pg_server: PgServer, pg_store_url: str, conn: psycopg.Connection[Any]
) -> None:
    """A user with CONNECT but no USAGE on actorflow's schema is told which privilege it lacks
    and how to grant it, not that the schema is another application's (``ForeignDatabase``,
    with advice to start an empty schema beside the real one)."""
    import urllib.parse
    import uuid

    from persistence import open_store

    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): its roles are its own")
    open_store(pg_store_url).close()  # actorflow's schema, made by its owner
    role = f"af_nousage_{uuid.uuid4().hex[:8]}"
    conn.execute(f"CREATE ROLE {role} LOGIN")
    try:
        parts = urllib.parse.urlsplit(pg_store_url)
        theirs = urllib.parse.urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
        schema = schema_of(pg_store_url)
        for owner in (True, False):
            with pytest.raises(ReadOnlyDatabase) as info:
                open_store(theirs, owner=owner)
            text = str(info.value)
            assert not isinstance(info.value, ForeignDatabase)
            assert f"user {role!r}" in text and f"lacks USAGE on the schema {schema!r}" in text, text
            assert f"GRANT USAGE, CREATE ON SCHEMA {schema}" in text or f'SCHEMA "{schema}"' in text, text
        assert "meta" in _tables(conn, schema)  # untouched
    finally:
        conn.execute(f"DROP ROLE {role}")


def test_a_server_at_max_connections_is_reported_as_full() -> None:
    """A server with every connection slot taken refuses a new one with a message and no
    SQLSTATE psycopg could give: recognised by the server's words, for an ordinary user (its
    slots run out first: "remaining connection slots are reserved") and for a superuser ("too
    many clients"), as full, not as a server that cannot be reached."""
    import uuid

    from persistence import open_store
    from tests.conftest import pg_unavailable
    from tests.pgserver import FAST, PgUnavailable

    try:
        server = PgServer.start({**FAST, "max_connections": "5", "superuser_reserved_connections": "2"})
    except PgUnavailable as exc:
        pg_unavailable(str(exc))
    held: list[psycopg.Connection[Any]] = []
    try:
        role = f"af_game_{uuid.uuid4().hex[:6]}"
        server.admin().execute(f"CREATE ROLE {role} LOGIN")  # the admin's session: one slot
        for user in (role, None):  # the ordinary user's slots first, then everyone's
            target = server.url("postgres", user=user)
            while True:
                try:
                    held.append(psycopg.connect(target))
                except psycopg.OperationalError:
                    break
            with pytest.raises(StorageUnavailable) as info:
                open_store(f"{target}&schema=game")
            text = str(info.value)
            assert "is full: it has max_connections sessions open" in text, text
            assert "cannot reach" not in text, text
    finally:
        for c in held:
            c.close()
        server.stop()
