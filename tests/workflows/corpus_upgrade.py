"""The differential corpus of upgrades: old/new pairs of the same workflow.

Each pair is run to a suspension under the old code (``before``: the values its awaits get),
checkpointed, then the new code is loaded under the same key and the checkpoint is upgraded.
A pair marked ``moves`` must move, and the upgraded run, given ``after``, must do exactly what the
new code does when run from the start with ``new_before + after`` (the equivalent state): the
same commands awaited, the same result or error. A pair marked held must stay held, with a reason
that contains ``reason``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Pair:
    name: str
    what: str  # the kind of edit
    old: str
    new: str
    before: list[Any]  # sent to the old code's awaits (after the first step) up to the suspension
    after: list[Any]  # sent after the upgrade
    moves: bool = True
    reason: str = ""  # held: a part of the message
    new_before: list[Any] | None = None  # the new code's sends to reach the same point
    upgrader: str | None = None  # source of an upgrade function ``up(point, locals)``
    args: tuple[Any, ...] = ("north",)
    extra: dict[str, Any] = field(default_factory=dict)


PATROL = '''
async def patrol(name):
    laps = 0
    tmp = name.upper()
    log(tmp)
    while True:
        await timer("walk", after=5)
        laps += 1
        if laps >= 3:
            return {"laps": laps, "name": name}
'''

class Logger:
    """A logger: its lines are no state of a workflow's (a call moved across an await moves)."""

    def info(self, *args: Any) -> None:
        pass


def notify(player: str) -> None:
    """A function of the module's that makes a workflow effect: a call of it is a send()."""
    from workflows import send

    send(player, "mail", "packed")


_PATH = "the if tests, elif chain, or case patterns and guards on the path to it changed"

PAIRS: list[Pair] = [
    Pair(
        "renamed_dead_local", "a renamed local that is not live",
        PATROL,
        PATROL.replace("tmp", "shout"),
        [None], [None, None],
    ),
    Pair(
        "statement_before", "a statement added before the await",
        PATROL,
        PATROL.replace('        await timer("walk"', '        log("about to walk")\n        await timer("walk"'),
        [None], [None, None],
    ),
    Pair(
        "statement_after", "a statement added after the await",
        PATROL,
        PATROL.replace("        laps += 1\n", "        laps += 1\n        log(f'lap {laps}')\n"),
        [None], [None, None],
    ),
    Pair(
        "new_branch", "a new branch",
        PATROL,
        PATROL.replace("        if laps >= 3:", "        if laps == 2:\n            log('halfway')\n"
                       "        elif laps > 99:\n            return None\n        if laps >= 3:"),
        [None], [None, None],
    ),
    Pair(
        "changed_constant", "a changed constant (the timer's wait, the number of laps)",
        PATROL,
        PATROL.replace("after=5", "after=2").replace(">= 3", ">= 4"),
        [None], [None, None, None],
    ),
    Pair(
        "removed_local", "a removed local (not used by the new code)",
        '''
async def patrol(name):
    seen = []
    laps = 0
    while True:
        await timer("walk", after=5)
        laps += 1
        seen.append(laps)
        if laps >= 3:
            return {"laps": laps, "seen": seen}
''',
        '''
async def patrol(name):
    laps = 0
    while True:
        await timer("walk", after=5)
        laps += 1
        if laps >= 3:
            return {"laps": laps}
''',
        [None], [None, None],
    ),
    Pair(
        "moved_await_across_unrelated", "an await moved across a statement that touches no live local",
        '''
async def order(name):
    item = await signal("item")
    await timer("pack", after=1)
    logger.info("packed")
    return {"item": item}
''',
        '''
async def order(name):
    item = await signal("item")
    logger.info("packed")
    await timer("pack", after=1)
    return {"item": item, "v": 2}
''',
        ["sword"], [None], extra={"logger": Logger()},
    ),
    Pair(
        "moved_helper_changing_module_data", "an await moved across a call of a function that "
        "changes module data (log() appends to a module list)",
        '''
async def order(name):
    item = await signal("item")
    await timer("pack", after=1)
    log("packed")
    return {"item": item}
''',
        '''
async def order(name):
    item = await signal("item")
    log("packed")
    await timer("pack", after=1)
    return {"item": item, "v": 2}
''',
        ["sword"], [None], moves=False, reason="a statement making log() moved across it",
    ),
    Pair(
        "moved_helper_sending", "an await moved across a call of a function that sends a "
        "message",
        '''
async def order(name):
    item = await signal("item")
    await timer("pack", after=1)
    notify(name)
    return {"item": item}
''',
        '''
async def order(name):
    item = await signal("item")
    notify(name)
    await timer("pack", after=1)
    return {"item": item, "v": 2}
''',
        ["sword"], [None], moves=False, reason="a statement making notify() moved across it",
        extra={"notify": notify},
    ),
    Pair(
        "moved_module_data_change", "an await moved across a statement changing module data "
        "(STOCK[item] -= 1)",
        '''
async def order(name):
    item = await signal("item")
    await timer("pack", after=1)
    STOCK[item] -= 1
    return {"item": item}
''',
        '''
async def order(name):
    item = await signal("item")
    STOCK[item] -= 1
    await timer("pack", after=1)
    return {"item": item, "v": 2}
''',
        ["sword"], [None], moves=False, reason="a statement making STOCK (module data) moved across it",
        extra={"STOCK": {"sword": 5}},
    ),
    Pair(
        "moved_global_assignment", "an await moved across an assignment of a global",
        '''
async def order(name):
    global packed
    item = await signal("item")
    await timer("pack", after=1)
    packed = item
    return {"item": item}
''',
        '''
async def order(name):
    global packed
    item = await signal("item")
    packed = item
    await timer("pack", after=1)
    return {"item": item, "v": 2}
''',
        ["sword"], [None], moves=False, reason="a statement making packed (module data) moved across it",
    ),
    Pair(
        "new_await_later", "a new await added after the point",
        '''
async def order(name):
    item = await signal("item")
    paid = await signal("pay")
    return {"item": item, "paid": paid}
''',
        '''
async def order(name):
    item = await signal("item")
    paid = await signal("pay")
    await timer("ship", after=60)
    return {"item": item, "paid": paid, "shipped": True}
''',
        ["sword"], [30, None],
    ),
    Pair(
        "new_await_before_shifts_uids", "an await added earlier in the function, inside a try (the compiler's numbering shifts)",
        '''
async def route(name):
    total = 0
    for stop in ["a", "b", "c"]:
        try:
            total += await procedure(visit, stop)
        finally:
            log(f"left {stop}")
    return total
''',
        '''
async def route(name):
    try:
        greeting = await signal("hello")
    except ValueError:
        greeting = None
    total = 0
    for stop in ["a", "b", "c"]:
        try:
            total += await procedure(visit, stop)
        finally:
            log(f"left {stop}")
    return total
''',
        [1], [2, 3],
        new_before=["hi", 1],
    ),
    Pair(
        "half_evaluated_statement_kept", "an edit elsewhere while an expression is half evaluated across the await",
        '''
async def tally(name):
    total = 0
    for i in range(3):
        total = total + 10 * await signal("n")
    return total
''',
        '''
async def tally(name):
    log("tallying")
    total = 0
    for i in range(3):
        total = total + 10 * await signal("n")
    log("done")
    return {"total": total}
''',
        [1], [2, 3],
    ),
    Pair(
        "with_block_kept", "an edit elsewhere while a with block is open across the await",
        '''
async def guarded(name):
    with Guard(name) as g:
        first = await signal("a")
        second = await signal("b")
    return [first, second, g.name]
''',
        '''
async def guarded(name):
    log("guarding")
    with Guard(name) as g:
        first = await signal("a")
        second = await signal("b")
    return {"got": [first, second, g.name]}
''',
        [1], [2],
    ),
    Pair(
        "select_in_loop", "the seed's auction loop: a new case, a changed constant",
        '''
async def auction(name):
    price = 10
    high = None
    while True:
        match await select(timer("end", after=60), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": high, "price": price}
            case Event("bid", bid):
                if bid["amount"] > price:
                    high, price = bid["bidder"], bid["amount"]
            case Event("cancel"):
                return {"cancelled": True}
''',
        '''
async def auction(name):
    price = 10
    high = None
    while True:
        match await select(timer("end", after=30), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": high, "price": price, "v": 2}
            case Event("bid", bid) if bid["amount"] > price * 2:
                high, price = bid["bidder"], bid["amount"]
                log("big bid")
            case Event("bid", bid):
                if bid["amount"] > price:
                    high, price = bid["bidder"], bid["amount"]
            case Event("cancel"):
                return {"cancelled": True}
''',
        [("bid", {"bidder": "al", "amount": 12})],
        [("bid", {"bidder": "bo", "amount": 50}), ("end", None)],
    ),
    Pair(
        "inline_helper_changed", "an inline sub-workflow on the stack changed",
        '''
@workflow
async def leg(stop):
    await timer("leg", after=5)
    return stop.upper()

async def trip(name):
    a = await leg("a")
    b = await leg("b")
    return [a, b]
''',
        '''
@workflow
async def leg(stop):
    log(f"walking to {stop}")
    await timer("leg", after=2)
    return stop.upper() + "!"

async def trip(name):
    a = await leg("a")
    b = await leg("b")
    return [a, b]
''',
        [], [None, None],
    ),
    Pair(
        "explicit_rename", "a renamed live local, moved by an upgrade function",
        PATROL,
        PATROL.replace("laps", "rounds"),
        [None], [None, None],
        upgrader='''
def up(point, old):
    if point == "timer 'walk' #1":
        return point, {"name": old["name"], "rounds": old["laps"]}
    return None
''',
    ),
    Pair(
        "comprehension_kept", "an edit elsewhere while a comprehension's loop is suspended (the numbering shifts)",
        '''
async def survey(name):
    seen = [await procedure(visit, s) for s in ["ab", "cde", "f"]]
    return seen
''',
        '''
async def survey(name):
    hello = name.upper() + await signal("hello")
    log(hello)
    seen = [await procedure(visit, s) for s in ["ab", "cde", "f"]]
    return {"seen": seen}
''',
        [2], [3, 1],
        new_before=["!", 2],
    ),
    Pair(
        "except_handler_kept", "an edit elsewhere while an except clause is handling an exception across the await",
        '''
async def careful(name):
    try:
        raise ValueError(name)
    except ValueError as e:
        await timer("cool", after=1)
        return f"recovered from {e!r}"
''',
        '''
async def careful(name):
    try:
        extra = await signal("extra")
    except KeyError:
        extra = None
    try:
        raise ValueError(name)
    except ValueError as e:
        await timer("cool", after=1)
        return f"recovered from {e!r} (v2)"
''',
        [], [None],
        new_before=["x"],
    ),
    Pair(
        "gather_kept", "an edit after a gather",
        '''
async def both(name):
    a, b = await gather(procedure(visit, "abc"), timer("t", after=1))
    return a
''',
        '''
async def both(name):
    a, b = await gather(procedure(visit, "abc"), timer("t", after=1))
    log(f"got {a}")
    return {"a": a, "b": b}
''',
        [], [[3, None]],
    ),
    Pair(
        "explicit_out_of_loop", "an await moved out of a loop, by an upgrade function",
        '''
async def route(name):
    total = 0
    for stop in ["a", "bb", "ccc"]:
        total += await procedure(visit, stop)
    return total
''',
        '''
async def route(name):
    total = await procedure(visit, "abbccc")
    return {"total": total}
''',
        [1], [6],
        new_before=[],
        upgrader='''
def up(point, old):
    return "procedure visit #1", {"name": old["name"]}
''',
    ),
    # ---- a local assigned on one path only, the other paths leaving: not live before it
    Pair(
        "match_case_assigns", "a match case assigns a new local; the other cases return or raise",
        """
async def sort(name):
    kind = await signal("kind")
    match kind:
        case "parcel":
            log("parcel")
        case "letter":
            return "letter"
        case _:
            raise ValueError(kind)
    await timer("ship", after=1)
    return "shipped"
""",
        """
async def sort(name):
    kind = await signal("kind")
    match kind:
        case "parcel":
            label = kind.upper()
        case "letter":
            return "letter"
        case _:
            raise ValueError(kind)
    await timer("ship", after=1)
    return "shipped " + label
""",
        [], ["parcel", None],
    ),
    Pair(
        "if_branch_assigns", "the same logic written with if/elif/else",
        """
async def sort(name):
    kind = await signal("kind")
    if kind == "parcel":
        log("parcel")
    elif kind == "letter":
        return "letter"
    else:
        raise ValueError(kind)
    await timer("ship", after=1)
    return "shipped"
""",
        """
async def sort(name):
    kind = await signal("kind")
    if kind == "parcel":
        label = kind.upper()
    elif kind == "letter":
        return "letter"
    else:
        raise ValueError(kind)
    await timer("ship", after=1)
    return "shipped " + label
""",
        [], ["parcel", None],
    ),
    Pair(
        "bare_except_returns", "a local assigned after a try whose bare except returns, read by "
        "an outer handler",
        """
async def fetch(name):
    try:
        try:
            got = await signal("data")
        except:
            return "no data"
        log(got)
        await timer("settle", after=1)
    except ValueError:
        return "bad"
    return got
""",
        """
async def fetch(name):
    try:
        try:
            got = await signal("data")
        except:
            return "no data"
        size = len(got)
        await timer("settle", after=1)
    except ValueError:
        return f"bad after {size}"
    return got
""",
        [], ["abc", None],
    ),
    # ---- unsafe: held, saying what did not match
    Pair(
        "renamed_live_local", "a renamed local that is live",
        PATROL, PATROL.replace("laps", "rounds"),
        [None], [], moves=False,
        reason="local rounds is live there in the new code but was not in the old (live in the old code: laps)",
    ),
    Pair(
        "new_live_local_before", "a statement added before the await that assigns a local read after it",
        PATROL,
        PATROL.replace("    laps = 0\n", "    laps = 0\n    limit = 3\n").replace(">= 3", ">= limit"),
        [None], [], moves=False,
        reason="local limit is live there in the new code but was not in the old",
    ),
    Pair(
        "moved_await_live", "an await moved below a statement whose inputs it then needs",
        '''
async def order(name):
    item = await signal("item")
    label = item.upper()
    await timer("pack", after=1)
    return label
''',
        '''
async def order(name):
    item = await signal("item")
    await timer("pack", after=1)
    label = item.upper()
    return label
''',
        ["sword"], [], moves=False,
        reason="local item is live there in the new code but was not in the old (live in the old code: label)",
    ),
    Pair(
        "wrapped_in_try", "the await moved into a new try/finally",
        PATROL,
        PATROL.replace('        await timer("walk", after=5)\n',
                       '        try:\n            await timer("walk", after=5)\n        finally:\n'
                       '            log("step")\n'),
        [None], [], moves=False,
        reason="the constructs around it changed: while loop in the old code, while loop > try finally in the new",
    ),
    Pair(
        "await_moved_into_loop", "an await moved into a loop",
        '''
async def drill(name):
    await signal("go")
    for i in range(2):
        await timer("step", after=1)
    return "done"
''',
        '''
async def drill(name):
    for i in range(2):
        await signal("go")
        await timer("step", after=1)
    return "done"
''',
        [], [], moves=False,
        reason="the constructs around it changed: the function body in the old code, for i in range(2) in the new",
    ),
    Pair(
        "live_but_never_assigned", "a local the old code only read in a lambda, assigned before the await by the new",
        '''
async def show(name):
    get = lambda: x
    await signal("go")
    x = 1
    return get()
''',
        '''
async def show(name):
    get = lambda: x
    x = 2
    await signal("go")
    return get() + x
''',
        [], [], moves=False,
        reason="local x is live there in the new code but has no value in this instance (the old code had not assigned it)",
    ),
    Pair(
        "select_arms_changed", "a select given a new arm",
        '''
async def duel(name):
    match await select(timer("end", after=60), signal("hit")):
        case Event("hit", v):
            return v
        case _:
            return None
''',
        '''
async def duel(name):
    match await select(timer("end", after=60), signal("hit"), signal("yield")):
        case Event("hit", v):
            return v
        case _:
            return None
''',
        [], [], moves=False,
        reason="the new code has no await select(timer 'end', signal 'hit') #1",
    ),
    Pair(
        "await_removed", "the await it waits at removed",
        '''
async def order(name):
    item = await signal("item")
    await signal("confirm")
    return item
''',
        '''
async def order(name):
    item = await signal("item")
    return item
''',
        ["sword"], [], moves=False,
        reason="the new code has no await signal 'confirm' #1",
    ),
    Pair(
        "second_of_two_removed", "the first of two awaits with the same command removed (ranks shift)",
        '''
async def order(name):
    a = await signal("step")
    b = await signal("step")
    return [a, b]
''',
        '''
async def order(name):
    b = await signal("step")
    return [b]
''',
        [1], [], moves=False,
        reason="the new code has no await signal 'step' #2 (it has: signal 'step' #1)",
    ),
    Pair(
        "same_command_added_before", "an await of the same command added before it (its rank now names the one before)",
        '''
async def order(name):
    a = await signal("s")
    b = await signal("s")
    return [a, b]
''',
        '''
async def order(name):
    first = await signal("s")
    a = await signal("s")
    b = await signal("s")
    return [first, a, b]
''',
        [1], [2], moves=False,
        reason="the awaits signal 's' up to it changed (one was added, removed or moved before it, or the code around one of them, an if or a case, changed), so the new code's signal 's' #2 may be another await than this one",
    ),
    Pair(
        "identical_await_removed_before", "the first of three identical awaits removed (the next one's rank names the last)",
        '''
async def steps(name):
    await signal("s")
    log("one")
    await signal("s")
    log("two")
    await signal("s")
    log("three")
    return "done"
''',
        '''
async def steps(name):
    log("one")
    await signal("s")
    log("two")
    await signal("s")
    log("three")
    return "done"
''',
        [None], [None], moves=False,
        reason="the awaits signal 's' up to it changed (one was added, removed or moved before it, or the code around one of them, an if or a case, changed), so the new code's signal 's' #2 may be another await than this one",
    ),
    Pair(
        "same_command_in_a_new_branch_before", "the same await in a new if branch before its own",
        '''
async def route(name):
    if name == "north":
        await signal("s")
    got = await signal("s")
    return (name, got)
''',
        '''
async def route(name):
    if name == "south":
        await signal("s")
    if name == "north":
        await signal("s")
    got = await signal("s")
    return (name, got)
''',
        [None], [1], moves=False,
        reason="the awaits signal 's' up to it changed (one was added, removed or moved before it, or the code around one of them, an if or a case, changed), so the new code's signal 's' #2 may be another await than this one",
    ),
    Pair(
        "assigned_on_every_path_now", "a local the old code assigned on some paths, assigned before the await on every path by the new",
        '''
async def tally(name):
    if name == "south":
        y = 2
    await signal("go")
    return y if name == "south" else 0
''',
        '''
async def tally(name):
    y = 2
    await signal("go")
    return y
''',
        [], [None], moves=False,
        reason="local y is live there in the new code but has no value in this instance (the old code had not assigned it)",
    ),
    Pair(
        "loop_iterable_changed", "the for loop around the await iterates something else",
        '''
async def route(name):
    for stop in ["a", "b", "c"]:
        await procedure(visit, stop)
    return "done"
''',
        '''
async def route(name):
    for stop in ["a", "b"]:
        await procedure(visit, stop)
    return "done"
''',
        [1], [], moves=False,
        reason="the constructs around it changed: for stop in ['a', 'b', 'c'] in the old code, for stop in ['a', 'b'] in the new",
    ),
    Pair(
        "half_evaluated_statement_changed", "the statement half evaluated across the await changed",
        '''
async def tally(name):
    total = 0
    for i in range(3):
        total = total + 10 * await signal("n")
    return total
''',
        '''
async def tally(name):
    total = 0
    for i in range(3):
        total = total + 20 * await signal("n")
    return total
''',
        [1], [], moves=False,
        reason="the statement at line 5 is half evaluated across the await (a value computed before it is kept for after it), and that statement changed",
    ),
    Pair(
        "changed_around_a_comprehension", "the call around a comprehension that awaits changed (its earlier arguments are kept across the await)",
        '''
async def tally(name):
    return max(len(name), sum([await procedure(visit, s) for s in ["a", "bb"]]))
''',
        '''
async def tally(name):
    return max(len(name) * 2, sum([await procedure(visit, s) for s in ["a", "bb"]]))
''',
        [], [], moves=False,
        reason="the statement at line 3 is half evaluated across the await (a value computed before it is kept for after it), and that statement changed",
    ),
    Pair(
        "half_evaluated_in_new_code_only", "an awaited value used where it is awaited, in a statement that keeps a value computed before the await",
        '''
async def collect(name):
    out = []
    for i in range(2):
        v = await signal("n")
        out.append(v)
    return out
''',
        '''
async def collect(name):
    out = []
    for i in range(2):
        out.append(await signal("n"))
    return out
''',
        [1], [2], moves=False,
        reason="the statement at line 5 of the new code is half evaluated across the await (a value computed before it is kept for after it), which the old code did not keep",
    ),
    Pair(
        "comprehension_wrapped_in_a_call", "a comprehension that awaits passed to a call (the function is kept across the await)",
        '''
async def tally(name):
    res = [await procedure(visit, s) for s in ["a", "bb"]]
    return res
''',
        '''
async def tally(name):
    res = sorted([await procedure(visit, s) for s in ["a", "bb"]])
    return res
''',
        [], [], moves=False,
        reason="the statement at line 3 of the new code is half evaluated across the await (a value computed before it is kept for after it), which the old code did not keep",
    ),
    Pair(
        "with_context_changed", "the context expression of the with block around the await changed",
        '''
async def guarded(name):
    with Guard(name) as g:
        first = await signal("a")
    return [first, g.name]
''',
        '''
async def guarded(name):
    with Guard(name.upper()) as g:
        first = await signal("a")
    return [first, g.name]
''',
        [], [], moves=False,
        reason="the constructs around it changed: with Guard(name) as g in the old code, with Guard(name.upper()) as g in the new",
    ),
    Pair(
        "finally_running_return", "suspended in a finally that a return is running",
        '''
async def closing(name):
    try:
        return "done"
    finally:
        await timer("cleanup", after=1)
''',
        '''
async def closing(name):
    log("v2")
    try:
        return "done"
    finally:
        await timer("cleanup", after=1)
''',
        [], [], moves=False,
        reason="it is inside a finally block run by a return, whose destination in the old code cannot be carried over",
    ),
    Pair(
        "inline_helper_unsafe", "an inline sub-workflow on the stack changed unsafely",
        '''
@workflow
async def leg(stop):
    await timer("leg", after=5)
    return stop.upper()

async def trip(name):
    a = await leg("a")
    return [a]
''',
        '''
@workflow
async def leg(stop):
    where = stop.upper()
    await timer("leg", after=5)
    return where

async def trip(name):
    a = await leg("a")
    return [a]
''',
        [], [], moves=False,
        reason="local where is live there in the new code but was not in the old (live in the old code: stop)",
    ),
    Pair(
        "explicit_missing_local", "an upgrade function that leaves out a live local",
        PATROL, PATROL.replace("laps", "rounds"),
        [None], [], moves=False,
        reason="its upgrade function gave no value for rounds",
        upgrader='''
def up(point, old):
    return point, {"name": old["name"]}
''',
    ),
    Pair(
        "explicit_raises", "an upgrade function that raises",
        PATROL, PATROL.replace("laps", "rounds"),
        [None], [], moves=False,
        reason="its upgrade function raised KeyError: 'rounds'",
        upgrader='''
def up(point, old):
    return point, {"name": old["name"], "rounds": old["rounds"]}
''',
    ),
    Pair(
        "explicit_unknown_point", "an upgrade function that names a point the new code lacks",
        PATROL, PATROL.replace("laps", "rounds"),
        [None], [], moves=False,
        reason="its upgrade function chose point \"timer 'run' #1\", which the new code does not have",
        upgrader='''
def up(point, old):
    return "timer 'run' #1", {"name": old["name"], "rounds": old["laps"]}
''',
    ),
    Pair(
        "explicit_other_command", "an upgrade function that names an await of another command",
        PATROL, PATROL.replace("    log(tmp)\n", "    log(tmp)\n    await signal(\"go\")\n"),
        [None], [], moves=False,
        reason="its upgrade function chose point \"signal 'go' #1\", which awaits signal 'go', but this instance waits at await timer 'walk' #1 (line 7), for timer 'walk'",
        upgrader='''
def up(point, old):
    return "signal 'go' #1", {"name": old["name"], "laps": old["laps"]}
''',
    ),
    Pair(
        "assigned_on_every_path_by_if_else", "a local the old code assigned on some paths, assigned by an if/else on every path by the new",
        '''
async def tally(name):
    if name == "south":
        y = 2
    await signal("go")
    return y if name == "south" else 0
''',
        '''
async def tally(name):
    if name == "south":
        y = 2
    else:
        y = 0
    await signal("go")
    return y
''',
        [], [None], moves=False,
        reason="local y is live there in the new code but has no value in this instance (the old code had not assigned it)",
    ),
    Pair(
        "and_changed_to_or", "the and around the await changed to or (the first operand decided, before it, that it runs)",
        '''
async def pay(name):
    if (await signal("a")) and (await signal("b")):
        await procedure(visit, "charge")
        return "charged"
    return "not charged"
''',
        '''
async def pay(name):
    if (await signal("a")) or (await signal("b")):
        await procedure(visit, "charge")
        return "charged"
    return "not charged"
''',
        [True], [False], moves=False,
        reason="the and/or or conditional expression that decides whether it runs changed",
    ),
    Pair(
        "timer_wait_computed_from_a_local", "a timer's wait computed from the loop variable instead of a constant",
        '''
async def retry(name):
    for attempt in range(3):
        await timer("backoff", after=5)
    return "done"
''',
        '''
async def retry(name):
    for attempt in range(3):
        await timer("backoff", after=5 * 2 ** attempt)
    return "done"
''',
        [None], [None, None],
    ),
    # ---- a command not written out at the await: its expression and what computes it
    Pair(
        "awaited_variable_command_changed", "the command held in a variable and awaited changed (a timer became a signal)",
        '''
async def order(name):
    cmd = timer("grace", after=5)
    v = await cmd
    return ("grace over", v)
''',
        '''
async def order(name):
    cmd = signal("pay")
    v = await cmd
    return ("paid", v)
''',
        [], [], moves=False,
        reason="the command it awaits is not written out",
    ),
    Pair(
        "computed_signal_name_changed", "the name of the signal awaited computed otherwise",
        '''
async def refund(name):
    kind = "pay-" + name
    v = await signal(kind)
    return v
''',
        '''
async def refund(name):
    kind = "refund-" + name
    v = await signal(kind)
    return v
''',
        [], [], moves=False,
        reason="the command it awaits is not written out",
    ),
    Pair(
        "gathered_list_changed", "the list of commands a gather awaits got another arm",
        '''
async def both(name):
    cmds = [signal("a"), signal("b")]
    got = await gather(*cmds)
    return got
''',
        '''
async def both(name):
    cmds = [timer("a", after=1), signal("c"), signal("b")]
    got = await gather(*cmds)
    return got
''',
        [], [], moves=False,
        reason="the command it awaits is not written out",
    ),
    Pair(
        "awaited_variable_edit_elsewhere", "an edit after the await of a command held in a variable",
        '''
async def order(name):
    kind = "pay-" + name
    cmd = signal(kind)
    v = await cmd
    return v
''',
        '''
async def order(name):
    log("ordering")
    kind = "pay-" + name
    cmd = signal(kind)
    v = await cmd
    log(f"paid {v}")
    return {"paid": v}
''',
        [], [5],
    ),
    # ---- a local read by a function the old code made (through the frame)
    Pair(
        "closure_local_dropped", "a local that a lambda made by the old code reads is gone from the new code",
        '''
async def show(name):
    x = 41
    get = lambda: x + 1
    await signal("go")
    return get()
''',
        '''
async def show(name):
    get = lambda: 42
    await signal("go")
    return get()
''',
        [], [], moves=False,
        reason="local x is read by a function the old code made",
    ),
    Pair(
        "nonlocal_counter_local_dropped", "a local that a nested def made by the old code counts with nonlocal is gone from the new code",
        '''
async def tally(name):
    count = 0
    def bump():
        nonlocal count
        count += 1
        return count
    bump()
    await signal("go")
    return bump()
''',
        '''
async def tally(name):
    def bump():
        return 2
    await signal("go")
    return bump()
''',
        [], [], moves=False,
        reason="local count is read by a function the old code made",
    ),
    Pair(
        "closure_local_kept", "an edit after the await while a lambda made by the old code reads a local the new code keeps",
        '''
async def show(name):
    x = 41
    get = lambda: x + 1
    await signal("go")
    return get()
''',
        '''
async def show(name):
    x = 41
    get = lambda: x + 1
    await signal("go")
    log("shown")
    return {"got": get()}
''',
        [], [None],
    ),
    Pair(
        "match_guard_changed_two_awaits", "the guard of the case before the one holding the second of two awaits of one command changed",
        '''
async def sort(name):
    x = len(name)
    match x:
        case int() if x > 10:
            v = await signal("s")
            return ("big", v)
        case _:
            v = await signal("s")
            return ("small", v)
''',
        '''
async def sort(name):
    x = len(name)
    match x:
        case int() if x > 1:
            v = await signal("s")
            return ("big", v)
        case _:
            v = await signal("s")
            return ("small", v)
''',
        [], [], moves=False,
        reason="the awaits signal 's' up to it changed",
    ),
    Pair(
        "match_guard_kept_two_awaits", "an edit after the await in a match with a guarded case (two awaits of one command)",
        '''
async def sort(name):
    x = len(name)
    match x:
        case int() if x > 10:
            v = await signal("s")
            return ("big", v)
        case _:
            v = await signal("s")
            return ("small", v)
''',
        '''
async def sort(name):
    x = len(name)
    match x:
        case int() if x > 10:
            v = await signal("s")
            return ("big", v)
        case _:
            v = await signal("s")
            log("small")
            return ("small", v, 2)
''',
        [], [1],
    ),
    # ---- a comprehension's filters decide what its partial result holds
    Pair(
        "comprehension_filter_changed", "the if filter of the comprehension suspended mid-way changed",
        '''
async def tour(name):
    return [await procedure(visit, s) for s in ["a", "bb", "ccc"] if len(s) >= 1]
''',
        '''
async def tour(name):
    return [await procedure(visit, s) for s in ["a", "bb", "ccc"] if len(s) >= 2]
''',
        [1], [], moves=False,
        reason="the constructs around it changed: comprehension list comprehension > for s in ['a', 'bb', 'ccc'] if len(s) >= 1 in the old code, comprehension list comprehension > for s in ['a', 'bb', 'ccc'] if len(s) >= 2 in the new",
    ),
    Pair(
        "comprehension_filter_kept", "an edit elsewhere while a filtered comprehension is suspended mid-way",
        '''
async def tour(name):
    return [await procedure(visit, s) for s in ["a", "bb", "ccc"] if len(s) >= 1]
''',
        '''
async def tour(name):
    log('touring')
    return [await procedure(visit, s) for s in ["a", "bb", "ccc"] if len(s) >= 1]
''',
        [1], [2, 3],
    ),
    # ---- the decisions on the path to an await: if tests, elif chains, case patterns and guards
    Pair(
        "if_test_changed", "the if test leading to the await changed",
        '''
async def route(name):
    if name == "north":
        v = await signal("go")
        return "north " + str(v)
    return "other"
''',
        '''
async def route(name):
    if name == "south":
        v = await signal("go")
        return "north " + str(v)
    return "other"
''',
        [], [], moves=False,
        reason=_PATH,
    ),
    Pair(
        "case_pattern_changed", "the case pattern leading to the await changed",
        '''
async def route(name):
    match name:
        case "north":
            v = await signal("go")
            return "branch " + str(v)
        case _:
            return "other"
''',
        '''
async def route(name):
    match name:
        case "south":
            v = await signal("go")
            return "branch " + str(v)
        case _:
            return "other"
''',
        [], [], moves=False,
        reason=_PATH,
    ),
    Pair(
        "case_guard_changed", "the guard of the case leading to the await changed",
        '''
async def route(name):
    match name:
        case str() if len(name) > 3:
            v = await signal("go")
            return "long " + str(v)
        case _:
            return "other"
''',
        '''
async def route(name):
    match name:
        case str() if len(name) > 30:
            v = await signal("go")
            return "long " + str(v)
        case _:
            return "other"
''',
        [], [], moves=False,
        reason=_PATH,
    ),
    Pair(
        "await_moved_to_another_elif", "the await moved to another arm of an elif chain",
        '''
async def route(name):
    if name == "south":
        return "south"
    elif name == "north":
        v = await signal("go")
        return "north " + str(v)
    else:
        return "other"
''',
        '''
async def route(name):
    if name == "south":
        v = await signal("go")
        return "north " + str(v)
    elif name == "north":
        return "south"
    else:
        return "other"
''',
        [], [], moves=False,
        reason=_PATH,
    ),
    Pair(
        "case_added_before", "a case added before the one holding the await (it takes this instance's subject)",
        '''
async def route(name):
    match name:
        case "north":
            v = await signal("go")
            return "branch " + str(v)
        case _:
            return "other"
''',
        '''
async def route(name):
    match name:
        case str() if name.startswith("n"):
            return "n"
        case "north":
            v = await signal("go")
            return "branch " + str(v)
        case _:
            return "other"
''',
        [], [], moves=False,
        reason=_PATH,
    ),
    Pair(
        "if_other_branch_edited", "an edit outside the if holding the await, whose test is unchanged",
        '''
async def route(name):
    if name == "north":
        v = await signal("go")
        return "north " + str(v)
    return "other"
''',
        '''
async def route(name):
    if name == "north":
        v = await signal("go")
        return "north " + str(v)
    log("not north")
    return "other v2"
''',
        [], [1],
    ),
    # ---- the loop an await is in, and the statements assigning a live local around it
    Pair(
        "await_moved_to_another_while", "the await moved from the first while loop to the second (its counter means another thing there)",
        '''
async def count(name):
    n = 0
    while n < 2:
        v = await signal("tick")
        n += 1
    while n < 4:
        n += 1
        log(str(n))
    return n
''',
        '''
async def count(name):
    n = 0
    while n < 2:
        n += 1
        log(str(n))
    while n < 4:
        v = await signal("tick")
        n += 1
    return n
''',
        [], [], moves=False,
        reason='it is in another while loop: the 1st while loop of the function in the old code, the 2nd in the new',
    ),
    Pair(
        "counter_moved_across_await", "the statement counting the laps moved from after the await to before it",
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        await timer("rest", after=5)
        laps += 1
    return laps
''',
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        laps += 1
        await timer("rest", after=5)
    return laps
''',
        [None], [], moves=False,
        reason='a statement assigning or changing laps (live there) moved across it',
    ),
    Pair(
        "moved_and_edited_across", "a statement assigning a live local moved across the await and edited",
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        await timer("rest", after=5)
        laps += 1
    return laps
''',
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        laps += 2
        await timer("rest", after=5)
    return laps
''',
        [None], [], moves=False,
        reason="a statement assigning or changing laps (live there) left one side of it and one was added on the other",
    ),
    Pair(
        "edited_in_place_and_added_after", "a statement assigning a live local edited where it was, another added after the await",
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        laps += 1
        await timer("rest", after=5)
    return laps
''',
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        laps = laps + 1
        await timer("rest", after=5)
        laps = laps * 1
    return laps
''',
        [None], [None, None],
    ),
    Pair(
        "append_moved_across", "a method call changing a live list (`items.append`) moved from before the await to after it",
        '''
async def tour(name):
    items = []
    items.append(name)
    await signal("go")
    return items
''',
        '''
async def tour(name):
    items = []
    await signal("go")
    items.append(name)
    return items
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing items (live there) moved across it",
    ),
    Pair(
        "item_store_moved_across", "an item of a live dict stored (`d[\"n\"] += 1`) moved from before the await to after it",
        '''
async def tour(name):
    d = {"n": 0}
    d["n"] += 1
    await signal("go")
    return d
''',
        '''
async def tour(name):
    d = {"n": 0}
    await signal("go")
    d["n"] += 1
    return d
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing d (live there) moved across it",
    ),
    Pair(
        "attribute_and_del_moved_across", "an attribute store and a `del` of an item of live locals moved from after the await to before it",
        '''
async def tour(name):
    g = Guard(name)
    items = [1, 2, 3]
    await signal("go")
    g.name = g.name + "!"
    del items[0]
    return g.name, items
''',
        '''
async def tour(name):
    g = Guard(name)
    items = [1, 2, 3]
    g.name = g.name + "!"
    del items[0]
    await signal("go")
    return g.name, items
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing g, items (live there) moved across it",
    ),
    Pair(
        "passed_to_a_call_moved_across", "a live list passed to a call that may change it moved across the await",
        '''
async def tour(name):
    items = [3, 1, 2]
    items.sort()
    await signal("go")
    log(str(items))
    return items
''',
        '''
async def tour(name):
    items = [3, 1, 2]
    await signal("go")
    log(str(items))
    return sorted(items)
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing items (live there) left one side of it and one was added on the other",
    ),
    Pair(
        "send_moved_across", "a `send` moved from before the await to after it",
        '''
async def tour(name):
    send("quartermaster", "restock", name)
    await signal("go")
    return name
''',
        '''
async def tour(name):
    await signal("go")
    send("quartermaster", "restock", name)
    return name
''',
        [], ["v"], moves=False,
        reason="a statement making send() moved across it",
    ),
    Pair(
        "publish_moved_across", "a `publish` moved from after the await to before it",
        '''
async def tour(name):
    await signal("go")
    publish("phase", "walking")
    return name
''',
        '''
async def tour(name):
    publish("phase", "walking")
    await signal("go")
    return name
''',
        [], ["v"], moves=False,
        reason="a statement making publish() moved across it",
    ),
    Pair(
        "send_edited_in_place", "a `send` before the await given another payload",
        '''
async def tour(name):
    send("quartermaster", "restock", 1)
    await signal("go")
    return name
''',
        '''
async def tour(name):
    send("quartermaster", "restock", 2)
    await signal("go")
    return name
''',
        [], ["v"],
    ),
    Pair(
        "while_added_after", "a while loop added after the one holding the await",
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        await timer("rest", after=5)
        laps += 1
    return laps
''',
        '''
async def patrol(name):
    laps = 0
    while laps < 3:
        await timer("rest", after=5)
        laps += 1
    while laps < 5:
        laps += 2
        log(str(laps))
    return {"laps": laps}
''',
        [None], [None, None],
    ),
    Pair(
        "alias_changed_in_place_moved_across", "a method call changing a list through another name (`a = items`, then `a.append(1)`) moved from after the await to before it",
        '''
async def tour(name):
    items = []
    a = items
    await signal("go")
    a.append(1)
    return items
''',
        '''
async def tour(name):
    items = []
    a = items
    a.append(1)
    await signal("go")
    return items
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing a (live there) moved across it",
    ),
    Pair(
        "alias_changed_in_place_kept", "an edit elsewhere while a list is changed through another name after the await",
        '''
async def tour(name):
    items = []
    a = items
    await signal("go")
    a.append(1)
    return items
''',
        '''
async def tour(name):
    items = []
    a = items
    await signal("go")
    a.append(1)
    log(str(items))
    return items
''',
        [], ["v"],
    ),
    Pair(
        "local_function_call_moved_across", "a call of a nested def that counts with nonlocal (`bump()`) moved from after the await to before it",
        '''
async def tour(name):
    laps = 0
    def bump():
        nonlocal laps
        laps += 1
    await signal("go")
    bump()
    return laps
''',
        '''
async def tour(name):
    laps = 0
    def bump():
        nonlocal laps
        laps += 1
    bump()
    await signal("go")
    return laps
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing bump (live there) moved across it",
    ),
    Pair(
        "bound_method_call_moved_across", "a call of a list's method held in a local (`add = items.append`, then `add(1)`) moved from after the await to before it",
        '''
async def tour(name):
    items = []
    add = items.append
    await signal("go")
    add(1)
    return items
''',
        '''
async def tour(name):
    items = []
    add = items.append
    add(1)
    await signal("go")
    return items
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing add (live there) moved across it",
    ),
    Pair(
        "hoisted_out_of_loop", "a statement counting in the loop around the await, before it, hoisted above the loop",
        '''
async def tour(name):
    laps = 0
    for i in range(4):
        laps += 1
        await timer("t", after=1)
    return laps
''',
        '''
async def tour(name):
    laps = 0
    laps += 1
    for i in range(4):
        await timer("t", after=1)
    return laps
''',
        [None], [None, None, None], moves=False,
        reason="a statement assigning or changing laps (live there) moved into or out of a loop around it",
    ),
    Pair(
        "sunk_into_inner_loop", "a statement counting in the outer loop moved into the inner loop around the await",
        '''
async def tour(name):
    laps = 0
    for i in range(2):
        laps += 1
        for j in range(2):
            await timer("t", after=1)
    return laps
''',
        '''
async def tour(name):
    laps = 0
    for i in range(2):
        for j in range(2):
            laps += 1
            await timer("t", after=1)
    return laps
''',
        [None, None], [None], moves=False,
        reason="a statement assigning or changing laps (live there) moved into or out of a loop around it",
    ),
    Pair(
        "counted_in_loop_kept", "an edit after the loop while a statement in the loop counts before the await",
        '''
async def tour(name):
    laps = 0
    for i in range(3):
        laps += 1
        await timer("t", after=1)
    return laps
''',
        '''
async def tour(name):
    laps = 0
    for i in range(3):
        laps += 1
        await timer("t", after=1)
    log(f"{laps} laps")
    return {"laps": laps}
''',
        [None], [None, None],
    ),
    Pair(
        "alias_extended_moved_across", "a list held in a dict extended through another name (`a = d[\"items\"]`, then `a += [1]`) moved from after the await to before it",
        '''
async def tour(name):
    d = {"items": []}
    a = d["items"]
    await signal("go")
    a += [1]
    return d
''',
        '''
async def tour(name):
    d = {"items": []}
    a = d["items"]
    a += [1]
    await signal("go")
    return d
''',
        [], ["v"], moves=False,
        reason="a statement assigning or changing a (live there) moved across it",
    ),
    Pair(
        "awaits_swapped", "two awaits of different commands swapped (the one before it now comes after it)",
        '''
async def tour(name):
    x = await signal("a")
    y = await signal("b")
    return x, y
''',
        '''
async def tour(name):
    y = await signal("b")
    x = await signal("a")
    return x, y
''',
        [1], [2, 3], moves=False, new_before=[],
        reason="a statement making await signal 'a' moved across it",
    ),
    Pair(
        "procedure_moved_after", "a procedure awaited before the await moved after it",
        '''
async def tour(name):
    await procedure(visit, "abc")
    y = await signal("b")
    return y
''',
        '''
async def tour(name):
    y = await signal("b")
    await procedure(visit, "abc")
    return y
''',
        [3], [2, 3], moves=False, new_before=[],
        reason="a statement making await procedure visit moved across it",
    ),
    Pair(
        "procedure_before_edited_in_place", "the arguments of a procedure awaited before the await changed where it is",
        '''
async def tour(name):
    n = await procedure(visit, "abc")
    y = await signal("b")
    return n, y
''',
        '''
async def tour(name):
    n = await procedure(visit, "abcd")
    y = await signal("b")
    return n, y
''',
        [3], [2],
    ),
    Pair(
        "nested_def_body_changed", "the body of a nested def made before the await, and called after it, changed",
        '''
async def tour(name):
    def f(x):
        return x + 1
    await signal("go")
    return f(1)
''',
        '''
async def tour(name):
    def f(x):
        return x + 2
    await signal("go")
    return f(1)
''',
        [], ["v"], moves=False,
        reason="local f may hold a function (a def or a lambda) made before it whose code changed",
    ),
    Pair(
        "lambda_body_changed", "the body of a lambda made before the await, and called after it, changed",
        '''
async def tour(name):
    f = lambda x: x + 1
    await signal("go")
    return f(1)
''',
        '''
async def tour(name):
    f = lambda x: x * 10
    await signal("go")
    return f(1)
''',
        [], ["v"], moves=False,
        reason="local f may hold a function (a def or a lambda) made before it whose code changed",
    ),
    Pair(
        "lambda_after_await_changed", "the body of a lambda made after the await changed",
        '''
async def tour(name):
    n = await signal("go")
    f = lambda x: x + n
    return f(1)
''',
        '''
async def tour(name):
    n = await signal("go")
    f = lambda x: x * n
    return f(1)
''',
        [], [5],
    ),
    Pair(
        "function_alias_body_changed", "the body of a nested def made before the await changed, held after it under another name (`h = f`)",
        '''
async def tour(name):
    def f():
        return 1
    h = f
    await signal("go")
    return h()
''',
        '''
async def tour(name):
    def f():
        return 2
    h = f
    await signal("go")
    return h()
''',
        [], ["v"], moves=False,
        reason="local f may hold a function (a def or a lambda) made before it whose code changed",
    ),
    Pair(
        "function_called_before_changed", "the body of a nested def only called before the await changed (the value it computed is kept)",
        '''
async def tour(name):
    def f(x):
        return x + 1
    y = f(2)
    await signal("go")
    return y
''',
        '''
async def tour(name):
    def f(x):
        return x + 1
    y = f(2)
    await signal("go")
    log("done")
    return y
''',
        [], ["v"],
    ),
    Pair(
        "nested_class_method_changed", "a method of a class made in the workflow changed, an instance of it made before the await",
        '''
async def tour(name):
    class K:
        def v(self):
            return 1
    k = K()
    await signal("go")
    return k.v()
''',
        '''
async def tour(name):
    class K:
        def v(self):
            return 2
    k = K()
    await signal("go")
    return k.v()
''',
        [], ["v"], moves=False,
        reason="local K may hold a function (a def or a lambda) made before it whose code changed",
    ),
    Pair(
        "decorated_def_body_changed", "the body of a nested def a decorator registers in a live dict changed",
        '''
async def tour(name):
    fs = {}
    def reg(fn):
        fs[fn.__name__] = fn
        return fn
    @reg
    def hello():
        return 1
    await signal("go")
    return fs["hello"]()
''',
        '''
async def tour(name):
    fs = {}
    def reg(fn):
        fs[fn.__name__] = fn
        return fn
    @reg
    def hello():
        return 2
    await signal("go")
    return fs["hello"]()
''',
        [], ["v"], moves=False,
        reason="local hello may hold a function (a def or a lambda) made before it whose code changed",
    ),
]
