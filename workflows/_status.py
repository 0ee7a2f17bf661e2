"""Workflow status."""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    """Where a workflow is in its life. ``RUNNING`` includes suspended."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """True for every status but ``RUNNING``."""
        return self is not Status.RUNNING

    def __str__(self) -> str:
        return self.value
