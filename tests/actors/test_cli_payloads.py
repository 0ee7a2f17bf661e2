"""`wf show` on workflows holding large payloads: cut in text, whole on request."""

from __future__ import annotations

import json

from actors import ActorSystem
from actors.cli import main

from . import fault_flows

T = 30
BIG = 3_000_000


def test_show_cuts_long_payloads_and_says_how_to_see_them_whole(tmp_path, capsys):
    """`wf show` prints the start of a long buffered payload and of a long result, with their
    length and how to see them whole (it printed megabytes); --full and --json print them whole."""
    db = str(tmp_path / "wf.db")
    with ActorSystem(db) as s:
        done = s.start(fault_flows.takes, "go", id="done")
        done.signal("go", "r" * BIG)
        assert done.result(timeout=T) == "r" * BIG
        waiting = s.start(fault_flows.takes, "go", id="waiting")
        waiting.signal("later", "p" * BIG)
        s.idle(timeout=T)
    for wid in ("done", "waiting"):
        assert main(["show", wid, "--db", db]) == 0
        out = capsys.readouterr().out
        assert len(out) < 10_000
        assert f"(cut: {BIG + 2:,} characters in all; --full or --json shows it whole)" in out
        assert main(["show", wid, "--db", db, "--full"]) == 0
        out = capsys.readouterr().out
        assert ("r" if wid == "done" else "p") * BIG in out and "(cut:" not in out
    assert main(["show", "waiting", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["buffered"][0]["payload"] == "p" * BIG


def _strict_json(text: str) -> object:
    """Parse as a JSON parser other than Python's does: ``NaN`` and ``Infinity`` are not JSON."""
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_show_json_is_strict_json_when_values_hold_nan_or_infinity(tmp_path, capsys):
    """A buffered payload, a published value or a result holding a NaN or an infinity is given
    as its repr in `wf show --json`, as any other value JSON cannot hold; it was written as the
    bare `NaN`/`Infinity` that JSON parsers other than Python's refuse."""
    db = str(tmp_path / "wf.db")
    with ActorSystem(db) as s:
        done = s.start(fault_flows.takes, "go", id="done")
        done.signal("go", {"score": float("inf")})
        assert done.result(timeout=T) == {"score": float("inf")}
        waiting = s.start(fault_flows.takes, "go", id="waiting")
        waiting.signal("later", [float("nan")])
        s.idle(timeout=T)
    assert main(["show", "done", "--db", db, "--json"]) == 0
    assert _strict_json(capsys.readouterr().out)["result"] == "{'score': inf}"
    assert main(["show", "waiting", "--db", db, "--json"]) == 0
    assert _strict_json(capsys.readouterr().out)["buffered"][0]["payload"] == "[nan]"
