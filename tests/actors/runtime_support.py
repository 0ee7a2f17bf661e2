"""What the runtime's behaviour tests share: bounded waits, a connection to the test's database
(SQLite or PostgreSQL), the application events reducers wrote, small waiting helpers."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import actors._system

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


class _Draws:
    """The runtime's draw of an id's random bits: the given hex strings first, then real draws."""

    def __init__(self, *hexes: str) -> None:
        self.hexes = list(hexes)

    def __call__(self) -> str:
        return self.hexes.pop(0) if self.hexes else _real_draw()


_real_draw = actors._system._id_bits


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
    slot = s._rt.activator._live.get(workflow_id)
    return [] if slot is None else list(slot.ref.actor_inbox._items)


def _steps_and_ends(db: str, wid: str) -> list[tuple]:
    from persistence import open_store

    with open_store(db, owner=False) as store:
        return [(h.event, json.loads(h.detail), h.at, h.seq is None) for h in store.history(wid)]
