"""A user's program with right uses of the API: `mypy --strict` must accept it as it is.

`assert_type` fails type checking if a type is not exactly the one named (`Any` included), so
this file also pins that nothing the API gives back has fallen to `Any`.
"""

from __future__ import annotations

import datetime
import pathlib
from typing import Any, assert_type

from actors import ActorSystem, ScheduleInfo, WorkflowRef
from workflows import (
    ChildFailed,
    Event,
    ProcedureFailed,
    RetryPolicy,
    WorkflowFailed,
    WorkflowFunction,
    gather,
    procedure,
    reducer,
    select,
    signal,
    spawn,
    timer,
    workflow,
)


@procedure
def charge(order: str, cents: int) -> bool:
    return cents > 0


@procedure(retry=RetryPolicy(maximum_attempts=5), timeout=10)
def ship(order: str, *, express: bool = False) -> str:
    return f"{order}:{express}"


@procedure
def roll() -> int:
    return 4


def five(a: int, b: int, c: int, d: int, e: str) -> float:
    return float(a + b + c + d)


@reducer
def record(db: Any, order: str, cents: int) -> None:
    db["orders"].insert({"order": order, "cents": cents})


@workflow
async def pack(n: int, label: str = "box") -> list[int]:
    return [n] * 2


@workflow
async def checkout(order: str, cents: int) -> str:
    assert_type(await procedure(charge, order, cents), bool)
    assert_type(
        await procedure(charge, order, cents, timeout=5, retry=RetryPolicy(), name="pay"), bool
    )
    assert_type(await procedure(ship, order, express=True), str)
    assert_type(await procedure(roll), int)
    assert_type(await procedure(roll, timeout=datetime.timedelta(seconds=3)), int)
    assert_type(await procedure(five, 1, 2, 3, 4, "e", name="five"), float)
    assert_type(await timer("cool", 5), None)
    assert_type(await timer("dawn", at=1_000.0), None)
    assert_type(await signal("go"), Any)
    ev = await select(signal("bid"), timer("end", datetime.timedelta(minutes=1)), procedure(roll))
    assert_type(ev, Event)
    match ev:
        case Event("bid", value):
            assert_type(value, Any)
    assert_type(await gather(spawn(pack, 1), procedure(charge, order, 1)), list[Any])
    assert_type(await spawn(pack, 3, "crate", id="c", detached=True, name="p"), list[int])
    assert_type(await spawn(pack, 3), list[int])
    assert_type(await pack(2), list[int])
    reducer(record, order, cents)
    try:
        await procedure(charge, order, cents, retry=RetryPolicy(non_retryable=(KeyError, "ValueError")))
    except ProcedureFailed as e:
        # The engine fills every field of a failure: no None to rule out first.
        retries: int = e.attempts - 1
        reducer(record, e.error_message, retries)
        assert_type(e.procedure, str)
        assert_type(e.traceback, str)
    try:
        await spawn(pack, 1)
    except ChildFailed as e:
        assert_type((e.child_id, e.child_type, e.error_type, e.error_message), tuple[str, str, str, str])
    return await procedure(ship, order)


# Outside a workflow the decorated functions are still what they were.
assert_type(charge("o", 1), bool)
assert_type(roll(), int)
assert_type(ship("o", express=True), str)
assert_type(record(None, "o", 1), None)
plain: WorkflowFunction[[str, int], str] = checkout


def main() -> None:
    with ActorSystem(":memory:") as system:
        ref = system.start(checkout, "o", 5)
        assert_type(ref, WorkflowRef[str])
        assert_type(ref.result(timeout=5), str)
        assert_type(system.start(pack, 1, "tin", id="p1", test_mode=True), WorkflowRef[list[int]])
        assert_type(system.get("p1"), WorkflowRef[Any])
        assert_type(system.start_many(pack, [(1,), (2, "bag")]), list[WorkflowRef[list[int]]])
        assert_type(system.schedule("tins", pack, 1, every=3600, catchup="none"), ScheduleInfo)
        assert_type(system.schedule("half", pack, 1, every=datetime.timedelta(minutes=30)), ScheduleInfo)
        try:
            ref.result(timeout=5)
        except WorkflowFailed as e:
            assert_type((e.workflow_id, e.error_type, e.error_message), tuple[str, str, str])
    with ActorSystem(pathlib.Path("shop.db")) as on_disk:
        assert_type(on_disk.start(pack, 1), WorkflowRef[list[int]])


async def serve(system: ActorSystem) -> None:
    ref = await system.start_async(checkout, "o", 5, id="a1")
    assert_type(ref, WorkflowRef[str])
    assert_type(await ref.result_async(timeout=5), str)
    assert_type(await ref.signal_async("go", {"x": 1}), None)
    assert_type(await ref.cancel_async("bye"), None)
    assert_type(await system.broadcast_async("weather", "north", "rain"), int)
    assert_type(await system.idle_async(timeout=5), None)
    assert_type(await system.start_async(pack, 2), WorkflowRef[list[int]])
    assert_type(await system.schedule_async("nightly", pack, 1, "tin", cron="0 3 * * *", overlap="allow"), ScheduleInfo)
