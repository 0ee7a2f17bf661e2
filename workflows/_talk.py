"""Talking to a running workflow from outside: published values, and requests with replies.

- ``publish(key, value)`` records a value under ``key`` with the step (last write wins), for
  clients to read (``ref.published(key)``) without loading the workflow.
- ``await request(name)`` suspends like ``signal(name)`` and gives a ``Request``; ``reply(req,
  value)`` (or ``reply(req, error=exc)``) answers its asker (``ref.ask(name, payload)``), with the
  step. Neither ``publish`` nor ``reply`` is awaited: both are effects of the step, like
  ``reducer``, and a step that rolls back publishes and replies nothing.
"""

from __future__ import annotations

from typing import Any

from ._commands import RequestCommand, _check_name
from ._context import Publish, Reply, current
from ._errors import WorkflowError, check_text, stored_copy

__all__ = ["Request", "RequestCommand", "publish", "reply", "request"]


class Request:
    """An ask a workflow received (``await request(name)``): its ``name``, ``payload`` (what the
    asker passed) and ``id`` (the ask's id: the asker's ``ask_id``, or one made for it).

    Answer it with ``reply(req, value)`` or ``reply(req, error=exc)``, once.
    """

    __slots__ = ("_replied", "_to", "id", "name", "payload")

    def __init__(self, name: str, payload: Any, id: str, to: str | None = None) -> None:
        self.name = name
        self.payload = payload
        self.id = id
        self._replied = False
        self._to = to  # the workflow it was asked of: the one whose reply answers it

    def __repr__(self) -> str:
        return f"Request({self.name!r}, {self.payload!r}, id={self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Request) and (other.name, other.id) == (self.name, self.id)

    def __hash__(self) -> int:
        return hash((self.name, self.id))

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.name, self.payload, self.id, self._replied, self._to)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.name, self.payload, self.id, self._replied = state[:4]
        self._to = state[4] if len(state) > 4 else None


def request(name: str) -> RequestCommand:
    """Wait for the next ask called ``name`` (``ref.ask(name, payload)``); ``await`` gives its
    ``Request``. In a ``select`` it wins as ``Event(name, req)`` (kind ``"request"``)."""
    return RequestCommand(_check_name(name, "request"))


def publish(key: str, value: Any = None) -> None:
    """Record ``value`` under ``key`` when this step commits (the last write wins); clients read
    it with ``ref.published(key)``, also while the workflow is passivated and after it ended."""
    if not isinstance(key, str) or not key:
        raise TypeError(f"publish() key must be a non-empty string, got {key!r}")
    check_text(key, "publish() key")
    (value,) = stored_copy((value,), f"publish({key!r}) value")
    current("publish").effects.append(Publish(key, value))


def reply(req: Request, value: Any = None, *, error: BaseException | None = None) -> None:
    """Answer the ask ``req`` with ``value`` (or fail it with ``error``: the asker's ``ask``
    raises ``AskFailed`` carrying it), when this step commits. A request is answered once."""
    ctx = current("reply")
    if not isinstance(req, Request):
        raise TypeError(f"reply() needs the Request that `await request(name)` gave, got {req!r}")
    if error is not None and not isinstance(error, BaseException):
        raise TypeError(f"reply() error= must be an exception, got {error!r}")
    if error is not None and value is not None:
        raise TypeError(f"reply({req.name!r}) takes a value or error=, not both")
    if req._to is not None and req._to != ctx.workflow_id:
        raise WorkflowError(
            f"request {req.name!r} (ask {req.id!r}) was asked of workflow {req._to!r}, and only its "
            f"reply answers it (this is {ctx.workflow_id!r}); send the answer back to {req._to!r} "
            f"and reply there"
        )
    if req._replied:
        raise WorkflowError(
            f"request {req.name!r} (ask {req.id!r}) was answered already; each request is "
            f"answered once (its asker has the first reply)"
        )
    if error is None:
        (value,) = stored_copy((value,), f"reply({req.name!r}) value")
    req._replied = True
    ctx.effects.append(Reply(req.id, req.name, value, error))
