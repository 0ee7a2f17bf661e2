"""A system opened again on the same database continues where the last one was.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import pytest

from actors import ActorSystem

from . import flows
from .runtime_support import (
    T,
    connect,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_recovery_continues_where_it_was(db, clock):
    """Closing the system and opening the file again continues every workflow: locals and
    buffered signals intact, timers due during the downtime fire at recovery."""
    with ActorSystem(db, clock=clock) as s1:
        c = s1.start(flows.collect, 3, id="c")
        c.signal("item", "a")
        s1.idle(timeout=T)
        s1.start(flows.sleeper, 50, id="s")
        s1.idle(timeout=T)
    clock.advance(100)  # the sleeper's timer falls due while nothing runs
    with ActorSystem(db, clock=clock) as s2:
        assert s2.recovered["running"] == 2
        c = s2.get("c")
        c.signal("item", "b")
        c.signal("item", "c")
        assert c.result(timeout=T) == ["a", "b", "c"]
        s2.idle(timeout=T)
        assert s2.get("s").result(timeout=T) == 100


def test_timer_rows_are_matched_to_their_arms_by_what_they_say(db, clock):
    """At recovery each timer row goes to the arm it was armed for (its name and due time), not
    to the arm at its place in id order: a row armed again with a later id still fires its own."""
    with ActorSystem(db, clock=clock) as s1:
        s1.start(flows.two_timers, id="tt")
        s1.idle(timeout=T)
    con = connect(db)
    (due,) = con.execute("SELECT due_at FROM timers WHERE workflow_id = ? AND name = ?", ("tt", "short")).fetchone()
    con.execute("DELETE FROM timers WHERE workflow_id = ? AND name = ?", ("tt", "short"))
    con.execute("INSERT INTO timers (workflow_id, name, due_at) VALUES (?, ?, ?)", ("tt", "short", due))
    con.commit()
    ids = [r[0] for r in con.execute("SELECT name FROM timers WHERE workflow_id = ? ORDER BY id", ("tt",)).fetchall()]
    con.close()
    assert ids == ["long", "short"]
    clock.advance(10)  # only the short timer is due
    with ActorSystem(db, clock=clock) as s2:
        assert s2.get("tt").result(timeout=T) == "short"
