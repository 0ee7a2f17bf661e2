"""The demo keeps finished workflows one world hour, then deletes them: its file stays bounded."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from examples.demo import RETENTION, run_demo


def test_the_demo_prunes_what_finished_more_than_its_retention_ago(tmp_path):
    """Past a world hour (a few real seconds at x2400), workflows that finished earlier are gone,
    and the ones kept all finished within the retention (give or take a few clock ticks)."""
    db = str(tmp_path / "demo.db")
    run_demo(db, duration=4.0, speed=2400, view=False, scale=0.2)
    now = json.loads(Path(db + ".clock").read_text())["now"]
    con = sqlite3.connect(db)
    try:
        pruned = int(con.execute("SELECT value FROM meta WHERE key = 'pruned_total'").fetchone()[0])
        oldest = con.execute("SELECT min(finished_at) FROM workflows").fetchone()[0]
        kept = con.execute("SELECT count(*) FROM workflows WHERE finished_at IS NOT NULL").fetchone()[0]
    finally:
        con.close()
    assert RETENTION == 3600.0
    assert pruned > 0 and kept > 0
    assert now - oldest <= RETENTION + 600  # a sweep runs every housekeeping round (~120 world s)
