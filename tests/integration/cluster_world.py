"""The demo world's money, driven through the cluster kill test's nodes, and its audit.

The driver plays a small market in the demo's world (``examples.world``): eight players with a
purse and three items each put items up for auction (``examples.economy.auction``), bid on each
other's, swap items in trades (``examples.economy.trade``) and buff themselves
(``examples.buffs.buff``), every request through a random live node while the nodes are killed,
frozen and cut off. It records what was acknowledged, and the audit checks the demo's money
invariant (every coin minted is in a purse or in escrow, none negative, and at the end nothing
left in escrow or locked) and more: each player's purse is its starting purse plus what it sold
minus what it bought; each acknowledged bid was taken exactly once (and an unacknowledged one at
most once); every acknowledged trade completed and moved its items once; every item is where the
trades and sales put it; each buff's stacks count every acknowledged stack once.

A request is sent so that its outcome does not depend on timing: a trade or an auction offers
only items no other trade or auction holds, each bid on an auction is from a new bidder and higher
than every bid sent before it, and bids are sent only in the first ``BID_WINDOW`` seconds of an
auction that lasts ``AUCTION_SECS``, so a bid acknowledged is taken before the auction's end even
after a failover.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import persistence

PLAYERS = tuple(f"p{i}" for i in range(8))
PURSE = 1_000_000  # far more than all the bids of a soak: a bid is never refused for want of gold
ITEMS = {f"{p}-{k}": p for p in PLAYERS for k in range(3)}
AUCTION_SECS = 15.0
BID_WINDOW = 5.0
BUFF_SECS = 120.0  # longer than a buff lives here, even with a failover: buffs end by a dispel
MAX_OPEN = {"auction": 3, "trade": 2, "buff": 2}

Call = Callable[[dict[str, Any]], "dict[str, Any] | None"]


@dataclass
class Auction:
    item: str
    seller: str
    opened: float  # the driver's clock when the start was acknowledged
    bids: list[tuple[str, int]] = field(default_factory=list)  # sent, in order
    acked: set[tuple[str, int]] = field(default_factory=set)


@dataclass
class Trade:
    a: str
    b: str
    items: tuple[str, str]
    accepted: int = 0  # how many of the two players' accepts were acknowledged


@dataclass
class Buff:
    target: str
    sent: int = 0  # stack signals sent
    acked: int = 0
    dispelled: bool = False


class World:
    """The driver's side of the market: what it asked for, and what it was told."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.owner = dict(ITEMS)  # where the driver's record of finished trades and sales puts each item
        self.busy: set[str] = set()  # items a running trade or auction holds
        self.history: dict[str, list[str]] = {i: [] for i in ITEMS}  # the workflows each item went through
        self.auctions: dict[str, Auction] = {}
        self.trades: dict[str, Trade] = {}
        self.buffs: dict[str, Buff] = {}
        self.open: set[str] = set()
        self.results: dict[str, Any] = {}

    # -- driving ------------------------------------------------------------------------------

    def setup(self, call: Call, db_query: Callable[[str, Any], list[tuple[Any, ...]]], schema: str) -> None:
        chars = [{"id": p, "template": "hero", "gold": PURSE} for p in PLAYERS]
        items = [{"id": i, "name": f"item {i}", "owner": p} for i, p in ITEMS.items()]
        self._until_acked(call, {"op": "start", "wf": "setup_world", "args": [chars, items, []], "id": "world-setup"})
        deadline = time.monotonic() + 120
        while db_query(f"SELECT status FROM {schema}.workflows WHERE id = ?", "world-setup") != [("completed",)]:
            assert time.monotonic() < deadline, "the world's setup did not complete"
            time.sleep(0.1)

    def step(self, call: Call, finished: Callable[[list[str]], dict[str, Any]]) -> None:
        """Take note of what ended, then do one thing in the market, chosen at random."""
        if self.open:
            for wid, result in finished(sorted(self.open)).items():
                self._ended(wid, result)
        now = time.monotonic()
        free = sorted(i for i in ITEMS if i not in self.busy)
        actions: list[Callable[[], None]] = []
        kinds = Counter(wid[0] for wid in self.open)
        if kinds["a"] < MAX_OPEN["auction"] and free:
            actions.append(lambda: self._auction(call, self.rng.choice(free)))
        biddable = [a for a in sorted(self.open) if a[0] == "a" and now < self.auctions[a].opened + BID_WINDOW
                    and len(self.auctions[a].bids) < len(PLAYERS) - 1]
        if biddable:
            actions.append(lambda: self._bid(call, self.rng.choice(biddable)))
        pairs = [(x, y) for x in free for y in free if self.owner[x] < self.owner[y]]
        if kinds["t"] < MAX_OPEN["trade"] and pairs:
            actions.append(lambda: self._trade(call, *self.rng.choice(pairs)))
        accepting = [t for t in sorted(self.open) if t[0] == "t" and self.trades[t].accepted < 2]
        if accepting:
            actions.append(lambda: self._accept(call, self.rng.choice(accepting)))
        if kinds["b"] < MAX_OPEN["buff"]:
            actions.append(lambda: self._buff(call, self.rng.choice(PLAYERS)))
        stackable = [b for b in sorted(self.open) if b[0] == "b" and not self.buffs[b].dispelled]
        if stackable:
            actions.append(lambda: self._stack_or_dispel(call, self.rng.choice(stackable)))
        if actions:
            self.rng.choice(actions)()

    def finish(self, call: Call) -> None:
        """Let every trade and buff end: the missing accepts, and a dispel for each buff."""
        for t in sorted(self.open):
            if t[0] == "t":
                while self.trades[t].accepted < 2:
                    self._accept(call, t)
        for b in sorted(self.open):
            if b[0] == "b" and not self.buffs[b].dispelled:
                self._signal_until_taken(call, b, "dispel", None)
                self.buffs[b].dispelled = True

    def _until_acked(self, call: Call, req: dict[str, Any]) -> Any:
        while (reply := call(req)) is None or not reply["ok"]:
            time.sleep(0.05)  # a start is idempotent: an id that exists starts nothing
        return reply["value"]

    def _signal_until_taken(self, call: Call, wid: str, name: str, payload: Any) -> None:
        """Send a signal whose repetition is harmless until it is acknowledged or the workflow ended."""
        while True:
            reply = call({"op": "signal", "id": wid, "name": name, "payload": payload})
            if reply is not None and (reply["ok"] or "WorkflowNotRunning" in reply["error"]):
                return
            time.sleep(0.05)

    def _begin(self, wid: str, items: tuple[str, ...]) -> None:
        self.open.add(wid)
        self.busy.update(items)
        for i in items:
            self.history[i].append(wid)

    def _auction(self, call: Call, item: str) -> None:
        wid = f"a{len(self.auctions)}"
        seller = self.owner[item]
        self._until_acked(call, {"op": "start", "wf": "auction", "args": [item, seller, 10, AUCTION_SECS], "id": wid})
        self.auctions[wid] = Auction(item, seller, time.monotonic())
        self._begin(wid, (item,))

    def _bid(self, call: Call, wid: str) -> None:
        a = self.auctions[wid]
        seen = {a.seller, *(b for b, _ in a.bids)}
        bidder = self.rng.choice([p for p in PLAYERS if p not in seen])
        amount = 10 + 7 * (len(a.bids) + 1)
        a.bids.append((bidder, amount))
        reply = call({"op": "signal", "id": wid, "name": "bid", "payload": {"bidder": bidder, "amount": amount}})
        if reply is not None and reply["ok"]:
            a.acked.add((bidder, amount))

    def _trade(self, call: Call, x: str, y: str) -> None:
        wid = f"t{len(self.trades)}"
        a, b = self.owner[x], self.owner[y]
        self._until_acked(call, {"op": "start", "wf": "trade", "args": [a, b, [x], [y]], "id": wid})
        self.trades[wid] = Trade(a, b, (x, y))
        self._begin(wid, (x, y))

    def _accept(self, call: Call, wid: str) -> None:
        t = self.trades[wid]
        reply = call({"op": "signal", "id": wid, "name": "accept", "payload": (t.a, t.b)[t.accepted]})
        if reply is not None and reply["ok"]:
            t.accepted += 1  # an accept sent again after no answer is harmless: accepting is a set
        elif reply is not None and "WorkflowNotRunning" in reply["error"]:
            # The trade ended: an accept that got no answer went in, and completed it (or the trade
            # ended otherwise, which the audit finds: every trade must have completed).
            t.accepted = 2

    def _buff(self, call: Call, target: str) -> None:
        wid = f"b{len(self.buffs)}"
        self._until_acked(call, {"op": "start", "wf": "buff", "args": [target, wid, BUFF_SECS], "id": wid})
        self.buffs[wid] = Buff(target)
        self._begin(wid, ())

    def _stack_or_dispel(self, call: Call, wid: str) -> None:
        b = self.buffs[wid]
        if b.sent >= 3:
            self._signal_until_taken(call, wid, "dispel", None)
            b.dispelled = True
            return
        b.sent += 1
        reply = call({"op": "signal", "id": wid, "name": "stack", "payload": 1})
        if reply is not None and reply["ok"]:
            b.acked += 1

    def _ended(self, wid: str, result: Any) -> None:
        self.open.discard(wid)
        self.results[wid] = result
        if wid[0] == "t" and isinstance(result, dict) and result.get("outcome") == "completed":
            t = self.trades[wid]
            x, y = t.items
            self.owner[x], self.owner[y] = t.b, t.a
        if wid[0] == "a" and isinstance(result, dict) and result.get("outcome") == "sold":
            self.owner[self.auctions[wid].item] = result["winner"]
        if wid[0] == "a":
            self.busy.discard(self.auctions[wid].item)
        if wid[0] == "t":
            self.busy.difference_update(self.trades[wid].items)

    # -- the audit ----------------------------------------------------------------------------

    def audit(self, q: Callable[..., list[tuple[Any, ...]]], schema: str) -> dict[str, int]:
        """Checks the world's final state against what the driver was told; returns a few counts."""
        ids = ["world-setup", *self.auctions, *self.trades, *self.buffs]
        rows = {wid: (status, result) for wid, status, result in
                q(f"SELECT id, status, result FROM {schema}.workflows WHERE id = ANY(?)", ids)}
        assert set(rows) == set(ids), f"world workflows missing: {sorted(set(ids) - set(rows))}"
        not_done = {w: s for w, (s, _) in rows.items() if s != "completed"}
        assert not not_done, f"world workflows that did not complete: {not_done}"
        results = {w: persistence.loads(bytes(r)) for w, (_, r) in rows.items()}

        # The money invariant of the demo (tests/integration/test_demo_kill.py), at rest.
        (purses, held, minted, negative), = q(
            "SELECT (SELECT SUM(gold) FROM world_characters), (SELECT COALESCE(SUM(amount), 0) FROM world_holds), "
            "(SELECT SUM(amount) FROM world_mint), (SELECT COUNT(*) FROM world_characters WHERE gold < 0)")
        assert minted == PURSE * len(PLAYERS), f"gold was minted outside the starting purses: {minted}"
        assert purses + held == minted, f"coins created or lost: purses {purses} + escrow {held} != minted {minted}"
        assert negative == 0, "a purse went negative"
        assert held == 0, f"escrow left after every auction ended: {q('SELECT * FROM world_holds')}"
        assert q("SELECT count(*) FROM world_items WHERE locked_by IS NOT NULL") == [(0,)], "items left locked"
        assert q("SELECT count(*) FROM world_auctions WHERE status = 'open'") == [(0,)], "an ended auction shows open"
        assert q("SELECT count(*) FROM world_buffs") == [(0,)], "a buff was left on after it ended"

        # Bids: the auction's board announces each one it took; the driver's are unique (bidder, amount).
        taken: Counter[tuple[str, str, int]] = Counter()
        for (text,) in q("SELECT text FROM world_announcements"):
            if m := re.fullmatch(r"Auction (a\d+): (p\d+) bids (\d+)", text):
                taken[(m[1], m[2], int(m[3]))] += 1
        assert all(c == 1 for c in taken.values()), f"a bid was taken twice: {[k for k, c in taken.items() if c > 1]}"
        gold = dict.fromkeys(PLAYERS, PURSE)
        for wid, a in self.auctions.items():
            got = [(b, n) for (w, b, n) in taken if w == wid]
            assert {(wid, b, n) for b, n in a.acked} <= set(taken), f"an acknowledged bid on {wid} was lost"
            assert set(got) <= set(a.bids), f"{wid} took a bid nobody sent: {got}"
            r = results[wid]
            if got:
                winner, price = max(got, key=lambda bid: bid[1])
                assert r == {"outcome": "sold", "winner": winner, "price": price}, (wid, r, got)
                gold[a.seller] += price
                gold[winner] -= price
            else:
                assert r == {"outcome": "no_bids", "winner": None, "price": None}, (wid, r)
        purse = dict(q("SELECT id, gold FROM world_characters WHERE id = ANY(?)", list(PLAYERS)))
        assert purse == gold, f"purses are not their start plus sales minus purchases: {purse} != {gold}"

        # Trades: every one was accepted by both players, so every one completed and swapped.
        for wid, t in self.trades.items():
            r = results[wid]
            assert isinstance(r, dict) and r.get("outcome") == "completed", f"trade {wid} did not complete: {r}"
            assert r["offers"] == {t.a: [t.items[0]], t.b: [t.items[1]]}, (wid, r)
        owner = dict(ITEMS)
        for item, wids in self.history.items():
            for wid in wids:
                if wid[0] == "t":
                    t = self.trades[wid]
                    owner[item] = t.b if owner[item] == t.a else t.a
                elif results[wid]["outcome"] == "sold":
                    owner[item] = results[wid]["winner"]
        assert dict(q("SELECT id, owner FROM world_items")) == owner, "an item is not where the trades and sales put it"

        # Buffs: each stack signal acknowledged counted once, and none counted that was not sent.
        for wid, b in self.buffs.items():
            r = results[wid]
            assert r["ended_by"] == "dispelled", (wid, r)
            assert b.acked <= r["final_stacks"] - 1 <= b.sent, f"buff {wid}: {r} from {b.acked}..{b.sent} stacks"
        bids = sum(len(a.bids) for a in self.auctions.values())
        return {"auctions": len(self.auctions), "bids": bids, "trades": len(self.trades), "buffs": len(self.buffs)}
