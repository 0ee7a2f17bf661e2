"""The bank-account example answers ``withdraw`` asks with the new balance or a refusal, on
SQLite and PostgreSQL; run twice, its withdrawals (asked by id) are not paid twice."""

from __future__ import annotations

import pytest

from actors import ActorSystem, AskFailed
from actors.testing import VirtualClock
from examples import bank

T = 30


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "bank.db")


def test_withdrawals_get_the_new_balance_or_a_refusal(db):
    """withdraw asks get the new balance, or AskFailed carrying the account's Refused; deposits are
    signals; the balance is published."""
    with ActorSystem(db, clock=VirtualClock()) as system:
        ref = system.start(bank.account, "bob", 100, id="acct-bob")
        assert ref.ask("withdraw", 40, timeout=T) == 60
        with pytest.raises(AskFailed, match="bob has 60, cannot withdraw 70") as e:
            ref.ask("withdraw", 70, timeout=T)
        assert isinstance(e.value.error, bank.Refused)
        with pytest.raises(AskFailed, match="positive amount"):
            ref.ask("withdraw", -5, timeout=T)
        ref.signal("deposit", 15)
        assert ref.ask("withdraw", 75, timeout=T) == 0
        assert ref.published("balance") == 0
        ref.signal("close")
        assert ref.result(timeout=T) == 0


def test_the_program_runs_twice_without_paying_twice(db, capsys):
    """Run twice, the program's withdrawals (asked by id) are answered from their stored replies:
    nothing is paid twice."""
    bank.main(db)
    assert capsys.readouterr().out.splitlines() == [
        "withdrew 50: balance 70",
        "refused: alice has 70, cannot withdraw 100",
        "withdrew 30: balance 40",
        "published balance: 40",
    ]
    bank.main(db)  # the same asks by id: their stored replies; the deposit is a new signal
    assert capsys.readouterr().out.splitlines() == [
        "withdrew 50: balance 70",
        "refused: alice has 70, cannot withdraw 100",
        "withdrew 30: balance 40",
        "published balance: 60",
    ]
