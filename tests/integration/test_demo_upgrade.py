"""The demo across a deploy: change the patrols' wait, restart the demo on the same file, and the
patrols carry on under the new code (each moved onto it once, shown as it happens), none held."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OLD_WAIT = 'await timer("wait", 3)'
NEW_WAIT = 'await timer("wait", 1)'


def _demo(app: Path, db: Path, seconds: float = 3) -> subprocess.CompletedProcess[str]:
    # The application's copy of the examples comes first on the path (the current directory).
    return subprocess.run(
        [sys.executable, "-m", "examples.demo", "--db", str(db), "--duration", str(seconds), "--no-view",
         "--scale", "0.2"],
        cwd=app, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=240,
    )


def _patrols(db: Path) -> dict[str, tuple[str, str, int]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT id, status, fingerprint, step_seq FROM workflows WHERE type = 'examples.combat:patrol'"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def test_patrols_carry_on_under_the_changed_code_after_a_restart(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(ROOT / "examples", app / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    db = tmp_path / "demo.db"
    first = _demo(app, db)
    assert first.returncode == 0, first.stderr[-3000:]
    before = _patrols(db)
    assert before and all(st == "running" for st, _, _ in before.values())
    assert len({fp for _, fp, _ in before.values()}) == 1

    combat = app / "examples" / "combat.py"
    source = combat.read_text()
    assert source.count(OLD_WAIT) == 1
    combat.write_text(source.replace(OLD_WAIT, NEW_WAIT))  # the deploy: patrols wait 1 s, not 3

    # Long enough for every patrol to step twice after it moved on a machine busy with other
    # suites (the moves come first, then each patrol's next timer).
    second = _demo(app, db, 8)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "workflow_version_mismatch" not in second.stderr and "BLOCKED" not in second.stdout
    after = _patrols(db)
    old_fp = next(iter(before.values()))[1]
    new_fps = {fp for _, fp, _ in after.values()}
    assert len(new_fps) == 1 and old_fp not in new_fps  # every patrol runs the new code
    for wid, (status, _, seq) in after.items():
        assert status == "running"
        assert seq > before[wid][2] + 1, f"{wid} did not step after it was moved"
    # Shown as it happens: one line per patrol moved, with both fingerprints.
    shown = [line for line in second.stdout.splitlines() if " upgraded " in line and " patrol " in line]
    assert sorted(line.split()[3] for line in shown) == sorted(after)
    assert all(f"code {old_fp[:12]} -> {next(iter(new_fps))[:12]}" in line for line in shown)
    assert f"({len(after)} moved onto new code)" in second.stdout
    con = sqlite3.connect(db)
    try:
        n = con.execute("SELECT count(*) FROM history WHERE event = 'upgraded'").fetchone()[0]
        blocked = con.execute("SELECT count(*) FROM history WHERE event = 'version_mismatch'").fetchone()[0]
    finally:
        con.close()
    assert n == len(after) and blocked == 0
