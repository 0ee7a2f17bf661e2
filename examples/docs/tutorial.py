# examples/docs/tutorial.py
"""Run the tutorial's auction; kill it with kill -9 at any point and run it again.

Usage, from the root of a checkout:  python -m examples.docs.tutorial [DB] [SECONDS]
"""

import logging
import os
import sys

from actors import ActorSystem, UnknownWorkflow
from examples.docs.auction import auction


def main(db: str = "auction.db", seconds: float = 60.0) -> None:
    # The runtime logs through the standard library's logging: show its lifecycle events.
    logging.basicConfig(format="%(message)s")
    logging.getLogger("actorflow").setLevel(logging.INFO)
    with ActorSystem(db) as system:  # opening the file recovers every unfinished workflow
        try:
            ref = system.get("auction-7")
            print(f"auction-7 is already in {db}: {ref.status()}")
        except UnknownWorkflow:
            ref = system.start(auction, 7, "carol", seconds, id="auction-7")
            ref.signal("bid", {"bidder": "alice", "amount": 100})
            print(f"auction-7 started in {db}; alice bid 100")
        system.idle(timeout=30)  # let it take the steps it can take now: the price, the bid
        print(f"waiting for the auction to end (pid {os.getpid()})", flush=True)
        print("result:", ref.result(timeout=seconds + 60))
        rows = system.workflows()
        print("workflows in the file:", [(info.id, str(info.status)) for info in rows])


if __name__ == "__main__":
    main(*sys.argv[1:2], *map(float, sys.argv[2:3]))
