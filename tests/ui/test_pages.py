"""``wf ui``'s pages and actions through Starlette's test client, on SQLite and PostgreSQL: what
each page holds, escaping, the anti-forgery token, read-only, and actions with and without a
running system."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")


from starlette.testclient import TestClient  # noqa: E402

from actors import ActorSystem, Status  # noqa: E402
from actors._ui import create_app  # noqa: E402
from actors._ui import data as ui_data  # noqa: E402
from actors.testing import VirtualClock  # noqa: E402
from persistence import Store, open_store  # noqa: E402
from tests.actors import flows  # noqa: E402

T = 30
EVIL = "<script>alert('x')</script>"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "ui.db")


def client_for(db: str, **kw: Any) -> TestClient:
    store = open_store(db, owner=False)
    app = create_app(store, db, allowed_hosts=frozenset({"testserver"}), **kw)
    return TestClient(app)


@pytest.fixture
def world(db: str) -> Iterator[tuple[ActorSystem, VirtualClock]]:
    """A running system with workflows of every kind of state the pages show."""
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        s.start(flows.collect, 2, id="collector")
        a = s.start(flows.auction, 10, id=EVIL)
        s.start(flows.parent_of_sleeper, id="parent-1")
        s.start(flows.quester, "orc", id="quester-1")
        s.start(flows.boom, id="boomer")
        s.start(flows.waits_once, id="done-1")
        for i in range(5):
            s.start(flows.sleeper, 100 + i, id=f"sleep-{i}")
        s.idle(timeout=T)
        a.signal("unheard-of", {"blob": "y" * 5000})
        s.get("done-1").signal("go", {"ok": [1, 2]})
        clock.advance(2)  # boomer's timer: it fails
        s.idle(timeout=T)
        yield s, clock


def token_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, "the page has no form with a token"
    return m.group(1)


def test_the_list_filters_counts_and_pages(db, world) -> None:
    with client_for(db) as c:
        r = c.get("/")
        assert r.status_code == 200
        html = r.text
        # Every workflow, the children too, with its counts by status.
        for wid in ("collector", "parent-1", "the-child", "quester-1", "boomer", "done-1", "sleep-4"):
            assert f'href="/w/{wid}"' in html
        counts = c.get("/api/counts").json()
        assert counts == {"total": 12, "by_status": {"running": 10, "completed": 1, "failed": 1, "cancelled": 0}}
        assert 'data-count="failed">1<' in html

        r = c.get("/", params={"status": "failed"})
        assert "boomer" in r.text and "collector" not in r.text
        r = c.get("/", params={"type": "sleeper"})  # a short name, as the list shows types
        assert "sleep-0" in r.text and "the-child" in r.text and "collector" not in r.text
        r = c.get("/", params={"id": "sleep-", "status": "running"})
        assert [m for m in re.findall(r'href="/w/(sleep-\d)"', r.text)] == [f"sleep-{i}" for i in range(4, -1, -1)]

        # Pages of two, forward then back, cover them all once.
        seen, url = [], "/?limit=2&id=sleep-&order=oldest"
        while url:
            r = c.get(url)
            seen += re.findall(r'<td class="id"><a href="/w/([^"]+)"', r.text)
            m = re.search(r'href="(/\?[^"]+)" rel="next"', r.text)
            url = m.group(1).replace("&amp;", "&") if m else None
        assert seen == [f"sleep-{i}" for i in range(5)]
        m = re.search(r'href="(/\?[^"]+)" rel="prev"', r.text)
        assert m
        back = c.get(m.group(1).replace("&amp;", "&")).text
        assert re.findall(r'<td class="id"><a href="/w/([^"]+)"', back) == ["sleep-2", "sleep-3"]

        # Bad filters are answered with what is wrong.
        r = c.get("/", params={"status": "sleeping"})
        assert r.status_code == 400 and "it is one of running, completed, failed, cancelled" in r.text
        r = c.get("/", params={"after": "garbage"})
        assert r.status_code == 400 and "not one this page made" in r.text
        r = c.get("/", params={"type": "nosuch"})
        assert r.status_code == 400 and "no workflow type named &#39;nosuch&#39;" in r.text


def test_markup_from_the_database_is_text(db, world) -> None:
    """A workflow id holding a script, and payloads, are escaped on every page; no inline
    script can run anyway (the Content-Security-Policy)."""
    with client_for(db) as c:
        for r in (c.get("/"), c.get("/w/" + EVIL)):
            assert r.status_code == 200
            assert EVIL not in r.text
            assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in r.text
            assert "script-src 'self'" in r.headers["content-security-policy"]
            assert r.headers["x-frame-options"] == "DENY"
            # The only script is the page's own file.
            assert re.findall(r"<script[^>]*>", r.text) == ['<script src="/static/app.js" defer>']


def test_a_workflow_page_shows_its_state(db, world) -> None:
    s, clock = world
    with client_for(db) as c:
        html = c.get("/w/" + EVIL).text
        # What it waits for, its timer counting down (to the system's due time), its inbox.
        assert "Waiting on (the first of)" in html and "signal &#39;bid&#39;" in html
        due = s.get(EVIL)
        assert due.status() is Status.RUNNING
        assert re.search(r'class="countdown" data-due="\d+\.?\d*"', html)
        assert "unheard-of" in html
        assert "cut: see all 5,012 characters" in html  # {'blob': 'yyyy...'}
        whole = c.get("/value", params={"id": EVIL, "what": "inbox-" + re.search(r"inbox-(\d+)", html).group(1)})
        assert whole.status_code == 200 and whole.text == repr({"blob": "y" * 5000})
        assert whole.headers["content-type"].startswith("text/plain")

        # Children as a tree with links, the parent link from the child.
        html = c.get("/w/parent-1").text
        assert 'href="/w/the-child"' in html and "1 running" in html
        html = c.get("/w/the-child").text
        assert 'class="parent-link">parent-1<' in html

        html = c.get("/w/quester-1").text
        assert "Subscriptions" in html and "<b>killed</b> filtered by <code>&#34;orc&#34;</code>" in html

        html = c.get("/w/boomer").text
        assert "KeyError" in html and "lost item" in html and "Traceback" in html
        assert "Act on it" not in html  # a finished workflow takes no action

        html = c.get("/w/done-1").text
        assert "completed" in html and "{&#39;ok&#39;: [1, 2]}" in html
        assert "code version" in html

        r = c.get("/w/never-was")
        assert r.status_code == 404 and "no workflow with id &#39;never-was&#39;" in r.text
        assert c.get("/value", params={"id": "done-1", "what": "nonsense"}).status_code == 404


def test_actions_need_the_token_and_are_carried_out_by_the_running_system(db, world) -> None:
    s, _ = world
    with client_for(db) as c:
        page = c.get("/w/collector").text
        token = token_of(page)
        # Without the token, or with another, nothing is queued.
        for form in ({"id": "collector", "name": "item", "payload": "1"},
                     {"id": "collector", "name": "item", "payload": "1", "csrf": "forged"}):
            r = c.post("/signal", data=form)
            assert r.status_code == 403 and "anti-forgery token" in r.text
        assert c.app.state.ui.store.take_external(0) == []
        # A form of another site is refused even with a token it could not have read.
        r = c.post("/signal", data={"id": "collector", "name": "item", "payload": "1", "csrf": token},
                   headers={"origin": "http://evil.example"})
        assert r.status_code == 403 and "another site" in r.text
        # The same host on another port or scheme is another site too; the page's own origin,
        # with its port written or not, is this one.
        for other in ("http://testserver:8080", "https://testserver", "http://testserver:443"):
            r = c.post("/signal", data={"id": "collector", "name": "item", "payload": "1", "csrf": token},
                       headers={"origin": other})
            assert r.status_code == 403 and "another site" in r.text, other
        for same in ("http://testserver:80", "HTTP://TestServer"):  # not refused: buffered
            r = c.post("/signal", data={"id": "sleep-4", "name": "nudge", "payload": "", "csrf": token},
                       headers={"origin": same})
            assert r.status_code == 200 and "another site" not in r.text, same

        r = c.post("/signal", data={"id": "collector", "name": "item", "payload": '{"n": 1}', "csrf": token})
        assert r.status_code == 200
        assert re.search(r"signal &#39;item&#39; carried out by the running system \(pid \d+\): it is running", r.text)
        r = c.post("/signal", data={"id": "collector", "name": "item", "payload": "[2]", "csrf": token})
        assert "it has completed" in r.text
        assert s.get("collector").result(timeout=T) == [{"n": 1}, [2]]

        r = c.post("/signal", data={"id": "sleep-0", "name": "item", "payload": "{oops", "csrf": token})
        assert "refused: the payload is not valid JSON" in r.text
        for payload in ("NaN", '{"n": Infinity}', "1e999"):  # JSON to Python only: refused too
            r = c.post("/signal", data={"id": "sleep-0", "name": "item", "payload": payload, "csrf": token})
            assert "refused: the payload holds" in r.text and "not standard JSON" in r.text, payload
        r = c.post("/signal", data={"id": "sleep-0", "name": "nudge", "payload": "", "csrf": token})
        assert "buffered: the workflow does not await &#39;nudge&#39;" in r.text
        assert "never awaits a signal named &#39;nudge&#39;" in r.text

        r = c.post("/fire-timer", data={"id": "sleep-1", "name": "nope", "csrf": token})
        assert "refused: workflow &#39;sleep-1&#39; has no armed timer named &#39;nope&#39;" in r.text
        r = c.post("/fire-timer", data={"id": "sleep-1", "name": "wake", "csrf": token})
        assert "fire timer &#39;wake&#39; carried out" in r.text and "it has completed" in r.text

        r = c.post("/cancel", data={"id": "sleep-2", "reason": "no longer needed", "csrf": token})
        assert "cancel carried out" in r.text and "it has cancelled" in r.text
        assert s.get("sleep-2").status() is Status.CANCELLED
        r = c.post("/cancel", data={"id": "sleep-2", "reason": "", "csrf": token})
        assert "refused: workflow &#39;sleep-2&#39; has already finished (cancelled)" in r.text


def test_read_only_serves_no_action(db, world) -> None:
    with client_for(db, read_only=True) as c:
        html = c.get("/w/collector").text
        assert "read-only" in html and 'method="post"' not in html and 'name="csrf"' not in html
        r = c.post("/cancel", data={"id": "collector", "csrf": c.app.state.ui.token})
        assert r.status_code == 403 and "--read-only" in r.text
        assert c.app.state.ui.store.take_external(0) == []


def test_another_host_name_is_refused(db, world) -> None:
    """A page of another site that points its own name at this address (DNS rebinding) gets
    nothing: the server answers for its own names only."""
    with client_for(db) as c:
        r = c.get("/", headers={"host": "attacker.example:8765"})
        assert r.status_code == 421 and "not for the host" in r.text


def test_actions_wait_for_the_next_start_when_no_system_runs(db) -> None:
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        s.start(flows.collect, 1, id="later")
        s.idle(timeout=T)
    with client_for(db) as c:
        html = c.get("/w/later").text
        assert "no system runs on it: actions wait for the next start" in html
        r = c.post("/signal", data={"id": "later", "name": "item", "payload": '"hello"', "csrf": token_of(html)})
        assert "no system has" in r.text and "waits in the database for the next one to start" in r.text
        assert "Requests waiting to be carried out" in r.text and "(no system runs: the next start carries it out)" in r.text
        assert c.get("/api/state", params={"id": "later"}).json()["pending"] == 1
    with ActorSystem(db, clock=clock) as s:
        assert s.get("later").result(timeout=T) == ["hello"]


class NodesStore:
    """A store that reports cluster nodes (as a cluster's backend would), by delegation."""

    def __init__(self, store: Store, nodes: Any) -> None:
        self._store, self._nodes = store, nodes

    def nodes(self) -> list[Any]:
        if isinstance(self._nodes, Exception):
            raise self._nodes
        return list(self._nodes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_nodes_show_only_when_the_store_reports_some(db, world) -> None:
    store = open_store(db, owner=False)
    try:
        if db.startswith("postgresql://"):
            # A system on PostgreSQL is a node of the cluster on its schema: the store reports it.
            assert [(n["state"], n["shards"]) for n in ui_data.nodes(store)] == [("up", 256)]
            with client_for(db) as c:
                assert 'href="/nodes"' in c.get("/").text
        else:
            assert ui_data.nodes(store) == []
            with client_for(db) as c:
                assert 'href="/nodes"' not in c.get("/").text
        reported = [{"node_id": "n1", "shards": 128, "alive": True, "heartbeat_age": 0.25, "started_at": 1_800_000_000.0},
                    {"node_id": "<b>n2</b>", "shards": 128, "alive": False, "heartbeat_age": 31.0, "started_at": 1_800_000_000.0}]
        app = create_app(NodesStore(store, reported), db, allowed_hosts=frozenset({"testserver"}), close_store=False)  # type: ignore[arg-type]
        with TestClient(app) as c:
            html = c.get("/").text
            assert 'href="/nodes"' in html and "Nodes of the cluster" in html
            assert "&lt;b&gt;n2&lt;/b&gt;" in html and "<b>n2</b>" not in html
            nodes = c.get("/nodes").text
            assert "<th>shards</th>" in nodes and "31.0s ago" in nodes and "2027-01-15 08:00:00" in nodes
        app = create_app(NodesStore(store, RuntimeError("no nodes table")), db,  # type: ignore[arg-type]
                         allowed_hosts=frozenset({"testserver"}), close_store=False)
        with TestClient(app) as c:
            r = c.get("/")
            assert r.status_code == 200 and "Nodes of the cluster" not in r.text
    finally:
        store.close()


def test_wf_ui_says_what_is_wrong_before_serving(tmp_path, capsys) -> None:
    """A port out of range, a port in use, a database that is not there: one line each, exit 1."""
    import socket

    from actors.cli import main

    db = str(tmp_path / "here.db")
    with ActorSystem(db, clock=VirtualClock()):
        pass
    assert main(["ui", "--db", db, "--port", "70000"]) == 1
    assert "--port must be 1 to 65535, got 70000" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--db", db, "--port", str(port)]) == 1
        assert f"cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["ui", "--db", str(tmp_path / "nothing.db"), "--port", str(port)]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_wf_ui_prints_its_address_once_it_is_listening(tmp_path) -> None:
    """The line giving the address comes once the server listens and its app has started: a
    request sent the moment it is read is answered (the line used to come before either)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request
    from pathlib import Path

    db = str(tmp_path / "here.db")
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 5, id="sleep-0")
        s.idle(timeout=T)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.cli", "ui", "--db", db, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root), PYTHONUNBUFFERED="1"),
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith(f"wf ui: serving {db} at http://127.0.0.1:{port}/"), (
            line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else ""))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=T) as r:
            assert r.status == 200 and "sleep-0" in r.read().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=T)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate(timeout=T)
    assert "serving" not in out  # said once


class AwayStore:
    """A store whose database stopped answering: every read raises what the store raises then
    (``StorageUnavailable`` with its message), until ``back`` is set."""

    def __init__(self, store: Any, error: Exception) -> None:
        self._store, self._error, self.back = store, error, False

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)
        if name == "close" or self.back or not callable(real):
            return real

        def away(*args: Any, **kw: Any) -> Any:
            raise self._error

        return away


def test_an_outage_answers_503_with_the_stores_message(db, world) -> None:
    """While the database does not answer, every page and the polled API answer 503 with the
    store's own message (never a bare 500), no page says "no system runs" (it could not ask), and
    the same server serves again once the database is back."""
    from persistence import StorageUnavailable

    message = (f"cannot reach the PostgreSQL server at {db} (test)" if db.startswith("postgresql://")
               else f"the database {db} stayed locked past the busy timeout (test)")
    store = open_store(db, owner=False)
    away = AwayStore(store, StorageUnavailable(message, path=db))
    app = create_app(away, db, allowed_hosts=frozenset({"testserver"}))  # type: ignore[arg-type]
    with TestClient(app) as c:
        token = app.state.ui.token
        for path in ("/", "/?status=running", "/w/collector", "/nodes", "/value?id=boomer&what=error"):
            r = c.get(path)
            assert r.status_code == 503, (path, r.status_code, r.text[:300])
            assert "(test)" in r.text and "no system runs" not in r.text, path
            assert "could not be asked" in r.text, path
        for path in ("/api/counts", "/api/state?id=collector"):
            r = c.get(path)
            assert r.status_code == 503 and r.json() == {"error": message}, path
        r = c.post("/cancel", data={"id": "collector", "csrf": token})
        assert r.status_code == 503 and "(test)" in r.text
        away.back = True
        r = c.get("/w/collector")
        assert r.status_code == 200 and "no system runs" not in r.text  # one runs: the world's
