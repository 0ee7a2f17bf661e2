"""The demo keeps finished workflows one world hour, then deletes them: its database stays bounded
(on a SQLite file and on PostgreSQL)."""

from __future__ import annotations

import json

from examples.demo import RETENTION, run_demo
from tests.integration.conftest import DemoDb


def test_the_demo_prunes_what_finished_more_than_its_retention_ago(demo_db: DemoDb):
    """Past a world hour (a few real seconds at x2400), workflows that finished earlier are gone,
    and the ones kept all finished within the retention (give or take a few clock ticks)."""
    speed = 2400
    run_demo(demo_db.db, clock_path=demo_db.clock, duration=5.0, speed=speed, view=False, scale=0.2)
    now = json.loads(demo_db.clock.read_text())["now"]
    pruned = demo_db.pruned_total()
    finished = [r.finished_at for r in demo_db.workflows().values() if r.finished_at is not None]
    assert RETENTION == 3600.0
    assert pruned > 0 and finished
    # A sweep runs every housekeeping round (50 ms: 120 world s), late by as much as the machine
    # is busy: a real second's lag is allowed (2,400 world s). Never swept, the first workflows
    # to finish (40 world minutes in) would be over an hour and a half past the retention by now.
    assert now - min(finished) <= RETENTION + speed * 1.0
