# examples/docs/asyncio_server.py
"""An asyncio game server that embeds the system: its handlers await the async twins."""

from __future__ import annotations

import asyncio

from actors import ActorSystem
from actors.testing import VirtualClock
from workflows import Event, select, signal, timer, workflow


@workflow
async def duel(a: str, b: str) -> str:
    hits = {a: 0, b: 0}
    while True:
        match await select(signal("hit"), timer("round", 30)):
            case Event("hit", who):
                hits[who] += 1
                if hits[who] == 3:
                    return who
            case Event("round"):
                return "draw"


@workflow
async def respawn(monster: str, seconds: float) -> str:
    await timer("dead", seconds)
    return f"{monster} is back"


async def serve(system: ActorSystem, clock: VirtualClock) -> None:
    ticks = 0

    async def tick() -> None:  # the server's own 10 ms loop, never held up by the calls below
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    ref = await system.start_async(duel, "ana", "bo", id="duel-1")
    for who in ["ana", "bo", "ana", "ana"]:
        await ref.signal_async("hit", who)
    print("winner:", await ref.result_async(timeout=10))

    refs = [await system.start_async(respawn, f"orc-{i}", 5.0) for i in range(3)]
    waiting = [asyncio.create_task(r.result_async(timeout=10)) for r in refs]
    await asyncio.sleep(0.1)
    print("respawns pending:", sum(not w.done() for w in waiting), "ticker running:", ticks > 0)
    clock.advance(5)  # five seconds of game time pass
    print(await asyncio.gather(*waiting))
    await system.idle_async(timeout=10)
    ticker.cancel()


def main() -> None:
    clock = VirtualClock()
    with ActorSystem(":memory:", clock=clock) as system:
        asyncio.run(serve(system, clock))
