"""Crash tests: a writer process SIGKILLed at random moments; every reopen must be consistent.

The child (crash_child.py) commits steps (reducer row + step_seq + consumed inbox row + timers +
an outgoing signal) and appends signals, acknowledging each on a file only after its commit
returned. After each kill the file is reopened (which also proves the owner lock died with the
process) and checked: no partial step, every acknowledged write present, every reducer effect
exactly once, no sequence number reused.

ACTORFLOW_CRASH_KILLS sets the number of kills (default 50); ACTORFLOW_CRASH_SEED the seed.
"""

from __future__ import annotations

import os
import pathlib
import random
import select
import signal
import subprocess
import sys
from collections import Counter

import pytest

from persistence import open_store
from tests.integration.killing import kill_on_progress

from .conftest import new_wf

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKFLOWS = [f"w{i}" for i in range(4)]


def _read_acks(path: pathlib.Path) -> list[list[str]]:
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # a line cut by the kill was never acknowledged
    return [line.split() for line in lines if line]


def _check(db: str, acks: list[list[str]], kills: int) -> dict[str, int]:
    with open_store(db) as s:
        assert s.read_table("PRAGMA integrity_check") == [{"integrity_check": "ok"}]
        tables = {r["name"] for r in s.read_table("SELECT name FROM sqlite_master")}
        app = (s.read_table("SELECT wid, n, inbox_seq, poison FROM app") if "app" in tables
               else [])
        assert not [r for r in app if r["poison"]], "a rolled-back reducer's row is visible"
        inbox = {r.seq: r.workflow_id for w in WORKFLOWS for r in s.inbox(w)}
        seqs = {}
        for w in WORKFLOWS:
            rec = s.load_workflow(w)
            steps = sorted(r["n"] for r in app if r["wid"] == w)
            # Reducer effect exactly once per committed step, and only for committed steps.
            assert steps == list(range(1, rec.step_seq + 1)), (w, rec.step_seq, steps)
            seqs[w] = rec.step_seq
            timers = s.timers(w)
            assert len(timers) == (1 if rec.step_seq else 0), (w, timers)
            assert s.read_table("SELECT name FROM waits WHERE workflow_id = ?", (w,)) == (
                [{"name": "go"}] if rec.step_seq else [])
        consumed = Counter(r["inbox_seq"] for r in app)
        assert not [q for q, c in consumed.items() if c > 1], "an inbox row consumed twice"
        assert not set(consumed) & set(inbox), "a consumed inbox row is still there"
        by_step = {(r["wid"], r["n"]): r["inbox_seq"] for r in app}
        owner_of = {r["inbox_seq"]: r["wid"] for r in app}
        acked_seqs = Counter()
        acked_steps: dict[str, list[int]] = {w: [] for w in WORKFLOWS}
        for a in acks:
            if a[0] in ("A", "D"):
                wid, seq = a[1], int(a[2])
                acked_seqs[seq] += 1
                assert inbox.get(seq) == wid or owner_of.get(seq) == wid, f"acked signal lost: {a}"
            elif a[0] == "S":
                wid, n, seq = a[1], int(a[2]), int(a[3])
                acked_steps[wid].append(n)
                assert by_step.get((wid, n)) == seq, f"acked step lost: {a}"
        assert not [q for q, c in acked_seqs.items() if c > 1], "an inbox seq acked twice"
        for w, ns in acked_steps.items():
            assert ns == sorted(set(ns)), f"acked steps of {w} repeat or go back: {ns}"
            # A step can commit and lose its ack only when the kill lands between the two: at
            # most one per workflow per kill.
            missing = set(range(1, seqs[w] + 1)) - set(ns)
            assert len(missing) <= kills, f"{w}: {len(missing)} unacknowledged steps, {kills} kills"
    return seqs


@pytest.mark.slow
def test_sigkill_at_random_moments(tmp_path: pathlib.Path) -> None:
    """Under SIGKILL at random moments, nothing partial is visible and nothing acked is lost."""
    kills = int(os.environ.get("ACTORFLOW_CRASH_KILLS", "50"))
    seed = int(os.environ.get("ACTORFLOW_CRASH_SEED", "20261129"))
    rng = random.Random(seed)
    db, acks = str(tmp_path / "crash.db"), tmp_path / "acks.log"
    with open_store(db) as s:
        for w in WORKFLOWS:
            s.create_workflow(new_wf(w))
    progress = []
    during_work = 0
    for k in range(kills):
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "crash_child.py"), db, str(acks), str(seed + k)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            if rng.random() < 0.2:
                # Sometimes during start-up and recovery, before the child reports ready.
                try:
                    proc.wait(timeout=rng.uniform(0, 0.3))
                    pytest.fail(f"child exited by itself (seed {seed}, run {k}): "
                                f"{proc.stderr.read().decode()}")
                except subprocess.TimeoutExpired:
                    pass
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            else:
                # Else once it acknowledged a few more steps or signals: while work goes on,
                # whatever the machine's speed.
                ready, _, _ = select.select([proc.stdout], [], [], 60)
                assert ready and proc.stdout.readline() == b"ready\n", proc.stderr.read()
                target = len(_read_acks(acks)) + rng.randint(1, 8)
                if not kill_on_progress(proc, lambda: len(_read_acks(acks)), target, timeout=60):
                    pytest.fail(f"child exited by itself (seed {seed}, run {k}): "
                                f"{proc.stderr.read().decode()}")
                during_work += 1
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
        try:
            progress.append(_check(db, _read_acks(acks), k + 1))
        except AssertionError as exc:
            raise AssertionError(f"after kill {k + 1} (seed {seed}): {exc}") from exc
    total = sum(progress[-1].values())
    acked = sum(1 for a in _read_acks(acks) if a[0] == "S")
    assert total >= acked, (total, acked)
    print(f"\n{kills} kills ({during_work} while work went on), {total} steps committed, {acked} acknowledged")
