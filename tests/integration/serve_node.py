"""A node process that runs ``system.serve()`` (the shutdown test sends it SIGTERM).

Usage: python -m tests.integration.serve_node URL NODE_ID READYFILE TTL

Opens ``ActorSystem(URL, node_id=NODE_ID, node_ttl=TTL)``, writes READYFILE once it is open, and
serves until SIGTERM or SIGINT; exits 0 after a clean shutdown.
"""

from __future__ import annotations

import logging
import os
import sys

from actors import ActorSystem

from . import ops_flows  # noqa: F401  (its workflows are the ones it runs)


def main() -> int:
    url, node_id, readyfile, ttl = sys.argv[1:5]
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(message)s")
    with ActorSystem(url, node_id=node_id, node_ttl=float(ttl), procedure_workers=2) as system:
        tmp = readyfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, readyfile)
        system.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
