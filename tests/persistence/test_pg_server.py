"""The PostgreSQL server the tests start: it runs (as root too), each test gets an empty database
of its own, and under CI=true a missing server fails the run instead of skipping it."""

from __future__ import annotations

import os

import pytest

from tests.conftest import pg_unavailable
from tests.pgserver import PgServer, PgUnavailable


def test_each_test_gets_an_empty_schema_of_its_own(pg_server: PgServer, pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None and schema[0].startswith("af_s_")
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchone()
        assert tables == (0,)
        conn.execute("CREATE TABLE mark (x int)")
        assert conn.execute("SELECT to_regclass('mark')").fetchone() != (None,)
    with pg_server.schema() as other, psycopg.connect(other, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('mark')").fetchone() == (None,)
    with psycopg.connect(pg_server.url("postgres"), autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('mark')").fetchone() == (None,)


def test_a_whole_database_when_a_test_needs_one(pg_server: PgServer) -> None:
    import psycopg

    with pg_server.database() as url, psycopg.connect(url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        assert name is not None and name[0] != "postgres"
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)


def test_the_database_is_dropped_after_its_test(pg_server: PgServer) -> None:
    with pg_server.database() as url:
        import psycopg

        with psycopg.connect(url) as conn:
            name = conn.execute("SELECT current_database()").fetchone()
    assert name is not None
    left = pg_server.admin().execute(
        "SELECT count(*) FROM pg_database WHERE datname = %s", (name[0],)
    ).fetchone()
    assert left == (0,)


def test_a_password_role_logs_in_over_tcp(pg_server: PgServer) -> None:
    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): its roles are its own")
    import psycopg

    with pg_server.database() as _, psycopg.connect(pg_server.url("postgres", tcp=True)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("af_password",)


def test_the_conformance_server_runs_without_fsync(pg_server: PgServer) -> None:
    if pg_server.socket_dir is None:
        pytest.skip("an external server (AF_TEST_PG_DSN): its settings are its own")
    row = pg_server.admin().execute("SHOW fsync").fetchone()
    assert row == ("off",)


def test_no_binaries_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(PgUnavailable, match="initdb"):
        PgServer.start({}, bindir=str(tmp_path))


def test_a_missing_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run"):
        pg_unavailable("no binaries")


def test_a_missing_server_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no binaries"):
        pg_unavailable("no binaries")


def test_ci_runs_the_postgresql_tests_here() -> None:
    """On a machine with the binaries (every CI machine, after .ci/run's install step) the server
    starts; a failure here is what CI would report instead of skipping."""
    if os.environ.get("CI") != "true":
        pytest.skip("checked under CI=true only")
    server = PgServer.start({})
    server.stop()
