"""The README's example is the code in examples/, and it runs as the README says, twice."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
T = 60  # every wait on a subprocess is bounded
_BLOCK = re.compile(r"```python\n(# (examples/[\w/]+\.py)\n.*?)```", re.S)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


def test_readme_blocks_are_the_example_files():
    """Each ```python block of the README names a file of examples/ in its first line and is that
    file byte for byte, so the code a reader copies is the code the next test runs."""
    readme = (ROOT / "README.md").read_text()
    blocks = _BLOCK.findall(readme)
    assert [path for _, path in blocks] == ["examples/auction.py", "examples/auction_main.py"]
    assert readme.count("```python") == len(blocks), "a ```python block of the README names no file"
    for text, path in blocks:
        assert text == (ROOT / path).read_text(), f"README.md shows an outdated {path}; paste the file again"


def _fire_ends(db: Path, ids: list[str], proc: subprocess.Popen[str]) -> None:
    """Fire each auction's deadline through the CLI as soon as the running program has armed it."""
    deadline = time.monotonic() + T
    pending = list(ids)
    while pending:
        assert proc.poll() is None, f"the program ended before its auctions did: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no timer 'end' armed on {pending} within {T}s"
        fired = subprocess.run(
            [sys.executable, "-m", "actors.cli", "fire-timer", pending[0], "end", "--db", str(db)],
            cwd=db.parent, env=_env(), capture_output=True, text=True, timeout=T,
        )
        if fired.returncode == 0:
            pending.pop(0)
        else:
            time.sleep(0.1)  # not armed yet: the program is still starting its workflows


def _run(cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "examples.auction_main"], cwd=cwd, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_readme_program_runs_and_runs_again(tmp_path):
    """Run as the README says (its deadlines fired from another process with `wf fire-timer`, as
    the README shows), the program prints both results; run again after it finished, it prints
    the same results from the file, with no traceback and no new workflow."""
    db = tmp_path / "game.db"
    first = _run(tmp_path)
    _fire_ends(db, ["auction-7", "auction-3", "auction-4"], first)
    out, err = first.communicate(timeout=T)
    assert first.returncode == 0, f"exited {first.returncode}:\n{out}\n{err}"
    assert out.splitlines() == [
        "auction-7: {'winner': 'alice', 'price': 100}",
        "sale-dave: [{'winner': None, 'price': 30}, {'winner': None, 'price': 40}]",
    ]
    con = sqlite3.connect(db)
    rows = sorted(con.execute("SELECT id, type, status FROM workflows"))
    con.close()
    assert rows == [
        ("auction-3", "examples.auction:auction", "completed"),
        ("auction-4", "examples.auction:auction", "completed"),
        ("auction-7", "examples.auction:auction", "completed"),
        ("sale-dave", "examples.auction:sale", "completed"),
    ]

    second = _run(tmp_path)
    out2, err2 = second.communicate(timeout=T)
    assert second.returncode == 0, f"the second run exited {second.returncode}:\n{out2}\n{err2}"
    assert "Traceback" not in err2
    assert out2 == out
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM workflows").fetchone() == (4,)
    con.close()
