"""On PostgreSQL a node writes every step through one session: a reducer that waits for a lock
another session holds stalls every step of the node until the lock goes or the node's
statement_timeout cancels the statement, as docs/guides/postgresql.md says. The step then fails
(nothing of it committed), the workflow restarts and runs the reducer again."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from workflows import reducer, workflow

from . import flows

T = 30  # every wait in this test is bounded


@reducer
def bump(db) -> None:
    db.execute("UPDATE af_lock_purse SET gold = gold + 1 WHERE id = 1")


@workflow
async def bumper() -> str:
    reducer(bump)
    return "bumped"


def test_a_reducer_waiting_on_a_lock_stalls_the_node_until_statement_timeout(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from persistence._pg import _cluster

    monkeypatch.setitem(_cluster.NODE_SETTINGS, "statement_timeout", "5s")
    url = pg_store_url.partition("&schema=")[0]
    with capture_logs() as logs, ActorSystem(pg_store_url) as s:
        admin = psycopg.connect(url, autocommit=True)
        admin.execute("CREATE TABLE af_lock_purse (id int PRIMARY KEY, gold int)")
        admin.execute("INSERT INTO af_lock_purse VALUES (1, 0)")
        holder = psycopg.connect(url)  # another application's open transaction
        holder.execute("UPDATE af_lock_purse SET gold = 100 WHERE id = 1")
        started = threading.Thread(target=lambda: s.start(bumper, id="bumper"))
        started.start()
        deadline = time.monotonic() + T
        while not admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE 'UPDATE af_lock_purse%%'"
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the reducer never waited for the lock"
            time.sleep(0.02)
        done = threading.Event()
        other = threading.Thread(target=lambda: (s.start(flows.waits_once, id="other"), done.set()))
        other.start()
        assert not done.wait(1.0), (
            "another workflow's step committed while the node's writer waited"
        )
        # The statement timeout ends the wait: the step fails, commits nothing, and is run again.
        deadline = time.monotonic() + T
        while not any(
            e["event"] == "actor_restarted" and "statement timeout" in str(e.get("error"))
            for e in list(logs)
        ):
            assert time.monotonic() < deadline, "statement_timeout never ended the wait"
            time.sleep(0.05)
        assert done.wait(T), "the node's other steps stayed held up after the timeout"
        holder.rollback()
        holder.close()
        started.join(T)
        other.join(T)
        assert s.get("bumper").result(timeout=T) == "bumped"
        assert admin.execute("SELECT gold FROM af_lock_purse").fetchone() == (1,)  # once
        admin.close()
