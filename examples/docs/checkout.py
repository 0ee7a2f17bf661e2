# examples/docs/checkout.py
"""Version 2 of the checkout: an unpaid cart is abandoned after an hour."""

from workflows import Event, select, signal, timer, workflow

from . import checkout_v1  # noqa: F401  (registers version 1 under the old key, for recovery)


@workflow(name="examples.docs.checkout:checkout.v2")
async def checkout(cart: list) -> dict:
    match await select(signal("pay"), timer("abandon", 3600)):
        case Event("pay", payment):
            return {"paid": payment, "items": len(cart)}
        case Event("abandon"):
            return {"abandoned": True, "items": len(cart)}
