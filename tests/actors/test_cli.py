"""The ``wf`` command line, on the same database file as a running (or stopped) system."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors import ActorSystem, Status
from actors.cli import main
from actors.testing import VirtualClock

from . import flows

T = 30


def wf(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "cli.db")


def test_list_and_show_while_the_owner_runs(db, capsys):
    """list and show read the file while a system owns it: status, waits, timers, buffered
    signals, children and history, as text and as JSON."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        a = s.start(flows.auction, 10, id="auction-1", test_mode=True)
        p = s.start(flows.parent_of_sleeper, id="parent-1")
        s.idle(timeout=T)
        a.signal("unheard-of", {"x": 1})
        s.idle(timeout=T)
        code, out, _ = wf(capsys, "list", "--db", db)
        assert code == 0
        assert "auction-1" in out and "parent-1" in out and "the-child" in out
        assert "signal 'bid'" in out
        code, out, _ = wf(capsys, "list", "--db", db, "--json")
        rows = {r["id"]: r for r in json.loads(out)}
        assert rows["auction-1"]["status"] == "running"
        assert {a["name"] for a in rows["auction-1"]["waiting_on"]["arms"]} == {"end", "bid", "cancel"}
        code, out, _ = wf(capsys, "show", "auction-1", "--db", db)
        assert code == 0
        assert "end" in out and "unheard-of" in out and "(test mode)" in out
        code, out, _ = wf(capsys, "show", "parent-1", "--db", db, "--json")
        data = json.loads(out)
        assert data["children"] == [{"id": "the-child", "type": "tests.actors.flows:sleeper", "status": "running"}]
        assert data["waiting_on"]["arms"][0]["kind"] == "child"
        assert p.status() is Status.RUNNING


def test_signal_cancel_and_fire_timer_reach_a_running_owner(db, capsys):
    """signal, cancel and fire-timer are carried out by the owning process within a second."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        c = s.start(flows.collect, 2, id="c")
        g = s.start(flows.guarded, "x", id="g")
        t = s.start(flows.sleeper, 100, id="t", test_mode=True)
        s.idle(timeout=T)
        assert wf(capsys, "signal", "c", "item", '{"n": 1}', "--db", db)[0] == 0
        assert wf(capsys, "signal", "c", "item", "[2, 3]", "--db", db)[0] == 0
        assert c.result(timeout=T) == [{"n": 1}, [2, 3]]
        assert wf(capsys, "fire-timer", "t", "wake", "--db", db)[0] == 0
        assert t.result(timeout=T) == 0
        assert wf(capsys, "cancel", "g", "--reason", "from the shell", "--db", db)[0] == 0
        s.idle(timeout=T)  # idle() also waits for requests other processes left
        assert "timer 'cleanup'" in g.info().waiting_on  # the finally block awaits
        s.clock.advance(1)
        s.idle(timeout=T)
        assert g.status() is Status.CANCELLED


def test_requests_made_while_stopped_run_at_the_next_start(db, capsys):
    """A signal sent with wf while no system runs is carried out when the file is opened again."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.waits_once, id="w")
        s.idle(timeout=T)
    assert wf(capsys, "signal", "w", "go", '"hello"', "--db", db)[0] == 0
    with ActorSystem(db, clock=VirtualClock()) as s:
        assert s.get("w").result(timeout=T) == "hello"


def test_bad_input_is_a_clear_error(db, capsys):
    """Bad JSON, an unknown id, an unknown timer and a missing file exit 1 with a message."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 5, id="s", test_mode=True)
        s.idle(timeout=T)
        code, _, err = wf(capsys, "signal", "s", "x", "{not json", "--db", db)
        assert code == 1 and "payload is not valid JSON" in err
        code, _, err = wf(capsys, "show", "nope", "--db", db)
        assert code == 1 and "no workflow with id 'nope'" in err
        code, _, err = wf(capsys, "fire-timer", "s", "nope", "--db", db)
        assert code == 1 and "no armed timer named 'nope'; armed timers: 'wake'" in err
    code, _, err = wf(capsys, "list", "--db", db + ".missing")
    assert code == 1 and "does not exist" in err


def test_signal_to_a_finished_workflow_is_refused(db, capsys):
    """wf refuses to signal a workflow that has finished, saying so."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        r = s.start(flows.waits_once, id="done")
        r.signal("go", 1)
        r.result(timeout=T)
    code, _, err = wf(capsys, "signal", "done", "go", "1", "--db", db)
    assert code == 1 and "already finished (completed)" in err


def test_console_script_is_installed(db):
    """The installed `wf` console script runs (the entry point of setup.cfg)."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.waits_once, id="w")
        s.idle(timeout=T)
    exe = Path(sys.executable).with_name("wf")
    assert exe.exists(), f"{exe} missing: install the project with pip install -e ."
    out = subprocess.run([str(exe), "list", "--db", db, "--json"], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert [r["id"] for r in json.loads(out.stdout)] == ["w"]


def test_demo_help_lists_the_demos_own_options(capsys):
    """`wf demo --help` shows the demo's options (it used to show --db alone), and runs nothing."""
    with pytest.raises(SystemExit) as info:
        main(["demo", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: wf demo")
    for option in ("--db", "--duration", "--speed", "--no-view", "--seed", "--scale"):
        assert option in out, option
