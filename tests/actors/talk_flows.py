"""Workflows that publish values and answer asks, for ``test_talk.py`` (importable by
``module:qualname``, so a restarted system finds them)."""

from __future__ import annotations

import threading

from workflows import (
    ChildFailed,
    Event,
    Request,
    gather,
    publish,
    reducer,
    reply,
    request,
    select,
    send,
    signal,
    spawn,
    workflow,
)

# How many times each (workflow, ask id) was taken by a step that committed or not: a test that
# asks twice with one ask_id checks that the workflow saw it once.
SEEN: dict[str, list[str]] = {}
SEEN_LOCK = threading.Lock()
REDUCER_FAILS: dict[str, int] = {}


def seen(tag: str, req: Request) -> None:
    with SEEN_LOCK:
        SEEN.setdefault(tag, []).append(req.id)


@reducer
def fails_always(db, tag: str) -> None:
    REDUCER_FAILS[tag] = REDUCER_FAILS.get(tag, 0) + 1
    raise RuntimeError(f"reducer of {tag} fails")


@workflow
async def account(balance: int) -> int:
    """A bank account: ``withdraw`` asks answered with the new balance, or refused."""
    publish("balance", balance)
    while True:
        ev = await select(request("withdraw"), request("balance"), signal("close"))
        match ev:
            case Event("withdraw", req):
                seen("account", req)
                amount = req.payload
                if not isinstance(amount, int) or amount <= 0:
                    reply(req, error=ValueError(f"withdraw needs a positive int, got {amount!r}"))
                elif amount > balance:
                    reply(
                        req,
                        error=ValueError(f"insufficient funds: balance {balance}, asked {amount}"),
                    )
                else:
                    balance -= amount
                    publish("balance", balance)
                    reply(req, balance)
            case Event("balance", req):
                reply(req, balance)
            case Event("close"):
                return balance


@workflow
async def progress(steps: int) -> int:
    """Publishes its progress at each signal ``tick``."""
    for i in range(steps):
        await signal("tick")
        publish("done", i + 1)
        publish("label", f"step {i + 1} of {steps}")
    return steps


@workflow
async def publishes_then_fails_reducer(tag: str) -> None:
    publish("state", "before")
    await signal("go")
    publish("state", "rolled back")
    reducer(fails_always, tag)
    await signal("never")


@workflow
async def answers_one(name: str) -> str:
    """Answers one ask, then waits for ``stop``: later asks stay unanswered until it ends."""
    req = await request(name)
    seen("answers_one", req)
    reply(req, f"got {req.payload}")
    await signal("stop")
    return "stopped"


@workflow
async def never_answers() -> str:
    await signal("stop")
    return "stopped"


@workflow
async def replies_twice() -> str:
    req = await request("q")
    reply(req, 1)
    reply(req, 2)
    return "unreachable"


@workflow
async def replies_what_cannot_be_stored() -> str:
    """Replies with a lock, catches the refusal, and answers with its message instead."""
    req = await request("q")
    try:
        reply(req, threading.Lock())
    except TypeError as e:
        reply(req, f"refused: {e}")
        return "answered"
    return "not refused"


@workflow
async def request_or_signal() -> object:
    ev = await select(request("r"), signal("s"))
    return (ev.name, ev.kind, ev.value.payload, ev.value.id)


@workflow
async def publishes(key: str, value: object) -> None:
    """Publishes ``value`` under ``key``, then waits for ``stop``."""
    publish(key, value)
    await signal("stop")


@workflow
async def replies_a_set() -> None:
    """Replies to one ask with a set (not JSON), then waits for ``stop``."""
    req = await request("q")
    reply(req, {1, 2})
    await signal("stop")


class ReprFails:
    """A value whose ``repr`` raises."""

    def __repr__(self) -> str:
        raise RuntimeError("this repr is broken")


@workflow
async def replies_with(value: object) -> None:
    """Replies ``value`` to every ask ``q``."""
    while True:
        req = await request("q")
        reply(req, value)


@workflow
async def router() -> str:
    """Hands the Request it was asked to another workflow, which cannot answer it."""
    req = await request("job")
    send("worker", "job", req)
    return "routed"


@workflow
async def worker() -> str:
    req = await signal("job")
    reply(req, f"worker did {req.payload}")
    return "replied"


class InsufficientFunds(Exception):
    """A domain error whose ``__init__`` takes other arguments than the message it passes on."""

    def __init__(self, owner: str, balance: int) -> None:
        super().__init__(f"{owner} has only {balance}")
        self.owner = owner
        self.balance = balance


@workflow
async def strict_bank(owner: str, balance: int) -> None:
    """Refuses every withdrawal with an ``InsufficientFunds``."""
    while True:
        req = await request("withdraw")
        reply(req, error=InsufficientFunds(owner, balance))


@workflow
async def opens_then_answers() -> str:
    """Takes no ask until told ``open``; then answers one ask ``q`` and ends."""
    await signal("open")
    req = await request("q")
    seen("opens_then_answers", req)
    reply(req, f"answered {req.payload}")
    return "done"


@workflow
async def fails_when_told() -> None:
    await signal("fail")
    raise ValueError("told to fail")


@workflow
async def gathers_an_ask_with_a_child() -> str:
    """Gathers an ask ``q`` with a child that fails; then answers the next ask ``q``."""
    try:
        await gather(request("q"), spawn(fails_when_told, id="gathered-child"))
    except ChildFailed:
        pass
    req = await request("q")
    reply(req, f"answered {req.payload}")
    return "done"
