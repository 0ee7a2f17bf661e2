"""What a step writes of its ``publish`` and ``reply`` calls (``StepWrite.published`` and
``.replies``), in call order: the last value of each key, and each reply's value (or error)
pickled."""

from __future__ import annotations

import json
from typing import Any

from persistence import ASK_ERROR, ASK_OK, AskReply, dumps, loads
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
    return AskReply(
        eff.ask_id, ASK_ERROR, error_blob(eff.error),
        json.dumps({"type": info["type"], "message": info["message"]}),
    )


def error_blob(error: BaseException) -> bytes | None:
    """``error`` pickled so that it loads back as itself (None if it cannot be: the asker gets
    its type and message). Pickle rebuilds an exception as ``cls(*error.args)``, which fails
    for one whose ``__init__`` takes other arguments than what it passes on as its message (an
    ``InsufficientFunds(owner, balance)``); such an exception is rebuilt from its state instead:
    its ``args`` and attributes, without calling ``__init__`` again."""
    try:
        blob = dumps(error)
    except Exception:
        return None
    try:
        if type(loads(blob)) is type(error):
            return blob
    except Exception:
        pass
    try:
        rebuilt = dumps(_ErrorState(error))
        if type(loads(rebuilt)) is type(error):
            return rebuilt
    except Exception:
        pass
    return None


class _ErrorState:
    """Pickles an exception as its class, ``args`` and ``__dict__``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        e = self.error
        return (rebuild_error, (type(e), e.args, dict(getattr(e, "__dict__", {}))))


def rebuild_error(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """An exception of ``cls`` with these ``args`` and attributes, its ``__init__`` not called."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error
