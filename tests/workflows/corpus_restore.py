"""Corpus: state that must mean the same after a checkpoint and restore at every suspension.

Exception state kept across awaits (cause, context, suppressed context, traceback, notes and
attributes, of a local, of a pending exception while a ``finally`` awaits, through an inline
helper); dict, dict-view and set iterators of loops that await (values written later are seen,
a change of size still raises); closures made in the workflow and the module's real globals; a
module-level sentinel; a comprehension's loop variable that must not outlive it.
"""

from __future__ import annotations

import traceback
from collections import OrderedDict

from workflows import Cancelled, ProcedureFailed, procedure, signal, timer, workflow

from . import moddata
from .diffharness import C, add
from .probes import Boom, Fragile, Oops, double, explode, ident, log

F0 = frozenset({0})
F1 = frozenset({1})


def _lines(e):
    """The (function, line) of each traceback entry of ``e`` in this file (what the code sees)."""
    return [(f.name, f.lineno) for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]


# ---------------------------------------------------------------------------------------------
# Exception state


@workflow
async def caught_chain_kept_in_a_local(x):
    """A caught exception with a cause and a context, kept in a local across awaits."""
    try:
        try:
            await procedure(ident, x)
            raise KeyError(x)
        except KeyError as k:
            raise ValueError("outer") from k
    except ValueError as e:
        saved = e
    await timer("t", 1)
    log((type(saved.__cause__).__name__, type(saved.__context__).__name__))
    log(saved.__suppress_context__)
    log(_lines(saved))
    await procedure(ident, 2)
    raise saved


add(
    caught_chain_kept_in_a_local,
    C(1, raises=ValueError),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, fail_at=F0, raises=ProcedureFailed),
)


@workflow
async def implicit_context_kept(x):
    """An implicit __context__ (an error raised in a handler), kept and re-raised later."""
    try:
        try:
            raise Oops(x)
        except Oops:
            {}["missing"]
    except KeyError as e:
        saved = e
    await timer("t", 1)
    log(repr(saved.__context__))
    await timer("t", 2)
    try:
        raise saved
    except KeyError as again:
        log(_lines(again))
        raise


add(
    implicit_context_kept,
    C(1, raises=KeyError),
    C(3, fail_at=F1, raises=Boom),
    C(2, cancel_at=0, raises=Cancelled),
)


@workflow
async def suppressed_context_kept(x):
    """``raise ... from None`` sets __suppress_context__; it survives the restore."""
    try:
        try:
            raise Oops(x)
        except Oops:
            raise KeyError("clean") from None
    except KeyError as e:
        saved = e
    await procedure(ident, x)
    log((saved.__suppress_context__, saved.__cause__, type(saved.__context__).__name__))
    raise saved


add(
    suppressed_context_kept,
    C(1, raises=KeyError),
    C(2, fail_at=F0, raises=ProcedureFailed),
    C(3, cancel_at=0, raises=Cancelled),
)


@workflow
async def pending_while_finally_awaits(x):
    """The pending exception (with its context) while a finally awaits twice."""
    try:
        try:
            await procedure(explode, x)
        except ProcedureFailed:
            raise Boom(x, "in handler")
    finally:
        await timer("f1", 1)
        log("finally")
        await timer("f2", 1)


add(
    pending_while_finally_awaits,
    C(1, raises=Boom),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, cancel_at=2, raises=Cancelled),
)


@workflow
async def helper_raises_with_cause(x):
    """An inline helper: raises a chained error from inside an awaiting handler."""
    try:
        await procedure(explode, x)
    except ProcedureFailed as pf:
        await timer("h", 1)
        raise Boom(x, "helper") from pf


@workflow
async def chain_through_inline_helper(x):
    """A chain raised in an inline helper, caught, kept, awaited across and re-raised."""
    try:
        await helper_raises_with_cause(x)
    except Boom as b:
        kept = b
    await timer("t", 1)
    log((type(kept.__cause__).__name__, getattr(kept.__cause__, "error_type", None)))
    log(_lines(kept))
    await timer("t", 2)
    raise kept


add(
    chain_through_inline_helper,
    C(1, raises=Boom),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, fail_at=F1, raises=Boom),
)


@workflow
async def notes_and_attributes_on_project_errors(x):
    """ProcedureFailed and Cancelled keep add_note() notes and attributes set by user code."""
    try:
        await procedure(explode, x)
    except ProcedureFailed as e:
        e.add_note(f"while handling order {x}")
        e.extra = x * 5
        saved = e
    await timer("t", 1)
    log((saved.__notes__, saved.extra, saved.error_type))
    try:
        await signal("go")
    except Cancelled as c:
        c.add_note("cancelled while waiting")
        c.seen = True
        await timer("cleanup", 1)
        log((c.__notes__, c.seen))
        raise
    raise saved


add(
    notes_and_attributes_on_project_errors,
    C(1, raises=ProcedureFailed),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, cancel_at=2, raises=Cancelled),
)


@workflow
async def uncaught_failed_command(x):
    """A failed command nobody catches: its traceback points at the await, through a finally."""
    await timer("t", x)
    try:
        return await procedure(double, x)
    finally:
        await timer("after", 1)


add(
    uncaught_failed_command,
    C(1, fail_at=F1, raises=ProcedureFailed),
    C(2, cancel_at=1, raises=Cancelled),
    C(3, cancel_at=0, raises=Cancelled),
    C(4, returns=8),
)


# ---------------------------------------------------------------------------------------------
# Dict and set iterators


@workflow
async def dict_items_see_later_writes(n):
    """Values written to later keys during ``for k, v in d.items()`` are seen after a restore."""
    d = {i: i for i in range(n)}
    out = []
    for k, v in d.items():
        out.append((k, v))
        await timer("t", 1)
        for j in d:
            if j > k:
                d[j] = d[j] * 10
    return out, d


add(dict_items_see_later_writes, C(3), C(4), C(1))


@workflow
async def dict_grows_before_await(n):
    """Adding a key during the iteration raises RuntimeError at the next turn, restored or not."""
    d = {"a": 1, "b": 2}
    seen = []
    try:
        for k in d:
            seen.append(k)
            d[f"{k}{n}"] = n
            await timer("t", 1)
    except RuntimeError as e:
        return seen, str(e)
    return seen, None


add(dict_grows_before_await, C(1), C(2, cancel_at=0, raises=Cancelled), C(3))


@workflow
async def dict_grows_after_await(n):
    """Growing after the await (the checkpoint sees the old size) raises as well."""
    d = {"a": 1, "b": 2, "c": 3}
    seen = []
    try:
        for k, v in d.items():
            await timer("t", 1)
            seen.append((k, v))
            if k == "b":
                d["new"] = n
    except RuntimeError as e:
        log(str(e))
    return seen, d


add(dict_grows_after_await, C(1), C(7), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def dict_grows_uncaught(n):
    """The RuntimeError of a loop over a grown dict escapes: its traceback shows the for line."""
    d = {"a": 1}
    for k in d:
        d[k * n] = await procedure(
            ident,
            n,
        )
    return d


add(dict_grows_uncaught, C(2, raises=RuntimeError), C(1), C(3, cancel_at=0, raises=Cancelled))


@workflow
async def dict_size_restored_across_await(n):
    """A key added before an await and removed after it: the loop goes on where it was."""
    d = {i: str(i) for i in range(n)}
    seen = []
    for k in d:
        d["tmp"] = None
        await timer("t", 1)
        del d["tmp"]
        seen.append((k, d[k]))
        d[k] = d[k] + "!"
    return seen, d


add(dict_size_restored_across_await, C(3), C(1), C(4, cancel_at=2, raises=Cancelled))


@workflow
async def dict_values_and_shrinking(n):
    """``for v in d.values()`` sees later writes; deleting a key raises at the next turn."""
    d = {"x": 1, "y": 2, "z": 3}
    got = []
    try:
        for v in d.values():
            got.append(v)
            d["z"] = v * 100
            await procedure(ident, v)
            if v == n:
                del d["x"]
    except RuntimeError as e:
        got.append(str(e))
    return got


add(dict_values_and_shrinking, C(2), C(9), C(1, fail_at=F0, raises=ProcedureFailed))


@workflow
async def set_changes_size(n):
    """A set iterated across awaits: adding an element raises RuntimeError at the next turn."""
    s = {1, 2, 3}
    count = 0
    try:
        for x in s:
            count += 1
            await timer("t", x)
            if count == n:
                s.add(100 + x)
    except RuntimeError as e:
        return count, str(e)
    return count, sorted(s)


add(set_changes_size, C(1), C(2), C(5))


@workflow
async def ordered_dict_across_awaits(n):
    """An OrderedDict (reordered first) iterated across awaits; growing it raises as natively."""
    od = OrderedDict(a=1, b=2, c=3)
    od.move_to_end("a")
    out = []
    try:
        for k, v in od.items():
            if k == "c":
                od["z"] = n
            await timer("t", 1)
            od["c"] = n
            out.append((k, v, od[k]))
    except RuntimeError as e:
        out.append(str(e))
    for v in od.values():
        await timer("t", 1)
        out.append(v)
    return out


add(ordered_dict_across_awaits, C(1), C(5), C(2, cancel_at=2, raises=Cancelled))


@workflow
async def iterator_held_in_a_variable(n):
    """A dict iterator kept in a local (next() by hand): its position and later values survive."""
    d = {"a": 0, "b": 0, "c": 0}
    it = iter(d.items())
    first = next(it)
    await timer("t", 1)
    d["c"] = n
    rest = []
    for item in it:
        rest.append(item)
        await timer("t", 2)
    return first, rest


add(iterator_held_in_a_variable, C(1), C(5), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def set_iterator_held_in_a_variable(n):
    """A set iterator kept in a local: the rest comes after a restore; growing the set raises."""
    s = {1, 2, 3}
    it = iter(s)
    first = next(it)
    await timer("t", 1)
    if n > 1:
        s.add(10 + n)
    try:
        rest = list(it)
    except RuntimeError as e:
        rest = str(e)
    await timer("t", 2)
    return first, rest


add(set_iterator_held_in_a_variable, C(1), C(2), C(3, cancel_at=1, raises=Cancelled))


@workflow
async def set_changed_at_its_size_while_a_loop_iterates(n):
    """A set a loop iterates across awaits, an element removed and another added (same size):
    natively the loop goes on by the slot it is at, skipping the removed element and seeing the
    new one where it lands after that slot; so it does after a restore."""
    s = {1, 2, 3, 4, 5}
    out = []
    for v in s:
        out.append(v)
        await timer("t", 1)
        if v == n:
            s.discard(4)
            s.add(8 + n)  # lands on slot (8 + n) % 8 == n, behind the loop for n < 4
            s.discard(5)
            s.add(15)  # slot 7, ahead of it
    return out, list(s)


add(set_changed_at_its_size_while_a_loop_iterates, C(1), C(3), C(5), C(2, cancel_at=2, raises=Cancelled))


@workflow
async def set_iterator_in_a_variable_after_a_size_change(n):
    """A set iterator kept in a local while its set grows and shrinks back: natively it goes on
    by its slot once the size is back (it only checks the size), else raises; so after a restore."""
    s = {1, 2, 3, 9}
    it = iter(s)
    first = next(it)
    s.add(20 + n)
    await timer("t", 1)
    if n % 2:
        s.discard(2)  # back to the size the iterator checks
    try:
        rest = list(it)
    except RuntimeError as e:
        rest = str(e)
    await timer("t", 2)
    return first, rest


add(set_iterator_in_a_variable_after_a_size_change, C(1), C(2), C(3), C(4, cancel_at=1, raises=Cancelled))


# ---------------------------------------------------------------------------------------------
# Closures, module globals and sentinels

LIMIT = 0
HITS = 0
_MISSING = object()


def set_limit(v):
    """A plain helper that rebinds a module global (outside the workflow)."""
    global LIMIT
    LIMIT = v


@workflow
async def lambda_reads_module_global(x):
    """A lambda made in the workflow reads the module's current global after a restore."""
    set_limit(1)
    limit = lambda: LIMIT  # noqa: E731 - a lambda on purpose
    log(limit())
    await timer("t", 1)
    set_limit(x * 10)
    log(limit())
    await timer("t", 2)
    set_limit(x + 1)
    return limit(), LIMIT


add(lambda_reads_module_global, C(1), C(4), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def nested_def_writes_global(x):
    """A nested def that writes a ``global`` writes the module's, seen by the workflow."""
    global HITS
    HITS = 0

    def bump(by):
        global HITS
        HITS += by
        return HITS

    bump(1)
    await timer("t", 1)
    HITS = 10
    log(bump(x))
    await timer("t", 2)
    HITS = 100
    bump(x)
    return HITS


add(nested_def_writes_global, C(1), C(3), C(2, cancel_at=1, raises=Cancelled))


@workflow
async def module_sentinel_identity(key):
    """A module-level sentinel held in a local is the same object after a restore."""
    d = {"present": 1}
    v = d.get(key, _MISSING)
    marker = _MISSING
    await timer("t", 1)
    log(v is _MISSING)
    log(marker is _MISSING)
    check = lambda value: value is _MISSING  # noqa: E731 - a lambda on purpose
    await timer("t", 2)
    return check(v), check(marker)


add(
    module_sentinel_identity,
    C("present"),
    C("absent"),
    C("absent", cancel_at=1, raises=Cancelled),
)


@workflow
async def comprehension_variable_does_not_outlive_it(n):
    """A lowered comprehension's loop variable is gone after it: nothing stale is checkpointed."""
    items = [Fragile(i) for i in range(n)]
    doubled = [await procedure(double, f.n) for f in items]
    del items
    Fragile.broken = True
    try:
        await timer("t", 1)
        return doubled
    finally:
        Fragile.broken = False


add(
    comprehension_variable_does_not_outlive_it,
    C(2),
    C(3, cancel_at=2, raises=Cancelled),
    C(1),
)


@workflow
async def comprehension_variable_after_error(n):
    """The same when the comprehension raises and the error is caught."""
    items = [Fragile(i) for i in range(n)]
    try:
        got = [await procedure(explode if f.n == 1 else double, f.n) for f in items]
    except ProcedureFailed:
        got = None
    del items
    Fragile.broken = True
    try:
        await timer("t", 1)
        return got
    finally:
        Fragile.broken = False


add(comprehension_variable_after_error, C(3), C(1), C(2))


# ---------------------------------------------------------------------------------------------
# Sets restored with their order; module-level containers held in locals


@workflow
async def restored_set_keeps_its_order(n):
    """A set whose order a plain rebuild changes (collisions, elements removed): a loop that
    starts after the restore, list() and pop() see the order the set had."""
    s = {7, 15, 23}
    t = set(range(40))
    for i in range(3, 40):
        t.discard(i)
    t.add(1000)
    t.add(77)
    log((list(s), list(t)))
    await timer("t", 1)
    out = [x for x in s]
    for x in t:
        out.append(x)
        await timer("t", n)
    log(list(t))
    return out, s.pop(), t.pop()


add(restored_set_keeps_its_order, C(1), C(2, cancel_at=2, raises=Cancelled), C(3))


@workflow
async def restored_set_grows_as_it_would_have(n):
    """A set with removed elements (dummy slots), colliding elements and a moved pop finger:
    what it gains, loses and pops after the restore, and when it resizes, is as without one."""
    s = set(range(0, 64, 8))  # all on slot 0 of 8 slots, then spread by the resize
    for x in (8, 24, 40):
        s.discard(x)
    s.pop()
    s.add(-1)
    s.add(-2)  # hash(-1) == hash(-2)
    e = set(range(30))
    for x in range(30):
        e.discard(x)  # empty, in a table of 64 slots full of dummies
    await timer("t", 1)
    got = []
    for x in (n, 16 * n, 2**61 + n, 5, 13, 21, 29, 37):
        s.add(x)
        e.add(x)
        got.append((list(s), list(e)))
    await timer("t", 2)
    got.append((s.pop(), s.pop(), e.pop()))
    for x in range(100, 140):
        s.add(x)
        if x % 3:
            s.discard(x - 1)
    got.append(list(s))
    return got


add(restored_set_grows_as_it_would_have, C(1), C(3), C(2, cancel_at=1, raises=Cancelled))


ORDERED = frozenset({23, 7, 15, 31})


@workflow
async def restored_frozenset_and_shared_set(n):
    """A module-level frozenset keeps its order (it is the module's); one set held twice is still
    one set after a restore."""
    f = ORDERED
    a = {39, 7, 15, 31}
    b = a
    pair = (a, [a])
    b.add(n)
    await timer("t", 1)
    log((list(f), list(a), b is a, pair[0] is a, pair[1][0] is a))
    await timer("t", 2)
    return [x for x in f], [x for x in a]


add(restored_frozenset_and_shared_set, C(1), C(63), C(2, cancel_at=1, raises=Cancelled))


REGISTRY: list = []
COUNTS: dict = {}
SEEN: set = set()


@workflow
async def module_containers_held_in_locals(x):
    """A module-level list, dict and set held in locals stay the module's objects: what the
    workflow adds after a restore is seen through the module's names."""
    REGISTRY.clear()
    COUNTS.clear()
    SEEN.clear()
    reg, counts, seen = REGISTRY, COUNTS, SEEN
    both = [reg, counts]
    await timer("t", 1)
    reg.append(x)
    counts["k"] = x
    seen.add(x)
    log((REGISTRY[-1], COUNTS.get("k"), x in SEEN, reg is REGISTRY, both[0] is REGISTRY))
    await procedure(ident, x)
    both[1]["j"] = 2
    return reg is REGISTRY, counts is COUNTS, seen is SEEN, sorted(COUNTS), REGISTRY[-1:]


add(module_containers_held_in_locals, C(1), C(2, cancel_at=1, raises=Cancelled), C(3))


@workflow
async def other_module_data_held_in_locals(x):
    """Objects of another user module's data held in locals (a list bound in it, an item of
    that list, an attribute of an instance of its class, a sentinel) stay that module's objects
    after a restore: what the workflow changes through the locals is seen through the module."""
    moddata.reset()
    items, first, rules, marker = moddata.ITEMS, moddata.ITEMS[0], moddata.SETTINGS.rules, moddata.SENTINEL
    await timer("t", 1)
    items.append(x)
    first["n"] = x
    rules.append(x)
    # Read back through the module (the last item only: a process that restores several
    # checkpoints in turn keeps the module's data of the earlier ones).
    log((moddata.ITEMS[-1], moddata.ITEMS[0]["n"], moddata.SETTINGS.rules[-1], marker is moddata.SENTINEL))
    await procedure(ident, x)
    first["n"] = -x
    return (
        items is moddata.ITEMS, first is moddata.ITEMS[0], moddata.ITEMS[0]["n"],
        rules is moddata.SETTINGS.rules, marker is moddata.SENTINEL,
    )


add(other_module_data_held_in_locals, C(1), C(2, cancel_at=1, raises=Cancelled), C(3))


CONFIG: dict = {"items": [], "limits": {"per_user": [[], {"seen": set()}]}, "pair": ([], [])}


class Settings:
    """A module-level object of this module: its attributes' containers are reached by path."""

    def __init__(self):
        self.rules = {"allow": []}
        self.inner = None


SETTINGS = Settings()
SETTINGS.inner = Settings()


@workflow
async def nested_module_containers_held_in_locals(x):
    """Containers reached through module-level data (a dict's value, nested lists and dicts, a
    tuple's item, an object's attribute) held in locals stay the module's objects after a
    restore: what the workflow adds through the local is seen through the module, and back."""
    CONFIG["items"].clear()
    CONFIG["pair"][1].clear()
    per_user = CONFIG["limits"]["per_user"]
    per_user[0].clear()
    per_user[1]["seen"].clear()
    SETTINGS.rules["allow"].clear()
    SETTINGS.inner.rules["allow"].clear()
    items, first, seen = CONFIG["items"], per_user[0], per_user[1]["seen"]
    second, allow, deep = CONFIG["pair"][1], SETTINGS.rules["allow"], SETTINGS.inner.rules
    inner = SETTINGS.inner
    await timer("t", 1)
    items.append(x)
    first.append(x + 1)
    seen.add(x)
    second.append(x + 2)
    allow.append("a")
    deep["allow"].append("b")
    # What was added is read back through the module (the last item only: a process that
    # restores several checkpoints in turn keeps the module's data of the earlier ones).
    log((CONFIG["items"][-1], per_user[0][-1], x in per_user[1]["seen"], CONFIG["pair"][1][-1],
         SETTINGS.rules["allow"][-1], SETTINGS.inner.rules["allow"][-1], inner is SETTINGS.inner))
    await procedure(ident, x)
    CONFIG["items"].append(-x)
    return (
        items is CONFIG["items"], items[-2:], seen is per_user[1]["seen"], x in seen,
        second is CONFIG["pair"][1], allow is SETTINGS.rules["allow"], deep["allow"][-1],
        deep is SETTINGS.inner.rules, inner is SETTINGS.inner,
    )


add(nested_module_containers_held_in_locals, C(1), C(2, cancel_at=1, raises=Cancelled), C(3))


class FragileNum(Fragile):
    """A Fragile that compares by its number."""

    def __lt__(self, other):
        return self.n < other

    def __gt__(self, other):
        return self.n > other

    def __le__(self, other):
        return self.n <= other

    def __reduce__(self):
        if Fragile.broken:
            raise TypeError("a Fragile cannot be pickled now")
        return (FragileNum, (self.n,))


@workflow
async def comparison_chain_leaves_nothing_behind(x):
    """The values of a comparison chain that stopped early do not outlive it (a later checkpoint
    would otherwise try to keep them), as an expression and as a condition."""
    f = FragileNum(5)
    got = x < f < await procedure(ident, 10)
    if x < f <= await procedure(ident, 7):
        got = (got, "in")
    del f
    Fragile.broken = True
    try:
        await timer("t", 1)
        return got
    finally:
        Fragile.broken = False


add(comparison_chain_leaves_nothing_behind, C(1), C(9), C(5), C(1, cancel_at=2, raises=Cancelled))


@workflow
async def nonlocal_deleted_then_used(x):
    """A nested function deletes a workflow local through ``nonlocal``: reading it afterwards,
    and deleting it again, fail with CPython's own errors and messages."""
    y = x

    def drop():
        nonlocal y
        del y

    def read():
        return y

    drop()
    await timer("t", 1)
    out = []
    for f in (read, drop):
        try:
            f()
        except NameError as e:
            out.append((type(e).__name__, str(e)))
    try:
        y  # noqa: B018 - read on purpose
    except NameError as e:
        out.append((type(e).__name__, str(e)))
    await timer("t", 2)
    y = x + 1
    out.append(read())
    return out


add(nonlocal_deleted_then_used, C(1), C(2, cancel_at=1, raises=Cancelled), C(3))


# No reference to the harness module stays: a checkpoint walks the data of the user modules
# that a workflow's module imports, and the harness holds the whole corpus.
del C, add
