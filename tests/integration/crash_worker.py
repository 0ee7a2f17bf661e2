"""A process that runs the mixed workload until done; the kill test SIGKILLs it at random.

Usage: python -m tests.integration.crash_worker DB WORKFLOWS ROUNDS ACKFILE
Every signal whose send() returned is written to ACKFILE right after, and every broadcast whose
broadcast() returned to ACKFILE.bells, so the test knows what was acknowledged (a line in the page
cache survives SIGKILL).
"""

from __future__ import annotations

import sqlite3
import sys
import time

from actors import ActorSystem, Status

from .crash_flows import LISTENERS, listener, mixed


# Broadcasts per listener's group, for ROUNDS rounds.
def bells_for(rounds: int) -> int:
    return rounds // 5


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


def delivered_bells(db: str, group: int) -> int:
    """Broadcasts to ``group`` that its listener has recorded or buffered (one snapshot)."""
    con = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        con.execute("BEGIN")
        done = con.execute("SELECT count(*) FROM heard WHERE wf = ? AND kind = 'bell'", (f"l{group}",)).fetchone()[0]
        buffered = con.execute(
            "SELECT count(*) FROM inbox WHERE workflow_id = ? AND kind = 'signal' AND name = 'bell'", (f"l{group}",)
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
        con.execute("CREATE TABLE IF NOT EXISTS heard (wf TEXT, kind TEXT, a INTEGER, b INTEGER)")
        con.commit()
        con.close()
        listeners = [system.start(listener, g, id=f"l{g}") for g in range(LISTENERS)]
        refs = [system.start(mixed, i, rounds, id=f"m{i}") for i in range(n)]
        sent = {r.id: delivered_ticks(db, r.id) for r in refs}
        bells = [delivered_bells(db, g) for g in range(LISTENERS)]
        with open(ackfile, "a") as acks, open(ackfile + ".bells", "a") as bell_acks:
            progress = True
            while progress:
                progress = False
                for g in range(LISTENERS):
                    if bells[g] < bells_for(rounds):
                        assert system.broadcast("bell", g, bells[g]) == 1, f"listener l{g} is not subscribed"
                        bell_acks.write(f"{g} {bells[g]}\n")
                        bell_acks.flush()
                        bells[g] += 1
                        progress = True
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
        # Every note and bell is durable in the listeners' inboxes (or consumed): stop them.
        for ref in listeners:
            if ref.status() is Status.RUNNING:
                ref.signal("stop")
        for ref in listeners:
            ref.result(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
