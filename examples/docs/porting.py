# examples/docs/porting.py
"""Ports of the original design's Rust workflows, including its three "not yet supported" patterns.

Run from the root of a checkout:  python -m examples.docs porting
"""

from workflows import Event, procedure, reducer, select, signal, spawn, timer, workflow
from workflows.testing import WorkflowHarness


@procedure
def has_key(player: str, door: str) -> bool:
    return door == "cellar"


@procedure
def get_mood(npc: str) -> str:
    return "grumpy"


@reducer
def say(db, who: str, text: str) -> None:
    db["chat"].insert({"who": who, "text": text})


@workflow
async def buff(target: str, duration_secs: float) -> dict:
    """``loop { select! { timer!(..) => break, signal!(..) => continue, .. }.await }``"""
    stacks = 1
    while True:
        match await select(
            timer("expire", duration_secs), signal("refresh"), signal("stack"), signal("dispel")
        ):
            case Event("expire") | Event("dispel"):
                break
            case Event("refresh"):
                continue
            case Event("stack", n):
                stacks += n
    return {"target": target, "final_stacks": stacks}


@workflow
async def child_task(delay_secs: float, result_value: int) -> int:
    await timer("complete", delay_secs)
    return result_value


@workflow
async def parent(task_count: int) -> int:
    """``for i in 0..n { total += spawn!(child_task, ..).await }``"""
    total = 0
    for i in range(task_count):
        total += await spawn(child_task, 1, 10 * (i + 1))
    return total


@workflow
async def door(player: str, door_name: str, locked: bool) -> str:
    """Not yet supported in the seed: nested if/else with an await in the inner conditional."""
    if locked:
        if await procedure(has_key, player, door_name):
            await timer("unlock", 2)
            outcome = "unlocked"
        else:
            reducer(say, door_name, "it is locked")
            await signal("key_found")
            outcome = "unlocked later"
    else:
        outcome = "open"
    return f"{door_name}: {outcome}"


@workflow
async def merchant(npc: str, player: str) -> str:
    """Not yet supported in the seed: match expressions with await (subject and arms)."""
    match await procedure(get_mood, npc):
        case "happy":
            reducer(say, npc, f"welcome, {player}!")
            item = await signal("buy")
        case "grumpy":
            await timer("ignore_player", 5)
            item = await signal("buy")
        case mood:
            return f"{npc} is {mood}: no trade"
    return f"{player} bought {item}"


@workflow
async def duel(player: str) -> str:
    """Not yet supported in the seed: several await points in one conditional branch."""
    hits = 0
    if await signal("challenge_accepted"):
        await timer("countdown", 3)
        hits += await signal("attack")
        hits += await signal("attack")
        await timer("anim_delay", 0.3)
    return f"{player} landed {hits} hits"


def main() -> None:
    h = WorkflowHarness(buff, "alice", 30)
    h.send(Event("stack", 2, "signal"))
    h.send(Event("refresh", None, "signal"))
    h.send(Event("expire", None, "timer"))
    print("buff:", h.result())

    h = WorkflowHarness(parent, 3)
    while not h.done:
        h.send(h.command.args[1])  # answer each spawn with the child's result_value
    print("parent:", h.result(), "after", len(h.commands), "spawns")

    h = WorkflowHarness(door, "alice", "attic", True)
    h.send(False)  # has_key -> False
    h.send("the key")  # key_found
    print("door:", h.result(), "| awaited:", [type(c).__name__ for c in h.commands])

    h = WorkflowHarness(merchant, "gorm", "alice")
    h.send("grumpy")  # get_mood
    h.send(None)  # the ignore_player timer fired
    h.send("a lantern")  # buy
    print("merchant:", h.result())

    h = WorkflowHarness(duel, "alice")
    for answer in (True, None, 2, 3, None):
        h.send(answer)
    print("duel:", h.result())
