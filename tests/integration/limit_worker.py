"""The process of the limit SIGKILL test: 100 workflows each call a procedure limited to 3 at
once (``tests.actors.limit_flows.three_at_once``), started by id (a restart starts nothing new),
then it serves until killed or told to stop.

Usage: python -m tests.integration.limit_worker DB READYFILE
"""

from __future__ import annotations

import os
import sys

from actors import ActorSystem
from tests.actors.limit_flows import call_three

CALLS = 100


def main() -> int:
    db, readyfile = sys.argv[1:3]
    with ActorSystem(db, node_id="limit-worker", node_ttl=2.0, procedure_workers=8) as system:
        system.start_many(
            call_three, [(n,) for n in range(CALLS)], ids=[f"lim-{n}" for n in range(CALLS)]
        )
        tmp = readyfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, readyfile)
        system.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
