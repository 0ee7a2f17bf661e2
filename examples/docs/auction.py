# examples/docs/auction.py
"""The tutorial's workflow: an auction that takes bids until its deadline."""

from workflows import Event, now, procedure, reducer, select, signal, timer, workflow


@procedure
def get_price(item_id: int) -> int:
    # A side effect that returns a value: in a real game, a query to the item service.
    return 10 * item_id


@reducer
def announce(db, text: str) -> None:
    # Runs inside the step's own SQLite transaction, exactly once.
    db["announcements"].insert({"text": text})


@workflow
async def auction(item_id: int, seller: str, seconds: float) -> dict:
    price = await procedure(get_price, item_id)
    high_bidder = None
    deadline = now() + seconds  # a local like any other: it survives restarts
    reducer(announce, f"auction for item {item_id} by {seller} opens at {price}")
    while True:
        match await select(timer("end", at=deadline), signal("bid"), signal("cancel")):
            case Event("end"):
                reducer(announce, f"item {item_id} sold to {high_bidder} for {price}")
                return {"winner": high_bidder, "price": price}
            case Event("bid", bid):
                if bid["amount"] > price:
                    high_bidder, price = bid["bidder"], bid["amount"]
                    reducer(announce, f"{high_bidder} bids {price}")
            case Event("cancel") if high_bidder is None:
                return {"cancelled": True}
