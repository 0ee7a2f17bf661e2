"""Module-level data of a user module that a workflow's module reaches only through another
user module (``moddata.deep``): test_checkpoint_fidelity holds an object of it across an await."""

from __future__ import annotations

DEEP: list = [{"n": 0}]


def reset() -> None:
    DEEP[:] = [{"n": 0}]


class Bag:
    """A class of this module whose instances another module makes through ``make_bag``."""

    def __init__(self) -> None:
        self.items: list = []


def make_bag() -> Bag:
    return Bag()
