"""A process that runs the counters of the upgrade kill test under version 1 or 2 of their code.

Usage: python -m tests.integration.upgrade_worker DB VERSION MODE N
  MODE start: start N counters (version 1 only) and give each the tick 1.
  MODE run:   print "opening", open the database, print "opened", and run until every counter has taken the tick
              it waits in the file for (version 2 moves each onto its code when it loads it).
Both versions register the same key; only the returned dict and a reducer argument differ, so
the move is safe and automatic.
"""

from __future__ import annotations

import sys
import time

from actors import ActorSystem
from workflows import reducer, signal, workflow, workflow_id

from .dbconn import connect

VERSION = int(sys.argv[2]) if __name__ == "__main__" else 1


@reducer
def record_tick(db, wf: str, v: int, version: int) -> None:
    db.execute("INSERT INTO ticks (wf, v, version) VALUES (?, ?, ?)", [wf, v, version])


if VERSION == 1:
    @workflow(name="upgrade_kill:counter")
    async def counter() -> dict:
        total = 0
        while True:
            v = await signal("tick")
            total += v
            reducer(record_tick, workflow_id(), v, 1)
            if v == 0:
                return {"total": total}
else:
    @workflow(name="upgrade_kill:counter")
    async def counter() -> dict:
        total = 0
        while True:
            v = await signal("tick")
            total += v
            reducer(record_tick, workflow_id(), v, 2)
            if v == 0:
                return {"total": total, "version": 2}


def taken(db: str, v: int) -> int:
    with connect(db) as con:
        return int(con.execute("SELECT count(*) FROM ticks WHERE v = ?", (v,)).fetchone()[0])


def main() -> int:
    db, mode, n = sys.argv[1], sys.argv[3], int(sys.argv[4])
    if mode == "run":
        print("opening", flush=True)  # the kill test times its kill from here
    with ActorSystem(db) as system:
        if mode == "start":
            with connect(db) as con:
                con.execute("CREATE TABLE IF NOT EXISTS ticks (wf text, v integer, version integer)")
            refs = [system.start(counter, id=f"c{i}") for i in range(n)]
            system.idle(timeout=120)
            for r in refs:
                r.signal("tick", 1)
            system.idle(timeout=120)
            print(counter.fingerprint, flush=True)
            return 0
        print("opened", counter.fingerprint, flush=True)
        want = int(sys.argv[5])
        deadline = time.monotonic() + 240
        while taken(db, want) < n:
            if time.monotonic() > deadline:
                print(f"only {taken(db, want)} of {n} took tick {want}", file=sys.stderr)
                return 1
            system.idle(timeout=5)
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
