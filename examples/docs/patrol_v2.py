# examples/docs/patrol_v2.py
"""Version 2: a rest is two seconds, and the result says which version finished it."""

from workflows import timer, workflow


@workflow(name="examples.docs.patrol:patrol")
async def patrol(guard: str) -> dict:
    laps = 0
    while laps < 3:
        await timer("rest", 2)
        laps += 1
    return {"guard": guard, "laps": laps, "version": 2}
