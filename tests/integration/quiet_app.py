"""An application that configures no logging at all: it prints only its own lines."""

from __future__ import annotations

import sys

from actors import ActorSystem
from workflows import ProcedureFailed, RetryPolicy, procedure, signal, workflow


@procedure(retry=RetryPolicy(maximum_attempts=1))
def refuse(order: str) -> str:
    raise ValueError(f"order {order} refused")


@workflow
async def checkout(order: str) -> str:
    await signal("paid")
    try:
        return await procedure(refuse, order)
    except ProcedureFailed:
        return f"{order} refused"


def main(db: str) -> None:
    with ActorSystem(db) as system:  # started, steps, a procedure failed for good, finished
        ref = system.start(checkout, "o-1", id="checkout-o-1")
        print("started checkout-o-1")
        ref.signal("paid", {"amount": 3})
        print("result:", ref.result(timeout=30))


if __name__ == "__main__":
    main(sys.argv[1])
