"""select(): the first arm wins and the losers are disarmed.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import pytest

from . import flows
from .runtime_support import (
    T,
    connect,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_select_disarms_losing_timer(system, db):
    """When a select is won by a signal, its timer is cancelled (deleted), not left to fire."""
    ref = system.start(flows.auction, 10)
    system.idle(timeout=T)
    ref.signal("cancel")
    assert ref.result(timeout=T) == {"cancelled": True}
    con = connect(db)
    assert con.execute("SELECT count(*) FROM timers").fetchone()[0] == 0
    con.close()


def test_select_procedure_beats_timer(system):
    """A procedure arm of a select wins over a later timer and names itself in the Event."""
    ref = system.start(flows.select_proc_vs_timer, 21)
    assert ref.result(timeout=T) == "procedure:double:42"
