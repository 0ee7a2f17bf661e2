# examples/docs/checkout_v1.py
"""Version 1 of the checkout, kept unchanged so that instances started before version 2 finish.

This is the old function copied here verbatim (same name, same body); only the decorator changed,
to keep the key it was stored under. The decorator is not part of the code fingerprint.
"""

from workflows import signal, workflow


@workflow(name="examples.docs.checkout:checkout")
async def checkout(cart: list) -> dict:
    payment = await signal("pay")
    return {"paid": payment, "items": len(cart)}
