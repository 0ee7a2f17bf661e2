"""The idempotency key a running procedure is handed."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import WorkflowError

_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("actorflow_idem", default=None)


def idempotency_key() -> str:
    """The stable idempotency key of the procedure call running now.

    The same call keeps the same key across retries and across a crash and recovery, so a
    procedure can make its external effect idempotent (for example a unique request id).
    """
    key = _key.get()
    if key is None:
        raise WorkflowError(
            "idempotency_key() was called outside a running procedure; it is only set while the "
            "runtime executes a procedure(...) call"
        )
    return key


@contextmanager
def procedure_running(key: str) -> Iterator[None]:
    """Set the idempotency key for the duration of one procedure attempt."""
    token = _key.set(key)
    try:
        yield
    finally:
        _key.reset(token)
