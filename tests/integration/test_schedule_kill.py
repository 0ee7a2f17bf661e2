"""A schedule across SIGKILLs: a process driving a schedule (every 0.25 s, ``catchup="all"``) is
killed again and again, at random moments of its ticks, and started again at once; in the end
every tick from the first to the last was started exactly once (the workflows counted by id, the
ticks without a gap) and each run's reducer ran once."""

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

from .schedule_worker import EVERY

ROOT = Path(__file__).resolve().parents[2]
T = 60.0
KILLS = 6


def _start(db: str, tmp: Path, n: int) -> subprocess.Popen[bytes]:
    ready = tmp / f"ready-{n}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.schedule_worker", db, str(ready)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / f"worker-{n}.err", "wb"),
    )
    deadline = time.monotonic() + T
    while not ready.exists():
        assert proc.poll() is None, (tmp / f"worker-{n}.err").read_text()
        assert time.monotonic() < deadline, "the worker did not open in time"
        time.sleep(0.02)
    return proc


def _rows(db: str, sql: str) -> list[dict[str, object]]:
    store = open_store(db, owner=False)
    try:
        return store.read_table(sql)
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_tick_starts_exactly_once_across_sigkills(
    backend: str, tmp_path: Path, request
) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "wf.db") if backend == "sqlite" else request.getfixturevalue("pg_store_url")
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "36")))
    for n in range(KILLS):
        proc = _start(db, tmp_path, n)
        time.sleep(rng.uniform(0.3, 1.2))  # a few ticks, then a kill at a random moment of one
        proc.send_signal(signal.SIGKILL)
        proc.wait(T)
        time.sleep(rng.uniform(0.0, 0.6))  # down over a tick or two, sometimes
    proc = _start(db, tmp_path, KILLS)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)  # the last one stops cleanly, its runs finished
    assert proc.wait(T) == 0, (tmp_path / f"worker-{KILLS}.err").read_text()

    ticks = sorted(float(r["tick"]) for r in _rows(db, "SELECT tick FROM schedule_runs"))  # type: ignore[arg-type]
    assert len(ticks) > KILLS * 2
    gaps = [round(b - a, 6) for a, b in zip(ticks, ticks[1:], strict=False)]
    assert set(gaps) == {EVERY}  # every tick from the first to the last, none twice
    workflows = Counter(
        str(r["id"])
        for r in _rows(db, "SELECT id FROM workflows")
        if str(r["id"]).startswith("beat@")
    )
    assert len(workflows) == len(ticks) and set(workflows.values()) == {1}
    beats = Counter(str(r["workflow_id"]) for r in _rows(db, "SELECT workflow_id FROM beats"))
    # A run whose step had not committed when its process was killed runs at the next start:
    # every run's reducer ran once, and every run finished.
    assert beats == workflows
    done = _rows(db, "SELECT count(*) AS n FROM workflows WHERE status = 'completed'")
    assert done[0]["n"] == len(ticks)
