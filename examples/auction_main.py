# examples/auction_main.py
"""Run the README's auctions on game.db: ``python -m examples.auction_main``."""

from actors import ActorSystem, WorkflowNotRunning
from examples.auction import auction, sale

with ActorSystem("game.db") as system:              # embedded: one SQLite file, no server
    lots = system.start(sale, "dave", [3, 4], id="sale-dave")
    ref = system.start(auction, 7, "carol", id="auction-7")
    try:
        ref.signal("bid", {"bidder": "alice", "amount": 100})
    except WorkflowNotRunning:                      # run again after it ended: it is over
        pass
    print("auction-7:", ref.result(timeout=120))
    print("sale-dave:", lots.result(timeout=120))
