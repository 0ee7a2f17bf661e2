"""An object of module data found by its place in a list or a dict is the same one in a new
process, also where the module built that container in an order of its own process.

A local holding module data is checkpointed as the way to it from a global: through a list, a
tuple or a dict keyed by objects, that way is a place (``HANDLERS[2]``). A module that builds such
a container from a set of strings (``HANDLERS = [Handler(n) for n in SKILLS]``) builds it in
another order under another ``PYTHONHASHSEED``, so after a restart the place held another object:
a workflow that picked the "ice" handler went on with the "fire" one, silently. In another process
the restore now checks that the object at that place holds what the checkpointed one held, and
otherwise takes the one element of that container that does.
"""

from __future__ import annotations

from collections import deque

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


class Handler:
    def __init__(self, name):
        self.name = name
        self.uses = 0


SKILLS = {"fire", "ice", "wind", "earth", "light", "shadow", "storm", "stone"}
# Built in the order of a set of strings: another order in each process.
HANDLERS = [Handler(s) for s in SKILLS]
BY_HANDLER = {Handler(s): s for s in SKILLS}
TABLE = {"skills": tuple(Handler(s) for s in SKILLS)}
# Built in a fixed order: kept by its place, as before.
SLOTS = [Handler("a"), Handler("a"), Handler("b")]
NAMES = list(SKILLS)
CONFIG = {"handlers": [Handler(s) for s in SKILLS]}
BY_NAME = {s: Handler(s) for s in SKILLS}
QUEUE = deque(Handler(s) for s in SKILLS)


@workflow
async def holds_a_handler_of_a_list_built_from_a_set(name):
    chosen = next(h for h in HANDLERS if h.name == name)
    await timer("t", 1)
    return chosen.name, chosen in HANDLERS


@workflow
async def holds_a_key_of_a_dict_built_from_a_set(name):
    key = next(k for k, v in BY_HANDLER.items() if v == name)
    await timer("t", 1)
    return key.name, BY_HANDLER[key]


@workflow
async def holds_a_handler_of_a_nested_tuple(name):
    chosen = next(h for h in TABLE["skills"] if h.name == name)
    await timer("t", 1)
    return chosen.name, any(h is chosen for h in TABLE["skills"])


@workflow
async def holds_one_of_two_equal_handlers():
    chosen = SLOTS[1]
    await timer("t", 1)
    return chosen is SLOTS[1]


@workflow
async def picks_a_handler_and_counts_its_use(name):
    chosen = next(h for h in HANDLERS if h.name == name)
    chosen.uses += 1
    await timer("t", 1)
    return chosen.name


@workflow
async def loops_over_handlers_counting_their_uses(steps):
    seen = []
    for h in HANDLERS:
        h.uses += 1
        if len(seen) == steps:
            await timer("t", 1)
        seen.append(h.name)
    return sorted(seen)


@workflow
async def loops_over_a_list_built_from_a_set(steps):
    seen = []
    for h in HANDLERS:
        if len(seen) == steps:
            await timer("t", 1)
        seen.append(h.name)
    return sorted(seen)


@workflow
async def loops_over_a_list_appended_to_after_the_await(steps):
    seen = []
    for h in HANDLERS:
        if len(seen) == steps:
            await timer("t", 1)
            HANDLERS.append(Handler("extra"))
        seen.append(h.name)
    HANDLERS.pop()
    return sorted(seen)


@workflow
async def loops_over_names_built_from_a_set(steps):
    seen = []
    for i, n in enumerate(NAMES):
        if i == steps:
            await timer("t", 1)
        seen.append((i, n))
    return sorted(n for _i, n in seen), [i for i, _n in seen]


@workflow
async def holds_reversed_and_nested_iterators(steps):
    back = reversed(CONFIG["handlers"])
    fwd = iter(CONFIG["handlers"])
    first = [next(back).name for _ in range(steps)] + [next(fwd).name for _ in range(steps)]
    await timer("t", 1)
    return sorted(first[:steps] + [h.name for h in back]), sorted(first[steps:] + [h.name for h in fwd])


@workflow
async def loops_over_a_dict_built_from_a_set(steps):
    seen = []
    for name, h in BY_NAME.items():
        if len(seen) == steps:
            await timer("t", 1)
        seen.append((name, h.name))
    return sorted(seen)


@workflow
async def holds_iterators_of_a_dict_and_a_deque_built_from_a_set(steps):
    its = [reversed(BY_NAME), iter(BY_NAME.values()), iter(QUEUE), reversed(QUEUE)]
    first = [[next(it) for _ in range(steps)] for it in its]
    await timer("t", 1)
    out = []
    for got, it in zip(first, its, strict=True):
        out.append(sorted(x if type(x) is str else x.name for x in [*got, *it]))
    return out


def _restarted(wf, *args):
    """The outcome of ``wf(*args)`` checkpointed in one process and restored in others, each
    under another ``PYTHONHASHSEED`` (so that the module's set is in another order)."""
    blob = resume_in_a_new_interpreter(None, module=__name__, workflow=wf.__name__, args=args,
                                       hash_seed=1)
    return [
        resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__,
                                    hash_seed=seed)
        for seed in (2, 3, 4)
    ]


def test_a_handler_of_a_list_built_from_a_set_is_the_same_one_in_a_new_process():
    for name in ("ice", "storm"):
        got = _restarted(holds_a_handler_of_a_list_built_from_a_set, name)
        assert got == [(name, True)] * 3, got


def test_a_key_of_a_dict_built_from_a_set_is_the_same_one_in_a_new_process():
    got = _restarted(holds_a_key_of_a_dict_built_from_a_set, "wind")
    assert got == [("wind", "wind")] * 3, got


def test_a_handler_of_a_nested_tuple_is_the_same_one_in_a_new_process():
    got = _restarted(holds_a_handler_of_a_nested_tuple, "earth")
    assert got == [("earth", True)] * 3, got


def test_of_equal_objects_the_one_at_its_place_is_kept():
    assert _restarted(holds_one_of_two_equal_handlers) == [True] * 3
    h = WorkflowHarness(holds_one_of_two_equal_handlers, roundtrip=True)
    h.fire_timer("t")
    assert h.result() is True


def test_in_the_same_process_the_place_is_followed_as_written():
    h = WorkflowHarness(holds_a_handler_of_a_list_built_from_a_set, "ice", roundtrip=True)
    h.fire_timer("t")
    assert h.result() == ("ice", True)


def test_a_containers_order_is_recorded_once_for_its_elements(monkeypatch):
    """A workflow holding an element of a module list checkpoints at every step: the list's
    elements are fingerprinted at the first checkpoint only, and again once it holds others."""
    from workflows._compiler import _pickle_modules

    calls = []
    real = _pickle_modules.fingerprint
    monkeypatch.setattr(_pickle_modules, "fingerprint", lambda o: calls.append(o) or real(o))
    monkeypatch.setattr(_pickle_modules, "_ORDERS", {})
    h = WorkflowHarness(holds_a_handler_of_a_list_built_from_a_set, "ice", roundtrip=False)
    first = h.checkpoint()
    assert len(calls) == len(HANDLERS)
    calls.clear()
    assert h.checkpoint() == first and calls == []
    HANDLERS.append(Handler("extra"))
    try:
        h.checkpoint()
        assert len(calls) == len(HANDLERS)
    finally:
        HANDLERS.pop()


def test_a_loop_over_a_list_built_from_a_set_visits_each_item_once_in_a_new_process():
    """The loop's iterator was its list and an index: in another process the index went on over
    the list in that process's order, visiting some handlers twice and others never."""
    for steps in (1, 3, 7):
        assert _restarted(loops_over_a_list_built_from_a_set, steps) == [sorted(SKILLS)] * 3
    got = _restarted(loops_over_a_list_appended_to_after_the_await, 3)
    assert got == [sorted([*SKILLS, "extra"])] * 3, got  # as the list's own iterator sees it
    got = _restarted(loops_over_names_built_from_a_set, 4)
    assert got == [(sorted(SKILLS), list(range(8)))] * 3, got


def test_reversed_and_nested_iterators_of_a_list_built_from_a_set_go_on_in_a_new_process():
    got = _restarted(holds_reversed_and_nested_iterators, 3)
    assert got == [(sorted(SKILLS), sorted(SKILLS))] * 3, got


def test_in_the_same_process_a_loop_over_a_module_list_follows_the_list():
    """In the process that made the checkpoint the iterator is the list's, at its index: an
    item appended after the await is visited, as natively."""
    h = WorkflowHarness(loops_over_a_list_built_from_a_set, 2, roundtrip=True)
    HANDLERS.append(Handler("extra"))
    try:
        h.fire_timer("t")
        assert h.result() == sorted([*SKILLS, "extra"])
    finally:
        HANDLERS.pop()


def test_a_loop_over_a_dict_built_from_a_set_visits_each_key_once_in_a_new_process():
    """The loop went on after its count of keys visited, over the dict in the new order."""
    want = sorted((s, s) for s in SKILLS)
    for steps in (1, 5):
        assert _restarted(loops_over_a_dict_built_from_a_set, steps) == [want] * 3


def test_iterators_of_a_dict_and_a_deque_built_from_a_set_go_on_in_a_new_process():
    got = _restarted(holds_iterators_of_a_dict_and_a_deque_built_from_a_set, 3)
    assert got == [[sorted(SKILLS)] * 4] * 3, got


def test_a_handler_changed_in_place_before_the_await_is_the_same_one_in_a_new_process():
    """The workflow counted a use on the handler it picked (or on each it looped over) before
    the checkpoint, which a new process's import does not have: the list no longer held the
    same objects by fingerprint, so the restore went by place, to another handler ("ice" went
    on as "earth"). It is found by what no other handler has (its name)."""
    for name in ("ice", "stone"):
        assert _restarted(picks_a_handler_and_counts_its_use, name) == [name] * 3
    for steps in (1, 4):
        assert _restarted(loops_over_handlers_counting_their_uses, steps) == [sorted(SKILLS)] * 3
