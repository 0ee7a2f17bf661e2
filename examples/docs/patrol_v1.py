# examples/docs/patrol_v1.py
"""Version 1 of a patrol: three laps, resting five seconds before each."""

from workflows import timer, workflow


@workflow(name="examples.docs.patrol:patrol")
async def patrol(guard: str) -> dict:
    laps = 0
    while laps < 3:
        await timer("rest", 5)
        laps += 1
    return {"guard": guard, "laps": laps}
