"""What one step of a workflow produces.

``step(continuation, send=..., throw=...)`` runs the workflow from its current resume point to its
next suspension and returns one of these. Effects recorded during the step (reducers, sends,
subscriptions) go to the active ``StepContext``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._commands import Command


@dataclass(frozen=True)
class Suspended:
    """The workflow awaits ``command``."""

    command: Command


@dataclass(frozen=True)
class Finished:
    """The workflow returned ``value``."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """The workflow's code raised ``exception`` (``Cancelled`` included) and did not catch it."""

    exception: BaseException


StepResult = Suspended | Finished | Raised
