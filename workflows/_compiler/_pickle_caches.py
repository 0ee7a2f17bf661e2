"""The results of the application's cached functions in a checkpoint: module data, kept as the
call that returns them.

``stats`` bound at module level to ``functools.lru_cache(...)(f)`` or ``functools.cache(f)``:
natively ``s = stats(pid)`` holds the cache's own object, so ``s is stats(pid)`` holds across an
await and ``s["hp"] -= 10`` changes what the next ``stats(pid)`` returns. Written by value, ``s``
came back a copy. Such a result, and what it reaches (items, attributes, as module data is
walked), is module data: its path goes through the step ("L", (process, args, kwargs)), the
entry of that call in the cache of the function the path leads to (``stats(pid)["inv"]``). A
restore in the process that wrote it gives back the entry's object if the cache still holds it
for that call, else the value written (the cache let go of it: ``cache_clear()``, an eviction);
in another process it makes the call, which computes the result and caches it there, as the
program's first call after a restart does.

The cached functions are those a walk of module data meets (``_pickle_modules``): globals of
the frames' namespaces and of the modules they import, and those module data holds (a class's
cached method). The arguments come from the cache's keys, read back (``decode``) as
``functools`` made them (``_make_key``: the arguments, a marker and the keyword pairs, their types
where ``typed=True``, a lone int or str argument as itself). Each cache's results are indexed
into the walk's index when the walk is made, and again only where the cache changed since: its
size or its newest entry (a miss adds one, an eviction or ``cache_clear()`` changes the size or
the newest entry) or what its results hold (checked as the walk checks module data). A checkpoint
whose frames run in modules without cached functions does none of this.

Refused at the await (``CachedCallRefused``), naming the variable: a result whose key cannot be
read back into arguments, or whose arguments cannot be written, or hash by the identity of an
object the checkpoint copies (the call of the restored arguments would be another cache entry).
"""

from __future__ import annotations

import collections
import functools
import gc
import itertools
import operator
import sys
import threading
import types
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from . import _pickle_modules as _pm
from ._pickle_sets import BY_VALUE, hash_identities
from ._pickle_values import ValueRefused

LRU_WRAPPER: Any = type(functools.lru_cache(maxsize=None)(len))  # functools._lru_cache_wrapper
_TYPE_NAME = f"{LRU_WRAPPER.__module__}.{LRU_WRAPPER.__qualname__}"
_FAST_TYPES = (int, str)  # a lone argument of one of these is its own key (not typed)
_NONE: Any = object()
_FIFTH = operator.itemgetter(4)


class CachedCallRefused(ValueRefused):
    """A cached function's result that a restore could not get from its cache again."""


def _kwd_mark() -> Any:
    """The marker ``functools`` puts between the arguments and the keyword pairs of a key, or
    None where its caches are not laid out as this module reads them (``_cache_dict``)."""
    probe = functools.lru_cache(maxsize=None)(lambda **kw: None)
    probe(x=1)
    for r in gc.get_referents(probe):
        if type(r) is dict and len(r) == 1:
            (key,) = r
            if type(key) is tuple and len(key) == 3 and key[1:] == ("x", 1):
                mark = key[0]
                found = _cache_dict(probe, mark)
                return mark if found is not None and found[0] is r else None
    return None


def _cache_dict(fn: Any, mark: Any) -> tuple[dict[Any, Any], list[Any], int] | None:
    """The cache dict of cached function ``fn``, its referents and the dict's place among them.
    CPython's wrapper lists (``gc.get_referents``) its type, the key, result and link type of
    each entry of a bounded cache (oldest first), then the cache dict, the function and the
    marker."""
    refs = gc.get_referents(fn)
    for j in range(len(refs) - 1, 1, -1):
        if refs[j] is mark:
            d = refs[j - 2]
            return (d, refs, j - 2) if type(d) is dict else None
    return None


_MARK = _kwd_mark()


def entries(fn: Any, bounded: bool) -> tuple[dict[Any, Any], list[tuple[Any, Any]]] | None:
    """The cache dict of ``fn`` and its (key, result) pairs, or None where they cannot be read."""
    if _MARK is None:
        return None
    found = _cache_dict(fn, _MARK)
    if found is None:
        return None
    d, refs, at = found
    if not bounded:
        return d, list(d.items())
    n = len(d)
    start = at - 3 * n
    if start < 0:
        return None
    triples = refs[start:at]
    keys, results, links = triples[0::3], triples[1::3], triples[2::3]
    link_type = refs[at + 3] if at + 3 < len(refs) else None  # after the function and marker
    if any(t is not link_type for t in links) or set(map(id, keys)) != set(map(id, d)):
        return None
    return d, list(zip(keys, results, strict=True))


def decode(key: Any, typed: bool) -> tuple[tuple[Any, ...], tuple[tuple[str, Any], ...]]:
    """The arguments and keyword pairs of the call that made cache key ``key`` (ValueError where
    it is not a key ``functools`` makes)."""
    if type(key) is not tuple:
        if typed or type(key) not in _FAST_TYPES:
            raise ValueError(f"a key of type {type(key).__name__}")
        return (key,), ()
    marks = [i for i, x in enumerate(key) if x is _MARK]
    if len(marks) > 1:
        raise ValueError("a key holding its keyword marker twice")
    n = len(key)
    if not marks:
        if not typed:
            return key, ()
        half = n // 2
        args, types = key[:half], key[half:]
        if n % 2 or not all(map(operator.is_, map(type, args), types)):
            raise ValueError("a typed key whose types are not its arguments'")
        return args, ()
    i = marks[0]
    args, rest = key[:i], key[i + 1 :]
    if typed:
        m = len(rest) - len(args)
        if m < 3 or m % 3:
            raise ValueError("a typed key of an unknown shape")
        k = m // 3
        pairs, types = rest[: 2 * k], rest[2 * k :]
    else:
        pairs, types = rest, ()
    if not pairs or len(pairs) % 2:
        raise ValueError("a key of an unknown shape")
    kwargs = tuple(zip(pairs[0::2], pairs[1::2], strict=True))
    if any(type(name) is not str for name, _v in kwargs):
        raise ValueError("a key whose keyword names are not strings")
    if typed and not all(
        map(operator.is_, map(type, (*args, *(v for _n, v in kwargs))), types)
    ):
        raise ValueError("a typed key whose types are not its arguments'")
    return args, kwargs


def make_key(args: tuple[Any, ...], kwargs: tuple[tuple[str, Any], ...], typed: bool) -> Any:
    """The key ``functools`` makes for a call (the inverse of ``decode``)."""
    if not typed and not kwargs:
        if len(args) == 1 and type(args[0]) in _FAST_TYPES:
            return args[0]
        return args
    key = args
    if kwargs:
        key += (_MARK, *(x for pair in kwargs for x in pair))
    if typed:
        key += (*map(type, args), *(type(v) for _n, v in kwargs))
    return key


def _lookup(fn: Any, key: Any) -> Any:
    """The result cached for ``key`` in ``fn``'s cache, without calling it, or _NONE."""
    bounded = fn.cache_parameters()["maxsize"] is not None
    found = entries(fn, bounded)
    if found is None:
        return _NONE
    d, pairs = found
    try:
        if key not in d:
            return _NONE
        if not bounded:
            return d[key]
    except TypeError:  # an argument no longer hashes
        return _NONE
    for k, result in pairs:
        if k is key or k == key:
            return result
    return _NONE


def cached_result(fn: Any, call: tuple[Any, ...]) -> Any:
    """The object step ("L", ``call``) of a path leads to from ``fn``: the result its cache holds
    for the call; else, in another process than the one that wrote the step, the result of
    making the call (KeyError in that process: the cache let go of it; TypeError or ValueError
    where ``fn`` is no cached function now, or the call fails)."""
    process, args, kwargs = call
    if type(fn) is not LRU_WRAPPER or args is None:
        raise TypeError("not a cached function")
    found = _lookup(fn, make_key(args, kwargs, bool(fn.cache_parameters()["typed"])))
    if found is not _NONE:
        return found
    if process == _pm.PROCESS:
        raise KeyError("no longer cached")
    try:
        return fn(*args, **dict(kwargs))
    except Exception as e:
        raise ValueError(f"the call raised {type(e).__name__}: {e}") from None


def call_text(call: tuple[Any, ...]) -> str:
    """A step ("L", ``call``) as code: ``(1, kind='x')``."""
    _process, args, kwargs = call
    if args is None:
        return "(...)"
    parts = [_short(a) for a in args] + [f"{n}={_short(v)}" for n, v in kwargs]
    return f"({', '.join(parts)})"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"<{type(v).__qualname__}>"


# --------------------------------------------------------------------------------------------
# The index


class _Cache:
    """One cached function a walk met: the way to it, and its results as last indexed."""

    __slots__ = (
        "fn", "root", "typed", "bounded", "dict", "misses", "size", "marker", "keys", "values",
        "refs", "objects", "held", "truncated", "weak",
    )

    def __init__(self, fn: Any, root: tuple[Any, ...]) -> None:
        params = fn.cache_parameters()
        self.fn = fn
        self.root = root  # (tag, key or module, name, steps): the way to the function
        self.typed = bool(params["typed"])
        self.bounded = params["maxsize"] is not None
        self.dict: dict[Any, Any] | None = None
        self.misses = -1
        self.size = -1
        # A bounded cache: (key, link) of one entry as indexed; an unbounded one: its keys and
        # results as indexed (held: their ids stay their own).
        self.marker: Any = _NONE
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.refs: dict[int, _pm.Ref] = {}
        self.objects: list[Any] = []  # those of refs (held: their ids stay their own)
        self.held: _Contents | None = None  # what the results hold, as indexed
        self.truncated = False
        # The ids of refs reached through a call a restore may not make again (an argument
        # hashed by its identity, or that does not pickle): another way to them is kept.
        self.weak: set[int] = set()

    def changed(self) -> bool:
        """Whether the cache's entries changed since it was indexed. An entry is added only by a
        miss, and evicted only for one; ``cache_clear()`` sets the misses back to 0 and drops
        every entry: a cache cleared and filled again to as many misses and entries no longer
        holds the bounded cache's link of the entry kept as a marker (a link is made per entry,
        and the one held here is in no cache after the clear), or the unbounded cache's keys and
        results (compared by identity, at C speed)."""
        d = self.dict
        if d is None:
            return self.size != -2  # (-2: its entries cannot be read; not tried again)
        info = self.fn.cache_info()
        if info.misses != self.misses or info.currsize != self.size or len(d) != self.size:
            return True
        if self.bounded:
            marker = self.marker
            return marker is not _NONE and d.get(marker[0], _NONE) is not marker[1]
        return not (
            all(map(operator.is_, d, self.keys)) and all(map(operator.is_, d.values(), self.values))
        )

    def stale(self) -> bool:
        """Whether the cache changed since it was indexed, or what its results hold."""
        return self.changed() or self.held is None or not self.held.current()

    def index(self, skip: set[int], modules: Any) -> None:
        """Index the results (and what they hold) by id, as the walk of module data does."""
        self.refs = {}
        self.objects = objects = []
        self.held = None
        self.truncated = False
        misses = self.fn.cache_info().misses  # (read first: a miss since, indexed again)
        found = entries(self.fn, self.bounded)
        if found is None:
            self.dict, self.size, self.marker = None, -2, _NONE
            return
        d, pairs = found
        self.dict, self.misses, self.size = d, misses, len(d)
        if self.bounded:
            self.marker = next(iter(d.items()), _NONE)
        else:
            self.keys, self.values = list(d), list(d.values())
        tag, root, name, steps = self.root
        index = self.refs
        seen = set(skip)
        lists: list[list[Any]] = []
        dicts: list[dict[Any, Any]] = []
        instances: list[Any] = []
        checks: list[tuple[Any, list[Any]]] = []
        Step = tuple[tuple[str, Any], ...]
        queue: collections.deque[tuple[Any, Step]] = collections.deque()
        later: collections.deque[tuple[Any, Step]] = collections.deque()
        plain, unindexed = _pm._PLAIN_TYPES, _pm._UNINDEXED
        calls: list[tuple[bool, Any, tuple[Any, ...]]] = []
        for key, result in pairs:
            tv = type(result)
            if tv in plain and tv is not tuple and tv is not frozenset or tv in unindexed:
                continue
            try:
                args, kwargs = decode(key, self.typed)
                call: tuple[Any, ...] = (_pm.PROCESS, args, kwargs)
            except ValueError as e:
                call = (_pm.PROCESS, None, str(e))
            calls.append((_remade_alike(call), result, call))
        # The calls a restore can make again first: an object another call returns too is
        # reached through one of them.
        calls.sort(key=_FIRST, reverse=True)
        weak = {id(call) for alike, _r, call in calls if not alike}
        for _alike, result, call in calls:
            tv = type(result)
            if id(result) in seen:
                continue
            path: Step = (*steps, ("L", call))
            seen.add(id(result))
            if tv is not tuple:
                index[id(result)] = (tag, root, name, path, _pm._type_name(tv))
                objects.append(result)
            queue.append((result, path))
        budget = _pm._PATH_BUDGET - len(index)
        while queue or later:
            if budget <= 0:
                self.truncated = True
                break
            if queue:
                o, path = queue.popleft()
            else:  # reached only through a set's element: indexed here, if no other way did
                o, path = later.popleft()
                if id(o) in seen:
                    continue
                seen.add(id(o))
                budget -= 1
                to = type(o)
                if to is not tuple and to not in unindexed:
                    index[id(o)] = (tag, root, name, path, _pm._type_name(to))
                    objects.append(o)
            kids = _pm.children(o, modules)
            if kids is None:
                continue
            to = type(o)
            if to is list:
                lists.append(o)
            elif to is dict:
                dicts.append(o)
            elif to is not tuple and to is not frozenset:
                dd = getattr(o, "__dict__", None)
                if (type(dd) is dict and len(kids) == len(dd) and to is not types.FunctionType
                        and not isinstance(o, (type, *_pm._CONTAINER_BASES))
                        and all(k[0][0] == "a" for k in kids)):
                    instances.append(o)
                else:
                    checks.append((o, _pm.contents(o, modules)))
            behind = _pm.positional(path)
            for step, v in kids:
                tv = type(v)
                if tv in plain and tv is not tuple and tv is not frozenset:
                    continue
                i = id(v)
                if i in seen:
                    continue
                sub = (*path, step)
                if behind or step[0] == "E":
                    later.append((v, sub))
                    continue
                seen.add(i)
                budget -= 1
                if tv is not tuple and tv not in unindexed:
                    index[i] = (tag, root, name, sub, _pm._type_name(tv))
                    objects.append(v)
                if tv not in unindexed:
                    queue.append((v, sub))
        self.held = _Contents(lists, dicts, instances, checks, modules)
        at = len(steps)
        self.weak = {i for i, ref in index.items() if id(ref[3][at][1]) in weak} if weak else set()

    def describe(self) -> str:
        tag, root, name, steps = self.root
        where = _pm.path_text(name, steps)
        return f"the cache of {root}.{where}" if tag == "m" else f"the cache of {where}"


class _Contents:
    """What the results of one cache hold, as indexed: the objects in their lists, dicts and
    instances' ``__dict__``s, checked at C speed as ``_pm._Walk.current`` checks module data but
    for the numbers, strings and other plain values among them, which are never indexed: a
    result whose counter changes (``s["hp"] -= 10``) is not indexed again. Each place holds a
    value of the same type as before, every other object is the same, every key the same."""

    __slots__ = ("lists", "dicts", "instances", "checks", "modules", "sizes", "types", "objects", "keys")

    def __init__(
        self,
        lists: list[list[Any]],
        dicts: list[dict[Any, Any]],
        instances: list[Any],
        checks: list[tuple[Any, list[Any]]],
        modules: Any,
    ) -> None:
        self.lists, self.dicts, self.instances = lists, dicts, instances
        self.checks, self.modules = checks, modules
        values, keys = self._parts()
        self.sizes = list(map(len, values))
        flat = list(itertools.chain.from_iterable(values))
        self.types = list(map(type, flat))
        self.objects = list(itertools.compress(flat, _not_plain(self.types)))
        self.keys = list(itertools.chain.from_iterable(keys))

    def _parts(self) -> tuple[list[Any], list[Any]]:
        own = list(map(_DICT_OF, self.instances))
        values = [*self.lists, *map(dict.values, self.dicts), *map(dict.values, own)]
        return values, [*map(dict.keys, self.dicts), *map(dict.keys, own)]

    def current(self) -> bool:
        values, keys = self._parts()
        if list(map(len, values)) != self.sizes:
            return False
        flat = list(itertools.chain.from_iterable(values))
        types_ = list(map(type, flat))
        if types_ != self.types:
            return False
        objects = list(itertools.compress(flat, _not_plain(types_)))
        if not all(map(operator.is_, objects, self.objects)):
            return False
        if not all(map(operator.is_, itertools.chain.from_iterable(keys), self.keys)):
            return False
        modules = self.modules
        for o, seen in self.checks:
            now = _pm.contents(o, modules)
            if len(now) != len(seen) or not all(map(operator.is_, now, seen)):
                return False
        return True


# Values never indexed (``_pm.children``'s walk skips them): their changes leave the index as is.
_PLAIN_VALUES = frozenset({type(None), bool, int, float, complex, str, bytes})


def _not_plain(types_: list[type]) -> Any:
    """Per type of ``types_``, whether it is not a plain value's (at C speed)."""
    return map(operator.not_, map(_PLAIN_VALUES.__contains__, types_))
_DICT_OF = operator.attrgetter("__dict__")


class Caches:
    """The cached functions one walk of module data met, and their results in its index (each
    object by the first cache holding it; over the walk's own way to it, which the restore of a
    new process may not find: data the workflow put into a module)."""

    __slots__ = ("caches", "skip", "modules", "owner", "base", "lock")

    def __init__(self, caches: list[_Cache], skip: set[int], modules: Any) -> None:
        self.caches = caches
        self.skip = skip  # the globals of the frames' namespaces: kept by name
        self.modules = modules
        self.owner: dict[int, _Cache] = {}  # per id in the index that is a cache's
        self.base: dict[int, _pm.Ref] = {}  # the walk's own references those replaced
        self.lock = threading.Lock()

    def refresh(self, w: Any, contents: bool = True) -> list[str] | None:
        """Index again the results of the caches of walk ``w`` whose entries changed, or (with
        ``contents``) what their results hold (into a new index, which ``w`` holds from then on:
        a checkpoint on another thread reads the one it took whole); the walk's ``truncated``
        with the caches too large to index."""
        with self.lock:
            if contents:
                stale = [c for c in self.caches if c.stale()]
            else:
                stale = [c for c in self.caches if c.changed()]
            if stale:
                index = dict(w.index)
                freed: list[int] = []
                for c in stale:
                    freed.extend(self._drop(c, index))
                    c.index(self.skip, self.modules)
                for c in stale:
                    self._add(c, c.refs.items(), index)
                for i in freed:  # held by another cache too: now by that one
                    if i not in self.owner:
                        for other in self.caches:
                            ref = other.refs.get(i)
                            if ref is not None:
                                self._add(other, ((i, ref),), index)
                w.index = index
            large = [c.describe() for c in self.caches if c.truncated]
        truncated: list[str] | None = w.truncated
        if large:
            return [*(truncated or ()), *large]
        return truncated

    def _drop(self, c: _Cache, index: dict[int, _pm.Ref]) -> list[int]:
        owner, base = self.owner, self.base
        freed = []
        for i in c.refs:
            if owner.get(i) is c:
                del owner[i]
                old = base.pop(i, _NONE)
                if old is _NONE:
                    del index[i]
                else:
                    index[i] = old
                freed.append(i)
        return freed

    def _add(self, c: _Cache, items: Any, index: dict[int, _pm.Ref]) -> None:
        """Index ``items`` of cache ``c``: over the walk's own way to an object, and over another
        cache's that goes through a call a restore may not make again, unless theirs does too."""
        owner, base = self.owner, self.base
        weak = c.weak
        for i, ref in items:
            holder = owner.get(i)
            if holder is not None:
                if holder is not c and i in holder.weak and i not in weak:
                    owner[i] = c  # (a call made again alike, rather than one that may not be)
                    index[i] = ref
                continue
            old = index.get(i, _NONE)
            if old is not _NONE:
                if i in weak:
                    continue  # the walk's own way: the call may not be made again alike
                base[i] = old
            owner[i] = c
            index[i] = ref


def caches_of(ns: list[tuple[str, Any]], index: dict[int, _pm.Ref], modules: Any) -> Caches | None:
    """The cached functions of a walk of module data (its namespaces ``ns``, its ``index``), or
    None if it met none (most walks)."""
    if _MARK is None:
        return None
    found: list[_Cache] = []
    seen: set[int] = set()
    for key, n in ns:
        for name in n.roots:
            v = n.g[name]
            if type(v) is LRU_WRAPPER and id(v) not in seen:
                seen.add(id(v))
                found.append(_Cache(v, ("p", key, name, ())))
    if _TYPE_NAME in map(_FIFTH, index.values()):  # (at C speed: most walks meet none)
        spaces = {key: n.g for key, n in ns}
        for i, ref in list(index.items()):
            if ref[4] != _TYPE_NAME or i in seen or _pm.positional(ref[3]):
                continue
            tag, root, name, steps, _tname = ref
            try:
                v = spaces[root][name] if tag == "p" else vars(sys.modules[root])[name]
                for st in steps:
                    v = _pm.step_into(v, st)
            except Exception:  # (the walk just found it: a container changing under it)
                continue
            if id(v) == i:
                seen.add(i)
                found.append(_Cache(v, ref[:4]))
    if not found:
        return None
    skip: set[int] = set()
    for _key, n in ns:
        skip.update(n.names)
    return Caches(found, skip, modules)


# --------------------------------------------------------------------------------------------
# The refusals


def check_path(obj: Any, path: _pm.Ref, kept_as_is: Any) -> None:
    """CachedCallRefused if ``path`` (of ``obj``, which a checkpoint writes) goes through the
    cache entry of a call a restore could not make again: a key not read back into arguments,
    arguments that do not pickle, or that hash by the identity of an object the checkpoint
    copies (``kept_as_is``: whether an object comes back as itself)."""
    for at, (kind, call) in enumerate(path[3]):
        if kind != "L":
            continue
        problem = _call_problem(call, kept_as_is)
        if problem is None:
            continue
        fn = _pm.ref_text((*path[:3], path[3][:at], ""))
        what = "a result" if at == len(path[3]) - 1 else "held by a result"
        raise CachedCallRefused(
            f"this {type(obj).__qualname__} is {what} of {fn}(), a cached function "
            f"(functools.lru_cache): a checkpoint writes it as the call {fn}{call_text(call)}, so "
            f"that a restore gets it from the cache again, but {problem}",
            obj,
        )


def _call_problem(call: tuple[Any, ...], kept_as_is: Any) -> str | None:
    _process, args, kwargs = call
    if args is None:
        return (
            f"its cache key cannot be read back into the call's arguments ({kwargs}); call it "
            "with plain arguments (numbers, strings, tuples of them)"
        )
    values = (*args, *(v for _n, v in kwargs))
    if all(map(_plain, values)):
        return None  # (most calls: ids, names)
    for _part, o in hash_identities(values):
        if not kept_as_is(o):
            return (
                f"its argument {_short(o)} hashes by its identity and is written as a copy, "
                "which a restore would look up as another call; pass a value that names it "
                "(an id, a name) to the cached function"
            )
    try:
        cloudpickle.dumps(values)
    except Exception as e:
        return (
            f"its arguments cannot be written ({type(e).__name__}: {e}); pass values that pickle "
            "(an id, a name) to the cached function"
        )
    return None


_PLAIN_ARGS = BY_VALUE | {type(None), float, complex}
_FIRST = operator.itemgetter(0)


def remade_alike(steps: tuple[tuple[str, Any], ...]) -> bool:
    """Whether every cached function's call a path's ``steps`` go through is surely made again
    alike by a restore (``check_path`` cannot refuse it)."""
    return all(_remade_alike(call) for kind, call in steps if kind == "L")


def _remade_alike(call: tuple[Any, ...]) -> bool:
    """Whether a restore surely makes ``call`` again alike: its arguments are plain values."""
    _process, args, kwargs = call
    return args is not None and all(map(_plain, (*args, *(v for _n, v in kwargs))))


def _plain(v: Any) -> bool:
    """Whether argument ``v`` is written by value and hashes alike after a restore: a number (not
    a NaN), a string, bytes, None, a tuple or frozenset of those."""
    t = type(v)
    if t in _PLAIN_ARGS:
        return bool(v == v)  # (a NaN hashes by its identity)
    return (t is tuple or t is frozenset) and all(map(_plain, v))


_pm.Caches.module = sys.modules[__name__]
