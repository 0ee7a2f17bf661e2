"""Objects of module data that only a module-level set reaches are refused at the await.

A local holding module data is checkpointed as the way to it from a global. Into a set, that way
was the element's position in the set's order, which follows hashes: in another process a set of
objects hashed by their address (or by string hashes, under another ``PYTHONHASHSEED``) is laid
out otherwise, and the position held another element. A workflow that picked ``chosen`` from a
module-level set got back another element after a restart, silently; a ``for`` loop over such a
set, suspended mid-way, went on at its old slot in the new layout (an element visited twice,
another never). Both are refused at the await now, naming the variable (or the loop) and saying
what to hold instead. An object that a list, a dict or an attribute reaches too is kept by that
way; a loop over a module-level set of strings goes on in another process over the elements it
had not visited, each once.
"""

from __future__ import annotations

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


class Handler:
    def __init__(self, name):
        self.name = name


# Hashed by their address: laid out otherwise in each process.
HANDLERS = {Handler(n) for n in "abcdefgh"}
# Reached through a list too (a global bound after the set's, so the set is walked first):
# kept by its index there.
LISTED_SET: set[Handler] = set()
LISTED = [Handler(n) for n in "pqrs"]
LISTED_SET.update(LISTED)
NAMES = {"alice", "bob", "carol", "dave", "erin", "frank"}


@workflow
async def holds_an_element_of_a_module_set():
    chosen = next(h for h in HANDLERS if h.name == "c")
    await timer("t", 1)
    return chosen.name, chosen in HANDLERS


@workflow
async def loops_over_a_module_set_of_objects():
    seen = []
    for h in HANDLERS:
        seen.append(h.name)
        await timer("t", 1)
    return sorted(seen)


@workflow
async def holds_an_element_of_a_module_set_that_a_list_holds_too():
    chosen = next(h for h in LISTED_SET if h.name == "r")
    await timer("t", 1)
    return chosen.name, chosen is LISTED[2], chosen in LISTED_SET


@workflow
async def loops_over_a_module_set_of_strings():
    seen = []
    for n in NAMES:
        seen.append(n)
        await timer("t", 1)
    return seen


@pytest.mark.parametrize(
    ("wf", "variable", "says"),
    [
        (holds_an_element_of_a_module_set, "chosen", "this Handler is an element of the module-level set HANDLERS"),
        (loops_over_a_module_set_of_objects, None, "the iterator of the for-loop"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_an_object_only_a_module_set_reaches_is_refused_at_the_await(wf, variable, says):
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    msg = str(info.value)
    assert info.value.variable == variable, msg
    assert says in msg and "await timer(" in msg, msg
    assert "module-level set HANDLERS" in msg and "sorted(...)" in msg, msg


def test_the_refused_workflows_run_without_checkpoints():
    h = WorkflowHarness(holds_an_element_of_a_module_set, roundtrip=False)
    h.fire_timer("t")
    assert h.result() == ("c", True)


def test_an_object_a_module_list_holds_too_is_kept_by_its_index_there():
    h = WorkflowHarness(holds_an_element_of_a_module_set_that_a_list_holds_too, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == ("r", True, True)


def _restarted(wf, steps=1):
    """What ``wf`` returns, checkpointed after ``steps`` steps in a new interpreter and resumed to
    its end in another one, each under its own ``PYTHONHASHSEED``."""
    blob = resume_in_a_new_interpreter(None, module=__name__, workflow=wf.__name__, steps=steps,
                                       hash_seed=1)
    return resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__,
                                       now=0.0, tick=1.0, steps=50, hash_seed=2)


def test_an_object_a_module_list_holds_too_is_the_same_one_in_a_new_process():
    assert _restarted(holds_an_element_of_a_module_set_that_a_list_holds_too) == ("r", True, True)


def test_a_loop_over_a_module_set_of_strings_visits_the_rest_once_in_a_new_process():
    seen = _restarted(loops_over_a_module_set_of_strings, steps=3)  # suspended on the 3rd element
    assert sorted(seen) == sorted(NAMES), seen
