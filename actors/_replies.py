"""What a step writes of its ``publish`` and ``reply`` calls (``StepWrite.published`` and
``.replies``), in call order: the last value of each key, and each reply's value (or error)
pickled."""

from __future__ import annotations

import json
from typing import Any

from persistence import ASK_ERROR, ASK_OK, AskReply, dumps
from workflows._context import Publish, Reply

from ._procedures import error_info


def step_effects(sw: Any, effects: list[Any], workflow_id: str) -> None:
    """Add a step's ``publish`` and ``reply`` effects to its write (``sw``): last write per key."""
    published: dict[str, bytes] = {}
    for eff in effects:
        if isinstance(eff, Publish):
            try:
                published.pop(eff.key, None)
                published[eff.key] = dumps(eff.value)
            except Exception as e:
                raise TypeError(
                    f"publish({eff.key!r}) in workflow {workflow_id!r}: the value cannot be "
                    f"pickled ({type(eff.value).__name__}: {e}); publish plain picklable data"
                ) from e
        elif isinstance(eff, Reply):
            sw.replies.append(_reply(eff, workflow_id))
    sw.published.extend(published.items())


def _reply(eff: Reply, workflow_id: str) -> AskReply:
    if eff.error is None:
        try:
            return AskReply(eff.ask_id, ASK_OK, dumps(eff.value))
        except Exception as e:
            raise TypeError(
                f"reply() to ask {eff.name!r} in workflow {workflow_id!r}: the value cannot be "
                f"pickled ({type(eff.value).__name__}: {e}); reply with plain picklable data"
            ) from e
    info = error_info(eff.error)
    try:
        blob: bytes | None = dumps(eff.error)
    except Exception:
        blob = None  # the asker gets its type and message
    return AskReply(
        eff.ask_id, ASK_ERROR, blob, json.dumps({"type": info["type"], "message": info["message"]})
    )
