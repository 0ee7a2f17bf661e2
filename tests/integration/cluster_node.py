"""One node of the cluster kill test, which SIGKILLs, freezes and cuts it off at random.

Usage: python -m tests.integration.cluster_node URL NODE_ID PORTFILE LOGFILE TTL [GOFILE]

Runs ``ActorSystem(URL, node_id=NODE_ID, node_ttl=TTL)`` and serves the driver on a localhost TCP
port (written to PORTFILE once the system is open): one JSON request per line, ``{"op": "start" |
"signal" | "broadcast" | "cancel", ...}`` (the
kill test's workflows and the demo world's setup, auctions, trades and buffs), answered ``{"ok": true, ...}`` once the call returned
(what it asked for is durable) or ``{"ok": false, "error": "..."}``. Its warnings go to LOGFILE
(``step_fenced`` among them). SIGTERM shuts it down, handing its shards off.

With GOFILE the process waits, its imports done, until that file exists before it opens the system:
the kill test starts a killed node's successor at once and lets it go once the failover was
measured, so that a restart costs the system's opening and not the interpreter's start as well.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socketserver
import sys
import threading
import time
from typing import Any

from actors import ActorSystem
from examples import world
from examples.buffs import buff
from examples.economy import auction, trade

from .cluster_flows import waiter, worker
from .crash_flows import listener

FLOWS = {"worker": worker, "listener": listener, "waiter": waiter,
         # The demo world's money workflows, whose procedures read the world through the same URL.
         "setup_world": world.setup_world, "auction": auction, "trade": trade, "buff": buff}


def serve(system: ActorSystem, portfile: str) -> socketserver.ThreadingTCPServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                req = json.loads(line)
                try:
                    reply: dict[str, Any] = {"ok": True, "value": run(system, req)}
                except Exception as e:  # the driver records it as not acknowledged
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                self.wfile.write((json.dumps(reply) + "\n").encode())
                self.wfile.flush()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, portfile)
    return server


def run(system: ActorSystem, req: dict[str, Any]) -> Any:
    op = req["op"]
    if op == "start":
        return system.start(FLOWS[req["wf"]], *req.get("args", []), id=req["id"]).id
    if op == "signal":
        system.get(req["id"]).signal(req["name"], req.get("payload"))
        return None
    if op == "broadcast":
        return system.broadcast(req["name"], req["filter"], req.get("payload"))
    if op == "cancel":
        system.get(req["id"]).cancel(req.get("reason"))
        return None
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    url, node_id, portfile, logfile, ttl = sys.argv[1:6]
    if len(sys.argv) > 6:
        deadline = time.monotonic() + 600
        while not os.path.exists(sys.argv[6]):
            if time.monotonic() > deadline:
                print(f"node {node_id}: no go ({sys.argv[6]}) within 600 s", file=sys.stderr)
                return 1
            time.sleep(0.01)
    logging.basicConfig(filename=logfile, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    world.use_database(url)  # before the system opens: recovery may run the world's procedures
    with ActorSystem(url, node_id=node_id, node_ttl=float(ttl), procedure_workers=4) as system:
        server = serve(system, portfile)
        stop.wait()
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
