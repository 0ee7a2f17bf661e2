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
