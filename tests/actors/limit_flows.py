"""Workflows and procedures of the limit tests. Each procedure notes its attempts in ``TRACE``
(and, in the kill test's processes, in the file ``ACTORFLOW_LIMIT_TRACE`` names), counting how
many run at once from inside."""

from __future__ import annotations

import os
import threading
import time

from workflows import RetryPolicy, gather, procedure, workflow

LOCK = threading.Lock()
RUNNING = [0]
MOST = [0]
STARTS: list[tuple[str, float]] = []  # (what, time.monotonic()) of every attempt
GATE = threading.Event()
FAILED: set[int] = set()
GATES: dict[int, threading.Event] = {}  # one per call of ``held_apart``, by its argument
PAUSE = float(os.environ.get("ACTORFLOW_LIMIT_PAUSE", "0.01"))


def reset() -> None:
    with LOCK:
        RUNNING[0] = MOST[0] = 0
        STARTS.clear()
        FAILED.clear()
        GATES.clear()
    GATE.clear()


def gate(n: int) -> threading.Event:
    """The event the call ``held_apart(n)`` waits for."""
    with LOCK:
        return GATES.setdefault(n, threading.Event())


def _enter(what: str) -> None:
    with LOCK:
        RUNNING[0] += 1
        MOST[0] = max(MOST[0], RUNNING[0])
        STARTS.append((what, time.monotonic()))
    trace = os.environ.get("ACTORFLOW_LIMIT_TRACE")
    if trace:
        with open(trace, "a") as f:
            f.write(f"start {what} {os.getpid()}\n")


def _leave(what: str) -> None:
    trace = os.environ.get("ACTORFLOW_LIMIT_TRACE")
    if trace:
        with open(trace, "a") as f:
            f.write(f"end {what} {os.getpid()}\n")
    with LOCK:
        RUNNING[0] -= 1


@procedure(concurrency=3)
def three_at_once(n: int) -> int:
    _enter(str(n))
    try:
        time.sleep(PAUSE)
        return n
    finally:
        _leave(str(n))


@procedure(concurrency=2, retry=RetryPolicy(maximum_attempts=3, initial_interval=0.0))
def two_at_once_flaky(n: int) -> int:
    """Fails its first attempt for each n: the retries wait in line too."""
    _enter(str(n))
    try:
        time.sleep(PAUSE)
        with LOCK:
            first = n not in FAILED
            FAILED.add(n)
        if first:
            raise ConnectionError(f"service busy for {n}")
        return n
    finally:
        _leave(str(n))


@procedure(concurrency=1)
def one_at_once(n: int) -> int:
    _enter(str(n))
    try:
        time.sleep(PAUSE)
        return n
    finally:
        _leave(str(n))


@procedure(concurrency=1)
def held(n: int) -> int:
    _enter(str(n))
    try:
        GATE.wait(30)
        return n
    finally:
        _leave(str(n))


@procedure(concurrency=1)
def held_apart(n: int) -> int:
    _enter(str(n))
    try:
        gate(n).wait(30)
        return n
    finally:
        _leave(str(n))


@procedure(rate=10)
def ten_a_second(n: int) -> int:
    _enter(str(n))
    _leave(str(n))
    return n


@workflow
async def call_three(n: int) -> int:
    return await procedure(three_at_once, n)


@workflow
async def call_flaky(n: int) -> int:
    return await procedure(two_at_once_flaky, n)


@workflow
async def call_in_order(k: int) -> list[int]:
    return list(await gather(*[procedure(one_at_once, i) for i in range(k)]))


@workflow
async def call_held(n: int) -> int:
    return await procedure(held, n)


@workflow
async def call_held_apart(n: int) -> int:
    return await procedure(held_apart, n)


@workflow
async def call_rated(n: int) -> int:
    return await procedure(ten_a_second, n)


@workflow
async def held_or_timer(n: int) -> str:
    """A held call raced by a timer: the timer wins, the call's arm is taken back."""
    from workflows import select, timer

    won = await select(procedure(held, n), timer("t", after=5))
    return won.name


@procedure
def gated(n: int) -> int:
    """Unlimited, held by the gate: with one worker, the calls behind it queue for the worker."""
    _enter(str(n))
    try:
        GATE.wait(30)
        return n
    finally:
        _leave(str(n))


@workflow
async def call_gated(n: int) -> int:
    return await procedure(gated, n)


@procedure(concurrency=1, timeout=0.2, retry=RetryPolicy(maximum_attempts=1))
def outlives_its_timeout(n: int) -> int:
    """Runs on after its attempt is abandoned at the timeout, until the gate opens."""
    _enter(str(n))
    try:
        GATE.wait(30)
        return n
    finally:
        _leave(str(n))


@workflow
async def call_outliving(n: int) -> str:
    try:
        await procedure(outlives_its_timeout, n)
    except Exception as e:  # the timeout, after its one attempt
        return type(e).__name__
    return "returned"
