"""What `wf list`, `wf show` and `wf signal` print when there is a lot to print, or a mistake."""

from __future__ import annotations

import json
import os

import pytest
from structlog.testing import capture_logs

from actors import ActorSystem
from actors.cli import CHILDREN_SHOWN, DEFAULT_LIMIT, main
from actors.testing import VirtualClock
from persistence import RECENT_STEPS
from workflows import WorkflowFailed
from workflows._compiler import compile_workflow_source

from . import flows

T = 30


def wf(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "cli.db")


def test_list_type_takes_the_short_name_of_the_type_column(db, capsys):
    """`--type sleeper` selects tests.actors.flows:sleeper, as shown in TYPE; the full key works
    too; a short name two types share is an error naming both; an unknown one lists the types."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 100, id="s1", test_mode=True)
        s.start(flows.waits_once, id="w1")
        s.idle(timeout=T)
    code, out, _ = wf(capsys, "list", "--db", db, "--type", "sleeper")
    assert code == 0 and "s1" in out and "w1" not in out
    code, out, _ = wf(capsys, "list", "--db", db, "--type", "tests.actors.flows:sleeper", "--json")
    assert [r["id"] for r in json.loads(out)] == ["s1"]

    other = compile_workflow_source(
        "from workflows import signal\nasync def sleeper(x):\n    return await signal('go')\n",
        "other_sleeper.py", "elsewhere.game:sleeper",
    )
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(other, 1, id="s2")
        s.idle(timeout=T)
    code, _, err = wf(capsys, "list", "--db", db, "--type", "sleeper")
    assert code == 1
    assert "--type 'sleeper' is ambiguous" in err
    assert "elsewhere.game:sleeper" in err and "tests.actors.flows:sleeper" in err
    code, out, _ = wf(capsys, "list", "--db", db, "--type", "elsewhere.game:sleeper")
    assert code == 0 and "s2" in out and "s1" not in out
    code, _, err = wf(capsys, "list", "--db", db, "--type", "sleper")
    assert code == 1 and "no workflow type named 'sleper'" in err
    # The types two share a name of are listed by their full names, the others by name alone.
    assert "the types there: elsewhere.game:sleeper, tests.actors.flows:sleeper, waits_once" in err


def test_list_type_column_shows_the_full_type_where_two_types_share_a_name(db, capsys):
    """Two types of one name in two modules are not shown alike in TYPE (each was `sleeper`):
    each is shown by its module:qualname, which `--type` takes; a type whose name no other has
    keeps its name alone."""
    other = compile_workflow_source(
        "from workflows import signal\nasync def sleeper(x):\n    return await signal('go')\n",
        "other_sleeper.py", "elsewhere.game:sleeper",
    )
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 100, id="s1", test_mode=True)
        s.start(other, 1, id="s2")
        s.start(flows.waits_once, id="w1")
        s.idle(timeout=T)
    code, out, _ = wf(capsys, "list", "--db", db)
    assert code == 0
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert rows == {"s1": "tests.actors.flows:sleeper", "s2": "elsewhere.game:sleeper", "w1": "waits_once"}
    code, out, _ = wf(capsys, "list", "--db", db, "--type", rows["s2"])
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["s2"]


def test_list_has_a_default_limit_says_how_many_more_and_limit_0_is_all(db, capsys):
    """With no --limit, wf list prints DEFAULT_LIMIT rows and a line saying how many more there
    are; --limit N prints N; --limit 0 prints them all; a negative limit is an error."""
    n = DEFAULT_LIMIT + 7
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start_many(flows.waits_once, [()] * n, ids=[f"w{i:03}" for i in range(n)])
    code, out, _ = wf(capsys, "list", "--db", db)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 1 + DEFAULT_LIMIT + 1
    assert lines[-1].startswith(f"... 7 more of {n} (oldest first); --limit N shows N, --limit 0 all")
    code, out, _ = wf(capsys, "list", "--db", db, "--limit", "3")
    assert len(out.splitlines()) == 1 + 3 + 1 and f"... {n - 3} more of {n}" in out
    code, out, _ = wf(capsys, "list", "--db", db, "--limit", "0")
    assert len(out.splitlines()) == 1 + n and "more of" not in out
    code, out, err = wf(capsys, "list", "--db", db, "--json")
    assert len(json.loads(out)) == DEFAULT_LIMIT and "7 more" in err
    code, _, err = wf(capsys, "list", "--db", db, "--limit", "-1")
    assert code == 1 and "--limit must be 0 (no limit) or more, got -1" in err


def test_show_summarizes_children_unless_asked_for_all(db, capsys):
    """A parent's children: their count by status and the first few, then how many more;
    --all-children lists each one."""
    n = CHILDREN_SHOWN + 5
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.fan_out, list(range(n)), id="fan")
        s.idle(timeout=T)
    code, out, _ = wf(capsys, "show", "fan", "--db", db)
    assert code == 0
    assert f"children  {n}: {n} running" in out
    assert sum(1 for line in out.splitlines() if "(child) running" in line) == CHILDREN_SHOWN
    assert "... 5 more (--all-children lists them all)" in out
    code, out, _ = wf(capsys, "show", "fan", "--db", db, "--all-children")
    assert sum(1 for line in out.splitlines() if "(child) running" in line) == n
    assert "more (--all-children" not in out
    data = json.loads(wf(capsys, "show", "fan", "--db", db, "--json")[1])
    assert data["children_by_status"] == {"running": n} and len(data["children"]) == CHILDREN_SHOWN


def test_show_pages_the_history_back_by_position_as_ref_history_does(tmp_path, capsys):
    """``wf show --history N --before P`` shows the page of ``ref.history(limit=N, before=P)``,
    its ``--json`` gives each event its ``position``, and the header names the ``--before`` of
    the page before: a long history can be paged back to its start (only its newest N could be
    shown, with no way to the ones before)."""
    db = str(tmp_path / "wf.db")
    with ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.counter, 30, id="count")
        for _ in range(12):
            ref.signal("inc", 1)
        s.idle(timeout=T)
        whole = ref.history()
    assert len(whole) == 13
    pages, before = [], None
    while True:
        args = ["show", "count", "--db", db, "--history", "5", "--json"]
        data = json.loads(wf(capsys, *args, *(["--before", str(before)] if before is not None else []))[1])
        page = data["history"]
        assert [(h["position"], h["event"], h["at"]) for h in page] == [
            (e.position, e.event, e.at) for e in ref_page(whole, 5, before)
        ]
        pages.append(page)
        if not data["history_cut"]:
            break
        before = page[0]["position"]
        code, out, _ = wf(capsys, "show", "count", "--db", db, "--history", "5", "--before", str(page[-1]["position"] + 1))
        assert code == 0 and f"--before {before} the ones before)" in out
    assert [h["position"] for p in reversed(pages) for h in p] == list(range(13))
    code, _, err = wf(capsys, "show", "count", "--db", db, "--before", "-1")
    assert code == 1 and "--before must be a history position, 0 or more, got -1" in err


def ref_page(entries, limit, before):  # type: ignore[no-untyped-def]
    """The page ``ref.history(limit, before)`` gives, out of the whole history."""
    kept = [e for e in entries if before is None or e.position < before]
    return kept[-limit:]


def test_show_history_honours_the_limit_and_says_which_steps_are_not_kept(db, capsys):
    """--history N shows the newest N events and says when it cut older ones; asked for more
    than there are, it shows the whole history (every step is kept); only a system that keeps
    the newest steps (``history_limit``) leaves steps out, and then it says which."""
    n = RECENT_STEPS + 14
    with ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.counter, n + 5, id="count")
        for _ in range(n):
            ref.signal("inc", 1)
        s.idle(timeout=T)
    code, out, _ = wf(capsys, "show", "count", "--db", db, "--history", "5")
    assert code == 0 and f"history (the newest 5 events; --history N shows more, --before {n + 1 - 5} the ones before)" in out
    assert len(out[out.index("\nhistory"):].strip().splitlines()) == 1 + 5
    code, out, _ = wf(capsys, "show", "count", "--db", db, "--history", "400")
    history = out[out.index("\nhistory"):].strip().splitlines()
    steps = n + 1  # its start, then one step per signal
    assert history[0] == "history" and len(history) == 1 + steps
    assert "not kept" not in out
    data = json.loads(wf(capsys, "show", "count", "--db", db, "--history", "400", "--json")[1])
    assert data["steps_not_kept"] == 0 and not data["history_cut"]
    m = 3 * RECENT_STEPS
    with ActorSystem(db, clock=VirtualClock(), history_limit=RECENT_STEPS) as s:
        ref = s.start(flows.counter, m + 5, id="cut")
        for _ in range(m):
            ref.signal("inc", 1)
        s.idle(timeout=T)
    steps = m + 1
    code, out, _ = wf(capsys, "show", "cut", "--db", db, "--history", "400")
    history = out[out.index("\nhistory"):].strip().splitlines()
    kept = len(history) - 2
    assert RECENT_STEPS <= kept < steps
    assert history[-1].strip() == (
        f"(steps 1 to {steps - kept} are not kept: the system that ran it keeps the newest steps "
        f"of each workflow, ActorSystem(history_limit=...))"
    )
    code, _, err = wf(capsys, "show", "count", "--db", db, "--history", "-2")
    assert code == 1 and "--history must be 0 or more" in err


def test_signal_of_a_name_the_code_never_awaits_warns_naming_those_it_does(db, capsys):
    """wf signal with a name the workflow's code never awaits warns on stderr, naming the names
    it awaits, and queues it all the same; an awaited name gives no warning. The runtime logs
    the same mistake made through ref.signal() as a signal_not_awaited WARNING, once per name
    while the workflow is in memory (not once per signal)."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.auction, 10, id="a", test_mode=True)
        s.idle(timeout=T)
        with capture_logs() as logs:
            ref.signal("bdi", {"amount": 3})
            ref.signal("bid", {"bidder": "ann", "amount": 20})
            for _ in range(3):  # the same mistake again: said once
                ref.signal("bdi", {"amount": 4})
        warned = [e for e in logs if e["event"] == "signal_not_awaited"]
        assert [(e["log_level"], e["signal"], e["awaited"], e["workflow_id"]) for e in warned] == [
            ("warning", "bdi", ["bid", "cancel"], "a")
        ]
    code, out, err = wf(capsys, "signal", "a", "bdi", "{}", "--db", db)
    assert code == 0 and out.startswith("queued signal")
    assert "never awaits a signal named 'bdi'; the signals it awaits: 'bid', 'cancel'" in err
    code, out, err = wf(capsys, "signal", "a", "bid", '{"bidder": "bo", "amount": 30}', "--db", db)
    assert code == 0 and err == ""


def test_signal_to_a_workflow_of_a_script_warns_of_a_name_it_never_awaits(tmp_path, monkeypatch, capsys):
    """A workflow defined in the script that runs it is stored as ``__main__:name``, which no
    import finds: wf reads the names it awaits from the file its wait is at, as for a module."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "game.py"
    script.write_text(textwrap.dedent("""
        import warnings
        from actors import ActorSystem
        from workflows import workflow, signal, select
        warnings.simplefilter("ignore")

        @workflow
        async def duel(n):
            return await select(signal("hit"), signal("yield"))

        with ActorSystem("game.db") as system:
            system.start(duel, 1, id="duel-1")
            system.idle(timeout=30)
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, check=True, timeout=120)
    monkeypatch.chdir(tmp_path)
    code, out, err = wf(capsys, "signal", "duel-1", "hti", "{}", "--db", "game.db")
    assert code == 0 and out.startswith("queued signal")
    assert "never awaits a signal named 'hti'; the signals it awaits: 'hit', 'yield'" in err
    code, out, err = wf(capsys, "signal", "duel-1", "hit", "{}", "--db", "game.db")
    assert code == 0 and err == ""


def test_a_signal_from_wf_of_a_name_the_code_never_awaits_is_logged_by_the_owner(db, capsys):
    """wf may run where the application's code does not import (it cannot tell a misspelled
    name then): the system that carries the signal out, which has the code, logs it."""
    with ActorSystem(db, clock=VirtualClock()) as s, capture_logs() as logs:
        s.start(flows.auction, 10, id="a", test_mode=True)
        s.idle(timeout=T)
        code, _, _ = wf(capsys, "signal", "a", "bdi", "{}", "--db", db)
        assert code == 0
        s.idle(timeout=T)  # (which waits for the requests other processes left, too)
        warned = [(e["signal"], e["awaited"]) for e in logs if e["event"] == "signal_not_awaited"]
        assert warned == [("bdi", ["bid", "cancel"])]


def test_a_queued_request_says_who_carries_it_out(db, capsys):
    """With a system running on the file, the request is carried out by it within a second; with
    none, wf says it waits for the next one to start (not that a running system picks it up)."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.collect, 3, id="c")
        s.idle(timeout=T)
        code, out, _ = wf(capsys, "signal", "c", "item", "1", "--db", db)
        assert code == 0 and "the system running on it (node " in out and ", pid " in out and "within a second" in out
    code, out, _ = wf(capsys, "signal", "c", "item", "2", "--db", db)
    assert code == 0
    assert f"no system has {db} open: the request waits in the file for the next one to start" in out
    assert "within a second" not in out


def test_the_installed_wf_reads_the_names_from_the_application_in_its_directory(tmp_path, monkeypatch):
    """Run as the console script from an application's directory (which is not on its
    sys.path), wf finds the workflow's module file there and warns, without importing it."""
    import importlib
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "shopapp.py").write_text(
        "from workflows import signal, workflow\n\n\n"
        "@workflow\nasync def checkout(order: str) -> str:\n    return await signal('paid')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    shop = importlib.import_module("shopapp")
    db = str(tmp_path / "shop.db")
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(shop.checkout, "o-1", id="o-1")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("wf")), "signal", "o-1", "payed", "{}", "--db", db],
        cwd=tmp_path, capture_output=True, text=True, timeout=T,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr
    assert "never awaits a signal named 'payed'; the signals it awaits: 'paid'" in done.stderr


def test_reading_commands_leave_a_backup_byte_identical(tmp_path, capsys):
    """``wf list``, ``wf show`` and ``wf upgrade --dry-run`` on a file no system runs on (a backup
    copied with its write-ahead log while its system ran) open it read-only: they never
    checkpoint the log into the file, nor delete it, so the files hash the same afterwards."""
    import hashlib
    import shutil

    live = str(tmp_path / "live.db")
    backup = tmp_path / "backup"
    backup.mkdir()
    with ActorSystem(live, clock=VirtualClock()) as s:
        s._rt.store._writer.conn.execute("PRAGMA wal_autocheckpoint = 0")  # the log holds the steps
        for i in range(5):
            s.start(flows.sleeper, 100 + i, id=f"sleep-{i}")
        s.idle(timeout=30)
        for suffix in ("", "-wal"):  # a hot copy: the file and its log
            shutil.copy(live + suffix, backup / f"b.db{suffix}")
    db = str(backup / "b.db")
    assert os.path.getsize(db + "-wal") > 0

    def hashes() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (backup / "b.db", backup / "b.db-wal")}

    before = hashes()
    for argv in (["list"], ["show", "sleep-3"], ["upgrade", "--dry-run"], ["list", "--json"]):
        code, out, err = wf(capsys, *argv, "--db", db)
        assert code == 0, err
        assert hashes() == before, f"wf {' '.join(argv)} changed the backup"
    assert "sleep-4" in wf(capsys, "list", "--db", db)[1]


def test_a_fire_timer_request_read_again_after_it_was_carried_out_is_not_failed(db, capsys):
    """Under load housekeeping may read a `wf fire-timer` request again before the step that
    took its timer (and deleted the request) committed; by the time it looks, the workflow is past
    that timer, or finished. That is a request carried out, not one that failed: no
    ``external_request_failed`` warning (it said "has no armed timer named 'wake'")."""
    from persistence import open_store

    from .runtime_support import Inside

    with capture_logs() as logs, ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.sleeper, 3600, id="long")
        other = s.start(flows.waits_once, id="other")
        s.idle(timeout=30)
        with open_store(db, owner=False) as r:
            r.post_external("fire_timer", "long", "wake", None, at=0.0)
            stale = [x for x in r.take_external(0) if x.workflow_id == "long"]
        assert len(stale) == 1
        assert ref.result(timeout=30) == 0.0  # fired at once, on the virtual clock
        inside = Inside(s)
        real = inside.store_method("take_external")
        once = [stale]  # the next pass reads it once more, as it did before its step committed
        inside.patch_store("take_external", lambda after: (once.pop() if once and after == 0 else []) + real(after))
        code, _, err = wf(capsys, "signal", "other", "go", "--db", db)  # a request: a new pass
        assert code == 0, err
        assert other.result(timeout=30) is None
        inside.unpatch_store("take_external")
    failed = [e for e in logs if e["event"] == "external_request_failed"]
    assert failed == [], failed


def test_show_of_a_failed_workflow_says_where_it_failed_and_full_prints_the_traceback(db, capsys):
    with ActorSystem(db) as system:
        ref = system.start(flows.boom, id="b")
        with pytest.raises(WorkflowFailed):
            ref.result(timeout=T)
    code, out, _ = wf(capsys, "show", "b", "--db", db)
    assert code == 0
    [at] = [line for line in out.splitlines() if line.startswith("at ")]
    assert "flows.py" in at and "in boom" in at and "--full prints the traceback" in at
    code, out, _ = wf(capsys, "show", "b", "--db", db, "--full")
    assert "traceback\n  Traceback (most recent call last):" in out and "in boom" in out


def test_show_says_when_a_procedure_in_its_retry_backoff_runs_next(db, capsys):
    import time

    with ActorSystem(db) as system:  # the real clock: wf reads it too
        system.start(flows.calls_always_down, id="d")
        deadline = time.monotonic() + T
        while not [p for p in system._rt.store.procedures("d") if p.next_attempt_at > time.time()]:
            assert time.monotonic() < deadline, "the first attempt never failed"
            time.sleep(0.01)
        code, out, _ = wf(capsys, "show", "d", "--db", db)
    assert code == 0
    [line] = [x for x in out.splitlines() if "attempt(s)" in x]
    assert "[pending, 1 attempt(s), next attempt at " in line, line


def test_every_time_wf_prints_is_marked_utc(db, capsys):
    """wf prints times in UTC: each is marked Z (as the due times of a wait are, and wf nodes'),
    in list, show (created, updated, timers, history) and prune; none is left bare for an
    operator in another time zone to read as local time."""
    import re

    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 100, id="s1", test_mode=True)
        s.start(flows.waits_once, id="w1")
        s.idle(timeout=T)
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?!Z)")
    for argv in (("list",), ("show", "s1"), ("show", "w1"), ("prune", "--older-than", "1h")):
        code, out, _ = wf(capsys, *argv, "--db", db)
        assert code == 0 and re.search(r"\d\d:\d\d:\d\dZ", out), out
        assert not stamp.search(out), out
