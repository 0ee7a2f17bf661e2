"""A process that runs the mixed workload until done; the kill test SIGKILLs it at random.

Usage: python -m tests.integration.crash_worker DB WORKFLOWS ROUNDS ACKFILE
Every signal whose send() returned is written to ACKFILE right after, so the test knows what was
acknowledged (a line in the page cache survives SIGKILL).
"""

from __future__ import annotations

import sqlite3
import sys
import time

from actors import ActorSystem

from .crash_flows import mixed


def delivered_ticks(db: str, wid: str) -> int:
    # One snapshot: the recovered workflows run meanwhile, and a step moves a tick from the inbox
    # to the rounds table atomically; two separate reads could miss it and send it again.
    con = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        con.execute("BEGIN")
        done = con.execute("SELECT count(*) FROM rounds WHERE wf = ?", (wid,)).fetchone()[0]
        buffered = con.execute(
            "SELECT count(*) FROM inbox WHERE workflow_id = ? AND kind = 'signal' AND name = 'tick'", (wid,)
        ).fetchone()[0]
        con.execute("COMMIT")
        return done + buffered
    finally:
        con.close()


def main() -> int:
    db, n, rounds, ackfile = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    with ActorSystem(db, procedure_workers=4) as system:
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE IF NOT EXISTS rounds (wf TEXT, r INTEGER, x INTEGER)")
        con.execute("CREATE TABLE IF NOT EXISTS kids (wf TEXT, i INTEGER, r INTEGER)")
        con.execute("CREATE TABLE IF NOT EXISTS orders (wf TEXT, r INTEGER, tag TEXT)")
        con.execute("CREATE TABLE IF NOT EXISTS lates (wf TEXT, r INTEGER, late REAL)")
        con.commit()
        con.close()
        refs = [system.start(mixed, i, rounds, id=f"m{i}") for i in range(n)]
        sent = {r.id: delivered_ticks(db, r.id) for r in refs}
        with open(ackfile, "a") as acks:
            progress = True
            while progress:
                progress = False
                for ref in refs:
                    k = sent[ref.id]
                    if k < rounds:
                        ref.signal("tick", k)
                        acks.write(f"{ref.id} {k}\n")
                        acks.flush()
                        sent[ref.id] = k + 1
                        progress = True
                time.sleep(0.005)
        for ref in refs:
            ref.result(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
