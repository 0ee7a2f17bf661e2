# examples/docs/test_auction.py
"""Tests of the tutorial's auction, one per testing style of docs/guides/testing.md."""

from actors import Status
from examples.docs.auction import auction, get_price
from workflows import Event, procedure, signal, timer
from workflows.testing import WorkflowHarness


def test_auction_step_by_step():
    """The pure harness answers each await by hand: no database, no threads, no clock."""
    h = WorkflowHarness(auction, 7, "carol", 60, now=1000.0)
    assert h.command == procedure(get_price, 7)
    h.send(70)  # the procedure's reply
    assert h.command.commands == (timer("end", at=1060.0), signal("bid"), signal("cancel"))
    h.send(Event("bid", {"bidder": "alice", "amount": 100}))
    h.send(Event("end", None, "timer"))
    assert h.result() == {"winner": "alice", "price": 100}
    assert [e.args[0] for e in h.effects] == [
        "auction for item 7 by carol opens at 70",
        "alice bids 100",
        "item 7 sold to alice for 100",
    ]


def test_auction_in_test_mode(workflow_system):
    """In test mode timers never fire by themselves: the test fires them by name."""
    ref = workflow_system.start(auction, 7, "carol", 60, test_mode=True)
    ref.debug_send_signal("bid", {"bidder": "alice", "amount": 100})
    ref.debug_send_signal("bid", {"bidder": "bob", "amount": 150})
    workflow_system.idle(timeout=10)
    assert ref.status() is Status.RUNNING
    ref.debug_fire_timer("end")
    assert ref.result(timeout=10) == {"winner": "bob", "price": 150}


def test_auction_on_a_virtual_clock(workflow_system, workflow_clock):
    """A virtual clock runs a minute-long auction in milliseconds."""
    ref = workflow_system.start(auction, 7, "carol", 60)
    ref.signal("bid", {"bidder": "alice", "amount": 100})
    workflow_system.idle(timeout=10)  # the auction has armed its timer: now move the clock
    workflow_clock.advance(59)
    workflow_system.idle(timeout=10)  # everything 59 seconds bring has happened
    assert ref.status() is Status.RUNNING
    workflow_clock.advance(1)
    workflow_system.idle(timeout=10)
    assert ref.result(timeout=10) == {"winner": "alice", "price": 100}
