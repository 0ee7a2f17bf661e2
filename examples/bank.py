# examples/bank.py
"""A bank account that answers asks: ``withdraw`` gets the new balance, or a refusal.

    python -m examples.bank          # on bank.db; run it again: the account goes on

The balance is published after every change (``ref.published("balance")`` reads it without
loading the account), deposits come as signals (nobody waits for an answer), and a withdrawal is
an ask: its caller needs to know whether it went through. Each withdrawal is asked with an
``ask_id`` of its own, so a caller that crashed and asks again is answered from the stored reply
and is never paid twice.
"""

from __future__ import annotations

from actors import ActorSystem, AskFailed
from workflows import Event, publish, reply, request, select, signal, workflow


class Refused(Exception):
    """A withdrawal the account refused (not enough money, or not a positive amount)."""


@workflow
async def account(owner: str, balance: int) -> int:
    publish("balance", balance)
    while True:
        match await select(request("withdraw"), signal("deposit"), signal("close")):
            case Event("withdraw", req):
                amount = req.payload
                if not isinstance(amount, int) or amount <= 0:
                    reply(req, error=Refused(f"withdraw needs a positive amount, got {amount!r}"))
                elif amount > balance:
                    reply(req, error=Refused(f"{owner} has {balance}, cannot withdraw {amount}"))
                else:
                    balance -= amount
                    publish("balance", balance)
                    reply(req, balance)  # the caller's ask returns the new balance
            case Event("deposit", amount):
                balance += amount
                publish("balance", balance)
            case Event("close"):
                return balance


def main(db: str = "bank.db") -> None:
    with ActorSystem(db) as system:
        ref = system.start(account, "alice", 100, id="account-alice")
        ref.signal("deposit", 20)
        for n, amount in enumerate([50, 100, 30]):
            try:
                left = ref.ask("withdraw", amount, timeout=30, ask_id=f"alice-withdrawal-{n}")
                print(f"withdrew {amount}: balance {left}")
            except AskFailed as e:
                print(f"refused: {e.error_message}")
        system.idle(timeout=30)  # the deposit's step committed (a signal is not answered)
        print("published balance:", ref.published("balance"))


if __name__ == "__main__":
    main()
