"""Objects of the standard library that a restore can give back, kept instead of refused.

A ``random.SystemRandom`` held across an await draws from the operating system and has no state,
so a restore gives back one with the same attributes: it was refused at the checkpoint
(``NotImplementedError: System entropy source does not have state``, from ``Random``'s reduce).
A class made in the workflow with a ``functools.cached_property`` was refused on 3.11 (``cannot
pickle '_thread.RLock' object``, the lock the property held there), and is kept as on 3.12.
"""

from __future__ import annotations

import functools
import random

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import restarted


@workflow
async def rolls_secure_loot():
    rng = random.SystemRandom()
    rng.table = "epic"
    attrs = vars(rng)
    await timer("t", 1)
    roll = rng.randint(1, 6)
    return 1 <= roll <= 6, rng.table, attrs is vars(rng), type(rng) is random.SystemRandom


def test_a_system_random_is_kept_across_an_await():
    h = WorkflowHarness(rolls_secure_loot, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (True, "epic", True, True)


def test_a_system_random_is_kept_in_a_new_process():
    assert restarted(rolls_secure_loot) == (True, "epic", True, True)


@workflow
async def makes_a_class_with_a_cached_property():
    class Level:
        def __init__(self, xp):
            self.xp = xp

        @functools.cached_property
        def rank(self):
            """The rank of the level."""
            return self.xp // 100

    first = Level(250)
    before = first.rank
    await timer("t", 1)
    first.xp = 999
    second = Level(420)
    prop = vars(Level)["rank"]
    return before, first.rank, second.rank, prop.attrname, prop.__doc__


def test_a_class_made_in_the_workflow_with_a_cached_property_is_kept():
    want = (2, 2, 4, "rank", "The rank of the level.")
    h = WorkflowHarness(makes_a_class_with_a_cached_property, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want
    assert restarted(makes_a_class_with_a_cached_property) == want
