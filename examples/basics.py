"""The small workflows of the original design's phase 5, one construct at a time.

Each is a complete workflow you can start with ``system.start(...)``; the tests in
``tests/examples/test_basics.py`` drive every one of them.
"""

from __future__ import annotations

from workflows import Event, procedure, reducer, select, signal, spawn, timer, workflow

from .world import record


@procedure
def add(a: int, b: int) -> int:
    """Add two numbers (a procedure: in a real system, a call to another service)."""
    return a + b


@workflow
async def simple_timer(seconds: float) -> str:
    """Wait for one durable timer, then finish."""
    await timer("done", seconds)
    return "done"


@workflow
async def multi_step() -> list[str]:
    """Three timers in a row; each step leaves a line in the world log."""
    steps = []
    for name in ("first", "second", "third"):
        await timer(name, 1)
        reducer(record, "multi_step", f"{name} step done")
        steps.append(name)
    return steps


@workflow
async def countdown(start: int) -> str:
    """Count down one second at a time, announcing every number."""
    for n in range(start, 0, -1):
        reducer(record, "countdown", str(n))
        await timer("tick", 1)
    reducer(record, "countdown", "liftoff")
    return "liftoff"


class ExampleError(Exception):
    """The error the ``failing`` example raises on purpose."""


@workflow
async def failing(reason: str) -> None:
    """Wait a second, then fail: the workflow ends FAILED and ``result()`` raises."""
    await timer("before_failing", 1)
    raise ExampleError(reason)


@workflow
async def procedure_test(a: int, b: int) -> int:
    """Suspend on a procedure and use its result."""
    total = await procedure(add, a, b)
    reducer(record, "procedure_test", f"{a} + {b} = {total}")
    return total


@workflow
async def spawn_test(seconds: float) -> str:
    """Spawn a child workflow and wait for its result."""
    child_result = await spawn(simple_timer, seconds)
    return f"child said {child_result}"


@workflow
async def select_test(timeout: float) -> str:
    """Whichever comes first: the ``go`` signal or the timeout."""
    match await select(timer("timeout", timeout), signal("go")):
        case Event("go", payload):
            return f"go: {payload}"
        case Event("timeout"):
            return "timed out"


@workflow
async def conditional_test(wait_for_signal: bool) -> str:
    """Await different things in each branch of an ``if``."""
    if wait_for_signal:
        value = await signal("value")
        outcome = f"signal {value}"
    else:
        await timer("wait", 5)
        outcome = "timer"
    reducer(record, "conditional_test", outcome)
    return outcome


# --- parent and child (the design's "Parent-Child" example) ---------------------------------------


@workflow
async def child_task(task_name: str, delay_secs: float, result_value: int) -> int:
    """Wait ``delay_secs``, then return ``result_value``."""
    await timer("complete", delay_secs)
    reducer(record, task_name, f"returns {result_value}")
    return result_value


@workflow
async def parent(task_count: int) -> int:
    """Run ``task_count`` children one after another and add up their results."""
    total = 0
    for i in range(task_count):
        total += await spawn(child_task, f"task_{i}", 1, 10 * (i + 1))
    return total
