"""A user's program that talks to its workflows (publish, ask): `mypy --strict` must accept it.

What a workflow publishes or replies is not known statically: ``published`` and ``ask`` give
``Any``; ``await request(name)`` gives a ``Request``.
"""

from __future__ import annotations

import asyncio
from typing import Any, assert_type

from actors import ActorSystem, AskFailed, WorkflowNotRunning, WorkflowPruned
from workflows import Event, Request, publish, reply, request, select, signal, workflow


@workflow
async def account(balance: int) -> int:
    publish("balance", balance)
    while True:
        ev = await select(request("withdraw"), signal("close"))
        assert_type(ev, Event)
        if ev.name == "close":
            return balance
        req = ev.value
        assert isinstance(req, Request)
        amount: int = req.payload
        if amount > balance:
            reply(req, error=ValueError("insufficient funds"))
        else:
            balance -= amount
            reply(req, balance)
            publish("balance", balance)


@workflow
async def one_question() -> str:
    req = await request("name")
    assert_type(req, Request)
    assert_type(req.id, str)
    assert_type(req.name, str)
    reply(req, "actorflow")
    return str(req.payload)


def main() -> None:
    with ActorSystem(":memory:", history_limit=None, id_retention=86400.0) as system:
        ref = system.start(account, 100, id="acct", reuse_id=False)
        assert_type(ref.published("balance"), Any)
        assert_type(ref.published("balance", timeout=1.0), Any)
        try:
            left = ref.ask("withdraw", 30, timeout=5.0, ask_id="w-1")
            assert_type(left, Any)
        except AskFailed as e:
            assert_type(e.error, BaseException | None)
            assert_type(e.error_message, str)
            assert_type(e.error_type, str)
        except WorkflowNotRunning as e:
            assert_type(e.status, str)
        try:
            system.start(account, 1, id="old")
        except WorkflowPruned as e:
            assert_type(e.ended_at, float)
        for entry in ref.history(limit=10):
            assert_type(entry.event, str)
            assert_type(entry.at, float)
        info = ref.info()
        assert_type(info.published, dict[str, Any])


async def main_async(system: ActorSystem) -> None:
    ref = system.get("acct")
    assert_type(await ref.published_async("balance", timeout=1.0), Any)
    assert_type(await ref.ask_async("withdraw", 5), Any)


if __name__ == "__main__":
    main()
    asyncio.run(main_async(ActorSystem(":memory:")))
