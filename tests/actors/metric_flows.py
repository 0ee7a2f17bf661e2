"""Workflows of the metrics test: an order that waits for a signal, charges through a procedure
that fails once for order 0, and waits for a timer; and one whose procedure always fails."""

from __future__ import annotations

import threading

from workflows import RetryPolicy, broadcast, procedure, send, signal, subscribe, timer, workflow

FAILED_ONCE: set[int] = set()
LOCK = threading.Lock()


@procedure(retry=RetryPolicy(maximum_attempts=3, initial_interval=1.0))
def charge(n: int) -> int:
    with LOCK:
        if n == 0 and n not in FAILED_ONCE:
            FAILED_ONCE.add(n)
            raise ConnectionError("the payment service is away")
    return n * 10


@procedure(retry=RetryPolicy(maximum_attempts=1))
def refuse() -> None:
    raise ValueError("refused")


@workflow
async def order(n: int) -> int:
    paid = await signal("pay")
    charged = await procedure(charge, n)
    await timer("ship", 5.0)
    return charged + paid


@workflow
async def doomed() -> None:
    await procedure(refuse)


@workflow
async def listener() -> object:
    """Subscribes to "news" and returns the first one."""
    subscribe("news")
    return await signal("news")


@workflow
async def announcer(to: str) -> None:
    """Sends "news" to ``to`` and broadcasts it to every subscriber, in one step."""
    send(to, "news", "direct")
    broadcast("news", None, "everyone")
