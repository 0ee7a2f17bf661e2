"""Retention in the store: a finished workflow keeps no continuation, and pruning deletes it with
every row it left, in every table, leaving running workflows and what they hold alone."""

from __future__ import annotations

import sqlite3

import pytest
import sqlite_utils

from persistence import (
    ASK_ERROR,
    ASK_OK,
    ASK_PENDING,
    CHILD,
    SIGNAL,
    AskReply,
    NewProcedure,
    NewTimer,
    OutSignal,
    SqliteStore,
    StepWrite,
    dumps,
    open_store,
)
from persistence._writes import WORKFLOW_TABLES

from .conftest import new_wf, step


def _raw(store: SqliteStore, sql: str, params: tuple = ()) -> None:
    """Write rows the way an older version or a hand edit might have left them."""
    store._write_wait(lambda w: w.db.execute(sql, params))  # the reducers' db: ? on both backends


def _owned_rows(store: SqliteStore, wid: str) -> dict[str, int]:
    """How many rows of each actorflow table belong to ``wid`` (its own row included)."""
    counts = {"workflows": store.read_table("SELECT count(*) AS n FROM workflows WHERE id = ?", (wid,))[0]["n"]}
    for table in WORKFLOW_TABLES:
        counts[table] = store.read_table(
            f"SELECT count(*) AS n FROM {table} WHERE workflow_id = ?", (wid,)
        )[0]["n"]
    return counts


def _finish(store: SqliteStore, wid: str, at: float, status: str = "completed", **fields) -> None:
    store.commit_step(step(store, wid, status=status, result=dumps("done"), updated_at=at, **fields))


def test_ending_step_drops_continuation_and_records_its_end(store: SqliteStore) -> None:
    """The step that ends a workflow stores no continuation (even if it carries one) and stamps
    finished_at with its own time; a running step keeps both as they were."""
    store.create_workflow(new_wf("a"))
    store.commit_step(step(store, "a", continuation=b"c1", updated_at=2.0))
    rec = store.load_workflow("a")
    assert (rec.continuation, rec.finished_at) == (b"c1", None)
    store.commit_step(step(store, "a", status="failed", continuation=b"c2", error='{"type": "X"}',
                           updated_at=7.5))
    rec = store.load_workflow("a")
    assert (rec.status, rec.continuation, rec.finished_at, rec.error) == (
        "failed", None, 7.5, '{"type": "X"}'
    )


def test_workflow_ending_in_its_first_step_keeps_no_continuation(store: SqliteStore) -> None:
    """A start whose first step ends it (the record written by that step) has no continuation."""
    wf = new_wf("quick")
    store.commit_step(StepWrite(workflow_id="quick", step_seq=1, status="completed",
                                result=dumps(1), updated_at=4.0, create=wf))
    rec = store.load_workflow("quick")
    assert (rec.status, rec.continuation, rec.finished_at) == ("completed", None, 4.0)
    assert store.oldest_finished() == store.newest_finished() == 4.0


def _populate(store: SqliteStore) -> None:
    """A running parent ``run`` with rows in every table; its finished child ``kid`` (outcome in
    the parent's inbox); ``old`` finished at 5 with rows left in every table (as a hand edit or an
    older version might leave them); ``late`` finished at 50."""
    store.create_workflow(new_wf("run"))
    store.commit_step(step(store, "run", wait_signals=("go",), subscribe=[("tick", "1")],
                           new_timers=[NewTimer("t", 100.0)],
                           new_procedures=[NewProcedure("run-p", "m:f", b"args")],
                           new_workflows=[new_wf("kid", parent_id="run")],
                           history=[("blocked", "{}")]))
    store.append_inbox("run", SIGNAL, "go-later", dumps(1), at=3.0)
    store.post_external("signal", "run", "go", "1", at=3.0)
    store.commit_step(step(store, "kid", status="completed", result=dumps(9), updated_at=5.0,
                           signals=[OutSignal("run", "kid", dumps(("ok", 9)), CHILD)]))
    store.create_workflow(new_wf("old"))
    store.commit_step(step(store, "old", wait_signals=("x",), history=[("blocked", "{}")]))
    _finish(store, "old", 5.0, history=[("completed", "{}")])
    for sql in (
        "INSERT INTO inbox (workflow_id, kind, name, payload, created_at) VALUES ('old', 'signal', 'x', ?, 1)",
        "INSERT INTO timers (workflow_id, name, due_at) VALUES ('old', 't', 9)",
        "INSERT INTO procedures (key, workflow_id, function, args, created_at) VALUES ('old-p', 'old', 'm:f', ?, 1)",
        "INSERT INTO waits (workflow_id, name) VALUES ('old', 'x')",
        "INSERT INTO subscriptions (name, filter_key, workflow_id) VALUES ('tick', '1', 'old')",
        "INSERT INTO external (kind, workflow_id, name, payload, created_at) VALUES ('cancel', 'old', NULL, 'null', 1)",
        "INSERT INTO schedule_runs (workflow_id, schedule_id, tick) VALUES ('old', 'nightly', 5)",
        "INSERT INTO limit_waits (key, workflow_id, kind, since) VALUES ('old-p', 'old', 'concurrency', 5)",
        "INSERT INTO published (workflow_id, key, value, step_seq, updated_at) VALUES ('old', 'k', ?, 1, 1)",
        "INSERT INTO asks (workflow_id, ask_id, name, status, created_at) VALUES ('old', 'a', 'q', 'ended', 1)",
    ):
        _raw(store, sql, (b"\x00",) if "?" in sql else ())
    store.create_workflow(new_wf("late"))
    _finish(store, "late", 50.0)


def test_prune_deletes_every_row_of_the_pruned_and_nothing_else(store: SqliteStore) -> None:
    """Pruning what finished before 10 deletes ``old`` and ``kid`` and each of their rows in every
    table; the running parent keeps all of its rows (its child's outcome included), and ``late``
    (finished after the cutoff) stays whole."""
    _populate(store)
    assert all(_owned_rows(store, "old").values())  # a row in every table to delete
    run_before = _owned_rows(store, "run")
    late_before = _owned_rows(store, "late")
    assert sorted(store.prune_finished(10.0)) == ["kid", "old"]
    for wid in ("old", "kid"):
        assert set(_owned_rows(store, wid).values()) == {0}, wid
        assert store.load_workflow(wid) is None
    assert _owned_rows(store, "run") == run_before
    assert [(m.kind, m.name) for m in store.inbox("run")] == [("signal", "go-later"), ("child", "kid")]
    assert _owned_rows(store, "late") == late_before
    assert store.load_workflow("run").status == "running"
    assert store.pruned_total() == 2
    assert store.oldest_finished() == 50.0
    assert store.prune_finished(10.0) == []
    assert store.pruned_total() == 2


def test_prune_takes_the_oldest_first_within_its_limit(store: SqliteStore) -> None:
    """A limited prune deletes the earliest finished first; calls repeated until one returns
    fewer than the limit delete exactly those before the cutoff."""
    for i in range(7):
        store.create_workflow(new_wf(f"w{i}"))
        _finish(store, f"w{i}", 10.0 - i)  # w6 ended first
    assert store.prune_finished(8.5, limit=2) == ["w6", "w5"]
    assert store.prune_finished(8.5, limit=2) == ["w4", "w3"]
    assert store.prune_finished(8.5, limit=2) == ["w2"]
    assert [r.id for r in store.list_workflows()] == ["w0", "w1"]
    assert store.pruned_total() == 5
    with pytest.raises(ValueError, match="positive int"):
        store.prune_finished(1.0, limit=0)


def test_workflow_tables_name_every_table_of_the_schema(db_path: str) -> None:
    """Every table the migrations create that holds rows of a workflow (a workflow_id column)
    is one prune deletes from: a new table added to the schema must be added there too."""
    open_store(db_path).close()
    conn = sqlite3.connect(db_path)
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    keyed = {t for t in tables if "workflow_id" in {c[1] for c in conn.execute(f"PRAGMA table_info({t})")}}
    conn.close()
    assert keyed == set(WORKFLOW_TABLES)
    # Tombstones are what pruning leaves of a workflow (its id, type, status and end), by id.
    assert set(tables) - keyed == {"meta", "workflows", "schedules", "tombstones"}


def test_prune_leaves_application_tables_alone(store: SqliteStore) -> None:
    """A reducer's own table with a workflow_id column is the application's: never pruned."""
    store.create_workflow(new_wf("a"))

    def note(db: sqlite_utils.Database) -> None:
        db["notes"].insert({"workflow_id": "a", "text": "kept"})

    _finish(store, "a", 1.0, reducers=[note])
    assert store.prune_finished(2.0) == ["a"]
    assert store.read_table("SELECT workflow_id, text FROM notes") == [{"workflow_id": "a", "text": "kept"}]


def test_outcome_for_a_pruned_parent_is_dropped_as_pruned(store: SqliteStore) -> None:
    """A detached child that outlives its parent's retention: its outcome finds the parent pruned,
    which is expected (not the 'unknown workflow' of a mistaken id), and nothing is written."""
    store.create_workflow(new_wf("p"))
    store.commit_step(step(store, "p", new_workflows=[new_wf("c", parent_id="p", detached=True)]))
    _finish(store, "p", 1.0)
    assert store.prune_finished(2.0) == ["p"]
    ack = store.commit_step(step(store, "c", status="completed", result=dumps(1), updated_at=3.0,
                                 signals=[OutSignal("p", "c", dumps(("ok", 1)), CHILD)]))
    assert [(wid, str(why), why.expected) for wid, why in ack.dropped] == [("p", "workflow pruned", True)]
    assert store.history("c") == []  # not recorded as a mistake of the child's
    assert store.read_table("SELECT count(*) AS n FROM inbox")[0]["n"] == 0


def test_prune_request_result_round_trip(db_path: str) -> None:
    """A reader posts a prune request; the owner deletes it and leaves its result, which the
    reader takes exactly once."""
    with open_store(db_path) as owner, open_store(db_path, owner=False) as reader:
        seq = reader.post_external("prune", "", None, '{"older_than": 60}', at=1.0)
        assert reader.take_external_result(seq) is None
        (req,) = owner.take_external(0)
        assert (req.seq, req.kind, req.workflow_id) == (seq, "prune", "")
        owner.external_done(seq, '{"pruned": 3}')
        assert owner.take_external(0) == []
        assert reader.take_external_result(seq) == '{"pruned": 3}'
        assert reader.take_external_result(seq) is None




def test_expire_replies_deletes_answered_asks_oldest_first_and_never_a_pending_one(store: SqliteStore) -> None:
    """``expire_replies`` deletes answered asks (replied, refused, or ended with their workflow)
    answered at or before the cutoff, the earliest first within its limit; a pending ask stays
    whatever its age. ``oldest_reply`` is the earliest reply still kept."""
    store.create_workflow(new_wf("run"))
    store.create_workflow(new_wf("end"))
    for wid, ask_id in [("run", f"a{i}") for i in range(5)] + [("run", "pending"), ("end", "e")]:
        store.submit_ask(wid, ask_id, "q", dumps(None), at=1.0).result(30)
    assert store.oldest_reply() is None
    for i in range(5):  # a4 is answered first, a0 last
        status = ASK_OK if i % 2 else ASK_ERROR
        store.commit_step(step(store, "run", updated_at=20.0 - i, replies=[AskReply(f"a{i}", status, dumps(i))]))
    _finish(store, "end", 12.0)  # its pending ask ends with it
    assert store.oldest_reply() == 12.0
    assert store.expire_replies(17.0, limit=2) == 2  # end's e (12) and a4 (16)
    assert store.ask("end", "e") is None and store.ask("run", "a4") is None
    assert store.expire_replies(17.0, limit=2) == 1  # a3 (17)
    assert store.expire_replies(17.0, limit=2) == 0
    assert store.oldest_reply() == 18.0
    assert store.expire_replies(1e12) == 3
    kept = store.ask("run", "pending")
    assert kept is not None and kept.status == ASK_PENDING
    assert store.oldest_reply() is None
    with pytest.raises(ValueError, match="positive int"):
        store.expire_replies(1.0, limit=0)
