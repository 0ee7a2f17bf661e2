"""SIGKILL a process in the middle of a prune, many times: each pruned workflow is gone with every
row it had, each other one is whole, running workflows are untouched, and the count of pruned
workflows the file keeps agrees with what is gone. Each kill comes once the run has pruned a
number of workflows drawn at random (``killing``): in the middle of the prune, whatever the
machine's speed."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from persistence._writes import WORKFLOW_TABLES

from .killing import kill_on_progress
from .prune_worker import RUNNING, populate

ROOT = Path(__file__).resolve().parents[2]
KILLS = int(os.environ.get("ACTORFLOW_PRUNE_KILLS", "6"))
OLD, KEEP = 6000, 50


def _pruned(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT value FROM meta WHERE key = 'pruned_total'").fetchone()
    return int(row[0]) if row else 0


def _run(db: Path, kill_at: int | None) -> bool:
    """Run the worker; SIGKILL it once ``kill_at`` workflows in all have been pruned from the
    file. True if killed."""
    p = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.prune_worker", str(db)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert p.stdout is not None
        said = []
        for line in p.stdout:  # the runtime's log lines may come first
            said.append(line)
            if line.strip() == "pruning":
                break
        else:
            raise AssertionError(f"the worker never started pruning: {said} {p.stderr.read() if p.stderr else ''}")
        if kill_at is not None:
            con = sqlite3.connect(db, timeout=30, isolation_level=None)
            try:
                if kill_on_progress(p, lambda: _pruned(con), kill_at, timeout=240):
                    return True
            finally:
                con.close()
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
        return False
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for stream in (p.stdout, p.stderr):
            if stream is not None:
                stream.close()


def _check(db: Path) -> int:
    """Every invariant of a file after a (possibly killed) prune; returns how many old remain."""
    con = sqlite3.connect(db)
    try:
        ids = {r[0] for r in con.execute("SELECT id FROM workflows")}
        for table in WORKFLOW_TABLES:
            orphans = con.execute(
                f"SELECT count(*) FROM {table} WHERE workflow_id != '' AND workflow_id NOT IN "
                f"(SELECT id FROM workflows)").fetchone()[0]
            assert orphans == 0, f"{orphans} rows of {table} belong to no workflow"
        # Each finished workflow still there is whole: its record and its end in the history.
        ended = {r[0] for r in con.execute("SELECT workflow_id FROM history WHERE event = 'completed'")}
        old = {i for i in ids if i.startswith("old-")}
        assert old <= ended
        assert {f"keep-{i}" for i in range(KEEP)} <= ids & ended
        for i in range(RUNNING):
            status, cont, steps = con.execute(
                "SELECT status, continuation, step_seq FROM workflows WHERE id = ?", (f"run-{i}",)
            ).fetchone()
            assert status == "running" and cont is not None and steps >= 1
            assert con.execute("SELECT name FROM waits WHERE workflow_id = ?", (f"run-{i}",)).fetchall() == [("inc",)]
        pruned = con.execute("SELECT value FROM meta WHERE key = 'pruned_total'").fetchone()
        assert int(pruned[0] if pruned else 0) == OLD - len(old), "the pruned count disagrees with the file"
        return len(old)
    finally:
        con.close()


@pytest.mark.slow
def test_sigkill_during_pruning_loses_nothing_that_should_stay(tmp_path):
    db = tmp_path / "prune.db"
    populate(str(db), OLD, KEEP)
    assert _check(db) == OLD
    rng = random.Random(int(os.environ.get("ACTORFLOW_SEED", "7")))
    left, mid = OLD, 0
    for k in range(KILLS):
        # Once at least one more was pruned, and with some left for the kills to come.
        share = max(1, left // (KILLS - k + 1))
        if not _run(db, kill_at=OLD - left + rng.randint(1, share)):
            break  # it pruned all that was left first
        now_left = _check(db)
        assert now_left <= left
        mid += 0 < now_left < left  # killed while it was pruning, with more to prune
        left = now_left
        if left == 0:
            break
    assert mid >= 1, "no kill landed in the middle of the prune: give it more to prune"
    _run(db, kill_at=None)
    assert _check(db) == 0
