"""SIGKILL a process while it moves running workflows onto new code: nothing is lost or done twice.

Version 1 of a counter runs N instances, each having taken one tick; a tick for each then waits in
the file (``wf signal``, no system running). Version 2's processes are killed while they load the
counters (each once a number of counters drawn at random have been moved: ``killing``), move each onto the new code (one commit: the new checkpoint and
fingerprint, and an ``upgraded`` history event) and deliver the tick. In the end every counter
was upgraded exactly once, took each tick exactly once (a reducer row each), runs version 2's
fingerprint, and finishes with version 2's result computed from the locals kept across the move.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actors.cli import main as wf

from .dbconn import Connection, connect
from .killing import kill_on_progress

ROOT = Path(__file__).resolve().parents[2]
N = 500
KILLS = int(os.environ.get("ACTORFLOW_UPGRADE_KILLS", "8"))
ATTEMPTS = 3  # fresh sets of counters, should every kill of one land before or after the moves


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


def _count_upgraded(con: Connection) -> int:
    return int(con.execute("SELECT count(*) FROM history WHERE event = 'upgraded'").fetchone()[0])


def _killed_run(db: str, target: int) -> bool:
    """A version 2 run, killed once ``target`` counters have been moved onto version 2; False if
    it finished first (it had fewer than that left to move)."""
    p = _worker(db, 2, "run", str(2))
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith("opening"), (line, p.stderr.read() if p.stderr else "")
    with connect(db) as con:
        killed = kill_on_progress(p, lambda: _count_upgraded(con), target, timeout=240)
    _, err = p.communicate()
    assert killed or p.returncode == 0, f"the worker failed before it was killed:\n{err[-3000:]}"
    return killed


def _upgraded(db: str) -> Counter[str]:
    with connect(db) as con:
        rows = con.execute("SELECT workflow_id FROM history WHERE event = 'upgraded'").fetchall()
    return Counter(r[0] for r in rows)


def _queue(db: str, v: int) -> None:
    for i in range(N):
        assert wf(["signal", f"c{i}", "tick", str(v), "--db", db]) == 0


@pytest.fixture(params=["sqlite", "postgres"])
def databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A maker of fresh databases on the backend: a new SQLite file, or a new schema on a
    PostgreSQL server that runs as in production (fsync on), at each call."""
    if request.param == "sqlite":
        names = itertools.count()
        yield lambda: str(tmp_path / f"upgrade-{next(names)}.db")
        return
    server = request.getfixturevalue("pg_durable_server")
    with contextlib.ExitStack() as stack:

        def fresh() -> str:
            url = stack.enter_context(server.schema("upgrade_kill"))
            return f"{url}&schema={url.rsplit('search_path%3D', 1)[1]}"

        yield fresh


def _counters_on_version_1(db: str) -> str:
    """N counters of version 1 that took tick 1, with tick 2 waiting for each; v1's fingerprint."""
    v1_fp = _finish(_worker(db, 1, "start")).split()[0]
    _queue(db, 2)
    return v1_fp


@pytest.mark.slow
@pytest.mark.timeout(900)  # a thousand `wf signal` runs and many restarts: minutes on a loaded machine
def test_sigkill_during_upgrades_loses_and_duplicates_nothing(databases, capsys):
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "11")))
    for _ in range(ATTEMPTS):
        db = databases()
        v1_fp = _counters_on_version_1(db)
        capsys.readouterr()
        partial, done = 0, 0
        seen: list[int] = []
        for _ in range(KILLS):
            if done >= N - 1:
                break
            # Each kill once at least one more counter was moved, and before the last few.
            if not _killed_run(db, rng.randint(done + 1, max(done + 1, N - N // 10))):
                break  # it moved them all first: nothing was left to kill it in
            done = sum(_upgraded(db).values())
            seen.append(done)
            partial += 0 < done < N
        if partial:
            break
        # Every kill landed before the first move or after the last: nothing was tested on
        # these counters; again on fresh ones.
    assert partial >= 1, f"in {ATTEMPTS} sets of counters no kill landed while the moves were under way (moved after each kill: {seen})"
    out = _finish(_worker(db, 2, "run", "2"))
    v2_fp = out.split()[2]
    assert v2_fp != v1_fp

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
