"""How a step stores what its workflow waits for: the ``Wait`` (``workflows/_instance.py``, where
the rules of resolving it live) packed next to the checkpoint, its readable description, and the
signal names it awaits."""

from __future__ import annotations

from typing import Any

from persistence import dumps, loads, register_plain
from workflows._instance import Arm, Wait, build_wait

__all__ = ["Arm", "Wait", "build_wait", "envelope", "envelope_wait", "stored_forms"]


# Stored inside a step's envelope: plain data for the serializer's fast path. (Files written
# before these moved to workflows/ name them as ``actors._wait.Arm``/``Wait``: the names below
# keep loading them.)
register_plain(Arm)
register_plain(Wait)
_STORED_MAX = 4096


# What a step stores of a new wait that awaits signals only, by (mode, location, arms): a loop
# awaiting its next signal stores the same three things at every step. Cleared when full.
_STORED: dict[tuple[Any, ...], tuple[bytes, str, tuple[str, ...]]] = {}


def stored_forms(wait: Wait, *, fresh: bool = False) -> tuple[bytes, str, tuple[str, ...]]:
    """What a step stores of ``wait``: its payload, its description and the signals it awaits.

    ``fresh``: ``wait`` is as ``build_wait`` made it (and its location set). Such a wait on
    signals only is the same every time it is built at one await: its forms are built once.
    """
    if fresh and not wait.results and all(a.kind == "signal" for a in wait.arms):
        key = (wait.mode, wait.location, *[(a.name, a.target) for a in wait.arms])
        forms = _STORED.get(key)
        if forms is None:
            if len(_STORED) >= _STORED_MAX:
                _STORED.clear()
            forms = _STORED[key] = (dumps(wait), wait.describe(), wait.signal_names())
        return forms
    return dumps(wait), wait.describe(), wait.signal_names()


def envelope(blob: bytes, packed_wait: bytes | None) -> dict[str, Any]:
    """The step envelope stored as a workflow's continuation: its checkpoint and its wait."""
    return {"cont": blob, "wait_p": packed_wait}


def envelope_wait(env: dict[str, Any]) -> Wait | None:
    """The wait of a stored envelope (None: the workflow waits on nothing)."""
    packed = env["wait_p"]
    return loads(packed) if packed is not None else None
