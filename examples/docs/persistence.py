# examples/docs/persistence.py
"""One owner per file, the wf CLI beside it, idempotency keys, durability.

Run from the root of a checkout:  python -m examples.docs persistence
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from actors import ActorSystem
from persistence import DatabaseLocked
from workflows import idempotency_key, procedure, signal, workflow


@procedure
def ship(order_id: str) -> str:
    # At least once: after a crash this may run again, with the same key. A real shipping
    # service would be called with the key as its request id, so a repeat is a no-op there.
    return f"shipment for {order_id} (request id {idempotency_key()})"


@workflow
async def order(order_id: str) -> str:
    address = await signal("address")
    receipt = await procedure(ship, order_id)
    return f"{receipt} to {address}"


def wf(*args: str) -> str:
    """Run the wf command line in another process, as an operator would."""
    cmd = [sys.executable, "-m", "actors.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "shop.db")
        # durability="full" fsyncs every group commit: it survives a power loss too.
        with ActorSystem(db, durability="full") as system:
            ref = system.start(order, "o-1", id="order-1")
            system.idle(timeout=10)

            try:
                ActorSystem(db)  # a second owner, in this process or any other
            except DatabaseLocked as e:
                print(f"second owner refused: {type(e).__name__} (the owner is us: {e.pid == os.getpid()})")

            listed = json.loads(wf("list", "--json", "--db", db))
            print("wf list while the owner runs:", [(w["id"], w["status"]) for w in listed])
            print(wf("signal", "order-1", "address", '"12 Quay Street"', "--db", db).split(":")[0])
            print("result:", ref.result(timeout=30))
