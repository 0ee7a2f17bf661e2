"""Procedure limits across a SIGKILL: 100 calls of a procedure limited to 3 at once, the process
killed in the middle and started again; all 100 complete, never more than 3 attempts ran at once
in either process (measured inside the procedure), and a call ran twice only if its attempt was
not recorded when the process died (at least once, none twice beyond it)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from persistence import open_store

ROOT = Path(__file__).resolve().parents[2]
T = 120.0


def _start(db: str, tmp: Path, n: int, trace: Path) -> subprocess.Popen[bytes]:
    ready = tmp / f"ready-{n}"
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        ACTORFLOW_LIMIT_TRACE=str(trace),
        ACTORFLOW_LIMIT_PAUSE="0.05",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.limit_worker", db, str(ready)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / f"worker-{n}.err", "wb"),
    )  # fmt: skip
    deadline = time.monotonic() + T
    while not ready.exists():
        assert proc.poll() is None, (tmp / f"worker-{n}.err").read_text()
        assert time.monotonic() < deadline, "the worker did not open in time"
        time.sleep(0.02)
    return proc


def _lines(trace: Path) -> list[tuple[str, str, str]]:
    return [tuple(x.split()) for x in trace.read_text().splitlines() if x.strip()]  # type: ignore[misc]


def _completed(db: str) -> set[str]:
    store = open_store(db, owner=False)
    try:
        return {r.id for r in store.list_workflows(status="completed") if r.id.startswith("lim-")}
    finally:
        store.close()


def _done(db: str) -> int:
    store = open_store(db, owner=False)
    try:
        return sum(1 for r in store.list_workflows(status="completed") if r.id.startswith("lim-"))
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_sigkill_in_the_middle_loses_no_call_and_runs_none_twice_beyond_at_least_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    db = str(tmp_path / "wf.db") if backend == "sqlite" else request.getfixturevalue("pg_store_url")
    trace = tmp_path / "trace.txt"
    trace.touch()
    first = _start(db, tmp_path, 0, trace)
    deadline = time.monotonic() + T
    # The kill lands after some of the 100 calls ended: how many, the run's seed says.
    kill_after = random.Random(int(os.environ.get("ACTORFLOW_SEED", "30"))).randint(10, 70)
    while sum(1 for w, *_ in _lines(trace) if w == "end") < kill_after:
        assert time.monotonic() < deadline and first.poll() is None, "the calls did not run"
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait(T)
    killed_at = len(_lines(trace))
    replied = _completed(db)  # calls whose reply committed (their workflow ended with it)
    assert sum(1 for w, *_ in _lines(trace) if w == "end") < 100  # killed in the middle
    second = _start(db, tmp_path, 1, trace)
    try:
        deadline = time.monotonic() + T
        while _done(db) < 100:
            assert time.monotonic() < deadline and second.poll() is None, (
                "the calls did not all complete"
            )
            time.sleep(0.05)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(T) == 0
    lines = _lines(trace)
    pids = [first.pid, second.pid]
    for pid in pids:  # at most 3 at once in each process, and 3 reached
        running = most = 0
        for what, _n, p in lines:
            if int(p) == pid:
                running += 1 if what == "start" else -1
                most = max(most, running)
        assert most == 3, (pid, most)
    starts = Counter(n for what, n, _ in lines if what == "start")
    ends = Counter(n for what, n, _ in lines if what == "end")
    assert set(starts) == set(ends) == {str(i) for i in range(100)}  # all 100 ran to the end
    # Started twice: only calls the first process started whose reply had not committed when it
    # was killed (at least once); none whose reply was durable ran again.
    started_first = {
        n for what, n, p in lines[:killed_at] if what == "start" and int(p) == first.pid
    }
    twice = {n for n, c in starts.items() if c > 1}
    assert twice <= started_first - {k.removeprefix("lim-") for k in replied}
    assert all(c <= 2 for c in starts.values())
