"""The economy: production lines, auctions and player-to-player trades.

Gold and items only move through reducers, inside the step that decides the move, so a crash at
any point leaves every coin and every item in exactly one place. Bids are backed by escrow
(``hold_gold``) so a winner can always pay, and items on offer are locked so they cannot be sold
twice.
"""

from __future__ import annotations

from workflows import (
    Cancelled,
    Event,
    now,
    procedure,
    publish,
    reducer,
    select,
    signal,
    timer,
    workflow,
    workflow_id,
)

from .world import (
    BLUEPRINTS,
    announce,
    announce_bid,
    check_inputs,
    close_auction,
    close_ui,
    consume_inputs,
    deposit_outputs,
    gold_held,
    hold_gold,
    items_locked_by,
    lock_items,
    notify_player,
    open_auction,
    pay_hold,
    release_hold,
    set_machine,
    show_ui,
    transfer_items,
    unlock_items,
)


@workflow
async def production(entity_id: str, blueprint: str) -> dict:
    """Run a production line: turn inputs into outputs, one timed cycle at a time.

    ``inventory_changed`` (someone delivered inputs) starts production, which runs for as long as
    the inputs last. ``halt`` (with a reason) pauses until ``resume``; ``stop`` ends the workflow.
    A cycle in progress always completes: halt and stop wait in the inbox until it has.
    """
    cycle_time = BLUEPRINTS[blueprint]["cycle_time"]
    cycles = 0
    reducer(set_machine, entity_id, blueprint, "idle", cycles)
    while True:
        match await select(signal("inventory_changed"), signal("halt"), signal("stop")):
            case Event("halt", reason):
                reducer(set_machine, entity_id, blueprint, f"halted: {reason}", cycles)
                await signal("resume")
            case Event("stop"):
                reducer(set_machine, entity_id, blueprint, "stopped", cycles)
                return {"cycles": cycles}

        while await procedure(check_inputs, entity_id, blueprint):
            reducer(consume_inputs, entity_id, blueprint)
            reducer(set_machine, entity_id, blueprint, "working", cycles)
            await timer("cycle_complete", cycle_time)
            reducer(deposit_outputs, entity_id, blueprint)
            cycles += 1
        reducer(set_machine, entity_id, blueprint, "idle", cycles)


@workflow
async def auction(item_id: str, seller: str, starting_price: int, duration_secs: float = 60) -> dict:
    """Sell ``item_id`` to the highest bidder when the auction ends.

    Signals: ``bid`` with ``{"bidder": ..., "amount": ...}``, and ``cancel`` (honoured only while
    there are no bids). The end is a real deadline (``timer("end", at=...)``), not a timer that
    restarts with every bid; a bid in the last 10 seconds pushes it back to 10 seconds from now,
    so nobody wins by sniping. Returns ``{"outcome", "winner", "price"}``.
    """
    me = workflow_id()
    price = starting_price
    high_bidder = None
    high_hold = None
    bids = 0
    ends_at = now() + duration_secs

    reducer(open_auction, me, seller, item_id, price, ends_at)
    # What a client reads of the auction now (ref.published("bid"), the demo's live view).
    publish("bid", {"item": item_id, "price": price, "high_bidder": None, "ends_at": ends_at})
    # The reducer locked the item only if the seller had it free; ask what it decided.
    if await procedure(items_locked_by, me) != [item_id]:
        reducer(close_auction, me, "unavailable")
        return {"outcome": "unavailable", "winner": None, "price": None}

    try:
        while True:
            match await select(timer("end", at=ends_at), signal("bid"), signal("cancel")):
                case Event("end"):
                    if high_bidder is None:
                        reducer(close_auction, me, "unsold")
                        return {"outcome": "no_bids", "winner": None, "price": None}
                    reducer(pay_hold, high_hold, seller)
                    reducer(transfer_items, me, seller, high_bidder, [item_id])
                    reducer(close_auction, me, "sold")
                    reducer(announce, f"Auction {me}: sold to {high_bidder} for {price}")
                    return {"outcome": "sold", "winner": high_bidder, "price": price}

                case Event("bid", {"bidder": bidder, "amount": amount}):
                    if amount <= price or bidder in (seller, high_bidder):
                        reducer(notify_player, bidder, f"Bid of {amount} not accepted (at {price}).")
                        continue
                    # Escrow the bid so the winner can always pay; the reducer holds the gold
                    # only if the purse has it, and the procedure reads back what it decided.
                    bids += 1
                    hold = f"{me}:bid-{bids}"
                    reducer(hold_gold, hold, bidder, amount)
                    if not await procedure(gold_held, hold):
                        reducer(notify_player, bidder, f"You cannot cover a bid of {amount}.")
                        continue
                    if high_bidder is not None:
                        reducer(release_hold, high_hold)
                        reducer(notify_player, high_bidder, "You've been outbid!")
                    high_bidder, high_hold, price = bidder, hold, amount
                    ends_at = max(ends_at, now() + 10)
                    reducer(announce_bid, me, bidder, amount, ends_at)
                    publish("bid", {"item": item_id, "price": price, "high_bidder": bidder, "ends_at": ends_at})

                case Event("cancel"):
                    if high_bidder is None:
                        reducer(close_auction, me, "cancelled")
                        return {"outcome": "cancelled", "winner": None, "price": None}
                    reducer(notify_player, seller, "Too late to cancel: there are bids.")
    except Cancelled:
        # Cancelled from outside (ref.cancel): give the bidder's gold and the seller's item back.
        if high_hold is not None:
            reducer(release_hold, high_hold)
        reducer(close_auction, me, "cancelled")
        raise


@workflow
async def trade(player_a: str, player_b: str, offer_a: list[str], offer_b: list[str]) -> dict:
    """Swap items between two players once both accept.

    Both offers are locked for the trade's whole life. Signals: ``accept`` (payload: the player),
    ``cancel`` (the player), ``modify_offer`` (``{"player": ..., "items": [...]}``, which voids
    both acceptances). The trade gives up after 60 seconds without activity (the timeout is armed
    afresh each time round the loop). The ``finally`` block unlocks whatever the trade still
    holds, however it ends: completed, timed out, cancelled by a player, or cancelled from outside
    with ``ref.cancel()``.
    """
    me = workflow_id()
    offers = {player_a: list(offer_a), player_b: list(offer_b)}
    try:
        for player, items in offers.items():
            reducer(lock_items, me, player, items)
        if await procedure(items_locked_by, me) != sorted(offers[player_a] + offers[player_b]):
            return {"outcome": "unavailable"}

        accepted = set()
        while True:
            for player in offers:
                reducer(show_ui, player, "trade", {"offers": offers, "accepted": sorted(accepted)})
            match await select(
                timer("timeout", 60), signal("accept"), signal("cancel"), signal("modify_offer")
            ):
                case Event("timeout"):
                    return {"outcome": "timeout"}
                case Event("accept", player) if player in offers:
                    accepted.add(player)
                    if accepted == set(offers):
                        reducer(transfer_items, me, player_a, player_b, offers[player_a])
                        reducer(transfer_items, me, player_b, player_a, offers[player_b])
                        return {"outcome": "completed", "offers": offers}
                case Event("cancel", player):
                    return {"outcome": "cancelled", "by": player}
                case Event("modify_offer", {"player": player, "items": items}) if player in offers:
                    accepted.clear()
                    reducer(unlock_items, me, offers[player])
                    reducer(lock_items, me, player, items)
                    offers[player] = list(items)
                    if await procedure(items_locked_by, me) != sorted(offers[player_a] + offers[player_b]):
                        return {"outcome": "unavailable"}
    finally:
        reducer(unlock_items, me)
        reducer(close_ui, player_a, "trade")
        reducer(close_ui, player_b, "trade")
