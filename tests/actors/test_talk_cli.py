"""``wf ask`` and the published values of ``wf show``, on SQLite and PostgreSQL, with a running
system carrying the requests out."""

from __future__ import annotations

import json
import shlex
import threading

import pytest

from actors import ActorSystem, InboxFull, Status
from actors.testing import VirtualClock
from persistence import dumps

from . import talk_flows as tf
from .test_cli import db, wf  # noqa: F401  (the fixture)

T = 30


def test_wf_ask_prints_the_reply_and_a_refusal_exits_1(db, capsys):  # noqa: F811
    """wf ask prints the reply as JSON; asked again by --ask-id it prints the stored one; a refusal,
    an unawaited name (warned) that times out, or a finished workflow exit 1 saying why; wf show
    lists published values."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        code, out, err = wf(
            capsys, "ask", "acct", "withdraw", "30", "--db", db, "--ask-id", "cli-1"
        )
        assert (code, out.strip()) == (0, "70"), err
        code, out, _ = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db, "--ask-id", "cli-1")
        assert (code, out.strip()) == (0, "70")  # asked again by id: the stored reply
        code, out, err = wf(capsys, "ask", "acct", "deposit", "30", "--db", db, "--ask-id", "cli-1")
        assert (code, out) == (1, "") and "was used for an ask 'withdraw', not 'deposit'" in err  # one ask per id
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "1000", "--db", db)
        assert code == 1 and "insufficient funds: balance 70, asked 1000" in err
        code, out, err = wf(capsys, "ask", "acct", "deposit", "5", "--db", db, "--timeout", "0.3")
        assert code == 1 and "never awaits a request named 'deposit'; the signal and request names it awaits: " in err
        assert "no reply to ask 'deposit'" in err
        hint = err.split("the request stays: `", 1)[1].split("`", 1)[0]  # the command that goes on waiting
        words = shlex.split(hint)
        assert words[:5] == ["wf", "ask", "acct", "deposit", "--ask-id"] and words[6] == "--db", hint
        assert wf(capsys, "show", "acct", "--db", words[7])[0] == 0  # the database that holds the ask
        code, out, _ = wf(capsys, "show", "acct", "--db", db)
        assert "published\n  balance              70" in out
        code, out, _ = wf(capsys, "show", "acct", "--db", db, "--json")
        assert json.loads(out)["published"] == {"balance": 70}
        s.get("acct").signal("close")
        s.idle(timeout=T)
        code, _, err = wf(capsys, "ask", "acct", "withdraw", "1", "--db", db)
        assert code == 1 and "has already finished (completed)" in err


def test_the_command_wf_ask_gives_to_go_on_waiting_runs_as_printed(tmp_path, capsys):
    """The command a timed-out wf ask prints to wait on for its reply quotes the id, the name and
    the ask id as a shell needs them (an id with a space, say): run, it waits for that ask."""
    path = str(tmp_path / "quoted.db")
    with ActorSystem(path, clock=VirtualClock()) as s:
        s.start(tf.answers_one, "q", id="acct 1")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct 1", "it's late", "--db", path, "--ask-id", "my ask",
                            "--timeout", "0.3")
        assert code == 1 and "no reply to ask \"it's late\"" in err, err
        words = shlex.split(err.split("the request stays: `", 1)[1].split("`", 1)[0])
        assert words == ["wf", "ask", "acct 1", "it's late", "--ask-id", "my ask", "--db", path], words
        code, out, err = wf(capsys, *words[1:], "--timeout", "0.3")
        assert code == 1 and "no reply to ask \"it's late\"" in err, err  # the same ask, waited on
        assert len(s._rt.store.inbox("acct 1")) == 1  # asked once


def test_wf_ask_made_while_stopped_is_answered_by_the_next_system(db, capsys, tmp_path):  # noqa: F811
    """wf ask made while no system runs waits, and the next system to open the database answers it."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 10, id="acct")
        s.idle(timeout=T)
    got: list[tuple[int, str, str]] = []
    asker = threading.Thread(
        target=lambda: got.append(wf(capsys, "ask", "acct", "withdraw", "4", "--db", db))
    )
    asker.start()
    with ActorSystem(db, clock=VirtualClock()) as s:
        asker.join(T)
        assert got and got[0][0] == 0 and got[0][1].strip() == "6"
        assert s.get("acct").published("balance") == 6


def test_wf_ask_prints_a_reply_that_is_not_json_as_its_repr(tmp_path, capsys) -> None:
    """A set is printed as Python writes it, not as a JSON string, which a string reply would be."""
    path = str(tmp_path / "set.db")
    with ActorSystem(path, clock=VirtualClock()) as s:
        s.start(tf.replies_a_set, id="s")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "s", "q", "--db", path)
        assert (code, out.strip()) == (0, "{1, 2}"), err
        assert "the reply (set) is not JSON; printed as Python's repr" in err


@pytest.mark.parametrize(
    ("reply", "printed", "json_or_not"),
    [
        ({"a": [1, 2.5, None, True]}, '{"a": [1, 2.5, null, true]}', True),
        (("x", 1), '["x", 1]', True),  # a tuple is an array
        ("text", '"text"', True),
        ({1: "a"}, "{1: 'a'}", False),  # json would print {"1": "a"}: another value
        (float("nan"), "nan", False),
        ({"k": float("inf")}, "{'k': inf}", False),
        (b"raw", "b'raw'", False),
    ],
)
def test_wf_ask_prints_a_reply_as_json_and_says_when_it_cannot(tmp_path, capsys, reply, printed, json_or_not) -> None:
    """wf ask prints a reply as standard JSON; one that JSON cannot say as it is (a NaN, an
    infinity, bytes, a key that is not a string) is printed as its repr, and stderr says so."""
    path = str(tmp_path / "reply.db")
    with ActorSystem(path, clock=VirtualClock()) as s:
        s.start(tf.replies_with, reply, id="r")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "r", "q", "--db", path)
        assert (code, out.strip()) == (0, printed), err
        if json_or_not:
            assert err == "" and json.loads(out) == json.loads(printed)
        else:
            assert f"the reply ({type(reply).__name__}) is not JSON; printed as Python's repr" in err


def test_wf_show_and_wf_ask_show_a_value_whose_repr_fails_saying_so(tmp_path, capsys) -> None:
    """A published value or a reply that Python cannot write out (an int of more digits than
    it writes, an object whose __repr__ raises) is shown as what it is and why it cannot be
    shown, by wf show (text and --json) and wf ask: they ended in a traceback."""
    path = str(tmp_path / "big.db")
    with ActorSystem(path, clock=VirtualClock()) as s:
        s.start(tf.publishes, "big", 10**5000, id="pub")
        s.start(tf.replies_with, tf.ReprFails(), id="odd")
        s.idle(timeout=T)
        for argv in (["show", "pub"], ["show", "pub", "--json"]):
            code, out, err = wf(capsys, *argv, "--db", path)
            assert code == 0, err
            assert "<int that cannot be shown: ValueError: Exceeds the limit (4300 digits)" in out, out
        code, out, err = wf(capsys, "ask", "odd", "q", "--db", path)
        assert code == 0, err
        assert out.strip() == "<ReprFails that cannot be shown: RuntimeError: this repr is broken>"


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ("NaN", "holds NaN, which is not standard JSON"),
        ('{"amount": Infinity}', "holds Infinity, which is not standard JSON"),
        ("[-Infinity]", "holds -Infinity, which is not standard JSON"),
        ("1e999", "holds the number 1e999, too large for a float"),
        ("1" * 5000, "holds an integer of 5,000 digits"),
    ],
)
def test_wf_ask_and_signal_refuse_json_only_python_reads(db, capsys, payload, says):  # noqa: F811
    """A payload of NaN, an infinity, or a number JSON readers cannot take is refused by wf ask
    and wf signal (exit 1 with a message, as other bad payloads), and nothing is queued: Python's
    json reads them, and the workflow got a float('nan') that no other tool could send back."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        for command in ("ask", "signal"):
            code, out, err = wf(capsys, command, "acct", "withdraw", payload, "--db", db, *(
                ["--timeout", "0.5"] if command == "ask" else []))
            assert (code, out) == (1, ""), (command, out, err)
            assert says in err and "Traceback" not in err, (command, err)
        assert s._rt.store.take_external(0) == []
        assert s.get("acct").ask("balance", timeout=T) == 100
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db)
        assert (code, out.strip()) == (0, "70"), err
        code, out, err = wf(capsys, "signal", "acct", "close", "1e2", "--db", db)
        assert code == 0, err  # a finite float in exponent form is JSON
        assert s.get("acct").result(timeout=T) == 70


def test_wf_ask_refuses_an_ask_id_that_ask_refuses(db, capsys):  # noqa: F811
    """--ask-id with a control character is refused before anything is asked, as ask() refuses
    that ask_id."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db, "--ask-id", "a\x1b[2Jb")
        assert (code, out) == (1, "") and "--ask-id 'a\\x1b[2Jb' holds the control character" in err, err
        assert s._rt.store.take_external(0) == []
        assert s.get("acct").ask("balance", timeout=T) == 100  # nothing withdrawn


def test_wf_ask_refuses_an_empty_ask_id_as_ask_does(db, capsys):  # noqa: F811
    """--ask-id "" is refused before anything is asked (ask() refuses an empty ask_id): it made a
    new ask under a generated id, which the given id could never find again."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db, "--ask-id", "")
        assert (code, out) == (1, "") and "--ask-id must name the ask" in err, err
        assert s.get("acct").ask("balance", timeout=T) == 100  # nothing withdrawn


def test_wf_ask_or_signal_with_an_empty_name_is_refused_and_wedges_nothing(db, capsys):  # noqa: F811
    """An empty name is refused by wf ask and wf signal (exit 1, nothing queued), as ask() and
    signal() refuse it; before, wf ask queued it and the running system failed on it at every
    pass, so every later wf request (a signal, a cancel) waited behind it forever."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct", "", "30", "--db", db, "--timeout", "0.5")
        assert (code, out) == (1, "") and "ask name must be a non-empty string" in err, err
        code, out, err = wf(capsys, "signal", "acct", "", "30", "--db", db)
        assert (code, out) == (1, "") and "signal name must be a non-empty string" in err, err
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db)
        assert (code, out.strip()) == (0, "70"), err


def test_a_wf_request_the_system_cannot_carry_out_is_dropped_not_retried_forever(db):  # noqa: F811
    """A request left by an older wf (an ask with an empty name) is logged and dropped; the
    requests behind it are carried out."""
    from structlog.testing import capture_logs

    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        store = s._rt.store
        with capture_logs() as logs:
            store.post_external("ask", "acct", "", json.dumps({"ask_id": "bad", "payload": 1}), at=0.0)
            store.post_external("signal", "acct", "close", json.dumps(None), at=0.0)
            assert s.get("acct").result(timeout=T) == 100
        failed = [e for e in logs if e["event"] == "external_request_failed"]
        assert failed and "ask name must be a non-empty string" in failed[0]["error"]
        assert not [e for e in logs if e["event"] == "housekeeping_failed"]


def test_wf_ask_is_not_held_behind_a_signal_waiting_for_room(db, capsys):  # noqa: F811
    """`wf ask` of a workflow whose inbox is full of signals, after a `wf signal` to it that
    waits for room, is answered, as `ask()` is (asks have room of their own): it waited behind
    that signal, for good when the workflow never takes what fills its inbox."""
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        ref.signal("unheard", 1)
        ref.signal("unheard", 2)
        assert wf(capsys, "signal", "acct", "unheard", "3", "--db", db)[0] == 0  # waits for room
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db, "--timeout", "10")
        assert (code, out.strip()) == (0, "70"), err


def test_wf_signal_the_workflow_awaits_is_not_held_behind_one_waiting_for_room(db, capsys):  # noqa: F811
    """A wf signal the workflow awaits now, sent after a wf signal of another name that waits
    for room in its full inbox, is taken, as ref.signal() takes it: it waited behind the other,
    for good, since the workflow makes room only once it has what it awaits. Signals of one
    name keep their order."""
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(tf.never_answers, id="stuck")
        s.idle(timeout=T)
        ref.signal("later", 1)
        ref.signal("later", 2)
        assert wf(capsys, "signal", "stuck", "later", "3", "--db", db)[0] == 0  # waits for room
        s.idle(timeout=T)
        code, out, err = wf(capsys, "signal", "stuck", "stop", "--db", db)
        assert code == 0, err
        assert ref.result(timeout=T) == "stopped"


def test_wf_signal_the_workflow_awaits_gets_through_a_full_inbox(db, capsys):  # noqa: F811
    """The bound is for signals not awaited yet: a wf signal the workflow awaits now is taken
    even when its inbox is full of messages it does not await, as ref.signal() takes it; before,
    it was refused (InboxFull) and held for ever, and the workflow with it."""
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:
        ref = s.start(tf.never_answers, id="stuck")
        s.idle(timeout=T)
        ref.signal("later", 1)
        ref.signal("later", 2)
        code, out, err = wf(capsys, "signal", "stuck", "stop", "--db", db)
        assert code == 0, err
        assert ref.result(timeout=T) == "stopped"
    with ActorSystem(db, clock=VirtualClock(), inbox_limit=2) as s:  # only the first of a name
        ref = s.start(tf.never_answers, id="flooded")
        s.idle(timeout=T)
        ref.signal("later", 1)
        ref.signal("later", 2)
        store = s._rt.store  # straight to the store (no wake-up), as another node's signal goes
        store.append_inbox("flooded", "signal", "stop", dumps(None), at=0.0)
        with pytest.raises(InboxFull):  # a second one of the name is bounded as any signal is
            store.append_inbox("flooded", "signal", "stop", dumps(None), at=0.0)


def test_ctrl_c_while_wf_ask_waits_names_the_ask_id_that_fetches_its_reply(db, capsys, monkeypatch):  # noqa: F811
    """Ctrl-C while `wf ask` waits leaves the durable ask queued: wf exits 130 with the command
    (its --ask-id) that fetches the reply without asking again; no traceback."""
    import re

    from actors import cli

    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(cli.time, "sleep", interrupted)
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db)
    assert (code, out) == (130, ""), err
    assert "Traceback" not in err and err.startswith("wf: interrupted: ask 'withdraw' of acct"), err
    ask_id = re.search(r"--ask-id (\S+) --db", err)
    assert ask_id, err
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.idle(timeout=T)
        code, out, err = wf(capsys, "ask", "acct", "withdraw", "30", "--db", db, "--ask-id", ask_id.group(1))
        assert (code, out.strip()) == (0, "70"), err
        assert s.get("acct").published("balance") == 70  # asked once


def test_a_name_awaited_only_as_the_other_kind_is_warned(db, capsys):  # noqa: F811
    """A signal of a name the code awaits only as a request (an ask) is never taken, nor an ask
    of a name it awaits only as a signal: wf signal and wf ask warn, saying which to use."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        code, _, err = wf(capsys, "signal", "acct", "withdraw", "30", "--db", db)
        assert code == 0 and "awaits 'withdraw' as a request (an ask), not as a signal" in err, err
        assert "wf ask" in err
        s.idle(timeout=T)
        assert s.get("acct").published("balance") == 100  # never taken
        code, _, err = wf(capsys, "ask", "acct", "close", "1", "--db", db, "--timeout", "0.3")
        assert code == 1 and "awaits 'close' as a signal, not as a request" in err, err
        assert "wf signal" in err
        assert s.get("acct").status() is Status.RUNNING  # the ask did not close it
        code, _, err = wf(capsys, "signal", "acct", "close", "--db", db)
        assert code == 0 and "warning" not in err, err
