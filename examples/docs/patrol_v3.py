# examples/docs/patrol_v3.py
"""Version 3: ``laps`` is renamed ``rounds``. It is live at the await, so instances of version 2
are held, until an upgrade function says where their lap count goes."""

from workflows import timer, workflow


@workflow(name="examples.docs.patrol:patrol")
async def patrol(guard: str) -> dict:
    rounds = 0
    while rounds < 3:
        await timer("rest", 2)
        rounds += 1
    return {"guard": guard, "rounds": rounds, "version": 3}


def from_v2(point: str, old: dict) -> tuple[str, dict] | None:
    """Version 2's continuations: the same await, with ``laps`` now called ``rounds``."""
    if point == "timer 'rest' #1":
        return point, {"guard": old["guard"], "rounds": old["laps"]}
    return None  # any other point: the automatic rules
