"""The nightly settlement example: a schedule at 02:00 Paris time settles the day before, per
merchant, once per day, across a restart; each run settles the day of its tick."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from actors import ActorSystem, Status
from actors.testing import VirtualClock
from examples.settlement import SCHEDULE_ID, schedule_settlement, settled_day

T = 30.0
PARIS = ZoneInfo("Europe/Paris")
START = dt.datetime(2024, 3, 1, 12, 0, tzinfo=PARIS).timestamp()  # Friday noon, Paris


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "bank.db")


def ledger(tmp_path: Path) -> str:
    path = str(tmp_path / "ledger.db")
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE payments (id INTEGER PRIMARY KEY, merchant TEXT, amount INTEGER, paid_at REAL)"
    )
    pay = [
        ("bakery", 350, dt.datetime(2024, 3, 1, 8, 0, tzinfo=PARIS)),
        ("bakery", 420, dt.datetime(2024, 3, 1, 23, 59, tzinfo=PARIS)),
        ("books", 1999, dt.datetime(2024, 3, 1, 15, 0, tzinfo=PARIS)),
        ("bakery", 100, dt.datetime(2024, 3, 2, 0, 0, tzinfo=PARIS)),  # the next day
        ("books", 500, dt.datetime(2024, 3, 3, 10, 0, tzinfo=PARIS)),
    ]
    conn.executemany(
        "INSERT INTO payments (merchant, amount, paid_at) VALUES (?, ?, ?)",
        [(m, a, t.timestamp()) for m, a, t in pay],
    )
    conn.commit()
    conn.close()
    return path


def test_each_night_settles_the_day_before_once(db: str, tmp_path: Path) -> None:
    clock = VirtualClock(START)
    book = ledger(tmp_path)
    with ActorSystem(db, clock=clock) as system:
        schedule_settlement(system, book)
        clock.advance(24 * 3600)  # past 02:00 on the 2nd: the 1st is settled
        system.idle(T)
    with ActorSystem(db, clock=clock) as system:  # a restart: the schedule was stored
        schedule_settlement(system, book)  # set again at start, as the example does
        for _ in range(2):
            clock.advance(24 * 3600)
            system.idle(T)
        runs = sorted(i.id for i in system.workflows() if i.id.startswith(SCHEDULE_ID + "@"))
        # 02:00 in Paris is 01:00 UTC before the end of March.
        assert runs == [f"{SCHEDULE_ID}@2024-03-0{d}T01:00:00Z" for d in (2, 3, 4)]
        assert [settled_day(r) for r in runs] == ["2024-03-01", "2024-03-02", "2024-03-03"]
        for r in runs:  # each run started by its tick ends (idle() may return as the last starts)
            system.get(r).result(timeout=T)
        assert all(system.get(r).status() is Status.COMPLETED for r in runs)
        assert system.get(runs[0]).result(timeout=T) == {"bakery": 770, "books": 1999}
        booked = system._rt.store.read_table(
            "SELECT day, merchant, payments, cents FROM settlements ORDER BY day, merchant"
        )
        assert [tuple(r.values()) for r in booked] == [
            ("2024-03-01", "bakery", 2, 770),
            ("2024-03-01", "books", 1, 1999),
            ("2024-03-02", "bakery", 1, 100),
            ("2024-03-03", "books", 1, 500),
        ]
        assert (
            system.get(runs[0]).info().scheduled_at
            == dt.datetime(2024, 3, 2, 2, 0, tzinfo=PARIS).timestamp()
        )
