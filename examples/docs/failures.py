# examples/docs/failures.py
"""Failures, retries, cancellation and supervision, on a virtual clock.

Run from the root of a checkout:  python -m examples.docs failures
"""

import sqlite3
import tempfile
from pathlib import Path

from actors import ActorSystem
from actors.testing import VirtualClock
from workflows import (
    Cancelled,
    ChildFailed,
    Event,
    ProcedureFailed,
    RetryPolicy,
    procedure,
    reducer,
    select,
    signal,
    spawn,
    timer,
    workflow,
    workflow_id,
)

ATTEMPTS: dict[str, int] = {}  # how often each player's card was charged, in this process


class CardDeclined(Exception):
    """The bank said no: trying again will not help."""


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=2.0, non_retryable=("CardDeclined",)))
def charge(player: str, amount: int) -> str:
    ATTEMPTS[player] = ATTEMPTS.get(player, 0) + 1
    if player == "mallory":
        raise CardDeclined(f"card of {player} declined")
    if ATTEMPTS[player] < 3:
        raise ConnectionError("bank unreachable")  # retried: 2 s, then 4 s later
    return f"receipt-{player}-{amount}"


@reducer
def log(db, text: str) -> None:
    db["log"].insert({"text": text})


@reducer
def needs_a_table_nobody_made(db) -> None:
    db.execute("INSERT INTO missing_table VALUES (1)")  # a bug: raises on every attempt


@workflow
async def buy(player: str, amount: int) -> str:
    try:
        return await procedure(charge, player, amount)
    except ProcedureFailed as e:
        return f"not bought: {e.error_type} after {e.attempts} attempt(s)"


@workflow
async def trade(player_a: str, player_b: str) -> str:
    reducer(log, f"{workflow_id()}: items of {player_a} and {player_b} locked")
    try:
        await signal("both_accepted")
        return "traded"
    except Cancelled as c:
        reducer(log, f"{workflow_id()}: cancelled ({c.reason})")
        raise  # the workflow ends CANCELLED
    finally:
        await timer("close_ui", 1)  # a finally may await, even after a cancel
        reducer(log, f"{workflow_id()}: items unlocked")


@workflow
async def goblin(hp: int) -> int:
    await timer("fight", 5)
    if hp > 10:
        raise ValueError(f"the goblin has {hp} hp left and wins")
    return 25  # xp


@workflow
async def quest(goblin_hp: int) -> str:
    try:
        xp = await spawn(goblin, goblin_hp)
    except ChildFailed as e:
        return f"quest failed: {e.error_type}: {e.error_message}"
    return f"quest done, {xp} xp"


@workflow
async def buggy() -> None:
    await timer("soon", 1)
    reducer(needs_a_table_nobody_made)


@workflow
async def supervisor() -> str:
    try:
        await spawn(buggy, id="buggy-1")
    except ChildFailed as e:
        return f"child {e.child_id} failed: {e.error_message.split(':')[0]}"
    return "unreachable"


@workflow
async def respawn_boss(seconds: float) -> str:
    await timer("respawn", seconds)
    return "boss is back"


@workflow
async def raid_leader() -> str:
    match await select(
        spawn(respawn_boss, 30, id="respawn-1", detached=True, name="detached"),
        spawn(respawn_boss, 30, id="respawn-2", name="attached"),
        timer("patience", 10),
    ):
        case Event("patience"):
            return "gave up waiting"
        case Event(_, value):
            return value


def main() -> None:
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as tmp, ActorSystem(
        str(Path(tmp) / "failures.db"), clock=clock
    ) as system:
        bob, mallory = system.start(buy, "bob", 5), system.start(buy, "mallory", 5)
        system.idle(timeout=10)
        clock.advance(2)  # the first retry's backoff
        system.idle(timeout=10)
        clock.advance(4)  # the second retry's backoff
        print("bob:", bob.result(timeout=10))
        print("mallory:", mallory.result(timeout=10))

        t = system.start(trade, "alice", "bob", id="trade-1")
        system.idle(timeout=10)
        t.cancel("bob logged out")
        system.idle(timeout=10)
        clock.advance(1)  # the finally's timer
        system.idle(timeout=10)
        print("trade:", t.status())
        for row in system_log(system):
            print("  log:", row)

        easy, hard = system.start(quest, 8), system.start(quest, 30)
        system.idle(timeout=10)
        clock.advance(5)
        print("easy quest:", easy.result(timeout=10))
        print("hard quest:", hard.result(timeout=10))

        sup = system.start(supervisor)
        system.idle(timeout=10)
        clock.advance(1)
        print("supervisor:", sup.result(timeout=30))
        print("buggy-1:", system.get("buggy-1").status())

        leader = system.start(raid_leader)
        system.idle(timeout=10)
        clock.advance(10)
        print("raid leader:", leader.result(timeout=10))
        system.idle(timeout=10)
        print("respawn-1 (detached):", system.get("respawn-1").status())
        print("respawn-2:", system.get("respawn-2").status())
        clock.advance(20)
        print("respawn-1 result:", system.get("respawn-1").result(timeout=10))


def system_log(system: ActorSystem) -> list[str]:
    con = sqlite3.connect(system.db)
    try:
        return [text for (text,) in con.execute("SELECT text FROM log ORDER BY rowid")]
    finally:
        con.close()
