"""``PgStore``: the ``Store`` on a PostgreSQL database (``postgresql://`` URL).

The same data, writes and reads as ``SqliteStore``, in a schema of its own (``_schema``), with
the group-commit writer of ``_writer`` (pipelined, READ COMMITTED) and a pool of read-only
connections. Every owning store is a node of the cluster on its schema (``_cluster``): it
writes for the workflows of the shards it leases, each step's transaction fenced by the lease's
epoch, and a second live process under the same node name is refused (``NodeIdInUse``).

``durability="full"`` commits with ``synchronous_commit=on`` (a commit is on the server's disk
before it is acknowledged); ``"normal"`` with ``synchronous_commit=off``: a crash of the
*database server* can lose the last fraction of a second of acknowledged commits (at most three
times ``wal_writer_delay``, 0.6 s by default), while a crash of this process loses nothing in
either mode, and the database stays consistent in both.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
import psycopg.conninfo
import psycopg_pool

from persistence import _sql, _writes
from persistence._errors import Fenced, PersistenceError
from persistence._log import SystemLog, part_log
from persistence._pg import _appends, _schema
from persistence._pg._cluster import NODE_SETTINGS, TTL, ClusterNode, read_nodes
from persistence._pg._errors import ConnectionLost, translate_error
from persistence._pg._reducer_db import PgDatabase
from persistence._pg._schema import (
    CONNECT_DEFAULTS,
    PG_SCHEMA_VERSION,
    classify,
    connect,
    migrate,
    not_initialised,
    parse_url,
    quote,
)
from persistence._pg._writer import PgWriter, commit_status, commit_unknown
from persistence._promise import Promise
from persistence._sql import postgresql
from persistence._sqlstore import Query, SqlStore
from persistence._types import (
    Delivered,
    Dropped,
    NewWorkflow,
    NodeRow,
    ProcedureRow,
    StepAck,
    StepWrite,
    TimerRow,
)
from persistence._urls import display_url
from persistence._writer import Writer

T = TypeVar("T")


# The first statement of a step's write on a cluster's node (``_cluster``), and of every other
# write: the incarnation the routing trigger compares leases with. Each also gives the
# transaction's id (``PgWriter.execute_xid``).
_FENCE = "SELECT {s}.af_fence(?, ?, ?), txid_current()"
_AS_NODE = "SELECT set_config('actorflow.incarnation', ?, true), txid_current()"
_SPREAD = "SELECT {s}.af_spread(?)"

SYNCHRONOUS_COMMIT = {"normal": "off", "full": "on"}
READER_POOL = 8
# Readers wait this long for a connection of the pool, then connect on their own.
POOL_TIMEOUT = 5.0
# changed() says True at least this often (seconds), whatever it was told.
CHANGED_EVERY = 1.0


class PgStore(SqlStore):
    """The store on a PostgreSQL database. Build it with ``open_store("postgresql://...")``.

    With ``owner=True`` it is a node of the cluster on the URL's schema (``node_id``: its name,
    default host name and process id; ``node_ttl``: how old a node's heartbeat may get before
    the others take its shards over) and every write goes through the writer thread. With ``owner=False`` it only reads, and may ``post_external``
    requests for the owner.
    """

    def __init__(
        self,
        url: str,
        *,
        durability: str = "normal",
        owner: bool = True,
        inbox_limit: int = 10_000,
        node_id: str | None = None,
        node_ttl: float = TTL,
        local_time: Callable[[], float] | None = None,
        _log: SystemLog | None = None,
    ) -> None:
        # The system that opens it, for its writer's and its cluster node's events.
        self._system_log = _log
        self._log = _log.part("store") if _log is not None else part_log("store")
        if durability not in SYNCHRONOUS_COMMIT:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, SYNCHRONOUS_COMMIT))}, got "
                f"{durability!r}"
            )
        if not isinstance(inbox_limit, int) or inbox_limit < 1:
            raise ValueError(f"inbox_limit must be a positive int, got {inbox_limit!r}")
        self.url = url
        self._conninfo, self.schema = parse_url(url)
        self.path = display_url(url)
        self.durability = durability
        self.owner = owner
        self.inbox_limit = inbox_limit
        self._s = quote(self.schema)
        self.dialect = postgresql(self._s)
        self._channel = f"af_external_{self.schema}"[:63]
        self._closed = False
        self._close_lock = threading.Lock()
        self._writer: PgWriter | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._ext_conn: psycopg.Connection[Any] | None = None
        self._ext_lock = threading.Lock()
        self._changed_lock = threading.Lock()
        self._seen_commits = 0
        self._changed_at = 0.0
        self._first_connect = True
        self.node_id = node_id or f"{socket.gethostname()}-{os.getpid()}"
        self._node: ClusterNode | None = None
        # The epoch of each shard's lease under which this node last wrote a step of it (read and
        # written by the write in the batch only, one batch at a time).
        self._stepped_under: dict[int, int] = {}
        try:
            if owner:
                self._writer = PgWriter(self._connect_writer, self.schema, self.path,
                                        log=_log.part("store") if _log is not None else None)
                self._listen()
            else:
                with connect(self._conninfo, self.path, autocommit=True) as conn:
                    version = self._translated(lambda: classify(conn, self.schema, self.path), conn)
                if version == 0:
                    raise not_initialised(self.schema, self.path)
                if version < _schema.READABLE_FROM:
                    raise PersistenceError(
                        f"{self.path} has actorflow schema version {version} in schema "
                        f"{self.schema!r}, older than this actorflow's {PG_SCHEMA_VERSION}; start "
                        f"the system on it once (owner=True) to migrate it, then read it.",
                        path=self.path,
                    )
            given = psycopg.conninfo.conninfo_to_dict(self._conninfo)
            options = f"{given.get('options', '')} -c default_transaction_read_only=on".strip()
            self._pool = psycopg_pool.ConnectionPool(
                self._conninfo, min_size=1, max_size=READER_POOL, open=False,
                name=f"actorflow-readers-{self.schema}",
                kwargs={**{k: v for k, v in CONNECT_DEFAULTS.items() if k not in given},
                        "autocommit": True, "options": options,
                        "application_name": "actorflow-reader"},
                timeout=POOL_TIMEOUT,
            )
            self._pool.open(wait=False)
            if owner:
                self._node = ClusterNode(self._conninfo, self.schema, self.path, self.node_id,
                                         read=self._read, ttl=node_ttl, local_time=local_time or time.time,
                                         log=_log.part("cluster") if _log is not None else None)
                self._node.open()
        except BaseException:
            self._close_connections(handoff=False)
            raise

    # -- opening ------------------------------------------------------------------------------
    def _translated(self, fn: Callable[[], T], conn: Any = None) -> T:
        try:
            return fn()
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc

    def _connect_writer(self) -> psycopg.Connection[Any]:
        """A write connection: durability set, schema migrated (first time). Who may write for
        which workflows is the cluster's (the shard leases and the fence), not a lock's."""
        conn = connect(
            self._conninfo, self.path, autocommit=True,
            synchronous_commit=SYNCHRONOUS_COMMIT[self.durability], **NODE_SETTINGS,
        )
        try:
            # Named apart from the store's other sessions, for an operator (pg_stat_activity).
            conn.execute("SET application_name = 'actorflow-writer'")
            if self._first_connect:
                migrate(conn, self.schema, self.path)
        except psycopg.Error as exc:
            conn.close()
            raise translate_error(exc, self.path, conn) from exc
        except BaseException:
            conn.close()
            raise
        self._first_connect = False
        return conn

    def _listen(self) -> None:
        self._listener = connect(self._conninfo, self.path, autocommit=True)
        self._translated(lambda: self._listener.execute(  # type: ignore[union-attr]
            f"LISTEN {quote(self._channel)}"
        ))

    # -- lifecycle ----------------------------------------------------------------------------
    def crash(self) -> None:
        """Close without handing the shards off (for tests of a node that dies): the other
        nodes find this one's session gone and take its shards over."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._close_connections(handoff=False)

    def _close_connections(self, handoff: bool = True) -> None:
        if self._node is not None:
            self._node.halt()  # its rounds read through this store, which is closing
        try:
            if self._writer is not None:
                self._writer.close()  # every write queued is in (or failed) by now
        finally:
            if self._node is not None:
                # Hand the shards off: the other nodes claim them at once, and recover them.
                if handoff:
                    self._node.leave()
                else:
                    self._node.close()
            for conn in (self._listener, self._ext_conn):
                if conn is not None:
                    conn.close()
            if self._pool is not None:
                self._pool.close()

    def __repr__(self) -> str:
        role = "owner" if self.owner else "reader"
        return f"<PgStore {self.path} schema={self.schema} {role}{' closed' if self._closed else ''}>"

    def prune_finished(self, before: float, limit: int = 1000, *, at: float | None = None) -> list[str]:
        """As the SQL store's; a reader (``owner=False``) prunes on a transaction of its own,
        without joining the cluster: finished workflows are written by no node, and the rows it
        deletes are locked, skipping those another prune holds, so a node pruning meanwhile
        deletes each workflow once too (``wf prune`` on a schema no node runs on)."""
        if self._writer is not None:
            return super().prune_finished(before, limit, at=at)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"prune_finished() limit must be a positive int, got {limit!r}")
        self._check_open()
        pruned_at = time.time() if at is None else float(at)

        def run(conn: psycopg.Connection[Any]) -> list[str]:
            with conn.transaction():
                return _writes.prune_finished(_Transaction(conn, self), float(before), limit, pruned_at)  # type: ignore[arg-type]

        return self._external(run)

    def owner_info(self) -> dict[str, object] | None:
        """A running node of the schema (pid, host, since: the one that joined first, and its
        node_id), or None if none runs."""
        live = [n for n in self.nodes() if n.state == "up"]
        if not live:
            return None
        first = min(live, key=lambda n: n.started_at)
        return {"pid": first.pid, "host": first.host,
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(first.started_at)),
                "node_id": first.node_id}

    def nodes(self) -> list[NodeRow]:
        """Every node the schema knows (up, dead or left), by name; works without owning."""
        rows: list[NodeRow] = self._read(lambda conn: read_nodes(conn, self.schema))
        return rows

    def remote_reads(self) -> bool:
        return True  # every read is a round trip to the server

    def cluster(self) -> ClusterNode:
        if self._node is None:
            raise PersistenceError(
                f"the store on {self.path} was opened with owner=False: it reads, and is no node "
                f"of the cluster; open it with owner=True (an ActorSystem) to run workflows.",
                path=self.path,
            )
        return self._node

    # -- a cluster's node: fenced writes, and the reads scoped to its shards -------------------
    def _write(self, fn: Callable[[Writer], Any], *, fenced: bool = False, here: bool = False) -> Promise[Any]:
        node = self._node
        if node is not None and not fenced:
            # The routing trigger tells the shards leased here by the incarnation this
            # transaction names: an inbox row for one of them needs no wake-up row.
            inner, incarnation = fn, node.membership.incarnation

            def fn(w: Writer) -> Any:
                assert isinstance(w, PgWriter)
                w.execute_xid(_AS_NODE, (incarnation,))
                return inner(w)

        return super()._write(fn, here=here)

    def submit_step(self, step: StepWrite, *, here: bool = False) -> Promise[StepAck]:
        """Queue ``step`` for the group-commit writer; the future resolves after COMMIT (run on
        this thread when ``here`` and the writer is idle, as ``SqlStore.submit_step``).

        On a cluster's node its transaction opens with the fence of its workflow's shard: a
        node that lost the lease (or never held it) commits nothing of it (``Fenced``)."""
        apply = functools.partial(_writes.apply_step, step=step, limit=self.inbox_limit)
        node = self._node
        if node is None:
            return super()._write(apply, here=here)
        root = step.create is not None and step.create.parent_id is None
        try:
            # A start's first step inserts its root workflow, in its own id's shard (``af_place``):
            # known without reading a row that is not there yet.
            fence = node.fence(step.workflow_id, shard=node.own_shard(step.workflow_id) if root else None)
        except Fenced as exc:
            refused: Promise[StepAck] = Promise()
            refused.set_exception(exc)
            return refused

        spread = [wf.id for wf in step.new_workflows if wf.spread]

        def fenced(w: Writer) -> Any:
            assert isinstance(w, PgWriter)
            shard, epoch = fence[0], fence[1]
            if self._stepped_under.get(shard, epoch) != epoch:
                # The shard was another node's since this node last stepped its workflows: the
                # wait sets the writer remembers of them may have changed meanwhile.
                w.waits.clear()
            self._stepped_under[shard] = epoch
            if w.server_checks:
                w.send_held()  # (the checked writes of the write before: a statement of their own)
                w.fence_next = fence  # sent with the step's first checked writes
            else:
                w.execute_xid(_FENCE, fence)
            try:
                done = apply(w)
            finally:
                unsent, w.fence_next = w.fence_next, None
            if unsent is not None:  # (a step whose first statement took no fence)
                w.execute_xid(_FENCE, fence)
            for child in spread:  # its own id's shard, and a wake-up for that shard's owner
                w.execute(_SPREAD, (child,))
            return done

        written: Promise[StepAck] = self._write(fenced, fenced=True, here=here)
        if root:
            # Committed: the row is there, in that shard (the later steps and signals need not
            # read it). Not before: an id taken meanwhile is another workflow's, maybe a child
            # in its parent's shard.
            written.add_done_callback(
                lambda p: node.note_shard(step.workflow_id, fence[0]) if p.exception() is None else None)
        return written

    def submit_create_workflows(self, wfs: list[NewWorkflow]) -> Promise[list[bool]]:
        """``create_workflows``, queued: the future resolves after COMMIT. On a cluster's node,
        the shard of each root workflow created is remembered (its own id's)."""
        wfs = list(wfs)
        written = super().submit_create_workflows(wfs)
        node = self._node
        if node is not None:
            def note(p: Promise[list[bool]]) -> None:
                if p.exception() is None:
                    for wf, created in zip(wfs, p.result(), strict=True):
                        if created and wf.parent_id is None:
                            node.note_shard(wf.id, node.own_shard(wf.id))

            written.add_done_callback(note)
        return written

    # -- appends, each at most once (``_appends``: an idempotency key the server enforces) ------
    def submit_append_inbox(
        self, workflow_id: str, kind: str, name: str, payload: bytes, *, at: float,
        external_seq: int | None = None,
    ) -> Promise[Delivered]:
        """``append_inbox``, queued: the future resolves after COMMIT. The append carries a key
        of its own (a request carried out: the request's), so that it is written once however
        often the writer runs it."""
        if external_seq is not None:  # the request's own key: carried out once, however often
            once = _appends.Once(f"external:{external_seq}", retried=True)
        else:
            once = _appends.Once(_appends.new_key())
        return self._write(lambda w: _appends.append_inbox(
            w, once, workflow_id, kind, name, payload, at, self.inbox_limit, external_seq))

    def submit_broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float
    ) -> Promise[tuple[list[Delivered], list[tuple[str, Dropped]]]]:
        """``broadcast``, queued, each subscriber's row at most once (a key per broadcast)."""
        once = _appends.Once(_appends.new_key())
        return self._write(
            lambda w: _appends.broadcast(w, once, name, filter_key, payload, at, self.inbox_limit))

    def post_external(
        self, kind: str, workflow_id: str, name: str | None, payload: str | None, *, at: float
    ) -> int:
        """Append a request for the owner (works without owning the schema), at most once (a key
        of its own, whichever connection posts it, however often). Returns its seq."""
        self._check_open()
        _writes.check_external(self.path, kind, workflow_id)
        values = (kind, workflow_id, name, payload, at)
        once = _appends.Once(_appends.new_key())
        if self._writer is not None:
            return int(self._write_wait(lambda w: _appends.insert_external(w, once, values)))

        def insert(conn: Any) -> int:
            seq = _appends.post_external(conn, self.dialect, once, values)
            self._notify_owner(conn, seq)
            return seq

        return self._external(insert)

    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        """Timers due before ``before``, soonest first; on a cluster's node, those of the shards
        it leases."""
        if self._node is not None:
            return self._node.timers_due(before, limit)
        return super().timers_due(before, limit)

    def procedures_to_run(self) -> Iterator[ProcedureRow]:
        """Every pending procedure (of the shards leased here, on a cluster's node)."""
        if self._node is not None:
            return iter(self._node.recovery_work(self._node.owned_shards()).procedures)
        return super().procedures_to_run()

    def workflows_with_work(self) -> Iterator[str]:
        """Running workflows with work now (of the shards leased here, on a cluster's node)."""
        if self._node is not None:
            return iter(self._node.recovery_work(self._node.owned_shards()).with_work)
        return super().workflows_with_work()

    def inbox_depth(self) -> tuple[int, int]:
        """``Store.inbox_depth``; on a cluster's node, of the shards leased here."""
        if self._node is None:
            return super().inbox_depth()
        (total, most), = self._rows(_sql.INBOX_DEPTH_OF_SHARDS, (sorted(self._node.owned_shards()),))
        return int(total), int(most)

    def workflows_cancelling(self) -> set[str]:
        """Workflows with a cancel waiting (of the shards leased here, on a cluster's node)."""
        if self._node is not None:
            return self._node.recovery_work(self._node.owned_shards()).cancelling
        return super().workflows_cancelling()

    # -- plumbing -----------------------------------------------------------------------------
    def _read(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        self._check_open()
        assert self._pool is not None
        try:
            with self._pool.connection(timeout=POOL_TIMEOUT) as conn:
                try:
                    return fn(conn)
                except psycopg.Error as exc:
                    err = translate_error(exc, self.path, conn)
                    if not isinstance(err, ConnectionLost):
                        raise err from exc
        except psycopg_pool.PoolTimeout:
            pass
        # The pooled connection was lost, or the pool has none to give (the server went away and
        # the pool is between two attempts): a connection of its own for this read, so that a
        # server that is back answers at once. It says why, if it cannot connect either.
        conn = connect(self._conninfo, self.path, autocommit=True,
                       default_transaction_read_only="on")
        try:
            return fn(conn)
        except psycopg.Error as exc:
            raise translate_error(exc, self.path, conn) from exc
        finally:
            conn.close()

    def _snapshot(self, fn: Callable[[Query], T]) -> T:
        def run(c: psycopg.Connection[Any]) -> T:
            with c.transaction():
                c.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                return fn(lambda template, params: c.execute(self.dialect.sql(template), params).fetchall())

        return self._read(run)

    def _notify_owner(self, conn: Any, seq: int) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (self._channel, str(seq)))

    def _external(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` on this (not owning) store's own connection, as one transaction; run it
        again once on a new connection if the connection was lost before COMMIT.

        Once COMMIT is sent, any failure leaves the outcome to the server: the transaction's id
        (asked first) is looked up with ``txid_status`` on a new connection, and ``fn`` runs
        again only if the server says it did not commit (a request posted is never posted
        twice); if the server cannot tell, ``ConnectionLost`` (``maybe_committed``) says so."""
        with self._ext_lock:
            for attempt in (1, 2):
                if self._ext_conn is None or self._ext_conn.closed:
                    self._ext_conn = connect(self._conninfo, self.path, autocommit=True)
                conn = self._ext_conn
                sent = False
                xid: int | None = None
                try:
                    conn.execute("BEGIN")
                    row = conn.execute("SELECT txid_current()").fetchone()
                    xid = int(row[0]) if row else None
                    value = fn(conn)
                    sent = True
                    conn.execute("COMMIT")
                    return value
                except Exception as exc:
                    if sent:
                        committed = self._external_outcome(conn, xid, exc)
                        if committed:
                            return value
                        if committed is False and attempt == 1:
                            continue
                        raise commit_unknown(exc, self.path, conn) from exc
                    if not isinstance(exc, psycopg.Error):
                        with contextlib.suppress(psycopg.Error):
                            conn.execute("ROLLBACK")
                        raise
                    err = translate_error(exc, self.path, conn)
                    if isinstance(err, ConnectionLost) and attempt == 1:
                        conn.close()
                        continue
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                    raise err from exc
        raise AssertionError("unreachable")

    def _external_outcome(self, conn: psycopg.Connection[Any], xid: int | None,
                          cause: BaseException) -> bool | None:
        """Whether the transaction ``xid``, whose COMMIT on ``conn`` failed with ``cause``,
        committed: asked on a new connection (``conn`` is closed)."""
        backend: int | None = None
        with contextlib.suppress(Exception):
            backend = conn.info.backend_pid
        with contextlib.suppress(Exception):
            conn.close()
        self._ext_conn = None
        committed: bool | None = None
        for pause in (0.0, 0.1, 0.5, 1.0):
            if xid is None:
                break
            time.sleep(pause)
            try:
                with connect(self._conninfo, self.path, autocommit=True) as fresh:
                    committed = commit_status(fresh, xid, backend=backend)
                break
            except (PersistenceError, psycopg.Error):  # asked again on a new connection
                continue
        verdict = {True: "committed", False: "aborted", None: "unknown"}[committed]
        self._log.warning("store_commit_answer_lost", outcome=verdict, committed=committed, xid=xid,
                    cause=str(cause))
        return committed

    def changed(self) -> bool:
        """True if a request may have come in since the last call: this store committed, a
        ``post_external`` notified, or a second has passed (a notification sent while the
        listener was away is not kept by the server)."""
        self._check_open()
        with self._changed_lock:
            now = time.monotonic()
            commits = self._writer.commits if self._writer is not None else 0
            seen = commits != self._seen_commits or now - self._changed_at >= CHANGED_EVERY
            self._seen_commits = commits
            listener = self._listener
            if listener is not None:
                try:
                    for _ in listener.notifies(timeout=0.0):
                        seen = True
                except psycopg.Error:
                    seen = True
                    try:
                        self._listener = None
                        listener.close()
                        self._listen()
                    except PersistenceError:
                        pass  # the server is away: the poll above stands in until it is back
            if seen:
                self._changed_at = now
            return seen

    def owns(self, workflow_id: str) -> bool:
        """True if ``workflow_id``'s shard is leased by this node (a reader owns nothing)."""
        return self._node is not None and self._node.owns(workflow_id)

    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (``?`` placeholders, as for reducers); rows as dicts."""
        return self._read(lambda conn: list(PgDatabase(conn).query(sql, params)))


class _Transaction:
    """The part of a writer that a write function of ``_writes`` uses, over one transaction of
    a reader's own connection (no batch, no fence: for writes no node makes, such as a prune)."""

    def __init__(self, conn: psycopg.Connection[Any], store: PgStore) -> None:
        self.conn = conn
        self.dialect = store.dialect
        self.path = store.path
        self.waits: dict[str, tuple[str, ...]] = {}

    def execute(self, template: str, params: Any = None) -> Any:
        return self.conn.execute(self.dialect.sql(template), params)

    def query_all(self, template: str, params: Any = None) -> list[tuple[Any, ...]]:
        return list(self.execute(template, params).fetchall())
