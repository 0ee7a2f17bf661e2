"""A throwaway PostgreSQL server for the tests, started from the binaries on this machine.

``PgServer.start(settings)`` runs ``initdb`` and ``pg_ctl start`` in a temporary directory. initdb
refuses to run as root, so when the tests run as root (CI does) both run as the ``postgres`` user
(``runuser``), in a directory that user owns. The server listens on a unix socket in that
directory and on 127.0.0.1 at a free port; local (socket) connections are trusted, TCP ones need a
password (so that a test can see authentication fail).

``FAST`` settings (no fsync) are for the conformance tests only: a crash of the machine loses the
cluster. Kill tests and benchmarks start their server with ``DURABLE`` settings.

``AF_TEST_PG_DSN`` points the tests at an external server instead (a superuser's URL); each test
then gets a database of its own on it, as here.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

# Tests only: a machine crash may lose the whole cluster, which the tests throw away anyway.
FAST = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_wal_size": "64MB",
    "shared_buffers": "32MB",
}
# As a production server would run: what kill tests and benchmarks need.
DURABLE: dict[str, str] = {}

SUPERUSER = "postgres"
# A role that logs in over TCP with a password (the socket is trusted, TCP is not).
PASSWORD_ROLE = "af_password"
PASSWORD = "af-secret"


class PgUnavailable(Exception):
    """No PostgreSQL server can be started here (no binaries, no postgres user, ...)."""


def find_bindir() -> str | None:
    """The directory of this machine's PostgreSQL server binaries (initdb, pg_ctl), or None."""
    candidates: list[str] = []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, timeout=10, check=True
        )
        candidates.append(out.stdout.strip())
    # Debian keeps the server binaries out of PATH, one directory per major version.
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    versions.sort(key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    candidates += reversed(versions)
    for directory in candidates:
        if all(os.access(os.path.join(directory, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return directory
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def url(*, host: str, port: int, dbname: str, user: str = SUPERUSER, password: str | None = None) -> str:
    """A ``postgresql://`` URL; ``host`` may be a socket directory (then passed as a parameter)."""
    auth = urllib.parse.quote(user, safe="")
    if password is not None:
        auth += ":" + urllib.parse.quote(password, safe="")
    if host.startswith("/"):
        query = urllib.parse.urlencode({"host": host, "port": str(port)})
        return f"postgresql://{auth}@/{urllib.parse.quote(dbname)}?{query}"
    return f"postgresql://{auth}@{host}:{port}/{urllib.parse.quote(dbname)}"


class PgServer:
    """A running server (started here, or external) and the databases made on it for tests."""

    def __init__(self, admin_url: str, *, directory: str | None = None, bindir: str | None = None,
                 socket_dir: str | None = None, port: int | None = None,
                 tcp_port: int | None = None) -> None:
        self.admin_url = admin_url
        self.directory = directory
        self.bindir = bindir
        self.socket_dir = socket_dir
        self.port = port
        self.tcp_port = tcp_port
        self._names = itertools.count(1)
        self._admin: Any = None
        self._options = ""

    # -- starting and stopping -------------------------------------------------------------------
    @classmethod
    def start(cls, settings: dict[str, str], *, bindir: str | None = None) -> PgServer:
        """initdb and start a server in a new temporary directory; raise PgUnavailable if not."""
        bindir = bindir or find_bindir()
        if bindir is None:
            raise PgUnavailable(
                "no PostgreSQL server binaries (initdb, pg_ctl) on this machine: looked at "
                "`pg_config --bindir` and /usr/lib/postgresql/*/bin. Install them "
                "(apt-get install -y postgresql), or point AF_TEST_PG_DSN at a server."
            )
        as_root = os.geteuid() == 0
        if as_root:
            try:
                pwd.getpwnam(SUPERUSER)
            except KeyError:
                raise PgUnavailable(
                    "running as root, and initdb refuses root, but there is no 'postgres' user "
                    "to run it as; install the postgresql package (it creates the user) or run "
                    "the tests as another user."
                ) from None
        # /tmp is world-traversable, so the postgres user can reach a directory made in it.
        directory = tempfile.mkdtemp(prefix="actorflow-pg-", dir="/tmp")
        try:
            if as_root:
                shutil.chown(directory, user=SUPERUSER)
            data = os.path.join(directory, "data")
            pwfile = os.path.join(directory, "pw")
            with open(pwfile, "w") as f:
                f.write(PASSWORD + "\n")
            if as_root:
                shutil.chown(pwfile, user=SUPERUSER)
            _run_as_owner(
                [os.path.join(bindir, "initdb"), "-D", data, "-U", SUPERUSER, "-N",
                 "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}",
                 "-E", "UTF8", "--locale=C"],
                as_root, what="initdb",
            )
            port = free_port()
            options = [f"-p {port}", f"-k {directory}", "-c listen_addresses=127.0.0.1"]
            options += [f"-c {k}={v}" for k, v in settings.items()]
            server = cls(
                url(host=directory, port=port, dbname="postgres"), directory=directory,
                bindir=bindir, socket_dir=directory, port=port, tcp_port=port,
            )
            server._options = " ".join(options)
            server.resume()
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        try:
            server.admin().execute(
                f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}' CREATEDB"
            )
        except BaseException:
            server.stop()
            raise
        return server

    def pause(self) -> None:
        """Stop the server (its data kept): clients see it go away. ``resume`` starts it again."""
        assert self.directory is not None and self.bindir is not None, "a server started here"
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        _run_as_owner(
            [os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.directory, "data"),
             "-m", "fast", "-w", "-t", "60", "stop"],
            os.geteuid() == 0, what="pg_ctl stop",
        )

    def resume(self) -> None:
        """Start the server on its data directory, at the same port and socket."""
        assert self.directory is not None and self.bindir is not None, "a server started here"
        log = os.path.join(self.directory, "server.log")
        _run_as_owner(
            [os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.directory, "data"),
             "-o", self._options, "-l", log, "-w", "-t", "60", "start"],
            os.geteuid() == 0, what="pg_ctl start", log=log,
        )

    @classmethod
    def external(cls, admin_url: str) -> PgServer:
        """A server someone else runs (``AF_TEST_PG_DSN``): only databases are made on it."""
        return cls(admin_url)

    def stop(self) -> None:
        """Drop the connection, stop the server (if started here) and delete its directory."""
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        if self.directory is None or self.bindir is None:
            return
        with contextlib.suppress(PgUnavailable):
            _run_as_owner(
                [os.path.join(self.bindir, "pg_ctl"), "-D", os.path.join(self.directory, "data"),
                 "-m", "immediate", "-w", "-t", "60", "stop"],
                os.geteuid() == 0, what="pg_ctl stop",
            )
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- databases -------------------------------------------------------------------------------
    def admin(self) -> Any:
        """An autocommit connection to the server's ``postgres`` database (kept open)."""
        if self._admin is None or self._admin.closed:
            import psycopg

            self._admin = psycopg.connect(self.admin_url, autocommit=True)
        return self._admin

    def url(self, dbname: str, *, tcp: bool = False, user: str | None = None,
            password: str | None = None) -> str:
        """A URL of database ``dbname`` (over the socket, or over TCP with a password)."""
        if self.socket_dir is None:  # an external server: its admin URL with another database
            parts = urllib.parse.urlsplit(self.admin_url)
            return urllib.parse.urlunsplit(parts._replace(path="/" + urllib.parse.quote(dbname)))
        assert self.port is not None
        if tcp:
            return url(host="127.0.0.1", port=self.port, dbname=dbname,
                       user=user or PASSWORD_ROLE, password=PASSWORD if password is None else password)
        return url(host=self.socket_dir, port=self.port, dbname=dbname, user=user or SUPERUSER)

    def create_database(self, prefix: str = "t") -> str:
        """Create an empty database (from template0, so nothing leaks in); return its name."""
        name = f"af_{prefix}_{os.getpid()}_{next(self._names)}"
        self.admin().execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name``, ending the sessions still connected to it."""
        self.admin().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    @contextlib.contextmanager
    def schema(self, prefix: str = "s") -> Iterator[str]:
        """A fresh schema of the ``postgres`` database for one test: a URL whose connections
        find (and create) their tables there; dropped afterwards. Much cheaper than a database
        (creating one copies a template's files)."""
        name = f"af_{prefix}_{os.getpid()}_{next(self._names)}"
        self.admin().execute(f'CREATE SCHEMA "{name}"')
        base = self.url("postgres") if self.socket_dir is not None else self.admin_url
        sep = "&" if "?" in base else "?"
        try:
            options = urllib.parse.quote(f"-c search_path={name}", safe="")
            yield f"{base}{sep}options={options}"
        finally:
            self._drop_schema(name)

    def _drop_schema(self, name: str) -> None:
        """Drop a test's schema; sessions a test left holding locks in it are ended first, so
        that a leaked connection cannot hang the run."""
        admin = self.admin()
        admin.execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_class c ON c.oid = "
            "l.relation JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
            "AND l.pid != pg_backend_pid()",
            (name,),
        )
        admin.execute("SET lock_timeout = '30s'")
        admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    @contextlib.contextmanager
    def database(self, prefix: str = "t") -> Iterator[str]:
        """A fresh database for one test: its URL; dropped afterwards."""
        name = self.create_database(prefix)
        try:
            yield self.url(name)
        finally:
            self.drop_database(name)


def _run_as_owner(argv: Sequence[str], as_root: bool, *, what: str, log: str | None = None) -> None:
    if as_root:
        argv = ["runuser", "-u", SUPERUSER, "--", *argv]
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PgUnavailable(f"{what} could not run ({' '.join(argv)}): {exc}") from exc
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip()
        if log is not None and os.path.exists(log):
            with open(log, errors="replace") as f:
                detail += "\nserver log:\n" + f.read()[-4000:]
        raise PgUnavailable(f"{what} failed (exit {out.returncode}): {detail}")
