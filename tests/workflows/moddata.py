"""Module-level data of a user module other than a workflow's own: corpus_restore and
test_checkpoint_fidelity hold objects of it in workflow locals across awaits."""

from __future__ import annotations

from . import moddata_deep as deep


class Settings:
    def __init__(self) -> None:
        self.rules: list = []


ITEMS: list = [{"n": 0}]
SETTINGS = Settings()
SENTINEL = object()


def reset() -> None:
    """Put the data back as the module makes it (a fresh process sees it so)."""
    ITEMS[:] = [{"n": 0}]
    SETTINGS.rules = []
    deep.reset()
