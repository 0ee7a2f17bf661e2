"""The logging policy: an application that configures nothing sees only its own output on stdout,
and on stderr nothing below WARNING."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import structlog
from structlog.testing import capture_logs

from actors import ActorSystem
from actors.testing import VirtualClock
from tests.integration import quiet_app

ROOT = Path(__file__).resolve().parents[2]


def test_an_application_that_configures_nothing_gets_only_its_own_output(tmp_path):
    """Run as a program of its own (no structlog or logging configuration): stdout is exactly the
    program's two lines; stderr holds the procedure that failed for good (an ERROR) and no
    INFO or DEBUG event (no workflow_started, step_committed, system_shutdown)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.integration import quiet_app; quiet_app.main(sys.argv[1])",
         str(tmp_path / "app.db")],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["started checkout-o-1", "result: o-1 refused"]
    assert "procedure_failed" in done.stderr and "error" in done.stderr
    for quiet in ("workflow_started", "step_committed", "workflow_completed", "system_shutdown", "[info", "[debug"):
        assert quiet not in done.stderr, done.stderr


def test_runtime_events_go_through_stdlib_logging_under_actorflow(tmp_path):
    """With the standard library's logging at DEBUG, the runtime's events arrive as records of
    `actorflow.*` loggers: lifecycle at INFO, every step at DEBUG, a procedure failed for good at
    ERROR."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger("actorflow")
    handler, level = Keep(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with ActorSystem(str(tmp_path / "app.db"), clock=VirtualClock()) as system:
            ref = system.start(quiet_app.checkout, "o-2", id="checkout-o-2")
            ref.signal("paid")
            assert ref.result(timeout=30) == "o-2 refused"
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert all(r.name.startswith("actorflow.") for r in records)
    levels: dict[str, set[int]] = {}
    for r in records:
        for event in ("workflow_started", "step_committed", "procedure_failed", "workflow_completed", "system_shutdown"):
            if event in str(r.msg):
                levels.setdefault(event, set()).add(r.levelno)
    assert levels == {
        "workflow_started": {logging.INFO},
        "step_committed": {logging.DEBUG},
        "procedure_failed": {logging.ERROR},
        "workflow_completed": {logging.INFO},
        "system_shutdown": {logging.INFO},
    }, [r.getMessage() for r in records]


def test_capture_logs_sees_every_level_whatever_logging_drops(tmp_path):
    """structlog.testing.capture_logs() captures the runtime's INFO and DEBUG events, bound to the
    workflow's id and type, though the standard library's logging (WARNING by default) drops
    them."""
    assert not logging.getLogger("actorflow.workflow").isEnabledFor(logging.INFO)
    with capture_logs() as logs, ActorSystem(str(tmp_path / "app.db"), clock=VirtualClock()) as system:
        ref = system.start(quiet_app.checkout, "o-3", id="checkout-o-3")
        ref.signal("paid")
        assert ref.result(timeout=30) == "o-3 refused"
    steps = [e for e in logs if e["event"] == "step_committed"]
    assert steps and all(e["log_level"] == "debug" for e in steps)
    assert {(e["workflow_id"], e["workflow_type"]) for e in steps} == {
        ("checkout-o-3", "tests.integration.quiet_app:checkout")
    }
    assert ("workflow_started", "info") in [(e["event"], e["log_level"]) for e in logs]
    # Outside the block, the configured processors are back and the events dropped again.
    assert not any(isinstance(p, structlog.testing.LogCapture) for p in structlog.get_config()["processors"])


def test_each_event_names_the_system_that_logged_it(tmp_path):
    """Two systems in one process, on two files: every event of each, logged on its own threads
    or on the caller's, names its own database (``system``), bound once when it opened; a
    system of no cluster names no node."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with capture_logs() as logs:
        with ActorSystem(a, clock=VirtualClock()) as sa, ActorSystem(b, clock=VirtualClock()) as sb:
            ra = sa.start(quiet_app.checkout, "o-a", id="on-a")
            rb = sb.start(quiet_app.checkout, "o-b", id="on-b")
            ra.signal("paid")
            rb.signal("paid")
            assert ra.result(timeout=30) == "o-a refused" and rb.result(timeout=30) == "o-b refused"
    assert logs and all("node_id" not in e for e in logs)
    unnamed = [e for e in logs if e.get("system") not in (a, b)]
    assert not unnamed, unnamed
    for wid, db in (("on-a", a), ("on-b", b)):
        mine = [e for e in logs if e.get("workflow_id") == wid]
        assert mine and {e["system"] for e in mine} == {db}, mine
    started = {e["system"] for e in logs if e["event"] == "workflow_started"}
    shutdown = {e["system"] for e in logs if e["event"] == "system_shutdown"}
    assert started == shutdown == {a, b}


def test_a_workflows_procedure_and_message_events_name_its_type_too(tmp_path):
    """Every event naming a workflow (SPEC §5: bound to workflow_id and workflow_type) names its
    type: a procedure attempt that failed, a procedure failed for good, a signal it sent that was
    dropped; they named the id only."""
    from tests.actors import flows

    flows.FLAKY_FAILS.clear()
    clock = VirtualClock()
    with capture_logs() as logs, ActorSystem(str(tmp_path / "app.db"), clock=clock) as system:
        pays = system.start(flows.pays, "t", "flaky", id="pays")
        pinger = system.start(flows.pinger, "nobody", id="pinger")
        for _ in range(3):
            system.idle(timeout=30)
            clock.advance(60)
        assert pays.result(timeout=30) == "gave up: ConnectionError after 3"
        assert pinger.result(timeout=30) == "sent"
    events = {e["event"] for e in logs}
    assert {"procedure_attempt_failed", "procedure_failed", "signal_dropped"} <= events
    types = {"pays": "tests.actors.flows:pays", "pinger": "tests.actors.flows:pinger"}
    untyped = [e for e in logs if "workflow_id" in e and e.get("workflow_type") != types[e["workflow_id"]]]
    assert not untyped, untyped
