"""What the runtime's behaviour tests share: bounded waits, a connection to the test's database
(SQLite or PostgreSQL), a reader store on it, the application events reducers wrote, small waiting
helpers, and ``Inside``, the one seam through which a test reaches into a running system."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import actors._procedures
import actors._runtime
import actors._system
from persistence import Store, WorkflowRecord, open_store

T = 30  # every wait in these tests is bounded


class _PgConnection:
    """The parts of a sqlite3 connection these tests use, on the PostgreSQL schema (``?``)."""

    def __init__(self, url: str) -> None:
        import psycopg

        from persistence._pg._reducer_db import PgDatabase
        from persistence._pg._schema import parse_url

        self.conn = psycopg.connect(parse_url(url)[0], autocommit=True)  # holds no locks
        self.db = PgDatabase(self.conn)

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.db.execute(sql, params)

    def commit(self) -> None:
        pass  # each statement committed as it ran

    def close(self) -> None:
        self.conn.close()


def connect(db: str) -> Any:
    """A connection to the database the test's system runs on, whichever backend."""
    return _PgConnection(db) if db.startswith("postgresql://") else sqlite3.connect(db)


def app_events(db: str, wf: str | None = None) -> list[str]:
    if db.startswith("postgresql://"):
        import psycopg

        from persistence._pg._schema import parse_url

        with psycopg.connect(parse_url(db)[0]) as pg:
            if pg.execute("SELECT to_regclass('app_events')").fetchone() == (None,):
                return []
            rows = pg.execute("SELECT wf, text FROM app_events ORDER BY id").fetchall()
        return [t for w, t in rows if wf is None or w == wf]
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT wf, text FROM app_events ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return [t for w, t in rows if wf is None or w == wf]


@contextlib.contextmanager
def reader(db: str) -> Iterator[Store]:
    """A reader store on the test's database (the store's public read API, ``owner=False``): what
    a running system has committed, as any other process would read it."""
    with open_store(db, owner=False) as store:
        yield store


def record(db: str, workflow_id: str) -> WorkflowRecord:
    """The workflow's committed row, read by a reader store."""
    with reader(db) as store:
        rec = store.load_workflow(workflow_id)
    assert rec is not None, f"no workflow {workflow_id!r} in {db}"
    return rec


class Inside:
    """The one seam through which these tests reach inside a running ``ActorSystem``.

    Only for what no user can observe or cause: a pause or a fault put into the store's writes
    and reads (``patch_store``), a message only the runtime sends (``deliver``), what is queued
    in a live actor's mailbox, the live actor objects and their passivation, the writer's count
    of commits, the retention sweep's batch and round, the draw of generated ids. Everything
    else is checked through public behaviour: SPEC names, ``system.idle()``, the ``wf`` CLI, a
    reader store (``reader``, ``record``). Each method names the one internal it touches, so a
    change of the runtime's insides is followed here, once.
    """

    def __init__(self, system: actors.ActorSystem) -> None:
        self._system = system
        self._rt = system._rt

    # -- the store, for faults and pauses ---------------------------------------------------------
    def store_method(self, name: str) -> Callable[..., Any]:
        """The store's method ``name`` as the runtime calls it (the real one, or a patch)."""
        return getattr(self._rt.store, name)  # type: ignore[no-any-return]

    def patch_store(self, name: str, replacement: Callable[..., Any]) -> None:
        """Make the runtime call ``replacement`` for the store's method ``name``."""
        setattr(self._rt.store, name, replacement)

    def disown(self, owned: Callable[[str], bool]) -> None:
        """Make this system own only the workflows ``owned(id)`` is true of, as a cluster's node
        that leases some shards does: the store's ``owns``, and a node's cache of the shards it
        knows (which a node consults first)."""
        self.patch_store("owns", owned)
        node = self._rt.cluster
        if node is not None:
            node.owns_cached = owned

    def own_again(self) -> None:
        """Undo ``disown``: this system owns what its leases say again."""
        self.unpatch_store("owns")
        node = self._rt.cluster
        if node is not None and "owns_cached" in vars(node):
            del node.owns_cached

    def take_over(self, workflow_id: str) -> None:
        """Do what a node does once it has leased the shard of ``workflow_id`` (its recovery)."""
        node = self._rt.cluster
        assert node is not None, "not a cluster's node"
        self._rt.shards_gained({node.shard_for(workflow_id)})

    def unpatch_store(self, name: str) -> None:
        """Undo ``patch_store(name, ...)``: the store's own method again."""
        delattr(self._rt.store, name)

    # -- actors ------------------------------------------------------------------------------------
    def deliver(self, workflow_id: str, message: object) -> None:
        """Hand ``message`` (one of the runtime's own, e.g. ``Kick()``) to the workflow's actor."""
        self._rt.activator.deliver(workflow_id, message)

    def mailbox(self, workflow_id: str) -> Any:
        """The live queue of messages waiting for the workflow's live actor (empty if none is
        live). The queue object itself: it stays readable after the actor is forgotten."""
        slot = self._rt.activator._live.get(workflow_id)
        return [] if slot is None else slot.ref.actor_inbox._items

    def live_actor_objects(self) -> list[Any]:
        """The live actors themselves (pykka actors), for what holds on to them."""
        return [slot.ref._actor_weakref() for slot in self._rt.activator._live.values()]

    def passivate_idle(self, after: float) -> int:
        """Stop the actors idle for ``after`` seconds now (what housekeeping does on its own)."""
        return self._rt.activator.passivate_idle(after)

    def actors_closing(self) -> bool:
        """A shutdown has reached the actors: they take no more messages from outside."""
        return bool(self._rt.activator._closed)

    # -- a cluster's node -------------------------------------------------------------------------
    def halt_node(self) -> None:
        """Freeze this node's membership (heartbeats, lease rounds), as a long pause would; its
        threads that run workflows go on, believing what they last knew."""
        node = self._rt.cluster
        assert node is not None, "not a cluster's node"
        node.halt()

    def believes_it_owns(self, workflow_id: str) -> bool:
        """This node's own view (which a halted node does not update) of owning the workflow."""
        return bool(self._rt.owns(workflow_id))

    def believes_alone(self) -> bool:
        """Whether this node takes itself to be the only one that appends to inboxes (it skips
        reading rows other nodes appended before it takes a signal)."""
        return bool(self._rt.store.cluster().alone())

    def owned_shards(self) -> set[int]:
        """The shards this node believes it leases, as it holds them in memory."""
        node = self._rt.cluster
        assert node is not None, "not a cluster's node"
        return set(node.owned_shards())

    def incarnation(self) -> object:
        """This node's incarnation (a new one each time it rejoins the cluster)."""
        node = self._rt.cluster
        assert node is not None, "not a cluster's node"
        return node.membership.incarnation

    def count_shard_reads(self) -> list[object]:
        """From now on, every read this node makes of a workflow's shard (its row, for a shard
        not known in memory) is appended to the list returned."""
        node = self._rt.cluster
        assert node is not None, "not a cluster's node"
        reads: list[object] = []
        read = node._read

        def counting(fn: Callable[..., Any]) -> Any:
            if getattr(fn, "__qualname__", "").startswith("ClusterNode.shard_for"):
                reads.append(fn)
            return read(fn)

        node._read = counting
        return reads

    # -- the writer, retention, ids ------------------------------------------------------------
    def commits(self) -> int:
        """How many transactions the store's writer has committed."""
        return int(self._rt.store._writer.commits)

    @property
    def retention(self) -> Any:
        """The retention sweep (its ``batch`` size, one round by ``tick()``)."""
        return self._system._retention

    @staticmethod
    def one_actor_thread(monkeypatch: pytest.MonkeyPatch) -> None:
        """Systems started from now on (in this test) run their actors on one thread."""
        from actors._pool import Dispatcher

        monkeypatch.setattr(actors._runtime, "Dispatcher", lambda threads, **kw: Dispatcher(1, **kw))

    @staticmethod
    def procedure_code(monkeypatch: pytest.MonkeyPatch, resolve: Callable[[str, str], Any] | None = None) -> Callable[[str, str], Any]:
        """Systems of this test find a procedure's code with ``resolve(kind, key)`` (None: the
        real lookup again); returns the real lookup."""
        monkeypatch.setattr(actors._procedures, "resolve", resolve or _real_resolve)
        return _real_resolve

    @staticmethod
    def draw_ids(monkeypatch: pytest.MonkeyPatch, *hexes: str) -> None:
        """Generated ids draw ``hexes`` as their random part first, then real random bits."""
        monkeypatch.setattr(actors._system, "_id_bits", _Draws(*hexes))


class _Draws:
    """The runtime's draw of an id's random bits: the given hex strings first, then real draws."""

    def __init__(self, *hexes: str) -> None:
        self.hexes = list(hexes)

    def __call__(self) -> str:
        return self.hexes.pop(0) if self.hexes else _real_draw()


_real_draw = actors._system._id_bits
_real_resolve = actors._procedures.resolve


def _hex(ref) -> str:
    return ref.id.split("-")[1]


def _chain(p):
    def settle(done):
        if done.exception(0) is None:
            p.set_result(done.result(0))
        else:
            p.set_exception(done.exception(0))

    return settle


def _wait_until(cond, what: str) -> None:
    deadline = time.monotonic() + T
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def ref_inbox(s, workflow_id: str) -> list:
    """The messages queued for the workflow's live actor (see ``Inside.mailbox``)."""
    return list(Inside(s).mailbox(workflow_id))


def _steps_and_ends(db: str, wid: str) -> list[tuple]:
    with reader(db) as store:
        return [(h.event, json.loads(h.detail), h.at, h.seq is None) for h in store.history(wid)]
