"""A class made in a workflow whose base, made there too, has an ``__init_subclass__`` that
reads variables (of the workflow, or of a function that made the base) is refused at the await.

A restore in another process makes such a class anew, which runs the hook: the workflow's frame
is still empty then (its variables come back after the classes it holds), so the restore failed,
after the checkpoint had been accepted; and where the variables were back, the hook ran a second
time on what it had done to them. The checkpoint names the variable that holds the class, the
base, the hook and the variables it reads. A hook that reads none (``super()``, class keywords,
attributes of ``cls``) restores anywhere (corpus_probe2).
"""

from __future__ import annotations

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness


def make_base():
    """A plugin base made by a function: its hook appends to the function's list."""
    registry = []

    class Plugin:
        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            registry.append(cls.__name__)

    return Plugin, registry


@workflow
async def hook_reads_a_workflow_variable():
    seen = []

    class Base:
        def __init_subclass__(cls, **kw):
            seen.append(cls.__name__)

    class Item(Base):
        pass

    await timer("t", 1)
    return seen, Item.__name__


@workflow
async def hook_reads_a_variable_of_the_function_that_made_the_base():
    plugin, registry = make_base()

    class Loader(plugin):
        pass

    await timer("t", 1)
    return registry, Loader.__name__


@workflow
async def subclass_held_in_a_list():
    seen = []

    class Base:
        @classmethod
        def __init_subclass__(cls):
            seen.append(cls.__name__)

    kinds = [type("Made", (Base,), {})]
    await timer("t", 1)
    return seen, kinds[0].__name__


@pytest.mark.parametrize(
    ("wf", "variable", "base", "reads"),
    [
        (hook_reads_a_workflow_variable, "Item", "Base", "seen"),
        (hook_reads_a_variable_of_the_function_that_made_the_base, "Loader", "Plugin", "registry"),
        (subclass_held_in_a_list, "kinds", "Base", "seen"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_a_subclass_whose_base_hook_reads_variables_is_refused_at_the_await(wf, variable, base, reads):
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    err = info.value
    msg = str(err)
    assert err.variable == variable, msg
    assert err.location and "await timer(" in msg
    assert f"<locals>.{base}, made in the workflow too, whose __init_subclass__" in msg, msg
    assert f"({reads})" in msg, msg
    assert f"Define {base} at module level" in msg and "del the variable" in msg, msg


def test_the_workflow_runs_natively_and_without_checkpoints():
    h = WorkflowHarness(hook_reads_a_workflow_variable, roundtrip=False)
    h.fire_timer("t")
    assert h.result() == (["Item"], "Item")
