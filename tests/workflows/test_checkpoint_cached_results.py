"""A result of a module-level ``functools.lru_cache``/``functools.cache`` function held in a local
is the cache's object after a restore, in the same process and in a new one.

``s = stats(pid)`` held across an await came back a copy: ``s["hp"] -= 10`` after it no longer
changed what ``stats(pid)`` returns, and ``stats(pid) is s`` was False (natively True). The
cache's results are module data: written as the call, and got from the cache again (made again
by the call in a new process). Where the call could not be made again, the checkpoint refuses,
naming the variable.
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import pytest

from workflows import CheckpointError, timer, workflow
from workflows._compiler import _pickle_caches, _pickle_modules, restore, step
from workflows._context import StepContext
from workflows.testing import WorkflowHarness

from . import moddata_cached as other
from .test_checkpoint_made_classes import native, restarted


@functools.lru_cache(maxsize=None)  # noqa: UP033 - lru_cache itself, as programs write it
def stats(pid):
    return {"hp": 100, "inv": [pid]}


@functools.lru_cache(maxsize=None, typed=True)
def typed(x):
    return {"x": x}


@functools.lru_cache(maxsize=4)
def by_keywords(pid, *, zone="north"):
    return {"zone": zone, "seen": []}


@functools.cache
def plain_cache(name):
    return {"name": name, "tags": []}


@functools.cache
def keyed_by_object(obj):
    return {"of": type(obj).__name__}


class Repo:
    @functools.cache  # noqa: B019 - the module's one instance: cached for the process's life
    def load(self, key):
        return {"key": key, "hits": 0}


REPO = Repo()


class Token:
    """Hashed by its identity."""


@workflow
async def fight(pid=1):
    s = stats(pid)
    await timer("t", 1)
    s["hp"] -= 10
    return stats(pid)["hp"], stats(pid) is s


@workflow
async def holds_results_in_a_container(pid=1):
    held = {"all": [stats(pid), stats(pid + 1)], "inv": stats(pid)["inv"]}
    await timer("t", 1)
    held["all"][1]["hp"] -= 1
    held["inv"].append("sword")
    return (
        stats(pid + 1)["hp"],
        stats(pid)["inv"],
        held["all"][0] is stats(pid),
        held["inv"] is stats(pid)["inv"],
    )


@workflow
async def holds_typed_results(x=1):
    a, b = typed(x), typed(float(x))
    await timer("t", 1)
    a["x"] = "int"
    return typed(x), typed(float(x)), typed(x) is a, typed(float(x)) is b


@workflow
async def holds_results_of_keyword_calls(pid=1):
    a = by_keywords(pid, zone="south")
    b = by_keywords(pid)
    await timer("t", 1)
    a["seen"].append(1)
    return by_keywords(pid, zone="south")["seen"], by_keywords(pid) is b, by_keywords(pid, zone="south") is a


@workflow
async def holds_a_functools_cache_result(name="orc"):
    r = plain_cache(name)
    await timer("t", 1)
    r["tags"].append("x")
    return plain_cache(name)["tags"], plain_cache(name) is r


@workflow
async def holds_another_modules_result(pid=1):
    p = other.profile(pid)
    await timer("t", 1)
    p["visits"] += 1
    return other.profile(pid)["visits"], other.profile(pid) is p


@workflow
async def holds_a_cached_methods_result(key="k"):
    r = REPO.load(key)
    await timer("t", 1)
    r["hits"] += 1
    return REPO.load(key)["hits"], REPO.load(key) is r


@workflow
async def holds_a_result_keyed_by_its_own_object():
    t = Token()
    r = keyed_by_object(t)
    await timer("t", 1)
    return keyed_by_object(t) is r


@dataclasses.dataclass(frozen=True)
class Conn:
    """Hashed by its name; holds a lock, which does not pickle."""

    name: str
    lock: object = dataclasses.field(default_factory=threading.Lock, compare=False)


@workflow
async def holds_a_result_keyed_by_an_object_holding_a_lock():
    r = keyed_by_object(Conn("db"))
    await timer("t", 1)
    return r


SHARED_RESULT = {"shared": True}


@functools.cache
def unbounded_sometimes_shared(pid):
    return SHARED_RESULT if pid == 2 else {"pid": pid}


@functools.lru_cache(maxsize=8)
def bounded_sometimes_shared(pid):
    return SHARED_RESULT if pid == 2 else {"pid": pid}


@workflow
async def holds_a_result_of_a_refilled_unbounded_cache():
    a = unbounded_sometimes_shared(1)
    await timer("t", 1)
    return a is unbounded_sometimes_shared(1)


@workflow
async def holds_a_result_of_a_refilled_bounded_cache():
    a = bounded_sometimes_shared(1)
    await timer("t", 1)
    return a is bounded_sometimes_shared(1)


@workflow
async def holds_what_was_put_into_a_result(pid=1):
    bag = stats(pid)["bag"]
    await timer("t", 1)
    bag.append("rope")
    return stats(pid)["bag"], stats(pid)["bag"] is bag


ROOMS = {"hall": {"name": "hall"}}


@functools.cache
def room_for(token):
    return ROOMS["hall"]


@workflow
async def holds_module_data_a_cached_function_returns_for_an_object():
    room_for(Token())
    r = ROOMS["hall"]
    await timer("t", 1)
    return r is ROOMS["hall"]


@functools.cache
def tagged_by_object(obj):  # (the first of the two cached functions the module binds)
    return {"inner": tagged("shared")}


@functools.cache
def tagged(name):
    return {"name": name}


@workflow
async def holds_a_result_also_held_by_a_result_keyed_by_an_object():
    t = Token()
    r = tagged_by_object(t)["inner"]
    tagged("shared")
    await timer("t", 1)
    return r is tagged("shared"), r is tagged_by_object(t)["inner"]


def _clear():
    for f in (
        stats, typed, by_keywords, plain_cache, keyed_by_object, other.profile,
        unbounded_sometimes_shared, bounded_sometimes_shared, room_for, tagged, tagged_by_object,
    ):
        f.cache_clear()
    Repo.load.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_caches():
    _clear()
    yield
    _clear()


def _resume(blob: bytes, wf):
    with StepContext(workflow_id="w", workflow_type=wf.__workflow_key__, now=1.0).active():
        return step(restore(blob), send=None).value


SAME_AS_NATIVE = [
    (fight, (90, True)),
    (holds_results_in_a_container, (99, [1, "sword"], True, True)),
    (holds_typed_results, ({"x": "int"}, {"x": 1.0}, True, True)),
    (holds_results_of_keyword_calls, ([1], True, True)),
    (holds_a_functools_cache_result, (["x"], True)),
    (holds_another_modules_result, (1, True)),
    (holds_a_cached_methods_result, (1, True)),
]


@pytest.mark.parametrize(("wf", "want"), SAME_AS_NATIVE, ids=[wf.__name__ for wf, _ in SAME_AS_NATIVE])
def test_a_cached_result_is_the_caches_object_after_a_restore_in_the_same_process(wf, want):
    assert native(wf) == want
    _clear()
    h = WorkflowHarness(wf, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want


@pytest.mark.parametrize(("wf", "want"), SAME_AS_NATIVE, ids=[wf.__name__ for wf, _ in SAME_AS_NATIVE])
def test_a_cached_result_is_the_caches_object_after_a_restore_in_a_new_process(wf, want):
    assert restarted(wf) == want


def test_a_result_changed_before_the_checkpoint_is_the_caches_in_the_same_process():
    """The restore gets the cache's object, with what the workflow changed in it, not the call
    made again."""
    h = WorkflowHarness(fight, roundtrip=False)
    stats(1)["hp"] = 50
    blob = h.checkpoint()
    assert _resume(blob, fight) == (40, True)


def test_a_result_the_cache_let_go_of_comes_back_as_the_value_it_had():
    """Cleared (or evicted) between the checkpoint and the restore: natively the local still
    holds the old object, which the cache no longer returns; the restore neither calls the
    function for it nor takes the new entry for it."""
    h = WorkflowHarness(fight, roundtrip=False)
    blob = h.checkpoint()
    stats(1)["hp"] = 70
    stats.cache_clear()
    assert _resume(blob, fight) == (100, False)
    assert stats.cache_info().misses == 1  # (the workflow's own call after the await)
    # Natively, the same:
    stats.cache_clear()
    n = WorkflowHarness(fight, native=True)
    stats.cache_clear()
    n.send(None)
    assert n.result() == (100, False)


def test_a_result_the_cache_made_again_since_comes_back_as_the_value_it_had():
    h = WorkflowHarness(fight, roundtrip=False)
    blob = h.checkpoint()
    stats.cache_clear()
    fresh = stats(1)  # another object for the same call
    fresh["hp"] = 1
    assert _resume(blob, fight) == (1, False)


def test_a_result_also_held_by_module_data_is_the_same_object_for_both():
    HELD.clear()
    h = WorkflowHarness(holds_a_result_also_in_a_module_list, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (True, True, 1)
    HELD.clear()


HELD: list = []


@workflow
async def holds_a_result_also_in_a_module_list():
    s = stats(3)
    HELD.append(s)
    await timer("t", 1)
    s["hp"] = 1
    return HELD[0] is s, stats(3) is s, stats(3)["hp"]


def test_a_result_keyed_by_an_object_the_checkpoint_copies_is_refused_naming_the_variable():
    h = WorkflowHarness(holds_a_result_keyed_by_its_own_object, roundtrip=False)
    with pytest.raises(CheckpointError) as err:
        h.checkpoint()
    e = err.value
    assert e.variable == "r"
    assert "keyed_by_object()" in str(e) and "hashes by its identity" in str(e)


def test_a_result_keyed_by_an_argument_that_does_not_pickle_is_refused_naming_the_variable():
    h = WorkflowHarness(holds_a_result_keyed_by_an_object_holding_a_lock, roundtrip=False)
    with pytest.raises(CheckpointError) as err:
        h.checkpoint()
    e = err.value
    assert e.variable == "r"
    assert "arguments cannot be written" in str(e) and "lock" in str(e)


def test_a_result_whose_key_cannot_be_read_back_is_refused_naming_the_variable(monkeypatch):
    def unreadable(key, typed):
        raise ValueError("a key of an unknown shape")

    monkeypatch.setattr(_pickle_caches, "decode", unreadable)
    _pickle_modules._WALKS.clear()
    try:
        h = WorkflowHarness(fight, roundtrip=False)
        with pytest.raises(CheckpointError) as err:
            h.checkpoint()
    finally:
        _pickle_modules._WALKS.clear()
    assert err.value.variable == "s"
    assert "cannot be read back" in str(err.value) and "stats(...)" in str(err.value)


@pytest.mark.parametrize(
    ("typed_", "args", "kwargs"),
    [
        (False, (1,), {}),
        (False, ("a",), {}),
        (False, (True,), {}),
        (False, (1.5,), {}),
        (False, ((1, 2),), {}),
        (False, (), {}),
        (False, (1, "b"), {}),
        (False, (1,), {"zone": "x", "level": 2}),
        (False, (), {"zone": "x"}),
        (True, (1,), {}),
        (True, (1, 2.0), {}),
        (True, (1,), {"zone": "x"}),
        (True, (), {"zone": 3}),
    ],
)
def test_a_key_is_read_back_into_the_call_that_made_it(typed_, args, kwargs):
    f = functools.lru_cache(maxsize=None, typed=typed_)(lambda *a, **k: object())
    f(*args, **kwargs)
    d, pairs = _pickle_caches.entries(f, False)
    ((key, _result),) = pairs
    got_args, got_kwargs = _pickle_caches.decode(key, typed_)
    assert got_args == args and dict(got_kwargs) == kwargs
    assert list(dict(got_kwargs)) == list(kwargs)  # in the call's order
    assert _pickle_caches.make_key(got_args, got_kwargs, typed_) in d


def test_the_entries_of_a_bounded_cache_are_read_in_any_order():
    f = functools.lru_cache(maxsize=3)(lambda x, **k: [x])
    a, b = f(1), f(2, k=1)
    f(1)  # moves 1 after 2 in the cache's order
    c = f("z")
    d, pairs = _pickle_caches.entries(f, True)
    assert len(d) == 3
    assert {id(r) for _k, r in pairs} == {id(a), id(b), id(c)}


def test_a_cache_is_indexed_again_only_when_it_changed(monkeypatch):
    """Hits, and a number changed in a result, leave the index as it was; a miss (a new entry),
    or an object put into a result, index that cache again."""
    calls = []
    real = _pickle_caches._Cache.index

    def spy(self, *a):
        calls.append(self.fn)
        return real(self, *a)

    monkeypatch.setattr(_pickle_caches._Cache, "index", spy)
    _pickle_modules._WALKS.clear()
    h = WorkflowHarness(fight, roundtrip=False)
    h.checkpoint()
    first = calls.count(stats)
    assert first == 1
    stats(1)
    stats(1)  # hits
    h.checkpoint()
    assert calls.count(stats) == first
    stats(1)["hp"] -= 5
    h.checkpoint()
    assert calls.count(stats) == first
    stats(2)  # a miss
    h.checkpoint()
    assert calls.count(stats) == first + 1
    stats(1)["bag"] = []
    h.checkpoint()
    assert calls.count(stats) == first + 2


def _walk_of(module):
    g = vars(module)
    _pickle_modules.ModuleData({id(g): ("k", g)}).paths()
    return _pickle_modules._WALKS[(_pickle_modules._PATH_BUDGET, ("k", id(g)))]


def test_only_a_walk_that_meets_cached_functions_indexes_caches():
    import sys

    from . import corpus_control  # a module without cached functions

    assert _walk_of(corpus_control).caches is None
    caches = _walk_of(sys.modules[__name__]).caches
    assert caches is not None
    assert {c.fn for c in caches.caches} >= {stats, typed, by_keywords, plain_cache, other.profile}


@pytest.mark.parametrize(
    ("wf", "fn"),
    [
        (holds_a_result_of_a_refilled_unbounded_cache, unbounded_sometimes_shared),
        (holds_a_result_of_a_refilled_bounded_cache, bounded_sometimes_shared),
    ],
)
def test_a_cache_cleared_and_filled_again_alike_is_indexed_again(wf, fn):
    """Cleared, then filled again with as many misses and entries, the newest being the same
    object as before: its new results are the cache's objects after a restore (a copy came
    back: the cache was not indexed again)."""
    fn(1), fn(2)  # the newest entry: SHARED_RESULT
    WorkflowHarness(wf, roundtrip=False).checkpoint()  # (indexes the cache)
    fn.cache_clear()
    fn(1), fn(2)  # the same misses and size, the same newest object; a new result for 1
    h = WorkflowHarness(wf, roundtrip=False)
    assert _resume(h.checkpoint(), wf) is True


def test_an_object_put_into_a_result_after_the_cache_was_indexed_is_the_results():
    """Held alone (not the result holding it): found where the checkpoint looks for objects
    that something other than the workflow holds."""
    stats(1)
    WorkflowHarness(fight, roundtrip=False).checkpoint()  # (indexes the cache)
    stats(1)["bag"] = ["map"]
    h = WorkflowHarness(holds_what_was_put_into_a_result, roundtrip=False)
    assert _resume(h.checkpoint(), holds_what_was_put_into_a_result) == (["map", "rope"], True)


def test_module_data_a_cached_function_also_returns_for_an_object_is_kept_by_its_own_path():
    """An object of module data that a cached function keyed by an object's identity returns
    too is written by its module path (it was refused, as a result whose call a restore could
    not make again)."""
    assert native(holds_module_data_a_cached_function_returns_for_an_object) is True
    h = WorkflowHarness(holds_module_data_a_cached_function_returns_for_an_object, roundtrip=True)
    h.fire_timer("t")
    assert h.result() is True


def test_a_result_held_through_an_object_keyed_call_and_a_plain_one_is_kept_by_the_plain_one():
    """Returned for a plain call and held by a result keyed by an object: written as the
    plain call's result (it was refused when the object-keyed cache came first)."""
    want = (True, True)
    assert native(holds_a_result_also_held_by_a_result_keyed_by_an_object) == want
    _clear()
    h = WorkflowHarness(holds_a_result_also_held_by_a_result_keyed_by_an_object, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == want


@workflow
async def holds_its_own_list(n=1):
    mine = [n, {"k": [n]}]
    await timer("t", 1)
    return mine


def test_locals_only_the_workflow_holds_are_not_looked_for_among_cached_results(monkeypatch):
    """What the cached results hold is looked at only where a local may be one of them (held by
    something else too), not at every checkpoint: cost in proportion to the caches."""
    for pid in range(50):
        stats(pid)
    h = WorkflowHarness(holds_its_own_list, roundtrip=False)
    h.checkpoint()
    looked: list[object] = []
    real = _pickle_caches._Contents.current

    def spy(self):
        looked.append(self)
        return real(self)

    monkeypatch.setattr(_pickle_caches._Contents, "current", spy)
    assert _resume(h.checkpoint(), holds_its_own_list) == [1, {"k": [1]}]
    assert looked == []
    h2 = WorkflowHarness(fight, roundtrip=False)  # holds a cached result: looked at
    h2.checkpoint()  # (indexes the caches)
    assert _resume(h2.checkpoint(), fight) == (90, True)
    assert looked
