"""The demo app: a short run, a restart that resumes instead of duplicating, the view, the CLI; on
a SQLite file and on PostgreSQL (``demo_db``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples import simulation
from examples.demo import clock_file, run_demo
from tests.integration.conftest import DemoDb

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.2  # a small world: these tests check behaviour, not load


def test_restart_resumes_the_world_without_starting_it_again(demo_db: DemoDb):
    """A second run recovers the first run's workflows and starts no director twice."""
    db = demo_db.db
    first = run_demo(db, clock_path=demo_db.clock, duration=1.5, view=False, scale=SCALE)
    assert first["recovered"]["running"] == 0
    assert first["started"] == len(simulation.directors(7, SCALE))
    assert first["running"] > first["started"]  # the directors started children

    second = run_demo(db, clock_path=demo_db.clock, duration=1.5, view=False, scale=SCALE)
    assert second["started"] == 0
    assert second["recovered"]["running"] >= first["started"]


def test_the_world_clock_continues_after_a_restart(demo_db: DemoDb, tmp_path, monkeypatch):
    """The virtual time saved in the clock file (next to a SQLite file; for a URL, in the current
    directory) is where the next run's clock starts."""
    monkeypatch.chdir(tmp_path)
    db = demo_db.db
    assert clock_file(db).resolve() == demo_db.clock
    run_demo(db, duration=1.0, speed=600, view=False, scale=SCALE)
    state = json.loads(demo_db.clock.read_text())
    # Thirty virtual days past where the run left it: more than any run moves on its own, so the
    # next run's clock can only end past it if it started from the file (and never went back).
    planted = state["now"] + 30 * 86_400
    demo_db.clock.write_text(json.dumps({**state, "now": planted}))
    run_demo(db, duration=1.0, speed=600, view=False, scale=SCALE)
    later = json.loads(demo_db.clock.read_text())["now"]
    assert planted <= later < planted + 86_400


def test_live_view_shows_workflows_and_world(demo_db: DemoDb, capsys):
    """The rich view lists workflows by type and the world's state."""
    run_demo(demo_db.db, clock_path=demo_db.clock, duration=1.5, view=True, scale=SCALE)
    out = capsys.readouterr().out
    for heading in ("Workflows", "World", "Recent completions", "auction_house", "gold"):
        assert heading in out
    assert "password" not in out


def test_wf_demo_runs_the_examples(demo_db: DemoDb):
    """`wf demo` finds the examples of the checkout and runs them on the given file or URL."""
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "demo", *demo_db.cli, "--duration", "1", "--no-view",
         "--scale", str(SCALE)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recovered 0 running workflows" in done.stdout
    directors = {wid for wid, _, _ in simulation.directors(7, SCALE)}
    assert directors <= set(demo_db.workflows())
    assert demo_db.clock.exists()


@pytest.mark.parametrize("flag", ["--speed", "--scale"])
@pytest.mark.parametrize("value", ["0", "inf"])
def test_wf_demo_refuses_a_non_positive_setting(tmp_path, flag, value):
    """A zero or infinite speed or scale is refused with a message naming the flag, before
    anything starts (an infinite speed ended in a traceback from the clock)."""
    done = subprocess.run(
        [sys.executable, "-m", "examples.demo", "--db", str(tmp_path / "x.db"), flag, value],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert f"{flag} must be a positive number" in done.stderr
    assert not (tmp_path / "x.db").exists()
