"""Suite-wide settings."""

from __future__ import annotations

from typing import Any

import structlog


def _drop_chatter(logger: Any, method_name: str, event_dict: Any) -> Any:
    if method_name in ("debug", "info"):
        raise structlog.DropEvent
    return event_dict


def pytest_configure(config: Any) -> None:
    # Keep warnings and errors (shown on failure) but skip rendering the per-workflow info events
    # of tests that run thousands of workflows. structlog.testing.capture_logs() replaces these
    # processors while it runs, so tests that assert on logs still see every event.
    structlog.configure(
        processors=[
            _drop_chatter,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        cache_logger_on_first_use=False,
    )
