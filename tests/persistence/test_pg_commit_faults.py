"""Exactly once under a connection lost at COMMIT, on every PostgreSQL write path.

The fault injector (``pgfault.FaultProxy``) sits on 127.0.0.1 between the store and the test
server and cuts a connection before, half-way into, during and after a COMMIT (and after it with
the message a terminated session gets); ``pgfault.PipelineExitFault`` is a psycopg shim that raises what
psycopg raises when a pipeline cannot be left (``cannot exit pipeline mode while busy``, no
SQLSTATE) once a COMMIT went through, on a connection left open or closed. Each case asserts that
what the write wrote is there exactly once (rows, inbox entries, reducer rows), that the caller
was told it succeeded, and how the writer settled the COMMIT's outcome.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from persistence import SIGNAL, NewTimer, OutSignal, StepWrite, StorageUnavailable, open_store
from persistence._pg._store import PgStore
from persistence._pg._writer import PgWriter
from tests.pgserver import PASSWORD, SUPERUSER, PgServer

from .conftest import new_wf
from .pgfault import MODES, FaultProxy, Mode, PipelineExitFault

# Modes whose COMMIT reaches the server (it commits); the others' never does.
COMMITTED = {"during": True, "after": True, "terminated": True, "before": False, "partial": False}


@pytest.fixture
def proxy(pg_server: PgServer) -> Iterator[FaultProxy]:
    if pg_server.socket_dir is None:
        pytest.skip("the fault proxy needs a server started here (AF_TEST_PG_DSN is set)")
    assert pg_server.tcp_port is not None
    p = FaultProxy(pg_server.tcp_port)
    yield p
    p.close()


@pytest.fixture
def schema(pg_server: PgServer) -> Iterator[str]:
    with pg_server.schema("cf") as url:
        options = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["options"][0]
        yield options.split("search_path=", 1)[1].split()[0]


def _url(proxy: FaultProxy, schema: str) -> str:
    return (
        proxy.url("postgres", user=SUPERUSER, password=PASSWORD, options=f"-c search_path={schema}")
        + f"&schema={schema}"
    )


def _direct(pg_server: PgServer, schema: str) -> psycopg.Connection[Any]:
    """A connection around the proxy, to count what is there."""
    conn = psycopg.connect(pg_server.url("postgres"), autocommit=True)
    conn.execute(f'SET search_path = "{schema}"')
    return conn


def _count(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


def _writer(store: Any) -> PgWriter:
    assert isinstance(store, PgStore) and store._writer is not None
    return store._writer


# -- the writes -------------------------------------------------------------------------------------
def _setup(store: Any, direct: psycopg.Connection[Any]) -> None:
    store.create_workflows([new_wf("a"), new_wf("b")])
    direct.execute("CREATE TABLE tally (wid text, n int)")


def _do_append(store: Any, arm: Callable[[], None]) -> None:
    arm()
    d = store.append_inbox("a", SIGNAL, "go", b"x", at=1.0)
    assert d.workflow_id == "a"


def _check_append(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT count(*) FROM inbox WHERE workflow_id = 'a' AND name = 'go'") == 1


def _do_step(store: Any, arm: Callable[[], None]) -> None:
    seq = store.append_inbox("a", SIGNAL, "in", b"x", at=1.0).seq
    arm()

    def reducer(db: Any) -> None:
        db.execute("INSERT INTO tally VALUES ('a', 1)")

    ack = store.commit_step(
        StepWrite(
            "a",
            1,
            updated_at=2.0,
            continuation=b"after",
            consume_inbox=[seq],
            reducers=[reducer],
            signals=[OutSignal("b", "out", b"y")],
        )
    )
    assert ack is not None


def _check_step(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT step_seq FROM workflows WHERE id = 'a'") == 1
    assert _count(direct, "SELECT count(*) FROM inbox WHERE workflow_id = 'a'") == 0
    assert _count(direct, "SELECT count(*) FROM tally") == 1
    assert (
        _count(direct, "SELECT count(*) FROM inbox WHERE workflow_id = 'b' AND name = 'out'") == 1
    )


def _do_sealed_step(store: Any, arm: Callable[[], None]) -> None:
    """A step that sends nothing elsewhere and arms no timer: its checks are the server's and
    its COMMIT goes with its statements, unanswered; a commit token settles a lost answer."""
    seq = store.append_inbox("a", SIGNAL, "in", b"x", at=1.0).seq
    arm()
    ack = store.commit_step(
        StepWrite("a", 1, updated_at=2.0, continuation=b"after", consume_inbox=[seq],
                  published=[("k", b"v")])
    )
    assert ack is not None and ack.timer_ids == [] and ack.delivered == []


def _do_sealed_timer_step(store: Any, arm: Callable[[], None]) -> None:
    """A sealed step that arms timers: their ids are drawn by the writer ahead (from the table's
    sequence), so its ack needs no answer, and a cut COMMIT still gives the ids it stored."""
    seq = store.append_inbox("a", SIGNAL, "in", b"x", at=1.0).seq
    arm()
    ack = store.commit_step(
        StepWrite("a", 1, updated_at=2.0, continuation=b"after", consume_inbox=[seq],
                  new_timers=[NewTimer("t1", 10.0), NewTimer("t2", 20.0)])
    )
    assert len(ack.timer_ids) == 2 and len(set(ack.timer_ids)) == 2
    assert [(t.id, t.name) for t in sorted(store.timers_due(100.0, 10), key=lambda t: t.id)] == list(
        zip(sorted(ack.timer_ids), ["t1", "t2"], strict=True)
    )


def _check_sealed_timer_step(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT step_seq FROM workflows WHERE id = 'a'") == 1
    assert _count(direct, "SELECT count(*) FROM timers WHERE workflow_id = 'a'") == 2


def _check_sealed_step(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT step_seq FROM workflows WHERE id = 'a'") == 1
    assert _count(direct, "SELECT count(*) FROM inbox WHERE workflow_id = 'a'") == 0
    assert _count(direct, "SELECT count(*) FROM published WHERE workflow_id = 'a'") == 1
    assert _count(direct, "SELECT count(*) FROM af_commits") >= 1


def _do_broadcast(store: Any, arm: Callable[[], None]) -> None:
    store.commit_step(StepWrite("b", 1, updated_at=2.0, subscribe=[("news", "{}")]))
    arm()
    got = store.broadcast("news", "{}", b"z", at=3.0)
    assert [d.workflow_id for d in got] == ["b"]


def _check_broadcast(direct: psycopg.Connection[Any]) -> None:
    assert (
        _count(direct, "SELECT count(*) FROM inbox WHERE workflow_id = 'b' AND name = 'news'") == 1
    )


def _do_request(store: Any, arm: Callable[[], None]) -> None:
    arm()
    seq = store.post_external("signal", "a", "go", '{"x": 1}', at=5.0)
    assert seq > 0


def _check_request(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT count(*) FROM external WHERE workflow_id = 'a'") == 1


def _do_start(store: Any, arm: Callable[[], None]) -> None:
    arm()
    assert store.create_workflows([new_wf("c")]) == [True]  # not "taken" by its own first run


def _check_start(direct: psycopg.Connection[Any]) -> None:
    assert _count(direct, "SELECT count(*) FROM workflows WHERE id = 'c'") == 1


WRITER_PATHS = {
    "start": (_do_start, _check_start, "INSERT INTO"),
    "append": (_do_append, _check_append, "inbox"),
    "step": (_do_step, _check_step, "tally"),
    "sealed step": (_do_sealed_step, _check_sealed_step, "af_commits"),
    "sealed step with timers": (_do_sealed_timer_step, _check_sealed_timer_step, "af_commits"),
    "broadcast": (_do_broadcast, _check_broadcast, "inbox"),
    "request": (_do_request, _check_request, "external"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", sorted(WRITER_PATHS))
def test_a_cut_at_commit_writes_once_in_pipeline_mode(
    proxy: FaultProxy,
    schema: str,
    pg_server: PgServer,
    path: str,
    mode: Mode,
) -> None:
    """The writer (pipelined): each of its write paths, its connection cut at COMMIT."""
    do, check, match = WRITER_PATHS[path]
    with _direct(pg_server, schema) as direct, open_store(_url(proxy, schema)) as store:
        _setup(store, direct)
        do(store, lambda: proxy.arm(mode, match))
        assert len(proxy.faults) == 1 and proxy.faults[0].mode == mode
        check(direct)
        w = _writer(store)
        if COMMITTED[mode]:
            assert w.outcomes == {"committed": 1, "aborted": 0, "unknown": 0}
        else:
            assert w.outcomes in (
                {"committed": 0, "aborted": 1, "unknown": 0},
                {"committed": 0, "aborted": 0, "unknown": 0},
            )
        # The store goes on writing on its new connection.
        store.append_inbox("a", SIGNAL, "later", b"", at=9.0)
        assert _count(direct, "SELECT count(*) FROM inbox WHERE name = 'later'") == 1


@pytest.mark.parametrize("close", [False, True], ids=["left-open", "closed"])
@pytest.mark.parametrize("path", sorted(WRITER_PATHS))
def test_an_unrecognised_error_after_commit_is_settled_by_the_server(
    pg_store_url: str,
    pg_server: PgServer,
    path: str,
    close: bool,
) -> None:
    """psycopg's ``cannot exit pipeline mode while busy`` (no SQLSTATE) once COMMIT went: the
    batch is committed, and is never run a second time."""
    do, check, _match = WRITER_PATHS[path]
    schema = pg_store_url.rsplit("schema=", 1)[1]
    with _direct(pg_server, schema) as direct, open_store(pg_store_url) as store:
        _setup(store, direct)
        shim = PipelineExitFault(_writer(store), close=close)
        do(store, shim.arm)
        assert shim.fired == 1
        check(direct)
        assert _writer(store).outcomes == {"committed": 1, "aborted": 0, "unknown": 0}


# -- out of pipeline mode: a reader's requests ----------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_readers_request_is_posted_once(
    proxy: FaultProxy,
    schema: str,
    pg_server: PgServer,
    mode: Mode,
) -> None:
    """``wf`` requests (a store that does not own the schema, autocommit connection, explicit
    transaction): cut at COMMIT, posted exactly once, and the poster told its seq."""
    with _direct(pg_server, schema) as direct, open_store(_url(proxy, schema)) as owner:
        _setup(owner, direct)
        with open_store(_url(proxy, schema), owner=False) as reader:
            proxy.arm(mode, "INSERT INTO")
            seq = reader.post_external("signal", "a", "go", '{"x": 1}', at=5.0)
            assert len(proxy.faults) == 1
            assert _count(direct, "SELECT count(*) FROM external") == 1
            assert _count(direct, "SELECT seq FROM external") == seq
            # And its result, taken once (the take deletes it: cut at its COMMIT as well).
            owner.external_done(seq, "done")
            proxy.arm(mode, "DELETE FROM")
            deadline = time.monotonic() + 10
            got = None
            while got is None:
                assert time.monotonic() < deadline
                got = reader.take_external_result(seq)
            assert got == "done"
            assert len(proxy.faults) == 2
            assert (
                _count(direct, "SELECT count(*) FROM meta WHERE key LIKE 'external_result_%%'") == 0
            )


# -- the idempotency keys -------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["append", "broadcast", "request"])
def test_even_a_wrong_guess_cannot_append_twice(
    proxy: FaultProxy, schema: str, pg_server: PgServer, path: str, monkeypatch: Any
) -> None:
    """The server says committed, the writer is made to believe "not committed" and runs the
    batch again: the appends' keys make that run append nothing, and answer what was appended."""
    do, check, match = WRITER_PATHS[path]
    with _direct(pg_server, schema) as direct, open_store(_url(proxy, schema)) as store:
        _setup(store, direct)
        w = _writer(store)
        real = w._commit_outcome
        lies: list[bool | None] = []

        def wrong(cause: BaseException) -> bool | None:
            lies.append(real(cause))
            return False  # the wrong guess: run the batch again

        monkeypatch.setattr(w, "_commit_outcome", wrong)
        do(store, lambda: proxy.arm("after", match))
        assert lies == [True]
        check(direct)
        assert _count(direct, "SELECT count(*) FROM af_appends") >= 1


def test_the_server_refuses_a_second_row_of_one_key(pg_store_url: str, pg_server: PgServer) -> None:
    """A write that does not know it ran before (a new ``Once`` of the same key) fails: the
    server's unique key refuses the second row, nothing is appended twice."""
    from persistence import PersistenceError
    from persistence._pg import _appends

    schema = pg_store_url.rsplit("schema=", 1)[1]
    with _direct(pg_server, schema) as direct, open_store(pg_store_url) as store:
        _setup(store, direct)
        key = _appends.new_key()

        def append(w: Any) -> Any:
            return _appends.append_inbox(w, _appends.Once(key), "a", SIGNAL, "go", b"", 1.0, 100)

        first = store._write(append).result(10)  # type: ignore[attr-defined]
        with pytest.raises(PersistenceError, match="af_appends_pkey|duplicate key"):
            store._write(append).result(10)  # type: ignore[attr-defined]
        assert _count(direct, "SELECT count(*) FROM inbox WHERE name = 'go'") == 1
        # The same write run again (it knows it ran) answers the row it appended.
        once = _appends.Once(key)
        once.runs = 1
        again = store._write(  # type: ignore[attr-defined]
            lambda w: _appends.append_inbox(w, once, "a", SIGNAL, "go", b"", 1.0, 100)
        ).result(10)
        assert again.seq == first.seq
        assert _count(direct, "SELECT count(*) FROM inbox WHERE name = 'go'") == 1


# -- out of pipeline mode: cluster control ------------------------------------------------------
def _leases_agree(store: Any, direct: psycopg.Connection[Any]) -> bool:
    node = store.cluster()
    m = node.membership
    rows = direct.execute(
        "SELECT shard, epoch FROM af_shards WHERE owner = %s", (m.incarnation,)
    ).fetchall()
    held = {int(s): int(e) for s, e in rows}
    return len(held) == m.shards and held == m.owned()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("what", ["claim", "heartbeat"])
def test_a_cut_at_a_cluster_write_leaves_one_lease_per_shard(
    proxy: FaultProxy, schema: str, pg_server: PgServer, mode: Mode, what: str
) -> None:
    """The node's control connection (autocommit) cut as its claim of the shards or its
    heartbeat commits: the node gives its leases up, rejoins, and ends holding every shard
    once, its view of the leases the server's; a step then commits once."""
    match = "SET owner = " if what == "claim" else "SET heartbeat_at"
    with _direct(pg_server, schema) as direct:
        if what == "claim":
            proxy.arm(mode, match)
        store = None
        deadline = time.monotonic() + 60
        while store is None:  # a cut claim may fail the open itself: opened again
            try:
                store = open_store(_url(proxy, schema))
            except Exception:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        try:
            if what == "heartbeat":
                proxy.arm(mode, match)
            node = store.cluster()
            while proxy.armed() or not _leases_agree(store, direct):
                assert time.monotonic() < deadline, (proxy.faults, node.membership.owned())
                # A round of the node, as its thread runs them (a bare store starts none).
                try:
                    node._round()
                except StorageUnavailable:
                    if not node._rejoin:
                        node._self_fence("its control connection to the database was lost")
                time.sleep(0.05)
            assert len(proxy.faults) == 1
            _setup(store, direct)
            while True:
                try:
                    _do_step(store, lambda: None)
                    break
                except Exception:  # fenced while the node settles: the step is not written
                    assert time.monotonic() < deadline
                    assert _count(direct, "SELECT step_seq FROM workflows WHERE id = 'a'") == 0
                    direct.execute("DELETE FROM inbox")
                    time.sleep(0.1)
            _check_step(direct)
        finally:
            store.close()


def test_an_undecided_transaction_is_settled_by_ending_its_session(pg_server: PgServer) -> None:
    """A transaction whose session does not end (its client gone, the server not told yet) stays
    "in progress": after the wait its session is terminated, which settles it (here: aborted),
    and only that session (matched by its transaction's id)."""
    from persistence._pg._writer import commit_status

    with (
        psycopg.connect(pg_server.url("postgres"), autocommit=True) as stuck,
        psycopg.connect(pg_server.url("postgres"), autocommit=True) as other,
        psycopg.connect(pg_server.url("postgres"), autocommit=True) as asker,
    ):
        stuck.execute("BEGIN")
        row = stuck.execute("SELECT txid_current()").fetchone()
        assert row is not None
        xid = int(row[0])
        other.execute("BEGIN")
        other.execute("SELECT txid_current()")
        # Named with another session's pid: that one runs another transaction, it is left alone.
        assert commit_status(asker, xid, wait=0.2, backend=other.info.backend_pid) is None
        assert not other.closed and other.execute("SELECT 1").fetchone() == (1,)
        assert commit_status(asker, xid, wait=0.2, backend=stuck.info.backend_pid) is False
        with pytest.raises(psycopg.OperationalError):
            stuck.execute("SELECT 1")


@pytest.mark.parametrize("mode", ["during", "after"])
def test_wakeups_taken_with_their_answer_lost_still_deliver_once(
    proxy: FaultProxy, schema: str, pg_server: PgServer, mode: Mode
) -> None:
    """Two nodes; each signals a workflow the other runs, and the wake-ups the other takes
    (``DELETE ... RETURNING``, autocommit) are cut as they commit, three times: the node that
    lost them gives its leases up, rejoins and recovers its workflows, and each signal is taken
    exactly once."""
    from actors.testing import Cluster
    from tests.actors import flows

    with Cluster(_url(proxy, schema), 2) as cluster:
        n1, n2 = cluster["node-1"], cluster["node-2"]

        def on(node: str, prefix: str) -> str:
            return next(
                f"{prefix}-{i}" for i in range(10_000) if cluster.owner(f"{prefix}-{i}") == node
            )

        a = n1.start(flows.collect, 3, id=on("node-2", "a"))
        b = n2.start(flows.collect, 3, id=on("node-1", "b"))
        cluster.idle(60)
        proxy.arm(mode, "af_wakeups WHERE shard", times=3)
        for item in ("x", "y", "z"):
            n1.get(a.id).signal("item", item)
            n2.get(b.id).signal("item", item)
        assert a.result(timeout=120) == ["x", "y", "z"]
        assert b.result(timeout=120) == ["x", "y", "z"]
        assert 1 <= len(proxy.faults) <= 3


def test_a_request_carried_out_twice_appends_once(pg_store_url: str, pg_server: PgServer) -> None:
    """A ``wf`` request's append is keyed by the request: carried out again (a node that did not
    learn its first try committed), it appends nothing and answers the row it appended."""
    schema = pg_store_url.rsplit("schema=", 1)[1]
    with _direct(pg_server, schema) as direct, open_store(pg_store_url) as store:
        _setup(store, direct)
        seq = store.post_external("signal", "a", "go", "1", at=1.0)
        first = store.append_inbox("a", SIGNAL, "go", b"1", at=2.0, external_seq=seq)
        again = store.append_inbox("a", SIGNAL, "go", b"1", at=3.0, external_seq=seq)
        assert again.seq == first.seq
        assert _count(direct, "SELECT count(*) FROM inbox WHERE name = 'go'") == 1
        assert _count(direct, "SELECT count(*) FROM external") == 0


def test_a_token_of_an_undecided_transaction_is_settled_by_ending_its_session(
    pg_server: PgServer,
) -> None:
    """A sealed batch's outcome is its commit token: found, it committed; not found while its
    session lives, it may still commit, so after the wait that session (matched by its pid and
    start) is terminated, and only then is a token not there an abort."""
    from persistence._pg._writer import _backend_start, token_status

    with (
        psycopg.connect(pg_server.url("postgres"), autocommit=True) as stuck,
        psycopg.connect(pg_server.url("postgres"), autocommit=True) as asker,
    ):
        with pg_server.schema("tok") as url:
            options = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["options"][0]
            schema = options.split("search_path=", 1)[1].split()[0]
            with open_store(f"{url}&schema={schema}"):  # makes the schema's tables
                pass
            q = f'"{schema}"'
            asker.execute(f"INSERT INTO {q}.af_commits (writer, token) VALUES (7, 1)")
            assert token_status(asker, q, 7, 1, None, None) is True
            stuck.execute("BEGIN")
            stuck.execute(f"INSERT INTO {q}.af_commits (writer, token) VALUES (7, 2)")
            started = _backend_start(stuck)
            t0 = time.monotonic()
            assert token_status(asker, q, 7, 2, stuck.info.backend_pid, started, wait=0.3) is False
            assert time.monotonic() - t0 >= 0.3  # it waited for the session before it said so
            with pytest.raises(psycopg.OperationalError):
                stuck.execute("SELECT 1")
