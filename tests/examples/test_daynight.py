"""The day/night cycle: world time in the database, and the world_time broadcast."""

from __future__ import annotations

import json

from actors import Status
from examples.daynight import day_night_cycle
from workflows import signal, subscribe, workflow

from .support import T


@workflow
async def night_watch(nights: int) -> list[dict]:
    """Listen to world_time broadcasts and return the first ``nights`` nightfalls heard."""
    subscribe("world_time", None)
    heard = []
    while len(heard) < nights:
        news = await signal("world_time")
        if news["phase"] == "night":
            heard.append(news)
    return heard


def time_of_day(view):
    return json.loads(view.state("time_of_day")), json.loads(view.state("day"))


def test_phases_follow_each_other_in_test_mode(system, view):
    """Each fired phase timer moves the world to the next phase, and after night a new day dawns."""
    ref = system.start(day_night_cycle, id="world-daynight", test_mode=True)
    system.idle(timeout=T)
    seen = [time_of_day(view)]
    for _ in range(4):
        ref.debug_fire_timer("phase")
        system.idle(timeout=T)
        seen.append(time_of_day(view))
    assert seen == [("dawn", 1), ("day", 1), ("dusk", 1), ("night", 1), ("dawn", 2)]
    announcements = [r[0] for r in view.rows("SELECT text FROM world_announcements ORDER BY id")]
    assert announcements[-1] == "The sun rises over the hills."
    assert ref.status() is Status.RUNNING


def test_a_day_lasts_34_minutes_on_the_clock(system, clock, view):
    """Dawn 2 min, day 20, dusk 2, night 10: the world's time follows the virtual clock, day after day."""
    system.start(day_night_cycle, id="world-daynight")
    system.idle(timeout=T)
    for day in (1, 2, 3):
        expected = [
            (2 * 60, ("day", day)), (20 * 60, ("dusk", day)), (2 * 60, ("night", day)), (10 * 60, ("dawn", day + 1)),
        ]
        for seconds, phase in expected:
            clock.advance(seconds - 1)
            system.idle(timeout=T)
            assert time_of_day(view) != phase
            clock.advance(1)
            system.idle(timeout=T)
            assert time_of_day(view) == phase


def test_subscribers_hear_the_world_time(system, clock):
    """A workflow subscribed to world_time hears every phase change; this one waits for two nights."""
    watcher = system.start(night_watch, 2)
    system.start(day_night_cycle, [("day", 60), ("night", 30)], id="short-days")
    system.idle(timeout=T)
    for _ in range(4):
        clock.advance(60)
        system.idle(timeout=T)
    assert watcher.result(timeout=T) == [{"phase": "night", "day": 1}, {"phase": "night", "day": 2}]
