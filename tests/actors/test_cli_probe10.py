"""`wf` as a probe of its CLI found it: a huge `--older-than` and times too far ahead for a
calendar (one line of error or a written time, never a traceback), the signal names a warning
offers (signals and requests apart), `wf show --history 0`, the reference page on `wf nodes` of
a SQLite file, and the number `wf signal` gives a queued request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from actors import ActorSystem
from actors.cli import MAX_AGE_DAYS, main
from workflows import Event, publish, reply, request, select, signal, timer, workflow

ROOT = Path(__file__).resolve().parents[2]
T = 30


@workflow
async def p10_quick(x: int) -> int:
    return x * 2


@workflow
async def p10_naps(seconds: float) -> str:
    await timer("nap", after=seconds)
    return "rested"


@workflow
async def p10_teller(balance: int) -> int:
    while True:
        match await select(request("withdraw"), request("peek"), signal("close")):
            case Event("withdraw", req):
                balance -= req.payload
                reply(req, balance)
            case Event("peek", req):
                reply(req, balance)
            case Event("close"):
                return balance


@workflow
async def p10_counter(n: int) -> int:
    total = 0
    for _ in range(n):
        await signal("tick")
        total += 1
        publish("count", total)
    return total


def wf(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "probe10.db")


# -- 1. ages and times too large for a calendar ------------------------------------------------------


def test_prune_with_an_age_too_large_is_one_line_of_error_naming_the_range(db, capsys):
    with ActorSystem(db) as s:
        s.start(p10_quick, 1, id="q").result(timeout=T)
    for age in ("99999999999d", "9" * 400 + "s", f"{MAX_AGE_DAYS + 1}d"):
        with pytest.raises(SystemExit) as exited:
            main(["prune", "--db", db, "--older-than", age])
        err = capsys.readouterr().err
        assert exited.value.code == 1
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert "too large" in err and f"up to {MAX_AGE_DAYS}d" in err, err
    # The largest age accepted prunes (nothing this young file finished so long ago) and prints
    # its cut-off.
    code, out, err = wf(capsys, "prune", "--db", db, "--older-than", f"{MAX_AGE_DAYS}d")
    assert (code, err) == (0, "") and out.startswith("pruned 0 finished workflows that finished before "), out
    code, out, _ = wf(capsys, "list", "--db", db, "--limit", "9" * 30)  # a limit past SQL's ints: all
    assert code == 0 and "q " in out


def test_list_and_show_write_a_timer_due_past_the_year_9999(db, capsys):
    with ActorSystem(db) as s:
        s.start(p10_naps, 1e12, id="far")  # due in the year 33000 and something
        s.start(p10_naps, 1e300, id="farther")  # past any calendar
        s.idle(timeout=T)
    code, out, err = wf(capsys, "list", "--db", db)
    assert code == 0, err
    assert re.search(r"far +p10_naps +running .* timer 'nap' due 33\d\d\d-\d\d-\d\d ", out), out
    assert "timer 'nap' due 1e+300s from 1970-01-01 (too far from now to write as a date)" in out, out
    code, out, err = wf(capsys, "list", "--db", db, "--json")
    assert code == 0 and {w["id"] for w in json.loads(out)} == {"far", "farther"}, err
    for wid in ("far", "farther"):
        code, out, err = wf(capsys, "show", wid, "--db", db)
        assert code == 0, err
        [due] = [line for line in out.splitlines() if line.startswith("  nap ")]
        assert "due 33" in due if wid == "far" else "too far from now" in due, out
        code, out, err = wf(capsys, "show", wid, "--db", db, "--json")
        assert code == 0 and json.loads(out)["timers"][0]["name"] == "nap", err


# -- 2. a warning names signals and requests apart ----------------------------------------------------


def test_signal_of_a_name_never_awaited_lists_signals_and_requests_apart(db, capsys):
    with ActorSystem(db) as s:
        s.start(p10_teller, 100, id="t")
        s.idle(timeout=T)
    code, out, err = wf(capsys, "signal", "t", "nosuch", "1", "--db", db)
    assert code == 0, err
    assert ("never awaits a signal named 'nosuch'; the signals it awaits: 'close'; the requests it "
            "awaits (asked with `wf ask`, not sent as signals): 'peek', 'withdraw'. Queued anyway") in err, err
    code, out, err = wf(capsys, "ask", "t", "nosuch", "1", "--db", db, "--timeout", "0.2")
    assert code == 1
    assert ("never awaits a request named 'nosuch'; the signal and request names it awaits: requests "
            "'peek', 'withdraw'; signals (sent with `wf signal`, not asked) 'close'. Queued anyway") in err, err


# -- 3. wf show --history 0 -------------------------------------------------------------------------------


def test_show_history_0_says_how_many_events_it_leaves_out(db, capsys):
    with ActorSystem(db) as s:
        ref = s.start(p10_counter, 3, id="c")
        for _ in range(3):
            ref.signal("tick")
        assert ref.result(timeout=T) == 3
    every = json.loads(wf(capsys, "show", "c", "--db", db, "--json", "--history", "100")[1])["history"]
    assert len(every) == 5  # started, three signals, completed
    code, out, err = wf(capsys, "show", "c", "--db", db, "--history", "0")
    assert code == 0, err
    assert "history (5 events, none shown with --history 0; --history N shows the newest N)" in out, out
    code, out, _ = wf(capsys, "show", "c", "--db", db, "--history", "0", "--before", "2")
    assert "history (2 events before position 2, none shown with --history 0;" in out, out
    code, out, _ = wf(capsys, "show", "c", "--db", db, "--history", "0", "--json")
    data = json.loads(out)
    assert (data["history"], data["history_cut"]) == ([], True)
    data = json.loads(wf(capsys, "show", "c", "--db", db, "--history", "0", "--before", "0", "--json")[1])
    assert (data["history"], data["history_cut"]) == ([], False)  # nothing before position 0
    code, out, _ = wf(capsys, "show", "c", "--db", db, "--history", "0", "--before", "0")
    assert "history" not in out, out


# -- 4. the reference on wf nodes of a SQLite file -------------------------------------------------------


def test_reference_says_what_wf_nodes_does_on_a_sqlite_file(db, capsys):
    page = (ROOT / "docs" / "reference.md").read_text()
    [row] = [line for line in page.splitlines() if line.startswith("| `wf nodes")]
    assert "On a SQLite file it is an error" not in row
    assert "On a SQLite file it lists the system that has the file open" in row, row
    with ActorSystem(db, node_id="solo-1"):
        code, out, err = wf(capsys, "nodes", "--db", db)
        assert code == 0 and "solo-1" in out, err
    code, out, err = wf(capsys, "nodes", "--db", db)
    assert code == 0 and out.startswith("no system has this SQLite file open now"), err


# -- 6. the number wf gives a queued request ---------------------------------------------------------------


def test_a_queued_request_is_numbered_as_a_request_not_as_the_signal(db, capsys):
    with ActorSystem(db) as s:
        s.start(p10_counter, 3, id="c")
        s.start(p10_naps, 3600, id="n")
        s.idle(timeout=T)
    code, out, err = wf(capsys, "signal", "c", "tick", "--db", db)
    assert code == 0 and out.startswith("queued signal 'tick' for c (request #1): no system has "), out
    code, out, err = wf(capsys, "fire-timer", "n", "nap", "--db", db)
    assert code == 0 and out.startswith("queued fire timer 'nap' for n (request #2): "), out
    code, out, err = wf(capsys, "cancel", "n", "--db", db)
    assert code == 0 and out.startswith("queued cancel for n (request #3): "), out
    code, out, _ = wf(capsys, "show", "c", "--db", db)
    assert "  #1 signal tick, queued " in out, out  # the request's number, as wf signal said
