"""The process of the schedule SIGKILL test: it schedules ``beat`` (every 0.25 s, every tick
caught up after downtime) as an application does at each start, and serves until killed.

Usage: python -m tests.integration.schedule_worker DB READYFILE
"""

from __future__ import annotations

import os
import sys

from actors import ActorSystem

from .ops_flows import beat

EVERY = 0.25


def main() -> int:
    db, readyfile = sys.argv[1:3]
    with ActorSystem(db, node_id="sched-worker", node_ttl=2.0) as system:
        system.schedule("beat", beat, every=EVERY, overlap="allow", catchup="all")
        tmp = readyfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, readyfile)
        system.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
