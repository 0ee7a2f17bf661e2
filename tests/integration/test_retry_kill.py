"""A process killed during a retry's backoff has not used up the attempt it had not started:
``maximum_attempts=3``, SIGKILL between attempts 1 and 2, and the call runs 3 times in all
before its workflow learns it failed after 3 attempts (both backends)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from persistence import open_store

ROOT = Path(__file__).resolve().parents[2]
T = 60


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "retry.db")
        return
    server = request.getfixturevalue("pg_server")
    with server.schema("retry") as url:
        schema = url.rsplit("search_path%3D", 1)[1]
        yield f"{url}&schema={schema}"


def _worker(db: str, executions: Path, mode: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.retry_worker", db, str(executions), mode],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_kill_during_the_backoff_does_not_use_up_an_attempt(target: str, tmp_path: Path) -> None:
    executions = tmp_path / "executions.txt"
    p = _worker(target, executions, "start")
    try:
        deadline = time.monotonic() + T
        # Attempt 1 ran and failed, and its failure is recorded (the retry is waiting out its
        # backoff): the kill lands between attempts 1 and 2.
        while True:
            assert p.poll() is None, p.stderr.read() if p.stderr else ""
            assert time.monotonic() < deadline, "attempt 1 never failed"
            if _lines(executions) == 1:
                with open_store(target, owner=False) as reader:
                    rows = reader.procedures("retry-after-kill")
                # The retry's write sets the next attempt's time, a backoff ahead.
                if rows and rows[0].next_attempt_at > time.time() + 0.5:
                    break
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=T)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=T)
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert _lines(executions) == 1  # killed during the backoff: attempt 2 had not started
    q = _worker(target, executions, "resume")
    out, err = q.communicate(timeout=3 * T)
    assert q.returncode == 0, err[-3000:]
    assert _lines(executions) == 3, (out, err[-3000:])
    assert "failed after 3 attempt" in out, out
