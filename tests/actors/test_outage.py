"""An outage of the storage that heals is no failure for good: the runtime's own rounds log it at
WARNING (SPEC §8: ERROR is for what failed for good), once, and carry on by themselves."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from actors.testing import VirtualClock
from persistence import DiskFull

from . import flows

T = 30  # every wait in these tests is bounded


def _errors(logs: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["event"], e.get("error")) for e in logs if e["log_level"] in ("error", "critical")]


def test_housekeeping_through_a_storage_outage_warns_once_and_resumes(tmp_path) -> None:
    """Housekeeping's reads fail for a while on a fault of the storage that may pass: one
    WARNING ``housekeeping_failed``, no ERROR, an INFO ``housekeeping_resumed`` once a round
    passes, and a `wf` request queued meanwhile is carried out after it."""
    db = str(tmp_path / "out.db")
    with capture_logs() as logs, ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.waits_once, id="w")
        s.idle(timeout=T)
        store = s._rt.store
        real = store.take_external
        failing = threading.Event()
        failing.set()
        failed = threading.Event()

        def take_external(limit: int) -> Any:
            if failing.is_set():
                failed.set()
                raise DiskFull("the disk is full (test)", path=db)
            return real(limit)

        store.take_external = take_external  # type: ignore[method-assign]
        store.post_external("signal", "w", "go", '{"ok": 1}', at=time.time())
        assert failed.wait(T)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # several failed rounds
            time.sleep(0.05)
        failing.clear()
        assert ref.result(timeout=T) == {"ok": 1}
    warned = [e for e in logs if e["event"] == "housekeeping_failed"]
    assert [e["log_level"] for e in warned] == ["warning"], warned
    assert "the disk is full (test)" in warned[0]["error"]
    assert [e["event"] for e in logs if e["event"] == "housekeeping_resumed"] == [
        "housekeeping_resumed"
    ]
    assert _errors(logs) == []


def test_a_postgresql_server_away_and_back_logs_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server stops under a running system for a few seconds and starts again: what the
    runtime says meanwhile is WARNING (the store's and the cluster's rounds), never ERROR; ``wf
    ui`` answers 503 with the store's message; the workflows go on afterwards."""
    from starlette.testclient import TestClient

    from actors._ui import create_app
    from persistence import open_store
    from persistence._pg import _store, _writer
    from tests.conftest import pg_unavailable, schema_of
    from tests.pgserver import FAST, PgServer, PgUnavailable

    monkeypatch.setattr(_writer, "RECONNECTS", (0.0, 0.05))
    monkeypatch.setattr(_store, "POOL_TIMEOUT", 1.0)
    try:
        server = PgServer.start(FAST)
    except PgUnavailable as exc:
        pg_unavailable(str(exc))
    try:
        with server.schema() as url:
            with capture_logs() as logs, ActorSystem(f"{url}&schema={schema_of(url)}") as s:
                ref = s.start(flows.waits_once, id="w")
                s.idle(timeout=T)
                reader = open_store(f"{url}&schema={schema_of(url)}", owner=False)
                server.pause()
                started = time.monotonic()
                with TestClient(
                    create_app(reader, url, allowed_hosts=frozenset({"testserver"}))
                ) as c:
                    # wf ui meanwhile: the store's message, as 503; never "no system runs".
                    r = c.get("/")
                    assert r.status_code == 503, r.text[:500]
                    assert (
                        "cannot reach the PostgreSQL server" in r.text
                        and "no system runs" not in r.text
                    )
                    assert c.get("/api/counts").status_code == 503
                time.sleep(
                    max(0.0, 3.0 - (time.monotonic() - started))
                )  # every service's rounds fail
                server.resume()
                deadline = time.monotonic() + T
                while True:  # the signal is taken once the node has its shards again
                    try:
                        ref.signal("go", {"ok": 2})
                        break
                    except Exception:
                        assert time.monotonic() < deadline, "the system never came back"
                        time.sleep(0.2)
                assert ref.result(timeout=T) == {"ok": 2}
    finally:
        server.stop()
    assert _errors(logs) == []
    assert any(e["log_level"] == "warning" for e in logs)


def test_a_storage_that_does_not_answer_ends_the_callers_wait_saying_what_to_do(tmp_path) -> None:
    """A storage that neither commits nor fails (a frozen database server, a disk that blocks):
    an ask with a timeout of its own waits that long (not the 60 s a write may take), and every
    caller's wait ends in a ``TimeoutError`` saying the storage did not answer, that the write may
    still be carried out, and what to do; asked again once the storage answers, it is answered."""
    from persistence import Promise

    from . import talk_flows

    with ActorSystem(str(tmp_path / "frozen.db"), clock=VirtualClock()) as s:
        ref = s.start(talk_flows.answers_one, "q", id="w")
        s.idle(timeout=T)
        store = s._rt.store
        real = {n: getattr(store, n) for n in ("submit_ask", "submit_append_inbox", "submit_broadcast")}
        unanswered: list[Promise[Any]] = []

        def never(*args: Any, **kwargs: Any) -> Promise[Any]:
            unanswered.append(Promise())
            return unanswered[-1]

        for n in real:
            setattr(store, n, never)
        try:
            started = time.monotonic()
            with pytest.raises(TimeoutError) as asked:
                ref.ask("q", 1, timeout=0.1, ask_id="a1")
            assert time.monotonic() - started < 10  # its own timeout (at least a second), not 60 s
            text = str(asked.value)
            assert "did not answer" in text and "ask_id='a1'" in text, text
            s._rt.commit_timeout = 0.2  # what any other caller waits for its write
            for call, what in ((lambda: ref.cancel("bye"), "cancel"),
                               (lambda: s.broadcast("news", None, 1), "broadcast 'news'")):
                with pytest.raises(TimeoutError) as waited:
                    call()
                text = str(waited.value)
                assert what in text and "did not answer" in text and "may" in text, text
        finally:
            for n, f in real.items():
                setattr(store, n, f)
            s._rt.commit_timeout = 60.0
        assert len(unanswered) == 3
        assert ref.ask("q", 1, timeout=T, ask_id="a1") == "got 1"


def test_a_shutdown_while_housekeeping_waits_on_the_storage_logs_no_error(tmp_path) -> None:
    """A shutdown while a housekeeping round waits on a storage that is away (a PostgreSQL
    server gone holds the read for seconds): the store is closed under the round, whose read then
    fails. That is the shutdown, not a failure: no ERROR ``housekeeping_failed``."""
    from persistence import StoreClosed

    with capture_logs() as logs:
        s = ActorSystem(str(tmp_path / "closing.db"), clock=VirtualClock())
        s.start(flows.waits_once, id="w")
        s.idle(timeout=T)
        inside = threading.Event()

        def changed() -> bool:
            inside.set()
            s._stop.wait(T)  # the storage answers only once the system is shutting down
            raise StoreClosed("the store was closed under this read", path=s.db)

        s._rt.store.changed = changed  # type: ignore[method-assign]
        assert inside.wait(T)
        s.shutdown()
        s._house.join(T)
        assert not s._house.is_alive()
    assert _errors(logs) == []


def _freeze_server(server: Any) -> list[int]:
    """Stop (SIGSTOP) the postmaster of ``server`` and every child it has (no other server's
    processes); the pids stopped. The postmaster goes first, so it forks no child after the list
    of its children is read (a backend for a connection a pool opens in the background, say, that
    would go on answering)."""
    import os
    import signal as sig

    with open(os.path.join(server.directory, "data", "postmaster.pid")) as f:
        master = int(f.readline())
    os.kill(master, sig.SIGSTOP)
    frozen = [master]
    while True:  # until a pass finds no child left to stop (one forking as the master stopped)
        new = [pid for pid in _children(master) if pid not in frozen]
        if not new:
            return frozen
        for pid in new:
            os.kill(pid, sig.SIGSTOP)
        frozen += new


def _children(parent: int) -> list[int]:
    import os

    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent:
                children.append(int(entry))
    return children


def test_result_and_published_keep_their_timeout_while_the_server_is_frozen() -> None:
    """A PostgreSQL server that stops answering without an error (frozen: SIGSTOP) holds a read
    for the connection's timeout; ``result(timeout=)`` and ``published(timeout=)`` (and their async
    twins) raise ``TimeoutError`` saying the storage did not answer, within their timeout, instead
    of ``ServerUnreachable`` after that connection timeout; everything goes on once it answers."""
    import asyncio
    import os
    import signal as sig

    from tests.conftest import pg_unavailable, schema_of
    from tests.pgserver import FAST, PgServer, PgUnavailable

    try:
        server = PgServer.start(FAST)
    except PgUnavailable as exc:
        pg_unavailable(str(exc))
    try:
        with server.schema() as url, ActorSystem(f"{url}&schema={schema_of(url)}") as s:
            ref = s.start(flows.waits_once, id="w")
            s.idle(timeout=T)
            frozen = _freeze_server(server)
            try:
                calls = [
                    ("result", lambda: ref.result(timeout=1)),
                    ("published", lambda: ref.published("score", timeout=1)),
                    ("result_async", lambda: asyncio.run(ref.result_async(timeout=1))),
                    ("published_async", lambda: asyncio.run(ref.published_async("score", timeout=1))),
                ]
                for what, call in calls:
                    with pytest.raises(TimeoutError, match="did not answer within") as info:
                        call()
                    assert what in str(info.value) and "'w'" in str(info.value)
            finally:
                for pid in frozen:
                    os.kill(pid, sig.SIGCONT)
            ref.signal("go", 7)
            assert ref.result(timeout=T) == 7
    finally:
        server.stop()
