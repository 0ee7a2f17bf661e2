"""Corpus: results of module-level cached functions (``functools.lru_cache``, ``functools.cache``)
held across awaits: the cache's own objects after a restore.

Each workflow first clears the caches it uses, so the native and the compiled runs start alike;
they change cached results and read them back through the cache, which a fresh process computes
anew, so they run in one process only.
"""

from __future__ import annotations

import functools

from workflows import timer, workflow

from . import moddata_cached as other
from .diffharness import C, add

IN_PROCESS_ONLY = True


def tick(n: int = 1):
    return timer("t", n)


@functools.lru_cache(maxsize=None)  # noqa: UP033 - lru_cache itself, as programs write it
def stats(pid):
    return {"hp": 100, "inv": [pid]}


@functools.lru_cache(maxsize=2)
def bounded(pid):
    return [pid]


@functools.lru_cache(maxsize=None, typed=True)
def typed(x):
    return {"x": x}


@functools.lru_cache(maxsize=8)
def by_keywords(pid, *, zone="north", level=1):
    return {"zone": zone, "level": level, "seen": []}


@functools.cache
def plain_cache(name):
    return {"name": name, "tags": set()}


class Monster:
    def __init__(self, name):
        self.name = name
        self.hp = 10


@functools.cache
def monster(name):
    return Monster(name)


@functools.cache
def pair(pid):
    return ({"left": pid}, {"right": pid})


HELD: list = []


def _clear():
    for f in (stats, bounded, typed, by_keywords, plain_cache, monster, pair, other.profile):
        f.cache_clear()
    HELD.clear()


@workflow
async def holds_a_cached_dict(pid):
    _clear()
    s = stats(pid)
    await tick()
    s["hp"] -= 10
    return stats(pid)["hp"], stats(pid) is s


add(holds_a_cached_dict, C(1), C("a"), C(2**70))


@workflow
async def holds_a_cached_result_in_a_container(pid):
    _clear()
    held = {"s": stats(pid), "all": [stats(pid), stats(pid + 1)]}
    await tick()
    held["s"]["hp"] -= 1
    held["all"][1]["hp"] -= 2
    return stats(pid)["hp"], stats(pid + 1)["hp"], held["all"][0] is stats(pid)


add(holds_a_cached_result_in_a_container, C(1), C(5), C(9))


@workflow
async def holds_an_item_of_a_cached_result(pid):
    _clear()
    inv = stats(pid)["inv"]
    await tick()
    inv.append("sword")
    return stats(pid)["inv"], inv is stats(pid)["inv"]


add(holds_an_item_of_a_cached_result, C(1), C(3), C(7))


@workflow
async def holds_typed_results(x):
    _clear()
    a, b = typed(x), typed(float(x))
    await tick()
    a["x"] = "int"
    b["x"] = "float"
    return typed(x), typed(float(x)), typed(x) is a, typed(float(x)) is b


add(holds_typed_results, C(1), C(7), C(-2))


@workflow
async def holds_results_of_calls_with_keywords(pid):
    _clear()
    a = by_keywords(pid, zone="south")
    b = by_keywords(pid, level=3, zone="east")
    c = by_keywords(pid)
    await tick()
    a["seen"].append(1)
    b["seen"].append(2)
    return (
        by_keywords(pid, zone="south")["seen"],
        by_keywords(pid, level=3, zone="east") is b,
        by_keywords(pid) is c,
    )


add(holds_results_of_calls_with_keywords, C(1), C("p"), C(0))


@workflow
async def holds_a_functools_cache_result(name):
    _clear()
    r = plain_cache(name)
    tags = r["tags"]
    await tick()
    tags.add("x")
    return sorted(plain_cache(name)["tags"]), plain_cache(name) is r


add(holds_a_functools_cache_result, C("a"), C("orc"), C("elf"))


@workflow
async def holds_a_cached_instance(name):
    _clear()
    m = monster(name)
    await tick()
    m.hp -= 3
    return monster(name).hp, monster(name) is m


add(holds_a_cached_instance, C("orc"), C("elf"), C("imp"))


@workflow
async def holds_parts_of_a_cached_tuple(pid):
    _clear()
    left, right = pair(pid)
    await tick()
    left["left"] = "changed"
    return pair(pid)[0], pair(pid)[1] is right


add(holds_parts_of_a_cached_tuple, C(1), C(4), C(8))


@workflow
async def holds_a_result_evicted_across_the_await(pid):
    _clear()
    first = bounded(pid)
    await tick()
    bounded(pid + 1)
    bounded(pid + 2)  # evicts bounded(pid)
    await tick()
    first.append("kept")
    again = bounded(pid)
    return first, again, again is first


add(holds_a_result_evicted_across_the_await, C(1), C(10), C(20))


@workflow
async def holds_a_result_cleared_across_the_await(pid):
    _clear()
    s = stats(pid)
    await tick()
    stats.cache_clear()
    await tick()
    s["hp"] -= 5
    return s["hp"], stats(pid)["hp"], stats(pid) is s


add(holds_a_result_cleared_across_the_await, C(1), C(2), C(3))


@workflow
async def holds_a_result_also_in_a_module_list(pid):
    _clear()
    s = stats(pid)
    HELD.append(s)
    await tick()
    s["hp"] = 1
    return HELD[0] is s, stats(pid) is s, stats(pid)["hp"]


add(holds_a_result_also_in_a_module_list, C(1), C(3), C(4))


@workflow
async def holds_a_result_of_another_modules_cache(pid):
    _clear()
    p = other.profile(pid)
    mine = stats(pid)
    await tick()
    p["visits"] += 1
    mine["hp"] += 1
    return other.profile(pid), other.profile(pid) is p, stats(pid)["hp"]


add(holds_a_result_of_another_modules_cache, C(1), C(2), C(3))


@workflow
async def adds_to_a_cached_result_before_the_await(pid):
    _clear()
    s = stats(pid)
    s["new"] = []
    new = s["new"]
    await tick()
    new.append(1)
    return stats(pid)["new"], new is stats(pid)["new"]


add(adds_to_a_cached_result_before_the_await, C(1), C(2), C(3))


@workflow
async def adds_to_a_cached_result_between_awaits(pid):
    _clear()
    s = stats(pid)
    await tick()
    s["hp"] -= 1
    s["new"] = [pid]
    new = s["new"]
    await tick()
    new.append(1)
    del s["inv"]
    await tick()
    return stats(pid), new is stats(pid)["new"], s is stats(pid)


add(adds_to_a_cached_result_between_awaits, C(1), C(2), C(3))


@workflow
async def caches_more_at_each_step(n):
    _clear()
    held = []
    for i in range(n):
        held.append(stats(i))
        await tick()
    for s in held:
        s["hp"] -= 1
    return [stats(i)["hp"] for i in range(n)], all(stats(i) is s for i, s in enumerate(held))


add(caches_more_at_each_step, C(1), C(4), C(2))
