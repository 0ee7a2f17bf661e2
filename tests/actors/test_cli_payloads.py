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
