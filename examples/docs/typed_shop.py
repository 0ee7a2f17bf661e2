# examples/docs/typed_shop.py
"""Types end to end: `mypy --strict` checks this file against the installed package."""

from __future__ import annotations

from actors import ActorSystem, WorkflowRef
from workflows import RetryPolicy, procedure, spawn, workflow


@procedure(retry=RetryPolicy(maximum_attempts=5))
def charge(order: str, cents: int) -> bool:
    return cents > 0


@workflow
async def receipt(order: str, cents: int) -> str:
    return f"{order}: paid {cents / 100:.2f}"


@workflow
async def checkout(order: str, cents: int) -> str:
    paid = await procedure(charge, order, cents, timeout=10)  # bool
    if not paid:
        return f"{order}: declined"
    return await spawn(receipt, order, cents)  # str


def main() -> None:
    with ActorSystem(":memory:") as system:
        ref: WorkflowRef[str] = system.start(checkout, "order-1", 250)
        print(ref.result(timeout=10))
