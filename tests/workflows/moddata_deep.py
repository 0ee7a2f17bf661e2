"""Module-level data of a user module that a workflow's module reaches only through another
user module (``moddata.deep``): test_checkpoint_fidelity holds an object of it across an await."""

from __future__ import annotations

DEEP: list = [{"n": 0}]


def reset() -> None:
    DEEP[:] = [{"n": 0}]
