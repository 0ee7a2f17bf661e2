"""The asyncio client API (SPEC §8): the async twins never block the running event loop.

Each test runs an asyncio program with a task ticking every 10 ms beside the calls, as a game
server's would. The check is deterministic, not a timing: a call is made to stay pending (a
workflow driven by a VirtualClock that has not moved, or a commit held back by a reducer waiting
on a gate), and the ticker must go on ticking while it is pending. A call that blocked the loop
would stop the ticker until the call was over, and so be done by the time the ticker moved.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actors import ActorSystem, SystemClosed, UnknownWorkflow, WorkflowNotRunning
from actors._aio import ASYNC_WORKERS
from actors.testing import VirtualClock
from workflows import (
    Cancelled,
    WorkflowFailed,
    procedure,
    reducer,
    signal,
    subscribe,
    timer,
    workflow,
)

T = 30.0  # every wait is bounded
GATE = threading.Event()  # a commit whose step calls hold() waits for it
HELD = threading.Event()  # set once a commit is held at the gate


@reducer
def hold(db: Any) -> None:
    """Keep the step's commit (and so every commit behind it) from finishing until GATE opens."""
    HELD.set()
    assert GATE.wait(T), "the gate was never opened"


async def held() -> None:
    """Wait, on the loop, until a commit is held at the gate."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + T
    while not HELD.is_set():
        assert loop.time() < deadline, "no commit reached the gate"
        await asyncio.sleep(0.005)


@workflow
async def sleeper(seconds: float, answer: int) -> int:
    await timer("nap", seconds)
    return answer


@workflow
async def gated_listener() -> object:
    payload = await signal("go")
    reducer(hold)  # the step that takes the signal commits only once the gate opens
    return payload


@workflow
async def gated_start(answer: int) -> int:
    reducer(hold)  # in the first step, which commits with the start
    await timer("t", 1)
    return answer


@workflow
async def listener() -> object:
    return await signal("go")


@workflow
async def weather(zone: str) -> object:
    subscribe("weather", zone)
    return await signal("weather")


@workflow
async def failing() -> None:
    await timer("t", 1)
    raise ValueError("boom")


class Ticker:
    """A task that ticks every 10 ms and counts its ticks."""

    def __init__(self) -> None:
        self.ticks = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(0.01)
            self.ticks += 1

    async def tick_while_pending(self, pending: list[asyncio.Task[Any]], ticks: int = 10) -> None:
        """Wait until the ticker has ticked ``ticks`` more times; every call must still be pending."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + T
        start = self.ticks
        while self.ticks < start + ticks:
            assert loop.time() < deadline, "the ticker stopped ticking"
            await asyncio.sleep(0.01)
        done = [t for t in pending if t.done()]
        assert not done, f"{len(done)} calls finished before the ticker could tick: they held the loop"


class NoDefaultExecutor(ThreadPoolExecutor):
    """The loop's default executor, made to fail: the async calls must use the system's own."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an async call used the event loop's default executor")


def serve(main: Callable[[Ticker], Awaitable[None]]) -> Ticker:
    """Run ``main`` in a fresh event loop beside a ticker; returns the ticker once ``main`` is done."""
    ticker = Ticker()

    async def program() -> None:
        asyncio.get_running_loop().set_default_executor(NoDefaultExecutor())
        tick = asyncio.create_task(ticker.run())
        try:
            await asyncio.wait_for(main(ticker), T * 2)
        finally:
            tick.cancel()

    asyncio.run(program())
    # (No bound on the ticker's longest gap: on a loaded machine a gap says how busy the
    # machine was. A call that holds the loop fails tick_while_pending, which counts ticks.)
    return ticker


def task(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    return asyncio.ensure_future(coro)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def system(tmp_path: Path, clock: VirtualClock) -> Any:
    GATE.clear()
    HELD.clear()
    with ActorSystem(str(tmp_path / "aio.db"), clock=clock) as s:
        yield s
    GATE.set()


def test_result_async_waits_for_a_virtual_clock_without_holding_the_loop(
    system: ActorSystem, clock: VirtualClock
) -> None:
    """result_async of a workflow sleeping on a VirtualClock stays pending, with the ticker
    ticking, until the clock moves; then it gives the workflow's return value."""

    async def main(ticker: Ticker) -> None:
        ref = await system.start_async(sleeper, 60.0, 42)
        waiting = task(ref.result_async(timeout=T))
        await ticker.tick_while_pending([waiting])
        clock.advance(60)
        assert await waiting == 42

    serve(main)


def test_many_result_async_wait_at_once_on_no_thread_each(system: ActorSystem, clock: VirtualClock) -> None:
    """500 result_async pending at once cost no thread each (the system's executor has at most
    ASYNC_WORKERS), hold nothing up, and each gets its own workflow's answer."""
    refs = system.start_many(sleeper, [(60.0, i) for i in range(500)])
    system.idle(timeout=T)

    async def main(ticker: Ticker) -> None:
        threads_before = threading.active_count()
        waiting = [task(ref.result_async(timeout=T)) for ref in refs]
        await ticker.tick_while_pending(waiting, ticks=20)
        assert threading.active_count() <= threads_before + ASYNC_WORKERS
        clock.advance(60)
        assert await asyncio.gather(*waiting) == list(range(500))

    serve(main)


def test_signal_async_and_idle_async_pending_on_a_held_commit(system: ActorSystem) -> None:
    """signal_async returns once the step that takes the signal has committed, and idle_async
    once nothing is left to do; while that commit is held back, both stay pending and the ticker
    ticks."""
    ref = system.start(gated_listener)
    system.idle(timeout=T)

    async def main(ticker: Ticker) -> None:
        sending = task(ref.signal_async("go", {"x": 1}))
        await held()
        idling = task(system.idle_async(timeout=T))
        await ticker.tick_while_pending([sending, idling])
        GATE.set()
        await sending
        await idling
        assert await ref.result_async(timeout=T) == {"x": 1}

    serve(main)


def test_start_async_cancel_async_broadcast_async_pending_on_a_held_commit(system: ActorSystem) -> None:
    """start_async (whose first step commits with the start), cancel_async and broadcast_async
    wait for their commits off the loop: all pending while the writer is held, each done after."""
    other = system.start(listener)
    subscriber = system.start(weather, "north")
    system.idle(timeout=T)

    async def main(ticker: Ticker) -> None:
        starting = task(system.start_async(gated_start, 7, id="held"))
        await held()  # the start's first step holds the commit from here on
        cancelling = task(other.cancel_async("no longer needed"))
        broadcasting = task(system.broadcast_async("weather", "north", "rain"))
        await ticker.tick_while_pending([starting, cancelling, broadcasting])
        GATE.set()
        ref = await starting
        assert ref.id == "held"
        await cancelling
        assert await broadcasting == 1
        with pytest.raises(Cancelled, match="no longer needed"):
            await other.result_async(timeout=T)
        assert await subscriber.result_async(timeout=T) == "rain"

    serve(main)


def test_async_calls_raise_as_their_blocking_twins(system: ActorSystem, clock: VirtualClock) -> None:
    """result_async raises WorkflowFailed, Cancelled and TimeoutError as result() does, and
    signal_async to a finished workflow WorkflowNotRunning; idle_async times out with TimeoutError."""

    async def main(ticker: Ticker) -> None:
        bad = await system.start_async(failing)
        sleepy = await system.start_async(sleeper, 60.0, 1)
        gone = await system.start_async(listener)
        with pytest.raises(TimeoutError, match="did not finish within 0.2s"):
            await bad.result_async(timeout=0.2)
        clock.advance(1)
        with pytest.raises(WorkflowFailed, match="ValueError: boom"):
            await bad.result_async(timeout=T)
        await sleepy.cancel_async("stop")
        with pytest.raises(Cancelled, match="stop"):
            await sleepy.result_async(timeout=T)
        await gone.signal_async("go", None)
        assert await gone.result_async(timeout=T) is None
        with pytest.raises(WorkflowNotRunning):
            await gone.signal_async("go", 2)
        GATE.clear()
        HELD.clear()
        stuck = await system.start_async(gated_listener)
        sending = task(stuck.signal_async("go", 1))
        await held()
        with pytest.raises(TimeoutError, match=r"system.idle\(\) timed out after 0.2s"):
            await system.idle_async(timeout=0.2)
        GATE.set()
        await sending

    serve(main)


def test_shutdown_wakes_a_pending_result_async(tmp_path: Path, clock: VirtualClock) -> None:
    """A result_async pending when the system shuts down raises SystemClosed at once, and any
    async call after that raises SystemClosed too."""
    s = ActorSystem(str(tmp_path / "closing.db"), clock=clock)

    async def main(ticker: Ticker) -> None:
        ref = await s.start_async(sleeper, 60.0, 1)
        waiting = task(ref.result_async())
        await ticker.tick_while_pending([waiting])
        await asyncio.get_running_loop().run_in_executor(closer, s.shutdown)
        with pytest.raises(SystemClosed):
            await asyncio.wait_for(waiting, T)
        with pytest.raises(SystemClosed):
            await s.start_async(sleeper, 1.0, 2)
        with pytest.raises(SystemClosed):
            await ref.signal_async("go")

    with ThreadPoolExecutor(1) as closer:
        serve(main)


PROCEDURE_RUNS = threading.Event()  # set by gated_call once it runs


@procedure
def gated_call() -> str:
    PROCEDURE_RUNS.set()
    assert GATE.wait(T), "the gate was never opened"
    return "done"


@workflow
async def calls_gated() -> str:
    return await procedure(gated_call)


def test_shutdown_async_waits_for_a_procedure_without_holding_the_loop(tmp_path: Path) -> None:
    """``shutdown_async`` (and leaving ``async with``) waits for the procedure under way, as
    ``shutdown`` does, while the loop goes on: the ticker ticks, and the loop itself opens the
    gate the procedure waits on (a shutdown that blocked the loop would wait for it for good)."""
    GATE.clear()
    PROCEDURE_RUNS.clear()
    db = str(tmp_path / "down.db")

    async def main(ticker: Ticker) -> None:
        async with ActorSystem(db) as s:
            ref = await s.start_async(calls_gated)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + T
            while not PROCEDURE_RUNS.is_set():
                assert loop.time() < deadline, "the procedure never ran"
                await asyncio.sleep(0.005)
            closing = task(s.shutdown_async())
            await ticker.tick_while_pending([closing])
            with pytest.raises(SystemClosed):
                await s.start_async(calls_gated)
            GATE.set()
            await asyncio.wait_for(closing, T)
            await s.shutdown_async()  # (again: nothing more to do, as shutdown())
        # Left the `async with` after it: closed once, nothing lost.
        with ActorSystem(db) as again:
            assert again.get(ref.id).result(T) == "done"

    serve(main)


def test_the_other_blocking_calls_have_async_twins_that_answer_as_they_do(
    system: ActorSystem, clock: VirtualClock
) -> None:
    """get, workflows, prune, schedule, schedules, unschedule, and a ref's status, info, history
    and debug_fire_timer: each twin answers what its blocking call answers."""

    async def main(ticker: Ticker) -> None:
        ref = await system.start_async(sleeper, 60.0, 7, id="s", test_mode=True)
        got = await system.get_async("s")
        assert got.id == "s" and (await got.status_async()).value == "running"
        assert [i.id for i in await system.workflows_async()] == [i.id for i in system.workflows()]
        assert (await ref.info_async()).waiting_on == ref.info().waiting_on
        await ref.debug_fire_timer_async("nap")
        assert await ref.result_async(timeout=T) == 7
        assert [e.event for e in await ref.history_async(limit=1)] == ["completed"]
        info = await system.schedule_async("every-hour", sleeper, 1.0, 2, every=3600)
        assert info.every == 3600 and [s.id for s in await system.schedules_async()] == ["every-hour"]
        assert await system.unschedule_async("every-hour") is True
        clock.advance(3600)
        assert await system.prune_async(older_than=60) == 1
        with pytest.raises(UnknownWorkflow):  # pruned, as get() raises
            await system.get_async("s")
        many = await system.start_many_async(listener, [(), ()], ids=["m1", "m2"], test_mode=True)
        assert [r.id for r in many] == ["m1", "m2"]
        await many[0].debug_send_signal_async("go", "hello")
        assert await many[0].result_async(timeout=T) == "hello"

    serve(main)


def test_nodes_has_an_async_twin_that_answers_as_it_does(system: ActorSystem) -> None:
    """nodes() reads the database (a round trip on PostgreSQL): nodes_async answers the same
    without blocking the loop, and raises SystemClosed once the system is shut down."""

    async def main(ticker: Ticker) -> None:
        got = await system.nodes_async()
        assert [(n.node_id, n.shards) for n in got] == [(n.node_id, n.shards) for n in system.nodes()]
        assert got and got[0].node_id == system.node_id

    serve(main)
    system.shutdown()

    async def closed() -> None:
        with pytest.raises(SystemClosed):
            await system.nodes_async()

    asyncio.run(closed())


def test_serve_async_awaits_sigterm_beside_the_loop_then_shuts_down(tmp_path: Path) -> None:
    """serve_async is serve's twin: the loop goes on ticking while it waits; SIGTERM ends it with
    a clean shutdown (the system closed, a workflow started before it recovered by the next
    system), and the process's own SIGTERM handler is back after."""
    import os
    import signal as signals

    db = str(tmp_path / "serve.db")
    before = signals.getsignal(signals.SIGTERM)
    system = ActorSystem(db)
    ticks: list[float] = []

    async def main() -> None:
        ref = await system.start_async(listener, id="l")
        loop = asyncio.get_running_loop()

        async def ticker() -> None:
            while True:
                ticks.append(loop.time())
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        served = asyncio.create_task(system.serve_async())
        await asyncio.sleep(0.3)
        assert not served.done() and len(ticks) > 5
        os.kill(os.getpid(), signals.SIGTERM)
        await asyncio.wait_for(served, T)
        tick.cancel()
        with pytest.raises(SystemClosed):
            await ref.signal_async("go", 1)

    asyncio.run(main())
    assert signals.getsignal(signals.SIGTERM) == before
    with ActorSystem(db) as again:
        again.get("l").signal("go", 3)
        assert again.get("l").result(timeout=T) == 3
