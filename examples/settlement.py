"""A nightly settlement, run as a schedule: every night at 02:00 (Paris time) it totals the
previous day's card payments of a ledger, per merchant, and books one settlement per merchant
and day.

The ledger is the application's own SQLite file (``payments``: id, merchant, amount in cents,
paid_at in epoch seconds), read by a procedure. The settlements are booked by a reducer, in the
step that decides them, into the workflows' database (``settlements``, keyed by day and
merchant): a crash anywhere books each day once. A run knows which day it settles from its tick
(its id is ``nightly-settlement@<tick>``), not from when it happens to start, so a run started
late (after downtime, ``catchup="latest"``) settles the right day.

Run it (Ctrl-C or SIGTERM stops it cleanly)::

    python -m examples.settlement --db bank.db --ledger ledger.db
"""

from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
from typing import Any
from zoneinfo import ZoneInfo

from actors import ActorSystem
from workflows import procedure, reducer, workflow, workflow_id

ZONE = "Europe/Paris"
SCHEDULE_ID = "nightly-settlement"


def settled_day(run_id: str) -> str:
    """The business day a run settles: the day before its tick, in Paris (``YYYY-MM-DD``)."""
    tick = dt.datetime.fromisoformat(run_id.rsplit("@", 1)[1].replace("Z", "+00:00"))
    return (tick.astimezone(ZoneInfo(ZONE)) - dt.timedelta(days=1)).date().isoformat()


@procedure
def day_totals(ledger: str, day: str) -> list[tuple[str, int, int]]:
    """(merchant, payments, cents) of ``day`` (Paris time) in the ledger, by merchant."""
    start = dt.datetime.fromisoformat(day).replace(tzinfo=ZoneInfo(ZONE))
    end = start + dt.timedelta(days=1)
    conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT merchant, count(*), sum(amount) FROM payments "
            "WHERE paid_at >= ? AND paid_at < ? GROUP BY merchant ORDER BY merchant",
            (start.timestamp(), end.timestamp()),
        ).fetchall()
    finally:
        conn.close()
    return [(str(m), int(n), int(c)) for m, n, c in rows]


@reducer
def book(db: Any, day: str, totals: list[tuple[str, int, int]]) -> None:
    db["settlements"].insert_all(
        [{"day": day, "merchant": m, "payments": n, "cents": c} for m, n, c in totals],
        pk=("day", "merchant"),
    )


@workflow
async def settle_day(ledger: str) -> dict[str, int]:
    """Settle the day before this run's tick: total it per merchant and book it."""
    day = settled_day(workflow_id())
    totals = await procedure(day_totals, ledger, day)
    if totals:
        reducer(book, day, totals)
    return {m: c for m, _n, c in totals}


def schedule_settlement(system: ActorSystem, ledger: str) -> None:
    """The schedule, set (or updated) at every start of the application."""
    system.schedule(SCHEDULE_ID, settle_day, ledger, cron="0 2 * * *", timezone=ZONE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="bank.db", help="the workflows' database (default bank.db)")
    parser.add_argument("--ledger", default="ledger.db", help="the ledger's SQLite file")
    args = parser.parse_args(argv)
    with ActorSystem(args.db) as system:
        schedule_settlement(system, args.ledger)
        for s in system.schedules():
            print(
                f"{s.id}: next run {s.next_tick and dt.datetime.fromtimestamp(s.next_tick, dt.UTC)}"
            )
        system.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
