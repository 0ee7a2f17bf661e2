"""The documentation's programs run and say what the docs say; the docs show them verbatim."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PROGRAMS = ROOT / "examples" / "docs"
T = 60  # every wait on a subprocess is bounded


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def _run(*args: str, timeout: float = T) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout
    )
    assert p.returncode == 0, f"{args} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def _wf(db: Path, *args: str) -> str:
    return _run("-m", "actors.cli", *args, "--db", str(db)).stdout


class _Lines:
    """A subprocess whose output lines are read with a timeout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float = T) -> str:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no line with {text!r} within {timeout}s; got {self.seen}") from None
            if line is None:
                raise AssertionError(f"the process ended before printing {text!r}; got {self.seen}")
            self.seen.append(line)
            if text in line:
                return line


# -- the tutorial ---------------------------------------------------------------------------------


def test_tutorial_survives_sigkill_and_recovers(tmp_path):
    """The tutorial program, SIGKILLed while it waits, is run again and finishes the same auction."""
    db = tmp_path / "auction.db"
    first = _Lines("-m", "examples.docs.tutorial", str(db), "8")
    first.wait_for("alice bid 100")
    first.wait_for("waiting for the auction to end")
    first.proc.send_signal(signal.SIGKILL)
    assert first.proc.wait(timeout=T) == -signal.SIGKILL

    listed = json.loads(_wf(db, "list", "--json"))
    assert [(w["id"], w["status"]) for w in listed] == [("auction-7", "running")]
    shown = _wf(db, "show", "auction-7")
    assert "waiting   timer 'end' due" in shown and "signal 'bid'" in shown
    _wf(db, "signal", "auction-7", "bid", '{"bidder": "bob", "amount": 150}')

    second = _run("-m", "examples.docs.tutorial", str(db), "8").stdout
    assert "auction-7 is already in" in second
    assert "result: {'winner': 'bob', 'price': 150}" in second
    con = sqlite3.connect(db)
    texts = [t for (t,) in con.execute("SELECT text FROM announcements ORDER BY rowid")]
    con.close()
    assert texts == [
        "auction for item 7 by carol opens at 70",
        "alice bids 100",
        "bob bids 150",
        "item 7 sold to bob for 150",
    ]
    assert "completed" in _wf(db, "show", "auction-7")
