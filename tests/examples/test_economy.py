"""Auctions, trades and production, and the gold and items they move."""

from __future__ import annotations

import pytest

from actors import Status
from examples.economy import auction, production, trade
from workflows import Cancelled

from .support import T


def open_auction(system, price=50, duration=60, test_mode=True, id="auction-1"):
    ref = system.start(auction, "sword", "carol", price, duration, id=id, test_mode=test_mode)
    system.idle(timeout=T)
    return ref


# --- auction --------------------------------------------------------------------------------------


def test_auction_highest_bid_wins(system, view):
    """The design's integration test: alice bids 100, bob 150, the end timer fires, bob wins at 150."""
    ref = open_auction(system)
    assert view.locked_by("sword") == "auction-1"
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 100})
    ref.debug_send_signal("bid", {"bidder": "bob", "amount": 150})
    system.idle(timeout=T)
    ref.debug_fire_timer("end")
    assert ref.result(timeout=T) == {"outcome": "sold", "winner": "bob", "price": 150}

    assert view.owner("sword") == "bob" and view.locked_by("sword") is None
    assert (view.gold("alice"), view.gold("bob"), view.gold("carol")) == (500, 350, 160)
    assert view.notifications("alice") == ["You've been outbid!"]
    assert view.rows("SELECT status, price, high_bidder FROM world_auctions") == [("sold", 150, "bob")]
    view.assert_gold_conserved()


def test_auction_holds_the_high_bid_in_escrow(system, view):
    """While the auction runs, the high bid is held out of the bidder's purse; the outbid get theirs back."""
    ref = open_auction(system)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 100})
    system.idle(timeout=T)
    assert view.gold("alice") == 400
    ref.debug_send_signal("bid", {"bidder": "bob", "amount": 120})
    system.idle(timeout=T)
    assert (view.gold("alice"), view.gold("bob")) == (500, 380)
    assert view.rows("SELECT player, amount FROM world_holds") == [("bob", 120)]
    view.assert_gold_conserved()


def test_auction_refuses_low_and_unaffordable_bids(system, view):
    """A bid at or under the price, or more than the bidder's purse, does not count."""
    ref = open_auction(system)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 40})
    ref.debug_send_signal("bid", {"bidder": "bob", "amount": 900})
    system.idle(timeout=T)
    assert view.notifications("alice") == ["Bid of 40 not accepted (at 50)."]
    assert view.notifications("bob") == ["You cannot cover a bid of 900."]
    ref.debug_fire_timer("end")
    assert ref.result(timeout=T) == {"outcome": "no_bids", "winner": None, "price": None}
    assert view.owner("sword") == "carol" and view.locked_by("sword") is None
    assert (view.gold("alice"), view.gold("bob")) == (500, 500)
    view.assert_gold_conserved()


def test_auction_cancel_only_without_bids(system, view):
    """The seller may cancel only while nobody has bid."""
    ref = open_auction(system)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 60})
    ref.debug_send_signal("cancel")
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    assert view.notifications("carol") == ["Too late to cancel: there are bids."]

    other = system.start(auction, "gem", "bob", 10, id="auction-2", test_mode=True)
    system.idle(timeout=T)
    other.debug_send_signal("cancel")
    assert other.result(timeout=T) == {"outcome": "cancelled", "winner": None, "price": None}
    assert view.locked_by("gem") is None


def test_auction_of_an_item_already_on_offer_is_refused(system, view):
    """An item locked by one auction cannot be put up in another."""
    open_auction(system)
    ref = system.start(auction, "sword", "carol", 5, id="auction-2", test_mode=True)
    assert ref.result(timeout=T) == {"outcome": "unavailable", "winner": None, "price": None}
    assert view.locked_by("sword") == "auction-1"


def test_cancelling_an_auction_returns_gold_and_item(system, view):
    """ref.cancel() raises Cancelled in the auction, which refunds the escrow and unlocks the item."""
    ref = open_auction(system)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 100})
    system.idle(timeout=T)
    ref.cancel("server maintenance")
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    assert view.gold("alice") == 500 and view.locked_by("sword") is None
    assert view.rows("SELECT status FROM world_auctions") == [("cancelled",)]
    view.assert_gold_conserved()


def test_a_late_bid_extends_the_auction(system, clock, view):
    """On the clock: the end is a deadline, and a bid in its last 10 s pushes it to 10 s from the bid."""
    ref = open_auction(system, test_mode=False)
    clock.advance(30)
    system.idle(timeout=T)
    ref.signal("bid", {"bidder": "alice", "amount": 70})  # early bid: the deadline stays at 60
    system.idle(timeout=T)
    clock.advance(25)  # t = 55
    system.idle(timeout=T)
    ref.signal("bid", {"bidder": "bob", "amount": 80})  # late bid: deadline moves to 65
    system.idle(timeout=T)
    clock.advance(6)  # t = 61
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    clock.advance(4)  # t = 65
    system.idle(timeout=T)
    assert ref.result(timeout=T) == {"outcome": "sold", "winner": "bob", "price": 80}
    view.assert_gold_conserved()


# --- trade ----------------------------------------------------------------------------------------


def start_trade(system, **kw):
    ref = system.start(trade, "alice", "bob", ["shield"], ["potion", "gem"], id="trade-1", test_mode=True, **kw)
    system.idle(timeout=T)
    return ref


def test_trade_completes_when_both_accept(system, view):
    """Both players accept, the items change hands, and nothing stays locked."""
    ref = start_trade(system)
    assert {view.locked_by(i) for i in ("shield", "potion", "gem")} == {"trade-1"}
    ref.debug_send_signal("accept", "alice")
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING
    ref.debug_send_signal("accept", "bob")
    result = ref.result(timeout=T)
    assert result["outcome"] == "completed"
    assert (view.owner("shield"), view.owner("potion"), view.owner("gem")) == ("bob", "alice", "alice")
    assert view.rows("SELECT id FROM world_items WHERE locked_by IS NOT NULL") == []
    assert view.rows("SELECT * FROM world_ui WHERE panel = 'trade'") == []


def test_cancelled_trade_unlocks_the_items(system, view):
    """A player's cancel ends the trade; the finally block unlocks every item."""
    ref = start_trade(system)
    ref.debug_send_signal("accept", "alice")
    ref.debug_send_signal("cancel", "bob")
    assert ref.result(timeout=T) == {"outcome": "cancelled", "by": "bob"}
    assert (view.owner("shield"), view.owner("potion")) == ("alice", "bob")
    assert view.rows("SELECT id FROM world_items WHERE locked_by IS NOT NULL") == []


def test_trade_cancelled_from_outside_runs_its_finally(system, view):
    """ref.cancel() raises Cancelled at the trade's await; its finally unlocks items and closes the UI."""
    ref = start_trade(system)
    assert view.rows("SELECT COUNT(*) FROM world_ui WHERE panel = 'trade'") == [(2,)]
    ref.cancel("alice logged out")
    with pytest.raises(Cancelled):
        ref.result(timeout=T)
    assert ref.status() is Status.CANCELLED
    assert view.rows("SELECT id FROM world_items WHERE locked_by IS NOT NULL") == []
    assert view.rows("SELECT * FROM world_ui WHERE panel = 'trade'") == []


def test_trade_times_out(system, view):
    """After 60 s without activity the trade gives up and unlocks."""
    ref = start_trade(system)
    ref.debug_fire_timer("timeout")
    assert ref.result(timeout=T) == {"outcome": "timeout"}
    assert view.rows("SELECT id FROM world_items WHERE locked_by IS NOT NULL") == []


def test_modified_offer_voids_acceptances(system, view):
    """Changing an offer re-locks the new items and both players must accept again."""
    ref = start_trade(system)
    ref.debug_send_signal("accept", "alice")
    ref.debug_send_signal("modify_offer", {"player": "bob", "items": ["gem"]})
    system.idle(timeout=T)
    assert view.locked_by("potion") is None and view.locked_by("gem") == "trade-1"
    ref.debug_send_signal("accept", "bob")
    system.idle(timeout=T)
    assert ref.status() is Status.RUNNING  # alice's earlier accept no longer counts
    ref.debug_send_signal("accept", "alice")
    assert ref.result(timeout=T)["outcome"] == "completed"
    assert (view.owner("shield"), view.owner("gem"), view.owner("potion")) == ("bob", "alice", "bob")


def test_trade_of_an_item_on_auction_is_refused(system, view):
    """An item locked by an auction cannot be traded; the trade releases what it did lock."""
    system.start(auction, "potion", "bob", 10, id="auction-9", test_mode=True)
    system.idle(timeout=T)
    ref = system.start(trade, "alice", "bob", ["shield"], ["potion"], test_mode=True)
    assert ref.result(timeout=T) == {"outcome": "unavailable"}
    assert view.locked_by("shield") is None and view.locked_by("potion") == "auction-9"


# --- production -----------------------------------------------------------------------------------


def machine(view, entity):
    return view.rows("SELECT status, cycles FROM world_machines WHERE id = ?", entity)[0]


def test_production_runs_while_inputs_last(system, view):
    """Two cycles use four of five ore and make two ingots, then the line goes idle."""
    ref = system.start(production, "smelter-1", "smelter", test_mode=True)
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("idle", 0)
    ref.debug_send_signal("inventory_changed")
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("working", 0)
    for _ in range(2):
        ref.debug_fire_timer("cycle_complete")
        system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("idle", 2)
    stock = dict(view.rows("SELECT resource, qty FROM world_resources WHERE owner = 'smelter-1'"))
    assert stock == {"ore": 1, "ingot": 2}
    ref.debug_send_signal("stop")
    assert ref.result(timeout=T) == {"cycles": 2}
    assert machine(view, "smelter-1") == ("stopped", 2)


def test_production_halts_until_resumed(system, view):
    """A halted line ignores deliveries until it is resumed."""
    ref = system.start(production, "smelter-1", "smelter", test_mode=True)
    system.idle(timeout=T)
    ref.debug_send_signal("halt", "furnace cracked")
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("halted: furnace cracked", 0)
    ref.debug_send_signal("inventory_changed")
    system.idle(timeout=T)
    assert machine(view, "smelter-1")[0].startswith("halted")
    ref.debug_send_signal("resume")
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("working", 0)


def test_production_on_the_virtual_clock(system, clock, view):
    """On the clock a 30 s cycle completes after 30 s."""
    ref = system.start(production, "smelter-1", "smelter")
    system.idle(timeout=T)
    ref.signal("inventory_changed")
    system.idle(timeout=T)
    clock.advance(29)
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("working", 0)
    clock.advance(1)
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("working", 1)
    clock.advance(30)
    system.idle(timeout=T)
    assert machine(view, "smelter-1") == ("idle", 2)
