"""What a workflow put into a global it declares ``global`` and assigns is the workflow's.

``global CURRENT; CURRENT = {"hp": x}; mine = CURRENT``: the checkpoint wrote ``mine`` as "the
module's CURRENT", which a restore in a new process looked up there: the module's import-time
``{}``, silently. Such a global is not kept (its ``CompileWarning`` says so), but the local is:
what only it reaches is written by value, shared among the locals as it was.
"""

from __future__ import annotations

import warnings

from workflows import CompileWarning, timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import native, restarted

CURRENT: dict[str, object] = {}
ROSTER: list[list[str]] = []
BOSS = None


class Monster:
    def __init__(self, hp: int) -> None:
        self.hp = hp


with warnings.catch_warnings():
    warnings.simplefilter("ignore", CompileWarning)

    @workflow
    async def holds_what_it_put_into_globals():
        global CURRENT, BOSS
        CURRENT = {"hp": 5, "items": ["sword"]}
        mine = CURRENT
        also = CURRENT
        items = CURRENT["items"]
        BOSS = Monster(9)
        boss = BOSS
        ROSTER.append(["ann"])
        first = ROSTER[-1]
        await timer("t", 1)
        return (
            mine, also is mine, items is mine["items"], type(boss).__name__, boss.hp, first
        )


WANT = ({"hp": 5, "items": ["sword"]}, True, True, "Monster", 9, ["ann"])


def test_what_a_workflow_put_into_a_global_is_its_own_after_a_restore():
    assert native(holds_what_it_put_into_globals) == WANT
    h = WorkflowHarness(holds_what_it_put_into_globals, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == WANT


def test_what_a_workflow_put_into_a_global_is_its_own_in_a_new_process():
    assert restarted(holds_what_it_put_into_globals) == WANT


SCORES: dict[str, int] = {}

with warnings.catch_warnings():
    warnings.simplefilter("ignore", CompileWarning)

    @workflow
    async def holds_the_modules_object_of_a_global_it_assigns_later():
        global SCORES
        mine = SCORES  # the module's own, until the workflow assigns another
        await timer("t", 1)
        mine["ann"] = 1
        seen = dict(SCORES)
        SCORES = {"bob": 2}
        return mine is not SCORES, seen


def test_a_local_holding_the_modules_object_of_a_global_the_workflow_assigns_is_the_modules():
    """Until the workflow assigns SCORES another object, the object it holds is the module's:
    kept as the module's global, so a change through the local after a restore is the module's."""
    want = (True, {"ann": 1})
    imported = SCORES

    def reset():
        globals()["SCORES"] = imported
        imported.clear()

    try:
        assert native(holds_the_modules_object_of_a_global_it_assigns_later) == want
        reset()
        h = WorkflowHarness(holds_the_modules_object_of_a_global_it_assigns_later, roundtrip=True)
        h.fire_timer("t")
        assert h.result() == want
    finally:
        reset()
