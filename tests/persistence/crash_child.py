"""The process the crash test kills: steps and inbox appends under load, acking each on a file.

Usage: python crash_child.py DB ACKS SEED

Acks are appended to ACKS (one ``os.write`` per line, after the write's future resolved, i.e.
after COMMIT returned) so that everything acknowledged can be checked against the file after a
SIGKILL at any moment:

    A <wid> <inbox seq>                    a signal appended by append_inbox
    D <wid> <inbox seq>                    a signal delivered by a step (OutSignal)
    S <wid> <step_seq> <consumed seq>      a committed step
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time

from persistence import (
    SIGNAL,
    InboxFull,
    NewTimer,
    OutSignal,
    ReducerFailed,
    StepWrite,
    dumps,
    open_store,
)

WORKFLOWS = [f"w{i}" for i in range(4)]


def main() -> None:
    """Open the store and write until killed."""
    db, acks, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    store = open_store(db)
    print("ready", flush=True)

    def ack(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    def appender(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        while True:
            wid = rng.choice(WORKFLOWS)
            try:
                d = store.append_inbox(wid, SIGNAL, "go", dumps(rng.random()), at=time.time())
            except InboxFull:
                time.sleep(0.01)
                continue
            ack(f"A {wid} {d.seq}")
            time.sleep(rng.uniform(0, 0.002))

    def stepper(wid: str) -> None:
        rng = random.Random(f"{seed}-{wid}")
        while True:
            rec = store.load_workflow(wid)
            inbox = store.inbox(wid)
            if not inbox:
                time.sleep(0.001)
                continue
            msg = inbox[0]
            n = rec.step_seq + 1
            other = rng.choice(WORKFLOWS)

            def effect(db, wid=wid, n=n, seq=msg.seq) -> None:
                db["app"].insert({"wid": wid, "n": n, "inbox_seq": seq, "poison": 0})

            def poison(db, wid=wid, n=n, seq=msg.seq) -> None:
                db["app"].insert({"wid": wid, "n": n, "inbox_seq": seq, "poison": 1})
                raise RuntimeError("poisoned reducer")

            base = dict(
                workflow_id=wid, step_seq=n, continuation=dumps({"n": n}), updated_at=time.time(),
                consume_inbox=[msg.seq], wait_signals=("go",), history=[("step", f'{{"n": {n}}}')],
                new_timers=[NewTimer("t", time.time() + 3600)],
                cancel_timers=[t.id for t in store.timers(wid)],
            )
            if n % 7 == 3:
                # A step whose reducer raises must leave no trace; the same step then succeeds.
                try:
                    store.commit_step(StepWrite(**base, reducers=[effect, poison]), timeout=60)
                    raise AssertionError("a poisoned step committed")
                except ReducerFailed:
                    pass
            signals = [OutSignal(other, "go", dumps(n))] if rng.random() < 0.3 else []
            ackd = store.commit_step(StepWrite(**base, reducers=[effect], signals=signals),
                                     timeout=60)
            ack(f"S {wid} {n} {msg.seq}")
            for d in ackd.delivered:
                ack(f"D {d.workflow_id} {d.seq}")

    threads = [threading.Thread(target=appender, args=(i,), daemon=True) for i in range(2)]
    threads += [threading.Thread(target=stepper, args=(w,), daemon=True) for w in WORKFLOWS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
