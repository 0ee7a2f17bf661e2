"""The ``@workflow`` compiler (being written; see issue 2)."""

from typing import Any


def workflow(fn: Any = None, **options: Any) -> Any:
    raise NotImplementedError("the @workflow compiler is not written yet")
