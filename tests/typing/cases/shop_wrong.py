"""A user's program with wrong uses of the API: `mypy --strict` must report each one.

A line that must be reported ends with a comment ``E: [code] text`` (more than one may follow):
the error's code and a part of its message. The test checks that these, and no others, are reported.
"""

# ruff: noqa: F841  (the variables exist for the types they are declared with)
from __future__ import annotations

from typing import Any

from actors import ActorSystem
from workflows import procedure, reducer, signal, spawn, timer, workflow


@procedure
def charge(order: str, cents: int) -> bool:
    return cents > 0


def refund(order: str, *, cents: int) -> None:
    return None


@reducer
def record(db: Any, order: str, cents: int) -> None:
    db["orders"].insert({"order": order, "cents": cents})


@workflow
async def pack(n: int) -> list[int]:
    return [n]


async def not_a_workflow(n: int) -> int:
    return n


@workflow
async def checkout(order: str, cents: int) -> str:
    await procedure(charge, "o", "not-an-int")  # E: [arg-type] "ProcedureFunction[[str, int], bool]"; expected "Callable[[str, str], bool]"
    await procedure(charge, "o", "x", timeout=3)  # E: [arg-type] expected "Callable[[str, str], bool]"
    await procedure(charge, "o")  # E: [arg-type] expected "Callable[[str], bool]"
    await procedure(refund, "o", cents="3")  # E: [arg-type] Argument "cents" to "procedure" has incompatible type "str"; expected "int"
    await procedure(charge, "o", 5, retry=3)  # E: [call-arg] Unexpected keyword argument "retry" for "procedure"
    paid: str = await procedure(charge, "o", 5)  # E: [arg-type] expected "Callable[[str, int], str]"
    tick: int = await timer("t", 5)  # E: [func-returns-value] does not return a value  # E: [assignment] expression has type "None", variable has type "int"
    kids: list[str] = await spawn(pack, 1)  # E: [arg-type] expected "WorkflowFunction[[int], list[str]]"
    await spawn(pack, "one")  # E: [arg-type] expected "WorkflowFunction[[str], list[int]]"
    await spawn(not_a_workflow, 1)  # E: [call-overload] No overload variant of "spawn" matches argument types "Callable[[int], Coroutine[Any, Any, int]]", "int"
    await spawn(pack, 1, detached="yes")  # E: [call-overload] No overload variant of "spawn" matches argument types "WorkflowFunction[[int], list[int]]", "int", "str"
    count: int = await pack(1)  # E: [assignment] expression has type "list[int]", variable has type "int"
    await pack("one")  # E: [arg-type] Argument 1 to "__call__" of "WorkflowFunction" has incompatible type "str"; expected "int"
    reducer(record, "o", "five")  # E: [call-overload] No overload variant of "reducer" matches argument types "Callable[[Any, str, int], None]", "str", "str"
    await signal(3)  # E: [arg-type] Argument 1 to "signal" has incompatible type "int"; expected "str"
    return 7  # E: [return-value] got "int", expected "str"


def main() -> None:
    with ActorSystem(":memory:") as system:
        system.start(checkout, "o", "five")  # E: [arg-type] expected "WorkflowFunction[[str, str], str]"
        system.start(checkout, "o")  # E: [arg-type] expected "WorkflowFunction[[str], str]"
        ref = system.start(checkout, "o", 5)
        total: int = ref.result(timeout=5)  # E: [assignment] expression has type "str", variable has type "int"
        system.start(checkout, "o", 5, test_mode="no")  # E: [call-arg] Unexpected keyword argument "test_mode" for "start" of "ActorSystem"
        system.schedule("s1", checkout, "o", "five", every=60)  # E: [arg-type] expected "WorkflowFunction[[str, str], Any]"
        system.schedule("s2", checkout, "o", every=60)  # E: [arg-type] expected "WorkflowFunction[[str], Any]"
        system.schedule("s3", checkout, "o", 5, evry=60)  # E: [call-overload] Unexpected keyword argument "evry"  # E: [call-overload] No overload variant of "schedule" of "ActorSystem" matches
        system.schedule("s4", checkout, "o", 5, every=60, overlap="sometimes")  # E: [call-overload] No overload variant of "schedule" of "ActorSystem" matches


async def serve(system: ActorSystem) -> None:
    await system.start_async(checkout, "o", "five")  # E: [arg-type] expected "WorkflowFunction[[str, str], str]"
    ref = await system.start_async(checkout, "o", 5)
    total: int = await ref.result_async()  # E: [assignment] expression has type "str", variable has type "int"
    await ref.signal_async(5)  # E: [arg-type] Argument 1 to "signal_async" of "WorkflowRef" has incompatible type "int"; expected "str"
    ref.result_async()  # E: [unused-coroutine] Value of type "Coroutine[Any, Any, str]" must be used
    await system.schedule_async("s5", checkout, "o", "five", every=60)  # E: [arg-type] expected "WorkflowFunction[[str, str], Any]"
    await system.schedule_async("s6", checkout, "o", 5, every="60")  # E: [call-overload] No overload variant of "schedule_async" of "ActorSystem" matches
