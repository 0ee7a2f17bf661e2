"""The demo as a user meets it: its clock across kill -9, what it prints on restart, piped and at
80x24, counters kept in the database, another application's database refused, its help; on a
SQLite file and on PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from actors import ActorSystem
from actors.testing import VirtualClock
from examples import simulation, world
from examples.demo import WorldWatch, _resume_time, run_demo
from persistence import PersistenceError
from tests.integration.conftest import DemoDb
from tests.integration.test_demo_kill import Demo

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.2  # a small world: these tests check behaviour, not load


def _step_times(demo_db: DemoDb) -> dict[str, list[tuple[int, int]]]:
    """{workflow id: [(step number, at in ms)]} from the steps each row keeps."""
    rows = [(r.id, r.recent_steps) for r in demo_db.workflows().values() if r.recent_steps]
    out = {}
    for wid, text in rows:
        steps = [json.loads(line) for line in text.split("\n")]
        out[wid] = [(detail["step"], at) for at, _, detail in steps if "step" in detail]
    return out


@pytest.mark.slow
def test_world_time_never_goes_back_after_sigkill(durable_demo_db: DemoDb):
    """Killed with SIGKILL at full speed (x600), the demo has saved a clock reading ahead of every
    time it used; the next run starts there, so no workflow's steps go back in time."""
    demo_db = durable_demo_db
    db, options = demo_db.db, ("--clock-file", str(demo_db.clock), "--speed", "600", "--scale", str(SCALE))
    first = Demo(db, duration=120, extra=options)
    first.wait_for(r"^world running: ", timeout=90)
    for _ in range(3):
        first.wait_for(r"^world \d\d:\d\d:\d\d \| running", timeout=30)
    # Half-way between two status lines: the world has run on for about 300 virtual seconds
    # since the last line (a fixed moment to kill at, not a wait for something to happen).
    time.sleep(0.5)
    first.proc.send_signal(signal.SIGKILL)
    assert first.finish(timeout=30) == -signal.SIGKILL

    records = demo_db.workflows()
    used = max(r.updated_at for r in records.values())
    known = set(records)
    saved = _resume_time(demo_db.clock)
    assert saved >= used, f"the saved clock {saved} is behind a time the world used, {used}"
    before = _step_times(demo_db)

    second = Demo(db, duration=4, extra=options)
    second.wait_for(r"^world running: 0 directors started", timeout=90)
    assert second.finish(timeout=90) == 0, "\n".join(second.seen[-40:])
    after = _step_times(demo_db)
    went_on = 0
    for wid, steps in after.items():
        times = [at for _, at in sorted(steps)]
        assert times == sorted(times), f"{wid}'s steps go back in time: {steps}"
        last = before[wid][-1][0] if before.get(wid) else 0
        later = [at for n, at in steps if n > last]
        # Every step taken after the restart is at or after every time used before the kill.
        assert all(at >= int(used * 1000) for at in later), (wid, used, steps)
        went_on += bool(later) and wid in before
    assert went_on >= 10  # recovered workflows stepped again, after the restart
    created = [r.created_at for w, r in demo_db.workflows().items() if w not in known]
    assert created and min(created) >= used  # and so is every workflow started after it


def test_a_restart_counts_directors_resumed_not_started(demo_db: DemoDb):
    """A director that has finished is not started again, and not counted as started: the
    restart says 0 started, all resumed."""
    db, clock = demo_db.db, demo_db.clock
    run_demo(db, clock_path=clock, duration=1.0, view=False, scale=SCALE)
    first_id = simulation.directors(7, SCALE)[0][0]
    world.use_database(db)
    with ActorSystem(db, clock=VirtualClock(start=_resume_time(clock))) as system:
        system.get(first_id).cancel("ended for the test")
        system.idle(timeout=30)
    world.close_database()
    second = run_demo(db, clock_path=clock, duration=1.0, view=False, scale=SCALE)
    assert second["started"] == 0


def test_restart_line_says_nothing_was_started(demo_db: DemoDb, capsys):
    """The second run's line says no director started and how many were resumed."""
    db, clock = demo_db.db, demo_db.clock
    run_demo(db, clock_path=clock, duration=1.0, view=False, scale=SCALE)
    capsys.readouterr()
    run_demo(db, clock_path=clock, duration=1.0, view=False, scale=SCALE)
    total = len(simulation.directors(7, SCALE))
    assert f"world running: 0 directors started (all {total} resumed from the file)" in capsys.readouterr().out


def test_piped_it_prints_plain_lines_as_they_happen(demo_db: DemoDb):
    """Without --no-view but with stdout a pipe, `wf demo` prints plain lines (finished workflows,
    a status line per second) as they happen: no live view's box drawing or cursor codes."""
    demo = Demo(demo_db.db, duration=30, extra=("--clock-file", str(demo_db.clock), "--scale", str(SCALE)),
                no_view=False)
    demo.wait_for(r"^world running: ", timeout=90)
    demo.wait_for(r"^world \d\d:\d\d:\d\d \| running \d+", timeout=30)  # while it runs, not at the end
    demo.wait_for(r"^\d\d:\d\d:\d\d (completed|cancelled|failed) ", timeout=60)
    demo.proc.send_signal(signal.SIGINT)
    assert demo.finish(timeout=60) == 0
    text = "\n".join(demo.seen)
    assert not re.search(r"[\x1b┏━┃│╭]", text), text[-2000:]


def test_the_live_view_fits_80_by_24(demo_db: DemoDb):
    """With every type of the full world and a dozen recent completions, the live view fits a
    terminal of 80 columns and 24 lines, World and Recent completions included."""
    db = demo_db.db
    run_demo(db, clock_path=demo_db.clock, duration=1.0, view=False, scale=SCALE)
    world.use_database(db)
    clock = VirtualClock(start=_resume_time(demo_db.clock))
    with ActorSystem(db, clock=clock) as system:
        watch = WorldWatch(system, db)
        watch.refresh()
    world.close_database()
    # More types than the full world runs (about 22), and a full list of recent completions.
    watch.running.update({f"w{i}": f"examples.world:type_number_{i}" for i in range(24)})
    kinds = {t.rpartition(":")[2] for t in watch.running.values()} | {k for k, _ in watch.finished}
    assert len(kinds) > 30
    for i in range(12):
        watch.recent.appendleft((f"auction-house-{i}:lot-{i}", "auction", "completed", '{"outcome": "sold"}'))
    console = Console(width=80, height=24, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(watch.render(clock, 60, dict(system.recovered), 24, 80))
    lines = console.export_text().rstrip("\n").split("\n")
    assert len(lines) <= 23, "\n".join(lines)  # one line left for the cursor
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert re.search(r"\+\d+ more types", text)
    for heading in ("Workflows", "World", "gold", "dragon", "Recent completions", "auction-house-9:lot-9"):
        assert heading in text, text


def test_finished_counts_are_read_from_the_file(demo_db: DemoDb):
    """The finished counters are the database's, not this run's: a new run starts with them."""
    db = demo_db.db
    run_demo(db, clock_path=demo_db.clock, duration=2.0, view=False, scale=SCALE)
    finished = sum(1 for r in demo_db.workflows().values() if r.status != "running")
    assert finished > 0
    world.use_database(db)
    with ActorSystem(db, clock=VirtualClock(start=_resume_time(demo_db.clock))) as system:
        watch = WorldWatch(system, db)
        watch.refresh()
        # All those the database held before this run (recovered workflows may finish meanwhile).
        assert sum(watch.finished.values()) >= finished
    world.close_database()


def test_another_applications_file_is_refused(demo_db: DemoDb):
    """`wf demo --db` on a file (or URL) that holds another application's workflows refuses with
    one line, runs none of them, and adds no world to it."""
    from tests.actors import flows

    db = demo_db.db
    with ActorSystem(db, clock=VirtualClock()) as system:
        system.start(flows.waits_once, id="theirs")
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "demo", *demo_db.cli, "--duration", "1", "--no-view"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    shown = db if db.startswith("/") else db.split("?")[0]
    assert f"wf demo: error: {shown}" in done.stderr
    assert "holds 1 workflows of another application and no demo world" in done.stderr
    assert "Traceback" not in done.stderr
    with pytest.raises(PersistenceError):
        demo_db.rows("SELECT count(*) FROM world_state")
    assert demo_db.workflows()["theirs"].step_seq == 1  # not run by the demo


def test_help_is_plain_text():
    """`wf demo --help` says what the demo is and that it is meant to be killed, without markup."""
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "demo", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0
    assert "``" not in done.stdout and "kill -9" in done.stdout and "--no-view" in done.stdout
