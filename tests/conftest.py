"""Suite-wide settings, and the PostgreSQL server the PostgreSQL tests run on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from persistence import _promise, _writer
from tests.pgserver import DURABLE, FAST, PgServer, PgUnavailable


def pytest_configure(config: Any) -> None:
    # The runtime's events go through the standard library's logging, which keeps WARNING and
    # above (shown on failure) and drops the rest before structlog renders anything.
    # structlog.testing.capture_logs() replaces these processors while it runs, and then sees
    # every event, whatever its level.
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        cache_logger_on_first_use=False,
    )


@pytest.fixture(autouse=True)
def _thread_left_as_found() -> Iterator[None]:
    """No test leaves the thread the tests run on holding its wake-ups (``hold_wakeups``) or
    staging its writes (``stage_on_this_thread``), as only an engine thread does: every later
    test on that thread would then hand work to the engine without waking it (a ``deliver``
    followed by ``idle()``, which lets nothing go, timed out). Put back, and the test fails."""
    yield
    held, staging = _promise._held.gates is not None, _writer._stager.on
    if held:
        _promise.let_go()
        del _promise._held.gates
    if staging:
        del _writer._stager.on
    if held or staging:
        pytest.fail(
            "this test left the thread the tests run on "
            + ("holding its wake-ups (hold_wakeups)" if held else "staging its writes (stage_on_this_thread)")
            + ", as only an engine thread does: do that on a thread of the test's own",
            pytrace=False,
        )


def pg_unavailable(why: str) -> None:
    """Skip a PostgreSQL test for ``why``; under CI=true fail instead: CI must run them all."""
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true, so the PostgreSQL tests must run, but {why}. .ci/run installs the "
            f"postgresql package when its binaries are missing; check that step's output.",
            pytrace=False,
        )
    pytest.skip(f"PostgreSQL tests skipped: {why}")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the whole run (fsync off: for conformance tests only).

    Started from this machine's binaries as the ``postgres`` user when the tests run as root, or
    the external server that ``AF_TEST_PG_DSN`` (a superuser's URL) names.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pg_unavailable("psycopg is not installed (pip install -e '.[test]' installs it)")
    external = os.environ.get("AF_TEST_PG_DSN")
    if external:
        server = PgServer.external(external)
    else:
        try:
            server = PgServer.start(FAST)
        except PgUnavailable as exc:
            pg_unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_durable_server() -> Iterator[PgServer]:
    """A second server with production settings (fsync on), for kill tests and benchmarks;
    ``AF_TEST_PG_DSN``'s server when it is set (its settings are its own)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pg_unavailable("psycopg is not installed (pip install -e '.[test]' installs it)")
    external = os.environ.get("AF_TEST_PG_DSN")
    if external:
        server = PgServer.external(external)
    else:
        try:
            server = PgServer.start(DURABLE)
        except PgUnavailable as exc:
            pg_unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL of the test server whose connections see an empty schema of this test's own
    (dropped afterwards). A test that needs a whole database uses ``pg_server.database()``."""
    with pg_server.schema() as url:
        yield url


def schema_of(url: str) -> str:
    """The schema a ``pg_url`` points its connections at (its search_path)."""
    import urllib.parse

    options = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["options"][0]
    return options.split("search_path=", 1)[1].split()[0]


@pytest.fixture
def pg_store_url(pg_url: str) -> str:
    """``pg_url`` with the store's own tables in the test's schema too (``?schema=``)."""
    return f"{pg_url}&schema={schema_of(pg_url)}"
