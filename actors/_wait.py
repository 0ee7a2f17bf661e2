"""How a step stores what its workflow waits for: the ``Wait`` (``workflows/_instance.py``, where
the rules of resolving it live) packed next to the checkpoint in one pickle, its readable
description, and the signal names it awaits."""

from __future__ import annotations

import pickle
from typing import Any

from persistence import dumps, loads, register_plain
from persistence._serialization import HEADER
from workflows._instance import Arm, Wait, build_wait

__all__ = ["Arm", "Wait", "build_wait", "pack_step", "stored_forms", "unpack_step"]


# Rows written before the step envelope was one pickle hold a dict whose "wait_p" is the pickled
# ``Wait`` itself (by its old name, ``actors._wait.Arm``/``Wait``, too: the names keep loading).
register_plain(Arm)
register_plain(Wait)
_STORED_MAX = 4096
# The step envelope's tag and version: (tag, version, checkpoint, wait).
_TAG = "af-step"
_VERSION = 1


# What a step stores of a new wait that awaits signals only, by (mode, location, arms): a loop
# awaiting its next signal stores the same three things at every step. Cleared when full.
_STORED: dict[tuple[Any, ...], tuple[tuple[Any, ...], str, tuple[str, ...]]] = {}


def _fields(wait: Wait) -> tuple[Any, ...]:
    """``wait`` as plain values (its results, which are the workflow's, pickled on their own)."""
    arms = tuple([a.fields() for a in wait.arms])
    packed = (wait.mode, wait.location, arms, dumps(wait.results) if wait.results else None)
    return (*packed, True) if wait.cancelled else packed  # (a fifth field only where it is set)


def _wait(fields: tuple[Any, ...]) -> Wait:
    mode, location, arms, results, *cancelled = fields
    return Wait(mode, [Arm(*a) for a in arms], loads(results) if results is not None else {}, location,
                bool(cancelled and cancelled[0]))


def stored_forms(wait: Wait, *, fresh: bool = False) -> tuple[tuple[Any, ...], str, tuple[str, ...]]:
    """What a step stores of ``wait``: its packed form (for ``pack_step``), its description and
    the signals it awaits.

    ``fresh``: ``wait`` is as ``build_wait`` made it (and its location set). Such a wait on
    signals only is the same every time it is built at one await: its forms are built once.
    """
    if fresh and not wait.results and not wait.cancelled:
        # Gathered in a list: a tuple grown by += is copied at each arm (a select of 3,000
        # signals spent 14 ms a step making its key).
        parts: list[Any] = [wait.mode, wait.location]
        for a in wait.arms:
            if a.kind != "signal":
                return _fields(wait), wait.describe(), wait.signal_names()
            parts += (a.name, a.target)
        key = tuple(parts)
        forms = _STORED.get(key)
        if forms is None:
            if len(_STORED) >= _STORED_MAX:
                _STORED.clear()
            forms = _STORED[key] = (_fields(wait), wait.describe(), wait.signal_names())
        return forms
    return _fields(wait), wait.describe(), wait.signal_names()


def pack_step(blob: bytes, packed_wait: tuple[Any, ...] | None) -> bytes:
    """The step envelope stored as a workflow's continuation: its checkpoint and its wait (a
    ``stored_forms`` packed form, or None), in one pickle of plain values."""
    return HEADER + pickle.dumps((_TAG, _VERSION, blob, packed_wait), protocol=pickle.HIGHEST_PROTOCOL)


def pack_wait(wait: Wait | None) -> tuple[Any, ...] | None:
    """``wait``'s packed form (None: the workflow waits on nothing)."""
    return _fields(wait) if wait is not None else None


def unpack_step(data: bytes) -> tuple[bytes, Wait | None]:
    """The checkpoint and the wait of a stored step envelope (of any version written)."""
    env = loads(data)
    if isinstance(env, tuple) and env[:2] == (_TAG, _VERSION):
        _tag, _version, blob, fields = env
        return blob, _wait(fields) if fields is not None else None
    if isinstance(env, dict) and "cont" in env:  # the envelope before: a dict, the wait pickled
        packed = env.get("wait_p")
        return env["cont"], loads(packed) if packed is not None else None
    raise ValueError(f"not a step envelope: {type(env).__name__}")
