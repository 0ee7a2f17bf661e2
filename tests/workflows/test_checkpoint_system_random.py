"""A ``random.SystemRandom`` held across an await is kept: it draws from the operating system
and has no state, so a restore gives back one with the same attributes.

It was refused at the checkpoint (``NotImplementedError: System entropy source does not have
state``, from ``Random``'s reduce), though nothing of it is lost by a restore.
"""

from __future__ import annotations

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
