"""The demo survives kill -9: run it, SIGKILL it mid-run, run it again, and audit the database (a
SQLite file, and PostgreSQL on a durable server left running)."""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from examples import simulation
from tests.integration.conftest import DemoDb

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("ACTORFLOW_SEED", "7"))  # the world's, and when the kill lands


class Demo:
    """The demo in a subprocess, with its output lines readable with a timeout."""

    def __init__(self, db: str, duration: float, extra: tuple[str, ...] = (), no_view: bool = True) -> None:
        self.proc = subprocess.Popen(
            # The README's main job, as a user runs it: the installed `wf demo`.
            [str(Path(sys.executable).with_name("wf")), "demo", "--db", db, "--duration", str(duration),
             *(["--no-view"] if no_view else []), "--seed", str(SEED), *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # Ctrl-C as in a terminal, though the suite may run as a background job of a shell
            # script (SIGINT ignored, and inherited so by every child).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float) -> str:
        """The first output line matching ``pattern``; fails with the output so far after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.0, remaining))
            except queue.Empty:
                line = None
                remaining = 0
            if line is None:
                pytest.fail(f"demo output has no line matching {pattern!r}:\n" + "\n".join(self.seen[-40:]))
            self.seen.append(line)
            if re.search(pattern, line):
                return line
            if remaining <= 0:
                pytest.fail(f"timed out waiting for {pattern!r}:\n" + "\n".join(self.seen[-40:]))

    def finish(self, timeout: float) -> int:
        rc = self.proc.wait(timeout=timeout)
        while (line := self.lines.get(timeout=5)) is not None:
            self.seen.append(line)
        return rc


def snapshot(demo_db: DemoDb) -> dict[str, tuple[str, str | None]]:
    """{workflow id: (status, parent id)}, read through a read-only store."""
    return {wid: (r.status, r.parent_id) for wid, r in demo_db.workflows().items()}


@pytest.mark.slow
def test_demo_recovers_everything_after_sigkill(durable_demo_db: DemoDb):
    """After a SIGKILL mid-run, a restart recovers every workflow, duplicates none, and the world adds up."""
    demo_db = durable_demo_db
    db, clock = demo_db.db, ("--clock-file", str(demo_db.clock))
    query = demo_db.rows

    first = Demo(db, duration=120, extra=clock)
    first.wait_for(r"^world running: \d+ directors started", timeout=90)
    # Let the world run for a few seconds of real time (minutes of world time), then kill it.
    for _ in range(random.Random(SEED).randint(1, 5)):
        first.wait_for(r"^world \d\d:\d\d:\d\d \| running", timeout=30)
    first.proc.send_signal(signal.SIGKILL)
    assert first.finish(timeout=30) == -signal.SIGKILL

    before = snapshot(demo_db)
    steps_before = {wid: r.step_seq for wid, r in demo_db.workflows().items()}
    running_before = {w for w, (st, _) in before.items() if st == "running"}
    assert len(running_before) >= 100, f"the demo should run hundreds of workflows, got {len(running_before)}"

    second = Demo(db, duration=6, extra=clock)
    recovered = second.wait_for(r"recovered \d+ running workflows", timeout=90)
    # Not compared with len(running_before) exactly: the runtime counts after it has begun to
    # activate the recovered workflows, whose first steps may already have spawned children.
    assert int(re.search(r"recovered (\d+) running", recovered).group(1)) >= 100
    second.wait_for(r"^world running: 0 directors started", timeout=60)
    assert second.finish(timeout=90) == 0, "\n".join(second.seen[-40:])
    assert not [ln for ln in second.seen if "Traceback" in ln or "[error" in ln], "\n".join(second.seen)

    after = snapshot(demo_db)
    # No workflow was lost, and none that had finished came back to life or changed its ending.
    assert set(before) <= set(after)
    for wid, (status, _) in before.items():
        if status != "running":
            assert after[wid][0] == status, wid
    # The recovered workflows went on from where they were: many of those running at the kill
    # took steps since (finished, or further on). Counted in steps, not in workflows finished:
    # how many finish in the restart's few seconds of real time depends on the machine's load.
    steps_after = {wid: r.step_seq for wid, r in demo_db.workflows().items()}
    moved = [w for w in running_before if after[w][0] != "running" or steps_after[w] > steps_before[w]]
    assert len(moved) >= 10, (len(moved), len(running_before))
    # The fixed-id world was resumed, not started again: the top-level workflows are exactly the
    # world setup and the directors.
    top = {w for w, (_, parent) in after.items() if parent is None}
    assert top == {"world-setup"} | {wid for wid, _, _ in simulation.directors(SEED)}
    assert all(after[wid][0] == "running" for wid, _, _ in simulation.directors(SEED))

    # The world adds up: every coin minted is in a purse or in escrow, and no purse is negative.
    (purses, held, minted, negative) = query(
        "SELECT (SELECT SUM(gold) FROM world_characters) AS purses, "
        "(SELECT COALESCE(SUM(amount), 0) FROM world_holds) AS held, "
        "(SELECT SUM(amount) FROM world_mint) AS minted, "
        "(SELECT COUNT(*) FROM world_characters WHERE gold < 0) AS negative",
    )[0]
    assert purses + held == minted and negative == 0
    running_after = {w for w, (st, _) in after.items() if st == "running"}
    # Escrow is only held by auctions still running (a finished auction paid or refunded it).
    for (hold,) in query("SELECT id FROM world_holds"):
        assert hold.rpartition(":bid-")[0] in running_after, hold
    # An item is locked only by a running trade or auction, and an auctioned item is the seller's.
    for item, lock in query("SELECT id, locked_by FROM world_items WHERE locked_by IS NOT NULL"):
        assert lock in running_after, (item, lock)
    for item, owner, seller in query(
        "SELECT i.id, i.owner, a.seller FROM world_items i JOIN world_auctions a ON i.locked_by = a.id",
    ):
        assert owner == seller, item
    # The auction board shows open only the auctions still running.
    for (auction_id,) in query("SELECT id FROM world_auctions WHERE status = 'open'"):
        assert auction_id in running_after, auction_id
