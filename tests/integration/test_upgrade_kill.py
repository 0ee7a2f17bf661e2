"""SIGKILL a process while it moves running workflows onto new code: nothing is lost or done twice.

Version 1 of a counter runs N instances, each having taken one tick; a tick for each then waits in
the file (``wf signal``, no system running). Version 2's processes are killed at random moments
while they load the counters, move each onto the new code (one commit: the new checkpoint and
fingerprint, and an ``upgraded`` history event) and deliver the tick. In the end every counter
was upgraded exactly once, took each tick exactly once (a reducer row each), runs version 2's
fingerprint, and finishes with version 2's result computed from the locals kept across the move.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.cli import main as wf

from .dbconn import connect

ROOT = Path(__file__).resolve().parents[2]
N = 500
KILLS = int(os.environ.get("ACTORFLOW_UPGRADE_KILLS", "8"))


def _worker(db: str, version: int, mode: str, *more: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.upgrade_worker", db, str(version), mode, str(N), *more],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )


def _finish(p: subprocess.Popen[str]) -> str:
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"the worker did not finish in 300 s:\n{err[-3000:]}") from None
    assert p.returncode == 0, err[-3000:]
    return out


def _killed_run(db: str, want: int, delay: float) -> bool:
    """A version 2 run killed ``delay`` seconds after it began to open the database; False if
    it finished first."""
    p = _worker(db, 2, "run", str(want))
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith("opening"), (line, p.stderr.read() if p.stderr else "")
    try:
        p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        p.communicate()
        return True
    p.communicate()
    return False


def _upgraded(db: str) -> Counter[str]:
    with connect(db) as con:
        rows = con.execute("SELECT workflow_id FROM history WHERE event = 'upgraded'").fetchall()
    return Counter(r[0] for r in rows)


def _queue(db: str, v: int) -> None:
    for i in range(N):
        assert wf(["signal", f"c{i}", "tick", str(v), "--db", db]) == 0


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "upgrade.db")
        return
    server = request.getfixturevalue("pg_durable_server")
    with server.schema("upgrade_kill") as url:
        schema = url.rsplit("search_path%3D", 1)[1]
        yield f"{url}&schema={schema}"


@pytest.mark.slow
def test_sigkill_during_upgrades_loses_and_duplicates_nothing(target, capsys):
    db = target
    v1_fp = _finish(_worker(db, 1, "start")).split()[0]
    _queue(db, 2)
    capsys.readouterr()
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "11")))
    partial = 0
    seen: list[int] = []
    for _ in range(KILLS):
        if not _killed_run(db, 2, rng.uniform(0.2, 1.2)):
            break
        done = sum(_upgraded(db).values())
        seen.append(done)
        partial += 0 < done < N
    out = _finish(_worker(db, 2, "run", "2"))
    v2_fp = out.split()[2]
    assert v2_fp != v1_fp
    assert partial >= 1, f"no kill landed while the upgrades were under way; lower the delays (upgraded after each kill: {seen})"

    upgraded = _upgraded(db)
    assert upgraded == Counter({f"c{i}": 1 for i in range(N)}), "a counter was upgraded twice or never"
    with connect(db) as con:
        ticks = Counter(con.execute("SELECT wf, v, version FROM ticks").fetchall())
        fps = Counter(r[0] for r in con.execute("SELECT fingerprint FROM workflows").fetchall())
    assert all(c == 1 for c in ticks.values()), "a tick's reducer ran twice"
    assert set(ticks) == {(f"c{i}", 1, 1) for i in range(N)} | {(f"c{i}", 2, 2) for i in range(N)}
    assert fps == Counter({v2_fp: N})

    _queue(db, 0)
    _finish(_worker(db, 2, "run", "0"))
    import persistence

    with connect(db) as con:
        rows = con.execute("SELECT id, status, result FROM workflows").fetchall()
    assert {r[1] for r in rows} == {"completed"}
    assert {str(persistence.loads(r[2])) for r in rows} == {str({"total": 3, "version": 2})}
