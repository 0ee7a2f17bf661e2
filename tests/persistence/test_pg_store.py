"""What the PostgreSQL store adds to the shared store suite (which runs on it too): one owner per
schema, durability as synchronous_commit, readers and the CLI's requests, and the server going
away under a running store (it reconnects and goes on), each against the real server."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from structlog.testing import capture_logs

from persistence import (
    SIGNAL,
    DatabaseLocked,
    ForeignDatabase,
    PersistenceError,
    StepWrite,
    open_store,
)
from persistence._pg._cluster import ClusterNode
from persistence._pg._store import PgStore
from tests.conftest import schema_of
from tests.pgserver import PgServer

from .conftest import new_wf, step


def _backend(store: Any, conn: str = "writer") -> int:
    assert isinstance(store, PgStore) and store._writer is not None
    return int(store._writer.conn.info.backend_pid)


def test_one_owner_per_schema(pg_store_url: str, pg_server: PgServer) -> None:
    first = open_store(pg_store_url)
    try:
        with pytest.raises(DatabaseLocked, match=r"owned by another ActorSystem.*this very process") as info:
            open_store(pg_store_url)
        assert info.value.pid is not None
        assert first.owner_info() is not None  # type: ignore[attr-defined]
    finally:
        first.close()
    second = open_store(pg_store_url)  # closed: the lock went with its session
    try:
        assert second.create_workflow(new_wf("a"))
    finally:
        second.close()


def test_a_closed_owner_frees_the_schema_at_once(pg_store_url: str) -> None:
    """close() ends ownership before it returns: an owner opened right after, in the same
    process, never finds the schema still locked by the closed one's exiting session."""
    for _ in range(40):
        open_store(pg_store_url).close()


def test_an_owner_that_dies_frees_the_schema(pg_store_url: str, pg_server: PgServer) -> None:
    first = open_store(pg_store_url)
    try:
        # The node's control session ends as a killed process's would: the server frees its
        # node lock, and a new process of the same node name may join.
        node = first.cluster()
        assert isinstance(node, ClusterNode) and node.membership._conn is not None
        pg_server.admin().execute("SELECT pg_terminate_backend(%s)",
                                  (node.membership._conn.info.backend_pid,))
        second = open_store(pg_store_url)
        second.close()
    finally:
        first.close()


@pytest.mark.parametrize(("durability", "setting"), [("full", "on"), ("normal", "off")])
def test_durability_is_synchronous_commit(pg_store_url: str, durability: str, setting: str) -> None:
    with open_store(pg_store_url, durability=durability) as s:
        assert isinstance(s, PgStore) and s._writer is not None
        assert s._writer.conn.execute("SHOW synchronous_commit").fetchone() == (setting,)


def test_a_reader_before_any_owner_is_told_what_to_do(pg_store_url: str) -> None:
    with pytest.raises(PersistenceError, match="holds no actorflow data yet.*Start an ActorSystem on it once"):
        open_store(pg_store_url, owner=False)


def test_a_reader_reads_while_the_owner_runs_and_posts_requests(pg_store_url: str) -> None:
    with open_store(pg_store_url) as owner:
        owner.create_workflow(new_wf("a"))
        owner.changed()
        with open_store(pg_store_url, owner=False) as reader:
            assert reader.load_workflow("a") is not None
            with pytest.raises(PersistenceError, match="owner=False: it only reads"):
                reader.create_workflow(new_wf("b"))
            seq = reader.post_external("signal", "a", "go", '{"x": 1}', at=5.0)
        assert [(r.seq, r.kind, r.name) for r in owner.take_external(0)] == [(seq, "signal", "go")]
        # Notified by the reader (and in any case within a second).
        deadline = time.monotonic() + 10
        while not owner.changed():
            assert time.monotonic() < deadline, "changed() never said True"
            time.sleep(0.01)
        owner.delete_external([seq])
        assert owner.take_external(0) == []


def test_another_applications_schema_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE players (id int)")
    with pytest.raises(ForeignDatabase, match="players"):
        open_store(f"{pg_url}&schema={schema_of(pg_url)}")


def test_a_bad_url_is_named() -> None:
    with pytest.raises(ValueError, match="not a plain identifier"):
        open_store("postgresql://u@localhost/db?schema=no-dashes")


def test_the_writer_reconnects_after_losing_its_session(pg_store_url: str, pg_server: PgServer) -> None:
    with open_store(pg_store_url) as s:
        s.create_workflow(new_wf("a"))
        old = _backend(s)
        pg_server.admin().execute("SELECT pg_terminate_backend(%s)", (old,))
        with capture_logs() as logs:
            s.commit_step(step(s, "a", continuation=b"after"))
        assert _backend(s) != old
        # A sealed step is committed by the sync that sends its statements: the lost session
        # shows once that went, so the writer also asks the server (its token is not there: aborted, run again).
        events = [e["event"] for e in logs]
        assert events[0] == "store_reconnected" and "lost" in logs[0]["cause"]
        assert events[1:] in ([], ["store_commit_answer_lost"]), events
        assert all(e.get("outcome") == "aborted" for e in logs[1:])
        rec = s.load_workflow("a")
        assert rec is not None and (rec.step_seq, rec.continuation) == (1, b"after")
        # Still the owner, on the new session.
        with pytest.raises(DatabaseLocked):
            open_store(pg_store_url)


def test_readers_reconnect_after_losing_their_session(pg_store_url: str, pg_server: PgServer) -> None:
    with open_store(pg_store_url) as s:
        s.create_workflow(new_wf("a"))
        pg_server.admin().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'actorflow-reader'"
        )
        assert s.load_workflow("a") is not None


def test_a_deadlock_in_a_reducer_is_run_again(pg_store_url: str, pg_url: str) -> None:
    runs: list[int] = []
    locked = threading.Event()
    holding = threading.Event()
    other_done = threading.Event()

    def reducer(db: Any) -> None:
        runs.append(len(runs))
        db.execute("UPDATE acct SET n = n + 1 WHERE id = 2")
        if len(runs) == 1:
            locked.set()
        db.execute("UPDATE acct SET n = n + 1 WHERE id = 1")

    def other() -> None:
        # Holds row 1, then wants row 2 once the reducer holds it; it waits long before looking
        # for a deadlock, so the reducer's session finds it and is the one rolled back.
        with psycopg.connect(pg_url) as c:
            c.execute("SET deadlock_timeout = '20s'")
            c.execute("UPDATE acct SET n = n + 10 WHERE id = 1")
            holding.set()
            assert locked.wait(30)
            c.execute("UPDATE acct SET n = n + 10 WHERE id = 2")
            c.commit()
        other_done.set()

    with open_store(pg_store_url) as s:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("CREATE TABLE acct (id int PRIMARY KEY, n int)")
            conn.execute("INSERT INTO acct VALUES (1, 0), (2, 0)")
        s.create_workflow(new_wf("a"))
        t = threading.Thread(target=other)
        t.start()
        assert holding.wait(30)
        s.commit_step(step(s, "a", reducers=[reducer]))
        t.join(30)
        assert other_done.is_set()
        assert len(runs) == 2  # once rolled back by the deadlock, once committed
        rows = s.read_table("SELECT id, n FROM acct ORDER BY id")
        assert rows == [{"id": 1, "n": 11}, {"id": 2, "n": 11}]
        assert s.load_workflow("a").step_seq == 1  # type: ignore[union-attr]


def test_a_reducer_that_catches_an_error_of_the_database_fails_its_step(pg_store_url: str) -> None:
    """A statement's error aborts the transaction on PostgreSQL: a reducer that catches it and
    returns fails its step with ReducerFailed saying so (its COMMIT could never succeed, and was
    taken for a lost connection and tried again for good); the batch's other writes commit."""
    from persistence import ReducerFailed

    def catches(db: Any) -> None:
        db["before"].insert({"id": 1}, pk="id", replace=True)
        try:
            db.execute("SELECT * FROM no_such_table")
        except Exception:
            pass

    with open_store(pg_store_url) as s:
        s.create_workflows([new_wf("a"), new_wf("b")])
        caught = s.submit_step(step(s, "a", reducers=[catches]))
        fine = s.submit_step(step(s, "b"))
        with pytest.raises(ReducerFailed, match="caught an error of one of its statements") as e:
            caught.result(30)
        assert "catches" in str(e.value)
        fine.result(30)
        assert s.load_workflow("a").step_seq == 0  # type: ignore[union-attr]
        assert s.load_workflow("b").step_seq == 1  # type: ignore[union-attr]
        assert s.read_table("SELECT count(*) AS n FROM pg_tables WHERE tablename = 'before'") == [{"n": 0}]


def test_a_caught_error_fails_its_step_before_the_connection_has_read_the_sync(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error a reducer caught fails its step also while the connection still reports the
    transaction ACTIVE (the server's answer to the pipeline's sync not read yet, as on a loaded
    machine): the db's record of the error tells, not the connection's status alone."""
    import psycopg

    from persistence import ReducerFailed

    real = psycopg.ConnectionInfo.transaction_status
    lagging: list[Any] = []

    def status(info: Any) -> Any:
        if lagging and info.pgconn is lagging[0]:
            lagging.clear()  # once: the reducer's return is what is checked with it
            return psycopg.pq.TransactionStatus.ACTIVE
        return real.fget(info)  # type: ignore[attr-defined]

    monkeypatch.setattr(psycopg.ConnectionInfo, "transaction_status", property(status))

    def catches(db: Any) -> None:
        try:
            db.execute("SELECT * FROM no_such_table")
        except Exception:
            lagging.append(db.conn.pgconn)

    with open_store(pg_store_url) as s:
        s.create_workflows([new_wf("a"), new_wf("b")])
        caught = s.submit_step(step(s, "a", reducers=[catches]))
        fine = s.submit_step(step(s, "b"))
        with pytest.raises(ReducerFailed, match="caught an error of one of its statements"):
            caught.result(30)
        fine.result(30)
        assert s.load_workflow("a").step_seq == 0  # type: ignore[union-attr]
        assert s.load_workflow("b").step_seq == 1  # type: ignore[union-attr]


def test_steps_from_many_threads_share_commits(pg_store_url: str) -> None:
    with open_store(pg_store_url) as s:
        assert isinstance(s, PgStore) and s._writer is not None
        ids = [f"w{i}" for i in range(8)]
        s.create_workflows([new_wf(w) for w in ids])
        before = s._writer.commits
        errors: list[BaseException] = []

        def run(wid: str) -> None:
            try:
                for n in range(1, 21):
                    s.commit_step(StepWrite(wid, n, updated_at=float(n),
                                            continuation=f"{wid}-{n}".encode()))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(w,)) for w in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert all(s.load_workflow(w).step_seq == 20 for w in ids)  # type: ignore[union-attr]
        assert s._writer.commits - before < len(ids) * 20


def test_a_batch_with_a_stale_step_commits_the_others(pg_store_url: str) -> None:
    with open_store(pg_store_url) as s:
        s.create_workflows([new_wf("a"), new_wf("b")])
        d = s.append_inbox("b", SIGNAL, "go", b"x", at=1.0)
        stale = s.submit_step(StepWrite("a", 5, updated_at=1.0))
        good = s.submit_step(StepWrite("b", 1, updated_at=1.0, consume_inbox=[d.seq]))
        with pytest.raises(PersistenceError, match="stale"):
            stale.result(30)
        assert good.result(30).created == []
        assert s.load_workflow("b").step_seq == 1  # type: ignore[union-attr]
        assert s.inbox("b") == []


def test_a_server_that_goes_away_and_comes_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server stops under a running store: writes fail as a storage fault that may pass (the
    runtime retries those), reads too; once it is back, the same store writes and reads again."""
    from persistence import StorageUnavailable
    from persistence._pg import _store, _writer
    from tests.pgserver import FAST, PgUnavailable

    monkeypatch.setattr(_writer, "RECONNECTS", (0.0, 0.05))
    monkeypatch.setattr(_store, "POOL_TIMEOUT", 1.0)
    try:
        server = PgServer.start(FAST)
    except PgUnavailable as exc:
        from tests.conftest import pg_unavailable

        pg_unavailable(str(exc))
    try:
        with server.schema() as url:
            store = open_store(f"{url}&schema={schema_of(url)}")
            try:
                store.create_workflow(new_wf("a"))
                server.pause()
                with pytest.raises(StorageUnavailable, match="cannot reach|was lost"):
                    store.commit_step(StepWrite("a", 1, updated_at=1.0, continuation=b"one"), timeout=60)
                with pytest.raises(StorageUnavailable):
                    store.load_workflow("a")
                server.resume()
                store.commit_step(StepWrite("a", 1, updated_at=1.0, continuation=b"one"), timeout=60)
                rec = store.load_workflow("a")
                assert rec is not None and (rec.step_seq, rec.continuation) == (1, b"one")
            finally:
                store.close()
    finally:
        server.stop()


def _lose_the_commits_answer(store: Any, admin: Any, *, committed: bool) -> list[int]:
    """Make the writer's next COMMIT lose its connection: after the server has committed it
    (``committed``: the answer is lost on the way back), or before it reaches the server. The
    client's end of the socket is shut, so the writer sees the connection die at the COMMIT.
    Returns the writer's backend pid at the time (one element once it has fired)."""
    import os
    import socket

    writer = store._writer
    commit = writer._commit
    fired: list[int] = []
    schema = store.schema

    def losing_commit() -> None:
        if fired:
            commit()
            return
        fired.append(int(writer.conn.info.backend_pid))
        pg = writer.conn.pgconn
        if committed:
            commit()
            pg.pipeline_sync()  # COMMIT, and everything before it, reach the server
            while pg.flush():
                time.sleep(0.001)
            deadline = time.monotonic() + 30
            while not admin.execute(f'SELECT count(*) FROM "{schema}".inbox').fetchone()[0]:
                assert time.monotonic() < deadline, "the COMMIT never committed"
                time.sleep(0.01)
        sock = socket.socket(fileno=os.dup(pg.socket))
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        if not committed:
            commit()

    writer._commit = losing_commit
    return fired


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_a_signal_whose_commit_loses_its_connection_is_appended_once(
    pg_store_url: str, pg_server: PgServer, committed: bool
) -> None:
    """The connection dies at the COMMIT of a signal's append. Whether the server committed it
    or not, the append returns (no error for a caller to retry, which would append it twice)
    and the inbox holds the signal exactly once: the writer asks the server, after reconnecting,
    whether that transaction committed, and settles it or runs it again."""
    admin = pg_server.admin()
    with open_store(pg_store_url) as s:
        s.create_workflow(new_wf("a"))
        fired = _lose_the_commits_answer(s, admin, committed=committed)
        delivered = s.append_inbox("a", SIGNAL, "go", b"x", at=1.0)
        assert fired and _backend(s) != fired[0]  # it did lose that connection
        rows = admin.execute(
            f'SELECT seq, name FROM "{s.schema}".inbox WHERE workflow_id = %s', ("a",)
        ).fetchall()
        assert rows == [(delivered.seq, "go")]
        assert [(m.seq, m.name) for m in s.inbox("a")] == rows
        # The store goes on, on its new connection.
        s.append_inbox("a", SIGNAL, "again", b"y", at=2.0)
        assert [m.name for m in s.inbox("a")] == ["go", "again"]


def test_the_writer_survives_the_server_forgetting_its_prepared_statements(pg_store_url: str) -> None:
    """psycopg prepares a statement on the server at its fifth run and from then on runs it by
    name; its record of what it prepared can part from the server's (a statement that fails in a
    pipeline, as a fenced step does, makes the server skip what follows it). The writer then
    failed every later batch that ran such a statement ("prepared statement _pg3_N does not
    exist", seen in the cluster's kill soak). Here the server forgets its prepared statements
    behind psycopg's back: the writer's statements still run (on a new session)."""
    q = "SELECT ?::int + 1"
    with open_store(pg_store_url) as s:
        writer = s._writer
        assert writer is not None
        for i in range(8):
            assert writer.submit(lambda w, i=i: w.query_one(q, (i,))).result(30) == (i + 1,)

        with writer._batch:  # between batches: the connection is idle, out of its pipeline
            writer.conn.pgconn.exec_(b"DEALLOCATE ALL")  # not through psycopg: it does not know
        for i in range(8):
            assert writer.submit(lambda w, i=i: w.query_one(q, (i,))).result(30) == (i + 1,)


def test_a_statement_prepared_in_a_failed_pipeline_runs_again_on_a_new_session(pg_store_url: str) -> None:
    """The soak's case itself: a statement's fifth run (the one that prepares it) goes in a
    pipeline after a statement that fails, so the server skips the PREPARE while psycopg records
    it as done. Its next run names a statement the server does not have: the writer takes that
    as a lost session, connects again and runs the batch again, which then succeeds."""
    q = "SELECT ?::int + 1"
    with open_store(pg_store_url) as s:
        writer = s._writer
        assert writer is not None

        def failing(w: Any) -> None:
            w.execute("SELECT 1 / 0")
            w.execute(q, (0,))  # its PREPARE is skipped: the statement before it failed
            w.sync()

        # A first failure: psycopg forgets what it prepared at a session's first ROLLBACK
        # (not at later ones), which would hide the case.
        with pytest.raises(PersistenceError, match="division by zero"):
            writer.submit(lambda w: w.query_one("SELECT 1 / 0")).result(30)
        for i in range(4):  # four runs: the next one prepares it
            assert writer.submit(lambda w, i=i: w.query_one(q, (i,))).result(30) == (i + 1,)
        with pytest.raises(PersistenceError, match="division by zero"):
            writer.submit(failing).result(30)
        before = _backend(s)
        for i in range(8):
            assert writer.submit(lambda w, i=i: w.query_one(q, (i,))).result(30) == (i + 1,)
        assert _backend(s) != before  # it did run into the missing statement, on that session


def test_a_node_that_gets_a_shard_back_does_not_trust_the_wait_sets_it_remembers(
    pg_store_url: str,
) -> None:
    """The writer remembers each workflow's committed wait set, to skip rewriting an unchanged
    one. A shard that went to another node and came back may hold workflows whose waits that
    node changed: their next step here replaces the rows instead of trusting the memory (which
    wrote a duplicate row, or left a wait set the workflow no longer had, so that a buffered
    signal was not found as work after a takeover)."""
    from persistence._shards import assignment, shard_of

    wants = assignment(256, ["a", "b"])["b"]
    wid = next(w for w in (f"w{i}" for i in range(1000)) if shard_of(w, 256) in wants)
    a = open_store(pg_store_url, node_id="a")
    try:
        a.create_workflow(new_wf(wid))
        a.commit_step(step(a, wid, wait_signals=("x",)))
        a.commit_step(step(a, wid))  # awaiting nothing, remembered so
        b = open_store(pg_store_url, node_id="b")
        try:
            ma, mb = a._node.membership, b._node.membership  # type: ignore[union-attr]
            ma.heartbeat()
            ma.release(ma.rebalance().release)  # b's share goes to b
            mb.rebalance()
            assert b.owns(wid) and not a.owns(wid)
            b.commit_step(step(b, wid, wait_signals=("y",)))
        finally:
            b.close()  # hands its shards off
        assert a._node.membership.rebalance().gained  # type: ignore[union-attr]
        a.commit_step(step(a, wid, wait_signals=("y",)))  # was: a duplicate of b's row
        assert a.read_table("SELECT name FROM waits WHERE workflow_id = ?", (wid,)) == [{"name": "y"}]
        a.commit_step(step(a, wid))
        a.commit_step(step(a, wid, wait_signals=("z",)))
        b = open_store(pg_store_url, node_id="b")
        try:
            ma, mb = a._node.membership, b._node.membership  # type: ignore[union-attr]
            ma.heartbeat()
            ma.release(ma.rebalance().release)
            mb.rebalance()
            b.commit_step(step(b, wid))  # awaits nothing now
        finally:
            b.close()
        assert a._node.membership.rebalance().gained  # type: ignore[union-attr]
        a.commit_step(step(a, wid, wait_signals=("z",)))  # was: skipped, a remembered ("z",)
        assert a.read_table("SELECT name FROM waits WHERE workflow_id = ?", (wid,)) == [{"name": "z"}]
    finally:
        a.close()


def _statements_of(s: Any, sw: StepWrite) -> list[str]:
    """Commit ``sw`` on store ``s``; the statements its writer's connection sent meanwhile."""
    sent: list[str] = []
    real = psycopg.Cursor.execute

    def counted(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if cur.connection is s._writer.conn:
            sent.append(str(query))
        return real(cur, query, params, **kw)

    psycopg.Cursor.execute = counted  # type: ignore[method-assign]
    try:
        s.commit_step(sw, timeout=30)
    finally:
        psycopg.Cursor.execute = real  # type: ignore[method-assign]
    return sent


def test_a_step_sends_its_fence_and_checked_writes_as_one_statement(pg_store_url: str) -> None:
    """A step's fence, its guard, the rows it consumes and the rows it inserts go to the server
    as one statement (their checks made there), and its batch's commit token with them; a stale
    one among them still fails alone, named, as its careful pass tells."""
    from persistence import NewProcedure

    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        s.create_workflow(new_wf("b"))
        first = step(s, "a", continuation=b"a1", new_procedures=[NewProcedure("a#1.0", "mod:f", b"x", 0.0)])
        s.commit_step(first, timeout=30)
        second = step(s, "a", continuation=b"a2", consume_procedures=["a#1.0"],
                      new_procedures=[NewProcedure("a#2.0", "mod:f", b"y", 0.0)])
        writes = [q for q in _statements_of(s, second) if q not in ("BEGIN", "COMMIT")]
        assert len(writes) == 1, writes
        assert "af_fence" in writes[0] and "af_commits" in writes[0] and writes[0].count("af_expect") == 3
        assert s.load_workflow("a").continuation == b"a2"
        stale = step(s, "b", continuation=b"b1", consume_procedures=["b#9.9"])
        with pytest.raises(PersistenceError, match="procedure 'b#9.9' it consumes is gone"):
            s.commit_step(stale, timeout=30)
        assert s.load_workflow("b").step_seq == 0
    finally:
        s.close()


def test_a_step_that_ends_its_workflow_in_its_one_statement_takes_what_it_consumes_and_drops_the_rest(
    pg_store_url: str,
) -> None:
    """The end of a workflow, sent with the step's checked writes, deletes every row the workflow
    still held (timers, procedures, messages, subscriptions) and ends its pending asks, while the
    rows the step consumes count as consumed (the step is not taken as stale)."""
    from persistence import COMPLETED, NewProcedure, NewTimer

    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        s.commit_step(step(s, "a", continuation=b"a1", subscribe=[("news", '"x"')],
                           new_timers=[NewTimer("t0", 40.0), NewTimer("t1", 41.0)],
                           new_procedures=[NewProcedure("a#1.0", "mod:f", b"x", 0.0),
                                           NewProcedure("a#1.1", "mod:f", b"y", 0.0)]), timeout=30)
        kept = s.append_inbox("a", SIGNAL, "in", b"1", at=1.0).seq
        taken = s.append_inbox("a", SIGNAL, "in", b"2", at=1.0).seq
        s.submit_ask("a", "q1", "question", b"?", at=1.0).result(timeout=30)
        timer = next(t.id for t in s.timers("a") if t.name == "t1")
        ended = step(s, "a", status=COMPLETED, result=b"r", consume_timers=[timer],
                     consume_procedures=["a#1.1"], consume_inbox=[taken])
        writes = [q for q in _statements_of(s, ended) if q not in ("BEGIN", "COMMIT")]
        assert len(writes) == 1, writes
        rec = s.load_workflow("a")
        assert rec is not None and rec.status == COMPLETED and rec.step_seq == ended.step_seq
        assert (s.timers("a"), s.procedures("a"), s.inbox("a"), s.subscriptions("a")) == ([], [], [], [])
        ask = s.ask("a", "q1")
        assert ask is not None and ask.status == "ended"
        assert kept != taken
    finally:
        s.close()


def test_a_sealed_batch_sends_no_begin_nor_commit_and_one_that_syncs_begins_before_its_sync(
    pg_store_url: str,
) -> None:
    """Statements sent in a pipeline with no sync between them are one transaction, which the
    pipeline's sync commits: a batch of sealed steps sends neither BEGIN nor COMMIT. A batch
    that syncs before its end (a signal to another workflow, whose delivery it reads) sends
    BEGIN before that sync, making what it sent before part of its block, and COMMIT."""
    from persistence import OutSignal

    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        s.create_workflow(new_wf("b"))
        sealed = _statements_of(s, step(s, "a", continuation=b"a1"))
        assert "BEGIN" not in sent_words(sealed) and "COMMIT" not in sent_words(sealed), sealed
        assert s.load_workflow("a").continuation == b"a1"
        synced = _statements_of(s, step(s, "a", continuation=b"a2", signals=[OutSignal("b", "go", b"x")]))
        words = sent_words(synced)
        assert words.count("BEGIN") == 1 and words[-1] == "COMMIT", synced
        assert words.index("BEGIN") > 0  # after the step's own statement, before the sync
        assert s.load_workflow("a").continuation == b"a2"
        assert [m.name for m in s.inbox("b")] == ["go"]
    finally:
        s.close()


def sent_words(sent: list[str]) -> list[str]:
    return [q.split(None, 1)[0].upper() for q in sent]


def test_the_lines_a_step_moves_out_of_its_row_go_as_one_insert_in_their_order(pg_store_url: str) -> None:
    """The steps a workflow's row no longer describes are inserted into the history table by one
    statement of several rows, in their order (their ``seq`` ascending as their times)."""
    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        lines = [f'[{1000 + i},"step",{{"step":{i}}}]' for i in range(17)]
        sent = _statements_of(s, step(s, "a", continuation=b"a1", evicted="\n".join(lines)))
        inserts = [q for q in sent if "INTO" in q and ".history" in q]
        assert len(inserts) == 1, inserts
        rows = [r for r in s.history("a", limit=100) if r.seq is not None]
        assert [r.detail for r in rows] == [f'{{"step":{i}}}' for i in range(17)]
        assert [r.at for r in rows] == [1 + i / 1000 for i in range(17)]
        assert [r.seq for r in rows] == sorted(r.seq for r in rows)
    finally:
        s.close()


def test_only_a_plain_insert_of_values_takes_several_rows_at_once() -> None:
    from persistence._pg._writer import _values_group

    group = "(%s, %s, %s)"
    assert _values_group(f"INSERT INTO s.t (a, b, c) VALUES {group}") == group
    assert _values_group(f"INSERT INTO s.t (a, b, c) OVERRIDING SYSTEM VALUE VALUES {group}") == group
    assert _values_group(f"INSERT INTO s.t (a, b, c) VALUES {group} ON CONFLICT DO NOTHING") is None
    assert _values_group(f"INSERT INTO s.t (a, b, c) VALUES {group} RETURNING a") is None
    assert _values_group("INSERT INTO s.t (a, b) VALUES (%s, now())") is None
    assert _values_group("UPDATE s.t SET a = %s WHERE b = %s") is None


def test_a_step_sends_its_new_rows_history_and_end_with_its_checked_writes_and_the_token(
    pg_store_url: str,
) -> None:
    """A step's new timers and history lines go in the statement of its checked writes, and so do
    the writes that end a workflow (its asks, the rows it held), the commit token with them: a
    step that arms a timer is one statement, one that ends the workflow too."""
    from persistence import COMPLETED, NewTimer

    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        # Its waits known from then on, and timer ids drawn ahead.
        s.commit_step(step(s, "a", continuation=b"a0", new_timers=[NewTimer("t0", 40.0)]), timeout=30)
        def writes_of(sw: StepWrite) -> list[str]:
            sent = _statements_of(s, sw)
            return [q for q in sent if q not in ("BEGIN", "COMMIT") and "nextval" not in q]

        armed = writes_of(step(s, "a", continuation=b"a1", new_timers=[NewTimer("t", 50.0)],
                               history=[("note", '{"n":1}')]))
        assert len(armed) == 1, armed
        assert ".timers" in armed[0] and ".history" in armed[0] and "af_commits" in armed[0]
        timer = next(t for t in s.timers("a") if t.name == "t")
        assert (timer.name, timer.due_at) == ("t", 50.0)
        ended = writes_of(step(s, "a", status=COMPLETED, result=b"r", consume_timers=[timer.id],
                               history=[("completed", '{"result":"r"}')]))
        assert len(ended) == 1, ended
        assert ".history" in ended[0] and "af_commits" in ended[0] and ".asks" in ended[0]
        assert s.timers("a") == []
        assert [r.event for r in s.history("a") if r.seq is not None] == ["note", "completed"]
        rec = s.load_workflow("a")
        assert rec is not None and rec.status == COMPLETED
    finally:
        s.close()


def test_a_batch_that_fails_on_the_client_after_sending_sealed_statements_commits_none_of_them(
    pg_store_url: str,
) -> None:
    """A sealed batch sends no BEGIN, and psycopg ends a pipeline with a sync even when the
    batch raised: without a transaction block, that sync would commit the statements sent before
    the error (a step the writer reports as failed, durable nonetheless). A batch failing on the
    client before its end opens its block first, so the sync commits nothing and the step runs
    again, once."""
    from persistence import _writes

    s = open_store(pg_store_url)
    try:
        s.create_workflow(new_wf("a"))
        sw = step(s, "a", continuation=b"a1")
        raised: list[int] = []

        def sends_then_fails(w: Any) -> Any:
            _writes.apply_step(w, sw, s.inbox_limit)  # the step's statement, sent
            if not raised:
                raised.append(1)
                raise RuntimeError("failed on the client before the batch's end")
            return None

        with pytest.raises(Exception, match="failed on the client"):
            s._writer.submit(sends_then_fails).result(30)
        assert s.load_workflow("a").step_seq == 0  # nothing of it committed
        s.commit_step(sw, timeout=30)  # the same step, run again: not stale
        assert (s.load_workflow("a").step_seq, s.load_workflow("a").continuation) == (1, b"a1")
    finally:
        s.close()


def test_a_failed_batch_leaves_no_psycopg_warning(pg_store_url: str, pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A write that fails after one of its statements failed in the batch's pipeline (a batch the
    writer runs again write by write, as when two nodes race) is reported to its caller alone:
    psycopg's "error ignored terminating <Pipeline>" WARNING, which an application that
    configures no logging saw on stderr, is not logged. An application's own pipeline still is."""
    import logging

    caplog.set_level(logging.WARNING)

    def fails(w: Any) -> None:
        w.execute("SELECT 1/0", ())
        w.execute("SELECT 1", ())
        raise ValueError("the write's own error, after a statement that failed")

    with open_store(pg_store_url) as store:
        assert isinstance(store, PgStore) and store._writer is not None
        for _ in range(3):
            with pytest.raises((ValueError, PersistenceError)):
                store._writer.submit(fails).result(10)
        store.create_workflow(new_wf("after"))  # the writer goes on
        assert store.load_workflow("after") is not None
    noise = [r for r in caplog.records if r.name == "psycopg" and "error ignored terminating" in r.getMessage()]
    assert noise == []
    with psycopg.connect(pg_url) as conn, pytest.raises(ValueError), conn.pipeline():
        conn.execute("SELECT 1/0")
        raise ValueError("the application's own")
    assert [r for r in caplog.records if r.name == "psycopg" and "error ignored terminating" in r.getMessage()]
