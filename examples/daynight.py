"""The world's day/night cycle: a workflow that never ends."""

from __future__ import annotations

from workflows import broadcast, reducer, timer, workflow

from .world import DAY_PHASES, announce, set_world_state

PHASE_TEXT = {
    "dawn": "The sun rises over the hills.",
    "day": "It is full day.",
    "dusk": "The sun sets; lanterns are lit.",
    "night": "Night falls. Stay near the fires.",
}


@workflow
async def day_night_cycle(phases: list[tuple[str, float]] | None = None) -> None:
    """Move the world through dawn, day, dusk and night, for ever.

    Each phase sets the world's time of day, announces it, and broadcasts ``world_time`` (filter
    ``None``, payload ``{"phase", "day"}``) to whatever subscribed. Like every workflow here it
    resumes from its saved locals, so running for years costs no more than running for a day.
    """
    phases = phases or DAY_PHASES
    day = 0
    while True:
        day += 1
        for phase, seconds in phases:
            reducer(set_world_state, "time_of_day", phase)
            reducer(set_world_state, "day", day)
            reducer(announce, PHASE_TEXT.get(phase, f"It is {phase}."))
            broadcast("world_time", None, {"phase": phase, "day": day})
            await timer("phase", seconds)
