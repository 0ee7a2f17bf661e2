# examples/docs/versioning.py
"""Old instances finish on version 1 while new ones start on version 2.

Run from the root of a checkout:  python -m examples.docs versioning
"""

import tempfile
from pathlib import Path

from actors import ActorSystem
from actors.testing import VirtualClock
from examples.docs import checkout, checkout_v1


def main() -> None:
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "shop.db")
        with ActorSystem(db, clock=clock) as system:
            # Started before the deploy, by the code of that time (version 1).
            system.start(checkout_v1.checkout, ["sword"], id="cart-old")
            system.idle(timeout=10)
        # The deploy: a new process, with version 2 loaded and version 1 kept under its old key.
        with ActorSystem(db, clock=clock) as system:
            system.start(checkout.checkout, ["shield", "potion"], id="cart-new")
            system.idle(timeout=10)
            for info in sorted(system.workflows(), key=lambda i: i.id):
                print(f"{info.id}: {info.type} waits on {info.waiting_on.split(' at ')[0]}")
            system.get("cart-old").signal("pay", 30)
            clock.advance(3600)
            print("cart-old:", system.get("cart-old").result(timeout=10))
            print("cart-new:", system.get("cart-new").result(timeout=10))
