"""A fault injector for the PostgreSQL client: a TCP proxy on 127.0.0.1 between the store's
connections and a test server, that cuts a connection at a COMMIT.

It reads the frontend/backend protocol (v3) in both directions, message by message. For each
connection it keeps the text of every statement sent since the last BEGIN (simple ``Q`` and
extended ``P`` messages alike, so pipelined and plain transactions both; a prepared statement's
text is remembered from its ``P`` and counted at each ``B`` that runs it). ``arm(mode, match)``
makes the next COMMIT of a transaction that sent a statement containing ``match`` the fault.
Writes sent outside a transaction block are one transaction, which commits at the next Sync
unless a BEGIN comes before it (it then joins them to its block): that Sync is their COMMIT (a
simple ``Q`` query is its own):

- ``before``: the COMMIT is never sent to the server (nor anything after it): the server rolls
  the transaction back. The client sees its connection closed.
- ``partial``: half of the COMMIT message's bytes are sent, then the connection is cut: the
  server never reads a whole COMMIT and rolls back.
- ``during``: the COMMIT (with the rest of its pipeline, up to the Sync) is sent and both
  sockets are closed at once: the server commits while the client sees its connection go.
- ``after``: the server's answer to COMMIT ("CommandComplete COMMIT") is received here and
  dropped, and the connection cut: the transaction is committed, the client never hears so.
- ``terminated``: as ``after``, but the client is sent what a server whose session an
  administrator terminated sends (``FATAL 57P01 terminating connection due to administrator
  command``) in place of the answer, before the cut: what ``pg_terminate_backend`` does to a
  session whose COMMIT has just gone through.

``PipelineExitFault`` is a psycopg shim for what a proxy cannot make: the error psycopg raises
when a pipeline cannot be left (``cannot exit pipeline mode while busy``, no SQLSTATE) once a
COMMIT went through.

Each fault is recorded in ``faults`` (mode, what matched). The client connects with
``sslmode=disable`` and ``gssencmode=disable`` (``url``) so that the stream is plain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import select
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any, Literal

import psycopg

from persistence._pg._reducer_db import PgDatabase
from persistence._pg._writer import PgWriter

Mode = Literal["before", "partial", "during", "after", "terminated"]
MODES: tuple[Mode, ...] = ("before", "partial", "during", "after", "terminated")

# Seconds between the FATAL message of "terminated" and the cut.
TERMINATE_LAG = 0.2

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104
_CANCEL_REQUEST = 80877102


def _error_response(fields: dict[bytes, str]) -> bytes:
    body = b"".join(k + v.encode() + b"\0" for k, v in fields.items()) + b"\0"
    return b"E" + struct.pack("!i", 4 + len(body)) + body


_TERMINATED = _error_response(
    {
        b"S": "FATAL",
        b"V": "FATAL",
        b"C": "57P01",
        b"M": "terminating connection due to administrator command",
    }
)


@dataclasses.dataclass
class Fault:
    mode: Mode
    match: str
    statements: list[str]


@dataclasses.dataclass
class _Arm:
    mode: Mode
    match: str
    left: int


def _statement(kind: bytes, body: bytes) -> str | None:
    """The SQL text of a ``Q`` or ``P`` message's body, else None."""
    if kind == b"Q":
        return body.split(b"\0", 1)[0].decode("utf-8", "replace")
    if kind == b"P":
        parts = body.split(b"\0", 2)  # statement name, query, parameter types
        return parts[1].decode("utf-8", "replace") if len(parts) > 1 else None
    return None


class FaultProxy:
    """Listen on 127.0.0.1 (a free port) and forward every connection to ``target``."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._arms: list[_Arm] = []
        self.faults: list[Fault] = []
        self.connections = 0
        self._closed = False
        self._socks: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="pgfault-accept", daemon=True)
        self._thread.start()

    def url(self, dbname: str, *, user: str, password: str, options: str | None = None) -> str:
        """A URL of database ``dbname`` through this proxy (plain TCP, no TLS, no GSS)."""
        query = {"sslmode": "disable", "gssencmode": "disable"}
        if options:
            query["options"] = options
        auth = f"{urllib.parse.quote(user, safe='')}:{urllib.parse.quote(password, safe='')}"
        return (
            f"postgresql://{auth}@127.0.0.1:{self.port}/{urllib.parse.quote(dbname)}?"
            f"{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"
        )

    def arm(self, mode: Mode, match: str, times: int = 1) -> None:
        """Cut the next ``times`` COMMITs of transactions that sent a statement containing
        ``match`` (case-insensitive), in ``mode``."""
        assert mode in MODES, mode
        with self._lock:
            self._arms.append(_Arm(mode, match.lower(), times))

    def disarm(self) -> None:
        with self._lock:
            self._arms.clear()

    def armed(self) -> bool:
        with self._lock:
            return any(a.left > 0 for a in self._arms)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()

    # -- plumbing -------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._socks += [client, server]
            threading.Thread(
                target=_Link(self, client, server).run, name="pgfault-link", daemon=True
            ).start()

    def _take(self, statements: list[str]) -> _Arm | None:
        """The arm a COMMIT of a transaction that sent ``statements`` fires, if any."""
        with self._lock:
            for arm in self._arms:
                if arm.left > 0 and any(arm.match in s.lower() for s in statements):
                    arm.left -= 1
                    self.faults.append(Fault(arm.mode, arm.match, list(statements)))
                    return arm
        return None


class _Link:
    """One client connection and its server connection, pumped by one thread."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.up = b""  # client -> server bytes not yet parsed
        self.down = b""  # server -> client bytes not yet parsed
        self.startup = True  # the next client message is untyped (startup, SSL request)
        self.raw = False  # a cancel request: forward bytes as they come
        self.prepared: dict[bytes, str] = {}  # prepared statements by name
        # The statements of the open transaction block (None: none is open).
        self.txn: list[str] | None = None
        # The writes sent outside a block since the last Sync: one transaction, which that Sync
        # commits unless a BEGIN comes first.
        self.implicit: list[str] = []
        # "after", "terminated": drop the server's answer to COMMIT and cut.
        self.waiting_commit: Mode | None = None

    def run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.client, self.server], [], [])
                if self.client in ready:
                    data = self.client.recv(65536)
                    if not data:
                        return
                    if not self._from_client(data):
                        return
                if self.server in ready:
                    data = self.server.recv(65536)
                    if not data:
                        return
                    if not self._from_server(data):
                        return
        except (OSError, ValueError):  # ValueError: a socket closed by the proxy's cut (fd -1)
            return
        finally:
            for s in (self.client, self.server):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()

    def _from_client(self, data: bytes) -> bool:
        if self.raw:
            self.server.sendall(data)
            return True
        self.up += data
        out = b""
        while True:
            if self.startup:
                if len(self.up) < 8:
                    break
                (length,) = struct.unpack("!i", self.up[:4])
                if len(self.up) < length:
                    break
                (code,) = struct.unpack("!i", self.up[4:8])
                out += self.up[:length]
                self.up = self.up[length:]
                if code == _CANCEL_REQUEST:
                    self.raw = True
                    out += self.up
                    self.up = b""
                    break
                # After an SSL or GSS request (declined: the URL disables both) comes the startup.
                self.startup = code in (_SSL_REQUEST, _GSS_REQUEST)
                continue
            if len(self.up) < 5:
                break
            kind = self.up[:1]
            (length,) = struct.unpack("!i", self.up[1:5])
            if len(self.up) < 1 + length:
                break
            message = self.up[: 1 + length]
            sql = _statement(kind, message[5:])
            if kind == b"P" and sql is not None:
                name = message[5:].split(b"\0", 1)[0]
                if name:  # prepared (psycopg: at its fifth run): it runs at each Bind of it
                    self.prepared[name] = sql
                    sql = None
            elif kind == b"B":
                name = message[5:].split(b"\0", 2)[1]
                sql = self.prepared.get(name) if name else None
            arm = None
            if kind == b"S" and self.implicit:
                writes, self.implicit = self.implicit, []
                arm = self.proxy._take(writes)
            if sql is not None:
                word = sql.strip().split(None, 1)[0].upper() if sql.strip() else ""
                if word in ("BEGIN", "START"):
                    self.txn, self.implicit = [*self.implicit, sql], []
                elif word in ("COMMIT", "END"):
                    arm = self.proxy._take(self.txn) if self.txn is not None else None
                    self.txn = None
                elif word == "ROLLBACK" and not sql.upper().strip().startswith("ROLLBACK TO"):
                    self.txn, self.implicit = None, []
                elif self.txn is not None:
                    self.txn.append(sql)
                elif word not in (
                    "SELECT",
                    "SHOW",
                    "SET",
                    "LISTEN",
                    "RESET",
                    "SAVEPOINT",
                    "RELEASE",
                    "DISCARD",
                    "DEALLOCATE",
                ):
                    # Outside a transaction block: committed at the next Sync (a simple query: by
                    # itself).
                    if kind == b"Q":
                        arm = self.proxy._take([sql])
                    else:
                        self.implicit.append(sql)
            if arm is not None:
                return self._fault(arm.mode, out, message)
            out += message
            self.up = self.up[1 + length :]
        if out:
            self.server.sendall(out)
        return True

    def _fault(self, mode: Mode, out: bytes, commit: bytes) -> bool:
        """Cut this connection at ``commit`` (the COMMIT message, or the Sync that commits;
        ``out`` was before it)."""
        if mode == "before":
            self.server.sendall(out)
            return False
        if mode == "partial":
            self.server.sendall(out + commit[: max(1, len(commit) // 2)])
            return False
        # The COMMIT and what follows it up to the pipeline's Sync (or all there is).
        rest = self.up[len(commit) :]
        tail = b""
        while len(rest) >= 5 and commit[:1] != b"S":
            kind = rest[:1]
            (length,) = struct.unpack("!i", rest[1:5])
            if len(rest) < 1 + length:
                break
            tail += rest[: 1 + length]
            rest = rest[1 + length :]
            if kind == b"S":
                break
        self.server.sendall(out + commit + tail)
        self.up = rest
        if mode == "during":
            return False
        self.waiting_commit = (
            mode  # "after", "terminated": wait for the server to say COMMIT, drop that
        )
        if self.up:
            self.server.sendall(self.up)
            self.up = b""
        return True

    def _from_server(self, data: bytes) -> bool:
        # Parsed message by message always, so that "after" knows where each one starts.
        self.down += data
        out = b""
        while len(self.down) >= 5:
            kind = self.down[:1]
            (length,) = struct.unpack("!i", self.down[1:5])
            if len(self.down) < 1 + length:
                break
            message = self.down[: 1 + length]
            self.down = self.down[1 + length :]
            if self.waiting_commit and (
                (kind == b"C" and message[5:].startswith(b"COMMIT")) or kind in (b"E", b"Z")
            ):
                # Committed: the client never hears it (or the transaction had failed, and its
                # COMMIT was a rollback: cut all the same).
                if self.waiting_commit == "terminated":
                    out += _TERMINATED
                if out:
                    self.client.sendall(out)
                if self.waiting_commit == "terminated":
                    # A server's exiting backend closes its socket a moment after the FATAL
                    # message: the client reads the message first.
                    time.sleep(TERMINATE_LAG)
                return False
            out += message
        if out:
            self.client.sendall(out)
        return True


# -- a psycopg shim ---------------------------------------------------------------------------------
class PipelineExitFault:
    """Wraps a ``PgWriter``'s connections: once armed, the next pipeline that committed is left
    (on the server: committed) and then ``OperationalError: cannot exit pipeline mode while
    busy`` is raised, the connection left open (``close=False``) or closed."""

    def __init__(self, writer: PgWriter, *, close: bool) -> None:
        self.close = close
        self.writer = writer
        self.left = 0
        self.fired = 0
        connect = writer._connect
        writer._connect = lambda: _ShimConn(connect(), self)  # type: ignore[method-assign,assignment]
        writer.conn = _ShimConn(writer.conn, self)  # type: ignore[assignment]
        writer.db = PgDatabase(writer.conn, writer.sync)

    def arm(self, times: int = 1) -> None:
        self.left += times

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.fired += 1
        return True


class _ShimConn:
    def __init__(self, real: psycopg.Connection[Any], shim: PipelineExitFault) -> None:
        self._real = real
        self._shim = shim
        self._commit = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(query, str) and query.strip().upper() == "COMMIT":
            self._commit = True
        return self._real.execute(query, *args, **kwargs)

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[Any]:
        self._commit = False
        with self._real.pipeline() as p:
            yield p
        # Its COMMIT, or the sync that commits the statements of a transaction with no BEGIN.
        if (self._commit or self._shim.writer._commit_sent) and self._shim.take():
            if self._shim.close:
                self._real.close()
            raise psycopg.OperationalError("cannot exit pipeline mode while busy")
