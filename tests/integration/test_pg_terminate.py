"""End to end on PostgreSQL: a process runs counters fed by senders while the test terminates its
writer's session (``pg_terminate_backend``) hundreds of times, COMMITs in flight among them, and
SIGKILLs the process now and then. Every acknowledged signal is counted exactly once (state and
reducer row), no signal at all twice; the counts of terminations, of batches whose COMMIT's
outcome was unknown and of how each was settled are printed (``-s``) and checked.

``ACTORFLOW_TERMINATE_RUNS`` (default 6) sets the runs, each ``ACTORFLOW_TERMINATE_SECONDS``
(default 8) long; every third run ends with a SIGKILL at a random moment.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[2]
RUNS = int(os.environ.get("ACTORFLOW_TERMINATE_RUNS", "6"))
SECONDS = float(os.environ.get("ACTORFLOW_TERMINATE_SECONDS", "8"))


class Terminator:
    """Terminates the writer's session of the schema's node every few tens of milliseconds."""

    def __init__(self, server: PgServer, seed: int) -> None:
        self.server = server
        self.rng = random.Random(seed)
        self.count = 0
        self.in_commit = 0  # terminated while its last statement was COMMIT, still running
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Terminator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        with psycopg.connect(self.server.url("postgres"), autocommit=True) as admin:
            while not self._stop.wait(self.rng.uniform(0.01, 0.06)):
                rows = admin.execute(
                    "SELECT pid, state = 'active' AND query = 'COMMIT' FROM pg_stat_activity "
                    "WHERE application_name = 'actorflow-writer'"
                ).fetchall()
                for pid, committing in rows:
                    if admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]:
                        self.count += 1
                        self.in_commit += bool(committing)


def _worker(url: str, run: int, acks: Path, seconds: float, log: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.terminate_worker",
            url,
            str(run),
            str(acks),
            str(seconds),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(log, "w"),
        text=True,
    )


@pytest.mark.slow
def test_terminated_writer_sessions_and_kills_lose_and_duplicate_nothing(
    pg_durable_server: PgServer, tmp_path: Path
) -> None:
    if pg_durable_server.socket_dir is None:
        pytest.skip("terminates sessions of a server started here")
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "33")))
    acks = tmp_path / "acks.txt"
    totals: collections.Counter[str] = collections.Counter()
    terminations = in_commit = kills = 0
    with pg_durable_server.schema("term") as base:
        schema = base.rsplit("search_path%3D", 1)[1]
        url = f"{base}&schema={schema}"
        logs = []
        for run in range(1, RUNS + 2):
            last = run == RUNS + 1  # the drain: no sends, no faults
            log = tmp_path / f"run{run}.log"
            logs.append(log)
            p = _worker(url, run, acks, 0 if last else SECONDS, log)
            if last:
                out, _ = p.communicate(timeout=600)
                assert p.returncode == 0, log.read_text()[-3000:]
                continue
            kill = run % 3 == 0
            assert p.stdout is not None
            ready = p.stdout.readline()  # open: the faults start once it runs
            assert ready.strip() == "ready", log.read_text()[-3000:]
            with Terminator(pg_durable_server, rng.randrange(1 << 30)) as term:
                if kill:
                    time.sleep(rng.uniform(1.0, SECONDS))
                    p.send_signal(signal.SIGKILL)
                    p.wait(timeout=60)
                    kills += 1
                else:
                    try:
                        out, _ = p.communicate(timeout=SECONDS + 600)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        raise AssertionError(
                            f"run {run} did not finish:\n{log.read_text()[-3000:]}"
                        )
            terminations += term.count
            in_commit += term.in_commit
            if p.stdout is not None:
                p.stdout.close()
            if not kill:
                assert p.returncode == 0, log.read_text()[-3000:]
                for k, v in json.loads(out.strip().splitlines()[-1])["outcomes"].items():
                    totals[f"writer_{k}"] += v
        # What each run's log says of the COMMITs whose answer was lost, killed runs included.
        settled: collections.Counter[str] = collections.Counter()
        for log in logs:
            for m in re.finditer(r"store_commit_answer_lost.*?outcome=(\w+)", log.read_text()):
                settled[m.group(1)] += 1
        with psycopg.connect(base, autocommit=True) as con:
            seen = con.execute("SELECT wf, v, n FROM seen").fetchall()
            left = con.execute("SELECT count(*) FROM inbox").fetchone()[0]
    acked: list[tuple[str, int]] = []
    for line in acks.read_text().splitlines():
        wid, value = line.split()
        acked.append((wid, int(value)))
    by_value: collections.Counter[int] = collections.Counter(v for _, v, _ in seen)
    duplicated = sorted(v for v, c in by_value.items() if c > 1)
    where = {v: wf for wf, v, _ in seen}
    lost = sorted(v for wid, v in acked if where.get(v) != wid)
    ns: dict[str, list[int]] = collections.defaultdict(list)
    for wf, _, n in seen:
        ns[wf].append(n)
    report: dict[str, Any] = {
        "runs": RUNS,
        "kills": kills,
        "terminations": terminations,
        "terminations_during_commit": in_commit,
        "acknowledged": len(acked),
        "consumed": len(seen),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "commit_outcome_unknown": sum(settled.values()),
        "settled": dict(settled),
        "writer_counters_of_clean_runs": dict(totals),
    }
    print("\nterminate test:", json.dumps(report))
    assert duplicated == [], f"signals consumed twice: {duplicated[:20]}"
    assert lost == [], f"acknowledged signals not consumed: {lost[:20]}"
    for wf, got in ns.items():  # the state's count and the reducer rows agree, one row each
        assert sorted(got) == list(range(1, len(got) + 1)), wf
    assert left == 0
    assert terminations >= 50 * RUNS // 2, report
    assert settled.get("unknown", 0) == 0, report
