"""A process that lacks a workflow's or a procedure's code loses nothing of it.

A maintenance script run from the wrong directory, or a deploy that renamed a module, opens the
file without the code of some workflows. Those are held as they are (shown as blocked, messages
buffered, a cancel honoured) and resume when a process with the code opens the file; a pending
procedure call whose code is missing is neither attempted nor failed.
"""

from __future__ import annotations

import sqlite3
import sys
import textwrap

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem, Status
from actors.testing import VirtualClock
from workflows import Cancelled, UnknownWorkflowType
from workflows._registry import _REGISTRY

from . import flows
from .runtime_support import Inside

T = 30  # every wait in these tests is bounded

MODULE = "af_missing_shop"
SOURCE = '''
from tests.actors import flows
from workflows import signal, spawn, workflow, select, timer

@workflow
async def order(n):
    first = await signal("pay")
    return n + first

@workflow
async def order_with_child(n):
    return await spawn(flows.collect, n)

@workflow
async def order_with_deadline():
    return await select(signal("pay"), timer("expire", after=3600))
'''


class _Module:
    """A module importable from a directory, which a test takes away and brings back."""

    def __init__(self, directory, name: str, source: str) -> None:
        self.path = directory / f"{name}.py"
        self.away = directory / f"{name}.py.away"
        self.name = name
        self.path.write_text(textwrap.dedent(source))

    def load(self):
        sys.modules.pop(self.name, None)
        return __import__(self.name)

    def remove(self) -> None:
        self.path.rename(self.away)
        sys.modules.pop(self.name, None)
        for key in [k for k in _REGISTRY["workflow"] if k.startswith(self.name + ":")]:
            del _REGISTRY["workflow"][key]

    def restore(self) -> None:
        self.away.rename(self.path)


@pytest.fixture
def shop(tmp_path, monkeypatch):
    """Workflows in a module importable from ``tmp_path``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    module = _Module(tmp_path, MODULE, SOURCE)
    yield module
    if module.path.exists():
        module.remove()


def history(db: str, wid: str) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [e for (e,) in con.execute("SELECT event FROM history WHERE workflow_id = ? ORDER BY seq", (wid,))]
    finally:
        con.close()


def test_workflow_whose_code_is_missing_is_held_then_resumes(tmp_path, shop):
    """Opened without its module, a workflow stays RUNNING, shown as blocked, and buffers its
    signals (it used to be failed after five restarts); with the module back it resumes and
    consumes them."""
    db = str(tmp_path / "wf.db")
    mod = shop.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(mod.order, 1, id="o1")
        system.idle(timeout=T)
    shop.remove()
    for _ in range(2):  # a second opening records nothing new
        with capture_logs() as logs, ActorSystem(db, clock=VirtualClock()) as system:
            ref = system.get("o1")
            ref.signal("pay", 41)
            system.idle(timeout=T)
            assert ref.status() is Status.RUNNING
            info = ref.info()
            assert info.waiting_on.startswith("BLOCKED (")
            assert "cannot be found" in info.waiting_on and MODULE in info.waiting_on
            assert info.error is None
        errors = [e for e in logs if e["log_level"] == "error"]
        assert {e["event"] for e in errors} <= {"workflow_code_missing"}
        assert not any(e["event"] == "actor_restarted" for e in logs)
    assert history(db, "o1") == ["code_missing"]
    shop.restore()
    shop.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("o1")
        assert ref.result(timeout=T) == 42
    assert history(db, "o1") == ["code_missing", "resumed", "completed"]


def test_blocked_workflow_can_be_cancelled_and_cancels_its_child(tmp_path, shop):
    """A blocked workflow takes a cancel: it ends CANCELLED without running its code, and its
    child (whose code is there) is cancelled with it."""
    db = str(tmp_path / "wf.db")
    mod = shop.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(mod.order_with_child, 2, id="p1")
        system.idle(timeout=T)
        (child,) = [w for w in system.workflows() if w.parent_id == "p1"]
    shop.remove()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("p1")
        ref.signal("nudge")  # loads it: it has nothing to do until then
        system.idle(timeout=T)
        assert ref.info().waiting_on.startswith("BLOCKED (")
        ref.cancel("shop closed")
        with pytest.raises(Cancelled, match="shop closed"):
            ref.result(timeout=T)
        system.idle(timeout=T)
        assert system.get(child.id).status() is Status.CANCELLED
    assert history(db, "p1")[-1] == "cancelled"


def test_blocked_workflow_cancelled_before_it_loads(tmp_path, shop):
    """A cancel that reaches the file while no process runs the workflow (or sent before the
    blocked workflow first loads) is honoured at its load; its armed timer is dropped."""
    db = str(tmp_path / "wf.db")
    mod = shop.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(mod.order_with_deadline, id="d1")
        system.idle(timeout=T)
    shop.remove()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("d1")
        ref.cancel("closing")
        with pytest.raises(Cancelled):
            ref.result(timeout=T)
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM timers WHERE workflow_id = 'd1'").fetchone()[0] == 0
    assert con.execute("SELECT status FROM workflows WHERE id = 'd1'").fetchone()[0] == "cancelled"
    con.close()


def test_procedure_whose_code_is_missing_stays_pending(tmp_path, monkeypatch):
    """A pending call whose function this process cannot find is neither attempted nor failed:
    it stays pending, and a process that has the code runs it with the same key."""
    db = str(tmp_path / "wf.db")

    def missing(kind, key):
        if key.endswith(":double"):
            raise UnknownWorkflowType(f"procedure {key!r} cannot be found (test)", key=key, kind=kind)
        return real(kind, key)

    real = Inside.procedure_code(monkeypatch, missing)
    with capture_logs() as logs, ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.start(flows.adder, 20, id="a1")
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["procedure_code_missing"]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT status, attempts FROM procedures WHERE workflow_id = 'a1'").fetchall()
    con.close()
    assert rows == [("pending", 0)]
    Inside.procedure_code(monkeypatch)
    with ActorSystem(db, clock=VirtualClock()) as system:
        assert system.get("a1").result(timeout=T) == 80


THING = "af_missing_thing"


@pytest.fixture
def thing(tmp_path, monkeypatch):
    """A module with a plain class, importable from ``tmp_path``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    module = _Module(tmp_path, THING, "class Thing:\n    def __init__(self, v):\n        self.v = v\n")
    yield module
    sys.modules.pop(THING, None)


def test_buffered_payload_whose_class_is_missing_holds_the_workflow(tmp_path, thing):
    """A buffered signal whose payload's class this process cannot import: the workflow is held
    (it used to be restarted five times and failed, losing its signals), and resumes, taking
    the signal, in a process that has the class."""
    db = str(tmp_path / "wf.db")
    mod = thing.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.start(flows.collect_after_go, 1, id="g1")
        ref.signal("item", mod.Thing(5))
        system.idle(timeout=T)
    thing.remove()
    with capture_logs() as logs, ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("g1")
        ref.signal("go")
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        assert ref.info().waiting_on.startswith("BLOCKED (") and THING in ref.info().waiting_on
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["workflow_code_missing"]
    assert not any(e["event"] == "actor_restarted" for e in logs)
    assert history(db, "g1") == ["code_missing"]
    thing.restore()
    with ActorSystem(db, clock=VirtualClock()) as system:
        (got,) = system.get("g1").result(timeout=T)
        assert type(got).__name__ == "Thing" and got.v == 5
    assert history(db, "g1") == ["code_missing", "resumed", "completed"]


def test_local_whose_class_is_missing_holds_the_workflow(tmp_path, thing):
    """A local holding an instance of a class this process cannot import: restoring it is code
    missing (held as blocked), not a damaged checkpoint (restarted until failed)."""
    db = str(tmp_path / "wf.db")
    thing.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(flows.holds_a_thing, THING, id="h1")
        system.idle(timeout=T)
    thing.remove()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("h1")
        ref.signal("go")
        system.idle(timeout=T)
        assert ref.status() is Status.RUNNING
        assert "cannot be found" in ref.info().waiting_on and THING in ref.info().waiting_on
    thing.restore()
    with ActorSystem(db, clock=VirtualClock()) as system:
        assert system.get("h1").result(timeout=T) == 5


PROCS = "af_renamed_procs"
FLOW = "af_renamed_flow"


def test_a_renamed_procedure_leaves_its_dispatched_call_pending(tmp_path, monkeypatch):
    """A deploy renames a procedure while a call of it waits for its retry: the call names the
    old key, which the new code no longer defines. It is neither attempted nor failed (no
    ``UnknownWorkflowType`` reaches the workflow): it stays pending with an ERROR
    ``procedure_code_missing``, and runs when a process with the old name opens the file."""
    monkeypatch.syspath_prepend(str(tmp_path))
    db = str(tmp_path / "wf.db")
    procs = _Module(tmp_path, PROCS, '''
        calls = []

        def double(n):
            calls.append(n)
            if len(calls) == 1:
                raise RuntimeError("the first attempt fails")
            return 2 * n
    ''')
    _Module(tmp_path, FLOW, f'''
        import {PROCS}
        from workflows import RetryPolicy, procedure, workflow

        @workflow
        async def doubler(n):
            return await procedure({PROCS}.double, n, retry=RetryPolicy(initial_interval=60))
    ''')
    try:
        flow = __import__(FLOW)
        with ActorSystem(db, clock=VirtualClock()) as system:
            ref = system.start(flow.doubler, 21, id="d1")
            system.idle(timeout=T)
            assert ref.status() is Status.RUNNING
        assert sys.modules[PROCS].calls == [21]

        procs.path.write_text(procs.path.read_text().replace("def double", "def twice"))
        sys.modules.pop(PROCS, None)  # the deploy: double is now twice
        clock = VirtualClock()
        with capture_logs() as logs, ActorSystem(db, clock=clock) as system:
            clock.advance(120)  # past the retry's backoff
            system.idle(timeout=T)
            assert system.get("d1").status() is Status.RUNNING
        missing = [e for e in logs if e["event"] == "procedure_code_missing"]
        assert missing and missing[0]["log_level"] == "error"
        assert missing[0]["function"] == f"{PROCS}:double"
        con = sqlite3.connect(db)
        rows = con.execute("SELECT status, attempts FROM procedures WHERE workflow_id = 'd1'").fetchall()
        con.close()
        assert rows == [("pending", 1)]

        procs.path.write_text("def double(n):\n    return 2 * n\n")
        sys.modules.pop(PROCS, None)  # rolled back: the old name is there again
        clock = VirtualClock()
        with ActorSystem(db, clock=clock) as system:
            clock.advance(120)
            system.idle(timeout=T)
            assert system.get("d1").result(timeout=T) == 42
    finally:
        for name in (PROCS, FLOW):
            sys.modules.pop(name, None)
        for key in [k for k in _REGISTRY["workflow"] if k.startswith(FLOW + ":")]:
            del _REGISTRY["workflow"][key]


ASKED_MODULE = "missing_code_asked"
ASKED_SOURCE = '''
from workflows import publish, reply, request, workflow

@workflow
async def teller():
    publish("open", True)
    while True:
        req = await request("balance")
        reply(req, 10)
'''


def test_an_ask_or_published_timing_out_on_a_blocked_workflow_says_it_is_blocked(tmp_path, monkeypatch, capsys):
    """An ask (ask_async, wf ask, and a published() wait) that times out because its workflow is
    held as blocked says so, with why, as result()'s timeout does; before, it said only that no
    reply came in time, as if the workflow were merely busy."""
    import asyncio

    monkeypatch.syspath_prepend(str(tmp_path))
    module = _Module(tmp_path, ASKED_MODULE, ASKED_SOURCE)
    db = str(tmp_path / "wf.db")
    mod = module.load()
    with ActorSystem(db, clock=VirtualClock()) as system:
        assert system.start(mod.teller, id="t").ask("balance", timeout=T) == 10
    module.remove()
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.get("t")
        ref.signal("wake")
        system.idle(timeout=T)
        assert ref.info().waiting_on.startswith("BLOCKED (")
        with pytest.raises(TimeoutError, match=r"got no reply within 0.2s.*is held as BLOCKED.*cannot be found"):
            ref.ask("balance", timeout=0.2)
        with pytest.raises(TimeoutError, match=r"got no reply within 0.2s.*is held as BLOCKED"):
            asyncio.run(ref.ask_async("balance", timeout=0.2))
        with pytest.raises(TimeoutError, match=r"published nothing under 'closed' within 0.2s.*is held as BLOCKED"):
            ref.published("closed", timeout=0.2)
        with pytest.raises(TimeoutError, match=r"is held as BLOCKED"):
            asyncio.run(ref.published_async("closed", timeout=0.2))
        from actors.cli import main

        assert main(["ask", "t", "balance", "--db", db, "--timeout", "0.3"]) == 1
        err = capsys.readouterr().err
        assert "no reply to ask 'balance'" in err and "the workflow is held as BLOCKED (" in err, err
