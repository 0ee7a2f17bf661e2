"""Workflows, procedures and reducers the runtime tests use (module level, so keys resolve)."""

from __future__ import annotations

import importlib
import threading

from workflows import (
    Cancelled,
    ChildFailed,
    Event,
    ProcedureFailed,
    RetryPolicy,
    WorkflowError,
    broadcast,
    gather,
    idempotency_key,
    now,
    procedure,
    reducer,
    select,
    send,
    signal,
    spawn,
    subscribe,
    timer,
    workflow,
    workflow_id,
)

CALLS: list[tuple[str, object]] = []
CALLS_LOCK = threading.Lock()


def record(what: str, value: object) -> None:
    with CALLS_LOCK:
        CALLS.append((what, value))


@reducer
def log_event(db, wf: str, text: str) -> None:
    db["app_events"].insert({"wf": wf, "text": text}, pk="id", alter=True)


@reducer
def bad_reducer(db) -> None:
    raise RuntimeError("reducer exploded")


@procedure
def double(x: int) -> int:
    record("double", (x, idempotency_key()))
    return 2 * x


FLAKY_FAILS: dict[str, int] = {}


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=10.0))
def flaky(tag: str, fail_times: int) -> str:
    n = FLAKY_FAILS.get(tag, 0)
    FLAKY_FAILS[tag] = n + 1
    if n < fail_times:
        raise ConnectionError(f"flaky {tag} attempt {n + 1}")
    return f"ok after {n + 1}"


class CardDeclined(ConnectionError):
    """A failure no retry mends: named by its class in ``non_retryable``."""


class StolenCard(CardDeclined):
    pass


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=10.0, non_retryable=(CardDeclined,)))
def charge(tag: str, error: str) -> str:
    FLAKY_FAILS[tag] = FLAKY_FAILS.get(tag, 0) + 1
    raise {"declined": CardDeclined, "stolen": StolenCard, "flaky": ConnectionError}[error](tag)


@workflow
async def pays(tag: str, error: str) -> str:
    try:
        return await procedure(charge, tag, error)
    except ProcedureFailed as e:
        return f"gave up: {e.error_type} after {e.attempts}"


@workflow
async def calls_with_wrong_arguments(tag: str) -> str:
    """Calls ``flaky`` (which takes two arguments) with one: no attempt could take it."""
    try:
        return await procedure(flaky, tag)  # type: ignore[call-arg]
    except ProcedureFailed as e:
        return f"gave up: {e.error_type} after {e.attempts}: {e.error_message}"


@workflow
async def sleeper(seconds: float) -> float:
    start = now()
    await timer("wake", seconds)
    return now() - start


@workflow
async def collect(n: int) -> list:
    got = []
    while len(got) < n:
        got.append(await signal("item"))
    return got


@workflow
async def adder(x: int) -> int:
    a = await procedure(double, x)
    b = await procedure(double, a)
    reducer(log_event, workflow_id(), f"{a},{b}")
    return b


@workflow
async def uses_flaky(tag: str, fail_times: int) -> str:
    try:
        return await procedure(flaky, tag, fail_times)
    except ProcedureFailed as e:
        return f"gave up: {e.error_type} after {e.attempts}"


@workflow
async def auction(start_price: int) -> dict:
    price, bidder = start_price, None
    while True:
        match await select(timer("end", 60), signal("bid"), signal("cancel")):
            case Event("end"):
                return {"winner": bidder, "price": price}
            case Event("bid", bid):
                if bid["amount"] > price:
                    bidder, price = bid["bidder"], bid["amount"]
            case Event("cancel") if bidder is None:
                return {"cancelled": True}


@workflow
async def child(value: int, delay: float) -> int:
    await timer("done", delay)
    if value < 0:
        raise ValueError(f"negative {value}")
    return value * 10


@workflow
async def parent(values: list) -> int:
    total = 0
    for v in values:
        try:
            total += await spawn(child, v, 1)
        except ChildFailed as e:
            reducer(log_event, workflow_id(), f"child failed: {e.error_message}")
    return total


@workflow
async def fan_out(values: list) -> list:
    return await gather(*[spawn(child, v, 5) for v in values])


@workflow
async def fan_out_spread(values: list) -> list:
    """Children placed by their own ids' shards: on a cluster, over the nodes."""
    return await gather(*[spawn(child, v, 1, placement="spread") for v in values])


@workflow
async def guarded(tag: str) -> str:
    reducer(log_event, workflow_id(), "locked")
    try:
        await signal("never")
        return "impossible"
    finally:
        reducer(log_event, workflow_id(), "unlocked")
        await timer("cleanup", 1)
        reducer(log_event, workflow_id(), "cleaned")


@workflow
async def parent_of_sleeper() -> float:
    return await spawn(sleeper, 1000, id="the-child")


@workflow
async def catches_cancel() -> str:
    try:
        await signal("never")
    except Cancelled as c:
        return f"caught {c.reason}"
    return "no"


@workflow
async def faulty() -> None:
    await timer("t", 1)
    reducer(bad_reducer)


@reducer
def exiting_reducer(db, how: str) -> None:
    """Library code the reducer calls ends it with ``sys.exit()`` (or a stray KeyboardInterrupt)."""
    raise {"exit": SystemExit("leaving"), "interrupt": KeyboardInterrupt()}[how]


@workflow
async def exits_in_a_reducer(how: str) -> None:
    await timer("t", 1)
    reducer(exiting_reducer, how)


@workflow
async def parent_of_faulty() -> str:
    try:
        await spawn(faulty)
    except ChildFailed as e:
        return "child failed: " + (e.error_message or "")
    return "no"


@workflow
async def quester(kind: str) -> list:
    subscribe("killed", kind)
    got = []
    while len(got) < 2:
        got.append(await signal("killed"))
    return got


@workflow
async def pinger(target: str) -> str:
    send(target, "item", "ping")
    return "sent"


@workflow
async def waits_once() -> object:
    return await signal("go")


@workflow
async def keeps_its_argument(settings: dict) -> dict:
    await signal("go")
    return settings


@workflow
async def boom() -> None:
    await timer("t", 1)
    raise KeyError("lost item")


@workflow
async def select_proc_vs_timer(x: int) -> str:
    ev = await select(procedure(double, x), timer("slow", 100))
    return f"{ev.kind}:{ev.name}:{ev.value}"


GATE = threading.Event()


@procedure
def blocker() -> str:
    GATE.wait(30)
    return "released"


@workflow
async def waits_on_blocker() -> str:
    return await procedure(blocker)


@workflow
async def counter(n: int) -> int:
    total = 0
    for _ in range(n):
        total += await signal("inc")
    return total


@workflow
async def subscriber(group: str) -> object:
    subscribe("go", group)
    return await signal("go")


@workflow
async def pair() -> list:
    return await gather(signal("a"), signal("b"))


REDUCER_FAILS: dict[str, int] = {}


@reducer
def fails_first(db, tag: str, times: int) -> None:
    n = REDUCER_FAILS.get(tag, 0)
    REDUCER_FAILS[tag] = n + 1
    if n < times:
        raise RuntimeError(f"reducer {tag} fails (call {n + 1})")
    db["app_events"].insert({"wf": tag, "text": "reduced"}, pk="id", alter=True)


@workflow
async def double_then_fragile_reducer(tag: str, x: int) -> int:
    a = await procedure(double, x)
    reducer(fails_first, tag, 2)
    return a


@workflow
async def reports_its_thread() -> list:
    names = []
    while len(names) < 2:
        await signal("go")
        names.append(threading.current_thread().name)
    return names


@workflow
async def gather_staggered() -> list:
    return await gather(spawn(child, 1, 1), spawn(child, 2, 2), spawn(child, 3, 2), spawn(child, 4, 2))


LATER = threading.Event()


@procedure
def gated(x: int) -> int:
    LATER.wait(30)
    return 10 * x


@workflow
async def gather_procedures() -> list:
    return await gather(procedure(double, 1), procedure(gated, 2), procedure(gated, 3))


@workflow
async def faulty_first_step(tag: str, times: int) -> object:
    reducer(fails_first, tag, times)
    return await signal("go")


@workflow
async def acts_on_go(target: str, group: str) -> list:
    """One step that asks for everything at once: a signal out, a broadcast, a timer, a procedure
    call and a child."""
    x = await signal("go")
    send(target, "item", x)
    broadcast("go", group, x)
    return await gather(timer("t", 5), procedure(double, x), spawn(child, x, 1))


@workflow
async def two_in_turn() -> list:
    first = await signal("a")
    return [first, await signal("b")]


@workflow
async def spawns_taken_id(taken: str) -> str:
    try:
        await spawn(sleeper, 1, id=taken)
    except WorkflowError as e:
        return f"caught: {e}"
    return "spawned"


@workflow
async def spawns_one_id_twice() -> str:
    try:
        await gather(spawn(sleeper, 1, id="twin"), spawn(sleeper, 2, id="twin"))
    except WorkflowError as e:
        return f"caught: {e}"
    return "spawned"


@workflow
async def calls_a_lambda() -> str:
    try:
        await procedure(lambda: 1)
    except TypeError as e:
        return f"caught: {e}"
    return "ran"


@workflow
async def imports_in_a_step(module: str, x: int) -> int:
    """Imports a module of procedures and reducers inside a step (its decorators decorate)."""
    await signal("go")
    reducer(importlib.import_module(module).note, x)
    return await procedure(importlib.import_module(module).triple, x)


@workflow
async def sends_many(target: str, n: int) -> int:
    for i in range(n):
        send(target, "item", i)
    send("nobody-has-this-id", "item", -1)
    return n


@workflow
async def collect_after_go(n: int) -> list:
    """Buffers its items until it is told to go, then takes n of them."""
    await signal("go")
    items = []
    while len(items) < n:
        items.append(await signal("item"))
    return items


@workflow
async def subscribed_not_listening(group: str) -> object:
    """Subscribed to ("go", group), awaiting something else: broadcasts buffer."""
    subscribe("go", group)
    return await signal("never")


@workflow
async def holds_a_thing(module: str) -> int:
    """Holds an instance of a class from ``module`` in a local across an await."""
    thing = importlib.import_module(module).Thing(5)
    await signal("go")
    return thing.v


@procedure(retry=RetryPolicy(maximum_attempts=1))
def refuses(x: int) -> int:
    raise ValueError(f"refused {x}")


@workflow
async def each_kind() -> str:
    """Wakes once by each kind of event, then waits to be cancelled."""
    await signal("go")
    await timer("pause", 5)
    a = await procedure(double, 1)
    try:
        await procedure(refuses, a)
    except ProcedureFailed:
        pass
    await gather(spawn(child, 1, 1.0), spawn(child, 2, 1.0))
    await signal("never")
    return "not reached"


HELD_FLAKY = threading.Event()


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=1.0))
def held_flaky(tag: str) -> str:
    """Waits for HELD_FLAKY, then fails its first attempt."""
    HELD_FLAKY.wait(30)
    n = FLAKY_FAILS.get(tag, 0)
    FLAKY_FAILS[tag] = n + 1
    if n == 0:
        raise ConnectionError(f"held_flaky {tag} attempt 1")
    return f"ok after {n + 1}"


@workflow
async def uses_held_flaky(tag: str) -> str:
    return await procedure(held_flaky, tag)


@workflow
async def two_timers() -> str:
    ev = await select(timer("short", 5), timer("long", 50))
    return str(ev.name)


@workflow
async def two_fragile_steps(tag: str, times: int) -> str:
    """Two steps whose reducers fail ``times`` times each (under the restart intensity)."""
    for i in range(2):
        await signal("go")
        reducer(fails_first, f"{tag}-{i}", times)
    return "ok"


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=3600))
def always_down() -> None:
    raise ConnectionError("the service is down")


@workflow
async def calls_always_down() -> None:
    await procedure(always_down)


# The system a test hands to workflow code and reducers that (wrongly) call it.
CLIENT: list = []


@reducer
def signals_from_a_reducer(db, target: str) -> None:
    CLIENT[0].get(target).signal("go")


@workflow
async def calls_the_system(target: str, how: str) -> str:
    await signal("start")
    if how == "reducer":
        reducer(signals_from_a_reducer, target)
        await signal("never")
    CLIENT[0].get(target).signal("go")
    return "signalled"


class _BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


@procedure
def ends_badly(tag: str, how: str) -> object:
    """Counts its runs in FLAKY_FAILS, then ends as ``how`` says."""
    FLAKY_FAILS[tag] = FLAKY_FAILS.get(tag, 0) + 1
    if how == "exit":
        raise SystemExit(2)  # library code calling sys.exit()
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "bad-str":
        raise _BadStr()
    if how == "unloadable":
        return _Unloadable()  # a result that pickles, and whose restore raises
    return threading.Lock()  # "unpicklable": a result no attempt can store


class _Unloadable:
    def __init__(self) -> None:
        self.kept = 1

    def __setstate__(self, state: object) -> None:
        raise ValueError("cannot be restored")


SHARED_CACHE: list[int] = []


@procedure
def cached_list() -> list[int]:
    """Returns the module's own list (a procedure's cache)."""
    return SHARED_CACHE


@workflow
async def holds_a_procedure_result() -> tuple[list[int], bool]:
    got = await procedure(cached_list)
    got.append(99)  # the workflow's own copy: the procedure's cache is not changed
    await signal("go")
    return list(got), got is SHARED_CACHE


@workflow
async def calls_ends_badly(tag: str, how: str) -> str:
    try:
        await procedure(ends_badly, tag, how)
    except ProcedureFailed as e:
        return f"gave up: {e.error_type} after {e.attempts}"
    return "impossible"


@procedure(timeout=0.1, retry=RetryPolicy(maximum_attempts=3, non_retryable=("ProcedureTimeout",)))
def overruns() -> str:
    """Overruns its timeout until the gate opens (its abandoned attempt then ends)."""
    GATE.wait(30)
    return "late"


@workflow
async def calls_overrunning() -> tuple[int, str]:
    try:
        await procedure(overruns)
    except ProcedureFailed as e:
        return e.attempts, e.error_type
    return 0, "returned"


@procedure(retry=RetryPolicy(maximum_attempts=1))
def refuses_an_item(item: str) -> None:
    raise LookupError(f"no {item}")


@workflow
async def reads_a_procedure_traceback(timeout: float | None) -> str:
    try:
        await procedure(refuses_an_item, "sword", timeout=timeout)
    except ProcedureFailed as e:
        return e.traceback
    return ""


@workflow
async def lets_a_procedure_failure_escape() -> None:
    await procedure(refuses_an_item, "shield")


class QuestBroken(Exception):
    pass


@workflow
async def wraps_a_procedure_failure() -> None:
    try:
        await procedure(refuses_an_item, "helm")
    except ProcedureFailed as e:
        raise QuestBroken("the quest needs a helm") from e


@workflow
async def lets_a_child_failure_escape() -> None:
    await spawn(lets_a_procedure_failure_escape)


def _exit_as_loaded() -> None:
    raise SystemExit("no loading this")


class ExitsWhenLoaded:
    """Pickles; calls sys.exit() as it is unpickled (where its reader takes it)."""

    def __reduce__(self):
        return (_exit_as_loaded, ())


@workflow
async def returns_what_exits_when_loaded() -> object:
    return ExitsWhenLoaded()


@workflow
async def takes_what_exits_when_loaded() -> str:
    try:
        await spawn(returns_what_exits_when_loaded)
    except Exception as e:  # (not what happens: the parent cannot even take the outcome)
        return type(e).__name__
    return "taken"


@workflow
async def nest(depth: int) -> int:
    """A chain of ``depth`` children, each spawned with a generated id: the deepest one's id is
    the root's with a segment per level."""
    if depth == 0:
        return 0
    return 1 + await spawn(nest, depth - 1)


HOLD = threading.Event()
HOLDING = threading.Event()


@workflow
async def holds_its_thread() -> str:
    """At signal ``go``, its step holds the actors' thread until ``HOLD`` is set (``HOLDING``
    says it does)."""
    await signal("go")
    HOLDING.set()
    HOLD.wait(30)
    return "let go"
