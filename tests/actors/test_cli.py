"""The ``wf`` command line, on the same database file as a running (or stopped) system."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors import ActorSystem, Status
from actors.cli import main
from actors.testing import VirtualClock
from workflows import Cancelled, WorkflowFailed

from . import flows
from .runtime_support import Inside, reader

T = 30


def wf(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    """The database the system and the wf command share: a SQLite file, or a PostgreSQL URL."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "cli.db")


def test_list_and_show_while_the_owner_runs(db, capsys):
    """list and show read the file while a system owns it: status, waits, timers, buffered
    signals, children and history, as text and as JSON."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        a = s.start(flows.auction, 10, id="auction-1", test_mode=True)
        p = s.start(flows.parent_of_sleeper, id="parent-1")
        s.idle(timeout=T)
        a.signal("unheard-of", {"x": 1})
        a.signal("bid", {"bidder": "ann", "amount": 20})
        s.idle(timeout=T)
        code, out, _ = wf(capsys, "list", "--db", db)
        assert code == 0
        assert "auction-1" in out and "parent-1" in out and "the-child" in out
        assert "signal 'bid'" in out
        assert wf(capsys, "--db", db, "list")[1] == out  # --db may come first
        assert wf(capsys, f"--db={db}", "list")[1] == out
        code, out, _ = wf(capsys, "list", "--db", db, "--json")
        rows = {r["id"]: r for r in json.loads(out)}
        assert rows["auction-1"]["status"] == "running"
        assert (rows["auction-1"]["test_mode"], rows["parent-1"]["test_mode"]) == (True, False)
        assert {a["name"] for a in rows["auction-1"]["waiting_on"]["arms"]} == {"end", "bid", "cancel"}
        code, out, _ = wf(capsys, "show", "auction-1", "--db", db)
        assert code == 0
        assert "end" in out and "unheard-of" in out and "(test mode)" in out
        history = out[out.index("\nhistory\n"):].splitlines()[2:]
        assert [line.split(None, 3)[2:] for line in history] == [
            ["started", '{"step": 1, "armed": ["timer end"]}'], ["signal", '{"step": 2, "name": "bid", "armed": ["timer end"]}'],
        ]
        code, out, _ = wf(capsys, "show", "auction-1", "--db", db, "--json")
        assert [(h["seq"], h["event"], h["detail"]) for h in json.loads(out)["history"]] == [
            (None, "started", {"step": 1, "armed": ["timer end"]}), (None, "signal", {"step": 2, "name": "bid", "armed": ["timer end"]}),
        ]
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


def test_a_queued_request_says_whether_anything_runs_to_carry_it_out(db, capsys):
    """On a file and on a URL alike: with a system (a node) running, wf says it carries the
    request out within a second; with none, that the request waits for the next one to start,
    and an ask that timed out says why no reply came."""
    from .talk_flows import account

    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.collect, 3, id="c")
        s.start(account, 100, id="acct")
        s.idle(timeout=T)
        code, out, _ = wf(capsys, "signal", "c", "item", "1", "--db", db)
        assert code == 0 and "the system running on it (" in out and "within a second" in out
    nobody = "no system has" if "://" not in db else "no node runs on"
    for argv in (("signal", "c", "item", "2"), ("cancel", "c")):
        code, out, _ = wf(capsys, *argv, "--db", db)
        assert code == 0 and f": {nobody} " in out and "for the next one to start" in out, out
        assert "within a second" not in out, out
    code, _, err = wf(capsys, "ask", "acct", "withdraw", "1", "--db", db, "--timeout", "0.2")
    assert code == 1 and f"({nobody} " in err and "the next one to start carries it out" in err, err


def test_show_lists_the_requests_queued_for_the_workflow(db, capsys):
    """A signal or cancel queued while no system runs is part of what `wf show` says of the
    workflow (as the web view lists it), as text and as JSON, until a system carries it out."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.collect, 3, id="c")
        s.start(flows.collect, 3, id="other")
        s.idle(timeout=T)
    assert wf(capsys, "signal", "c", "item", '"x"', "--db", db)[0] == 0
    assert wf(capsys, "cancel", "c", "--db", db)[0] == 0
    assert wf(capsys, "signal", "other", "item", "1", "--db", db)[0] == 0
    code, out, _ = wf(capsys, "show", "c", "--db", db)
    nobody = "no system has" if "://" not in db else "no node runs on"
    assert code == 0 and f"queued ({nobody} " in out, out
    assert "#1 signal item, queued" in out and "#2 cancel, queued" in out and "#3" not in out, out
    code, out, _ = wf(capsys, "show", "c", "--db", db, "--json")
    assert [(q["seq"], q["kind"], q["name"]) for q in json.loads(out)["queued"]] == [(1, "signal", "item"), (2, "cancel", None)]
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.idle(timeout=T)
        assert s.get("c").status() is Status.CANCELLED
    code, out, _ = wf(capsys, "show", "c", "--db", db, "--json")
    assert json.loads(out)["queued"] == []


@pytest.mark.parametrize("command", ["list", "show", "signal", "ask", "cancel", "fire-timer", "prune",
                                     "upgrade", "nodes", "schedules", "ui"])
def test_every_command_s_help_says_db_takes_a_url(command, capsys):
    """--db takes a SQLite file or a postgresql:// URL on every command (wf nodes needs the URL):
    each command's --help says so, not "database file" alone."""
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0 and "--db PATH_OR_URL a SQLite file or a postgresql:// URL" in out, out


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
    if db.startswith("postgresql://"):
        code, _, err = wf(capsys, "list", "--db", db.replace("&schema=", "&schema=missing_"))
        assert code == 1 and "holds no actorflow data yet" in err and "Start an ActorSystem on it once" in err
        code, _, err = wf(capsys, "list", "--db", db + ".bad")
        assert code == 1 and "not a plain identifier" in err
    else:
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


def test_signal_to_a_full_inbox_waits_for_room_in_order(db, capsys):
    """`wf signal` to a workflow whose inbox is full is not dropped (it used to be, after being
    reported as queued): it waits, with the requests behind it for that workflow, and is
    delivered in order once the workflow has room; idle() does not wait for it meanwhile."""
    from structlog.testing import capture_logs

    with capture_logs() as logs, ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(flows.collect_after_go, 4, id="gated")
        for i in range(4):
            assert wf(capsys, "signal", "--db", db, "gated", "item", str(i))[0] == 0
        s.idle(timeout=T)  # two buffered, two waiting for room
        with reader(db) as r:
            assert [m.name for m in r.inbox("gated")] == ["item", "item"]
            assert len(r.take_external(0)) == 2
        ref.signal("go")
        assert ref.result(timeout=T) == [0, 1, 2, 3]
        s.idle(timeout=T)
        with reader(db) as r:
            assert r.take_external(0) == []
    waiting = [e for e in logs if e["event"] == "external_request_waiting"]
    assert len(waiting) == 1 and "full" in waiting[0]["error"]  # said once, not at every retry
    assert not any(e["event"] == "external_request_failed" for e in logs)


def test_cancel_is_not_held_behind_a_signal_waiting_for_room(db, capsys):
    """`wf cancel` of a workflow whose inbox is full, after a `wf signal` to it that waits for
    room, cancels it: a cancel needs no room. It waited behind that signal, for good when the
    workflow never takes what fills its inbox; the signal is then dropped with the workflow."""
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(flows.collect_after_go, 4, id="gated")
        for i in range(3):
            assert wf(capsys, "signal", "--db", db, "gated", "item", str(i))[0] == 0
        s.idle(timeout=T)  # two buffered, one waiting for room
        assert wf(capsys, "cancel", "--db", db, "gated")[0] == 0
        with pytest.raises(Cancelled):
            ref.result(timeout=T)
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        s.idle(timeout=T)
        with reader(db) as r:
            assert r.take_external(0) == []


def test_fire_timer_is_not_held_behind_a_signal_waiting_for_room(db, capsys):
    """`wf fire-timer` of a test-mode workflow whose inbox is full, after a `wf signal` to it
    that waits for room, fires the timer, as `debug_fire_timer` does: it waited behind that
    signal, and the workflow, which only that timer moves on, waited for good."""
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(flows.sleeper, 100, id="nap", test_mode=True)
        for i in range(3):
            assert wf(capsys, "signal", "--db", db, "nap", "item", str(i))[0] == 0
        s.idle(timeout=T)  # two buffered, one waiting for room
        assert wf(capsys, "fire-timer", "--db", db, "nap", "wake")[0] == 0
        assert ref.result(timeout=T) == 0


def test_a_signal_request_is_deleted_with_its_append(db, capsys):
    """A `wf signal` request leaves the file in the transaction that appends it to the inbox: a
    crash after the append cannot carry it out a second time at the next opening. (The separate
    clean-up of requests is disabled here, as a crash right before it would leave it undone.)"""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.collect, 2, id="c")
        Inside(s).patch_store("delete_external", lambda seqs: None)  # the clean-up a crash would prevent
        assert wf(capsys, "signal", "--db", db, "c", "item", "7")[0] == 0
        s.idle(timeout=T)
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.idle(timeout=T)
        with reader(db) as r:
            assert r.take_external(0) == []
        ref = s.get("c")
        ref.signal("item", 8)
        assert ref.result(timeout=T) == [7, 8]


def test_demo_never_takes_its_file_from_wf_db(monkeypatch):
    """$WF_DB names the application's file for list/show/...; the demo, which writes a world of
    its own, keeps demo.db (it used to take $WF_DB and fill the application's file)."""
    from actors.cli import build_parser

    monkeypatch.setenv("WF_DB", "prod.db")
    parser = build_parser()
    assert parser.parse_known_args(["demo"])[0].db == "demo.db"
    assert parser.parse_known_args(["list"])[0].db == "prod.db"


def test_errors_of_the_file_are_one_line(tmp_path, capsys, monkeypatch):
    """A store error while wf posts a request (here a read-only file) prints one line and exits
    1, with the store's message; it used to print a traceback."""
    import persistence._sqlite._store
    from persistence import ReadOnlyDatabase

    db = str(tmp_path / "ro.db")
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.collect, 1, id="c")

    def read_only(self, *a, **k):
        raise ReadOnlyDatabase(f"{db} cannot be written (test); make the file writable", path=db)

    monkeypatch.setattr(persistence._sqlite._store.SqliteStore, "post_external", read_only)
    code, out, err = wf(capsys, "signal", "--db", db, "c", "item", "1")
    assert code == 1 and err == f"wf: error: {db} cannot be written (test); make the file writable\n"


def test_a_password_in_the_url_is_never_shown(db, capsys):
    """wf's messages name a PostgreSQL database without the password its URL carries."""
    if not db.startswith("postgresql://"):
        pytest.skip("a URL's password: PostgreSQL only")
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(flows.sleeper, 5, id="s", test_mode=True)
        s.idle(timeout=T)
    secret = db.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
    for argv in (["show", "nope"], ["list", "--type", "nope"], ["signal", "nope", "x"],
                 ["list", "--status", "failed"]):
        code, out, err = wf(capsys, *argv, "--db", secret)
        assert "s3cret-pw" not in out + err, (argv, out, err)
    code, _, err = wf(capsys, "show", "nope", "--db", secret)
    assert code == 1 and "no workflow with id 'nope'" in err and "postgres@" in err
    code, _, err = wf(capsys, "list", "--db", secret.replace("&schema=", "&schema=missing_"))
    assert code == 1 and "s3cret-pw" not in err and "holds no actorflow data yet" in err


def test_a_password_in_the_url_is_never_shown_by_the_system(db, caplog):
    """The system's own errors (UnknownWorkflow, SystemClosed) and its log events
    (system_recovered, system_shutdown) name a PostgreSQL database without the password its URL
    carries, as wf does; they gave the URL whole."""
    if not db.startswith("postgresql://"):
        pytest.skip("a URL's password: PostgreSQL only")
    import logging

    from actors import SystemClosed, UnknownWorkflow

    secret = db.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
    assert "s3cret-pw" in secret
    caplog.set_level(logging.INFO, logger="actorflow")
    s = ActorSystem(secret, clock=VirtualClock())
    with pytest.raises(UnknownWorkflow, match="no workflow with id 'nope' in postgresql://postgres@") as unknown:
        s.get("nope")
    s.shutdown()
    with pytest.raises(SystemClosed, match="was shut down") as closed:
        s.get("nope")
    said = [str(unknown.value), str(closed.value)] + [r.getMessage() for r in caplog.records]
    assert any("system_recovered" in m for m in said) and any("system_shutdown" in m for m in said)
    assert [m for m in said if "s3cret-pw" in m] == []


def test_reading_commands_need_only_read_rights_on_a_url(pg_store_url, pg_server, capsys):
    """list, show and upgrade --dry-run only read: on PostgreSQL they run as a user that may only
    SELECT the store's tables (their sessions are read-only too); a command that writes, as
    that user, fails with one line saying which right is missing."""
    from tests.conftest import schema_of

    schema = schema_of(pg_store_url)
    role = f"{schema}_reader"
    with ActorSystem(pg_store_url, clock=VirtualClock()) as s:
        s.start(flows.auction, 10, id="auction-1")
        s.idle(timeout=T)
    admin = pg_server.admin()
    admin.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        url = pg_store_url.replace("postgresql://postgres@", f"postgresql://{role}@")
        assert url != pg_store_url
        code, out, err = wf(capsys, "list", "--db", url)
        assert (code, err) == (0, "") and "auction-1" in out
        code, out, err = wf(capsys, "show", "auction-1", "--db", url)
        assert (code, err) == (0, "") and "bid" in out
        code, out, err = wf(capsys, "upgrade", "--dry-run", "--db", url)
        assert code == 0, err
        code, _, err = wf(capsys, "signal", "auction-1", "bid", '{"bidder": "ann", "amount": 20}',
                          "--db", url)
        assert code == 1 and "privilege" in err and len(err.strip().splitlines()) == 1, err
    finally:
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')


@pytest.mark.parametrize("args", [
    ["list", "--status", "bogus"], ["prune", "--older-than", "banana"], ["show"],
    ["ask", "x", "q", "1", "--timeout", "abc"], ["nope"], [],
    # A --timeout that is not a finite number of seconds more than 0 (nan waited for good, a
    # negative one queued a prune and then said it had not finished "within -1s").
    ["ask", "x", "q", "1", "--timeout", "nan"], ["ask", "x", "q", "1", "--timeout", "inf"],
    ["ask", "x", "q", "1", "--timeout", "0"], ["prune", "--older-than", "1h", "--timeout", "-1"],
    ["prune", "--older-than", "1h", "--timeout", "nan"],
])
def test_a_mistake_in_the_command_line_is_one_line_and_status_1(db, capsys, args):
    """As every other error of wf (the reference: "Errors print one line on stderr and exit with
    status 1"), not argparse's usage and status 2."""
    with pytest.raises(SystemExit) as info:
        main([*args, "--db", db] if args else [])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ": error: " in err and "--help lists the options" in err


@pytest.mark.parametrize("args", [["--bogus"], ["--speed", "abc"], ["--seed", "x"], ["--speed", "0"],
                                  ["--speed", "inf"], ["--scale", "inf"]])
def test_a_mistake_in_the_demo_s_options_is_one_line_and_status_1(tmp_path, capsys, args):
    """`wf demo` with a wrong option is refused as every other wf command is: one line on stderr
    and status 1 (it printed the demo's usage, and exited 2), before anything starts."""
    path = tmp_path / "demo.db"
    try:
        code = main(["demo", "--db", str(path), *args])
    except SystemExit as e:
        code = e.code
    assert code == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "wf demo: error: " in err
    assert not path.exists()


def test_db_with_no_command_says_the_command_is_missing(db, capsys):
    """``wf --db game.db`` (the command forgotten) says so, not that the path is an unknown
    command."""
    for argv in (["--db", db], [f"--db={db}"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 1
        err = capsys.readouterr().err
        assert f"no command after {' '.join(argv)}" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("url", ["sqlite:///x.db", "postgresql+psycopg://u@localhost/db"])
def test_a_url_of_another_scheme_is_named_as_such(capsys, url):
    for argv in (["list", "--db", url], ["prune", "--older-than", "1h", "--db", url],
                 ["demo", "--db", url, "--no-view"]):
        code, _, err = wf(capsys, *argv)
        assert code == 1 and "is a URL of scheme" in err and "does not exist" not in err, err
    with pytest.raises(Exception, match="is a URL of scheme"):
        ActorSystem(url)


def test_an_empty_database_path_says_so(capsys):
    """ActorSystem("") and wf --db "" say the path is empty (it named the current directory,
    refused as a directory, not a database file)."""
    with pytest.raises(Exception, match="the database path is empty"):
        ActorSystem("")
    code, _, err = wf(capsys, "list", "--db", "")
    assert code == 1 and "the database path is empty" in err, err


def test_demo_in_a_missing_directory_is_a_one_line_error(tmp_path, capsys):
    code, _, err = wf(capsys, "demo", "--db", str(tmp_path / "nowhere" / "x.db"), "--no-view")
    assert code == 1 and "does not exist" in err and len(err.strip().splitlines()) == 1, err


def test_list_json_gives_each_workflow_its_result_or_error(db, capsys):
    """``wf list --json`` gives each workflow the fields ``WorkflowInfo`` has (but what it
    published, which ``wf show`` gives): a finished one's result or error, as ``wf show --json``."""
    clock = VirtualClock()
    with ActorSystem(db, clock=clock) as s:
        s.start(flows.waits_once, id="done").signal("go", {"gold": 3})
        failed = s.start(flows.boom, id="failed")
        clock.advance(2)  # its timer of 1 s fires
        s.idle(timeout=T)
        with pytest.raises(WorkflowFailed):
            failed.result(timeout=T)
    code, out, _ = wf(capsys, "list", "--db", db, "--json")
    rows = {r["id"]: r for r in json.loads(out)}
    assert (rows["done"]["status"], rows["done"]["result"], rows["done"]["error"]) == ("completed", {"gold": 3}, None)
    assert rows["failed"]["status"] == "failed" and rows["failed"]["result"] is None
    assert rows["failed"]["error"]["type"] == "KeyError" and "lost item" in rows["failed"]["error"]["message"]
    shown = json.loads(wf(capsys, "show", "failed", "--db", db, "--json")[1])
    assert rows["failed"]["error"] == shown["error"]


@pytest.fixture
def actorflow_logger():
    """The "actorflow" logger and the root logger's handlers, given back as they were."""
    runtime, root = logging.getLogger("actorflow"), logging.getLogger()
    kept = (list(runtime.handlers), runtime.level, runtime.propagate, list(root.handlers))
    yield runtime, root
    runtime.handlers[:] = kept[0]
    runtime.setLevel(kept[1])
    runtime.propagate = kept[2]
    root.handlers[:] = kept[3]


def test_main_in_a_program_that_configured_logging_leaves_its_configuration(tmp_path, capsys, actorflow_logger):
    """A program (or a test) that calls ``main()`` with logging configured keeps it: the
    runtime's records still reach its handlers. main() took them away for good (a handler of its
    own on the "actorflow" logger, which stopped passing records on)."""
    runtime, root = actorflow_logger
    runtime.handlers.clear()
    runtime.propagate = True
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    root.addHandler(Keep())
    with ActorSystem(str(tmp_path / "x.db")):
        pass
    assert wf(capsys, "list", "--db", str(tmp_path / "x.db"))[0] == 0
    assert runtime.handlers == [] and runtime.propagate
    logging.getLogger("actorflow.workflow").warning("after main")
    assert [r.getMessage() for r in seen] == ["after main"]


def test_wf_writes_the_runtime_warnings_to_the_stderr_of_the_moment(tmp_path, capsys, actorflow_logger):
    """In a process with no logging configured (wf's own), the runtime's warnings go to stderr:
    the stderr of the moment, not the one there at the first main() (closed since, it failed
    every later record with "Logging error: I/O operation on closed file")."""
    import io

    runtime, root = actorflow_logger
    with ActorSystem(str(tmp_path / "x.db")):
        pass
    runtime.handlers.clear()
    root.handlers.clear()
    first = io.StringIO()
    old = sys.stderr
    sys.stderr = first
    try:
        assert main(["list", "--db", str(tmp_path / "x.db")]) == 0
    finally:
        sys.stderr = old
    first.close()
    later = io.StringIO()
    sys.stderr = later
    try:
        logging.getLogger("actorflow.workflow").warning("signal_not_awaited")
    finally:
        sys.stderr = old
    assert later.getvalue() == "signal_not_awaited\n"
    capsys.readouterr()
