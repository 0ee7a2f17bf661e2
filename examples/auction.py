# examples/auction.py
"""The README's workflows: an auction with one deadline, and a sale of several lots at once."""

from workflows import (
    Event,
    gather,
    now,
    procedure,
    publish,
    reducer,
    select,
    signal,
    spawn,
    timer,
    workflow,
)


@procedure
def get_price(item_id: int) -> int:                 # a side effect that returns a value
    return 10 * item_id                             # (in a game: ask the item service)


@reducer
def announce(db, text: str) -> None:                # a side effect with no return value,
    db["announcements"].insert({"text": text})      # run in the step's own SQLite transaction


@workflow
async def auction(item_id: int, seller: str) -> dict:
    price = await procedure(get_price, item_id)     # suspends until the procedure replies
    high_bidder = None
    reducer(announce, f"auction for {item_id} opens at {price}")
    closes_at = now() + 60                          # one deadline for the whole auction
    publish("state", {"price": price, "high_bidder": high_bidder})  # ref.published("state")
    while True:
        match await select(timer("end", at=closes_at), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": high_bidder, "price": price}
            case Event("bid", bid):
                if bid["amount"] > price:
                    high_bidder, price = bid["bidder"], bid["amount"]
                    publish("state", {"price": price, "high_bidder": high_bidder})
            case Event("cancel") if high_bidder is None:
                return {"cancelled": True}


@workflow
async def sale(seller: str, item_ids: list[int]) -> list[dict]:
    # One child workflow per lot, all running at once; their results in the order of the lots.
    return await gather(*[spawn(auction, i, seller, id=f"auction-{i}") for i in item_ids])
