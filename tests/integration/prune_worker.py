"""A process that prunes a file's old finished workflows while others run; the prune kill test
SIGKILLs it mid-prune.

Usage: python -m tests.integration.prune_worker DB
The file holds workflows that finished at virtual time 1000 (to prune), others that finished at
2000 (to keep) and running ones (see ``populate``). The worker prunes what finished before 1500 in
small batches, while the running workflows take signals, and prints ``pruning`` once it starts.
"""

from __future__ import annotations

import sys
import threading

from actors import ActorSystem, _retention
from actors.testing import VirtualClock
from workflows import signal, workflow

RUNNING = 10
START = 1000.0
KEEP_AT = 2000.0


@workflow
async def finishes(x: int) -> int:
    return x


@workflow
async def waiter() -> int:
    total = 0
    while True:
        total += await signal("inc")
        if total < 0:
            return total


def populate(db: str, old: int, keep: int) -> None:
    """``old`` workflows finished at 1000, ``keep`` finished at 2000, ``RUNNING`` still running."""
    clock = VirtualClock(start=START)
    with ActorSystem(db, clock=clock, retention=None) as system:
        system.start_many(finishes, [(i,) for i in range(old)], ids=[f"old-{i}" for i in range(old)])
        system.idle(timeout=120)
        clock.set(KEEP_AT)
        system.start_many(finishes, [(i,) for i in range(keep)], ids=[f"keep-{i}" for i in range(keep)])
        for i in range(RUNNING):
            system.start(waiter, id=f"run-{i}")
        system.idle(timeout=120)


def main(db: str) -> int:
    # Small batches, kept small: many transactions for a kill to land between or inside.
    _retention.MIN_BATCH = _retention.MAX_BATCH = 5
    with ActorSystem(db, clock=VirtualClock(start=KEEP_AT + 1), retention=None) as system:
        system._retention.batch = 5
        stop = threading.Event()

        def drive() -> None:
            refs = [system.get(f"run-{i}") for i in range(RUNNING)]
            while not stop.is_set():
                for r in refs:
                    r.signal("inc", 1)

        t = threading.Thread(target=drive, daemon=True)
        t.start()
        print("pruning", flush=True)
        n = system.prune(older_than=KEEP_AT + 1 - 1500.0)
        stop.set()
        t.join(30)
        print(f"pruned {n}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
