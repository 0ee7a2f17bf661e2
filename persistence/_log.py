"""How the store logs, with no logging library of its own (SPEC §2: ``persistence`` imports the
standard library, sqlite-utils, cloudpickle and psycopg only).

A store opened by a system is handed that system's logger (a ``SystemLog``, whose ``part`` gives
each part of the store a ``Log``): its events are the runtime's structlog events, naming the
system and node. The parts of a store opened for no system log through ``part_log(name)``: once
the runtime is loaded it installs its own logger for them (``install``), and before that they
log plain text to the standard library's ``logging.getLogger("actorflow.<name>")``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
}


class Log(Protocol):
    """A part's logger: one event name and its context as keywords, at a level."""

    def debug(self, event: str, **context: Any) -> None: ...

    def info(self, event: str, **context: Any) -> None: ...

    def warning(self, event: str, **context: Any) -> None: ...

    def error(self, event: str, **context: Any) -> None: ...

    def exception(self, event: str, **context: Any) -> None: ...


class SystemLog(Protocol):
    """What a system hands the store it opens: a logger per part (``"store"``, ``"cluster"``)."""

    def part(self, name: str) -> Log: ...


# The runtime's logger of a part, once the runtime is loaded (``actors`` installs it).
_installed: Callable[[str], Log] | None = None


def install(factory: Callable[[str], Log]) -> None:
    """Log the events of ``part_log`` loggers through ``factory(name)`` from now on."""
    global _installed
    _installed = factory


class _PartLog:
    """``part_log(name)``: the installed logger of the part, made at its first event, or plain
    text to ``logging`` while none is installed."""

    __slots__ = ("_name", "_logger", "_to")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger = logging.getLogger(f"actorflow.{name}")
        self._to: Log | None = None

    def _emit(self, level: str, event: str, context: dict[str, Any]) -> None:
        to = self._to
        if to is None and _installed is not None:
            to = self._to = _installed(self._name)
        if to is not None:
            getattr(to, level)(event, **context)
            return
        if self._logger.isEnabledFor(_LEVELS[level]):
            text = " ".join([event, *(f"{k}={v!r}" for k, v in context.items())])
            self._logger.log(_LEVELS[level], "%s", text, exc_info=level == "exception")

    def debug(self, event: str, **context: Any) -> None:
        self._emit("debug", event, context)

    def info(self, event: str, **context: Any) -> None:
        self._emit("info", event, context)

    def warning(self, event: str, **context: Any) -> None:
        self._emit("warning", event, context)

    def error(self, event: str, **context: Any) -> None:
        self._emit("error", event, context)

    def exception(self, event: str, **context: Any) -> None:
        self._emit("exception", event, context)


def part_log(name: str) -> Log:
    """The logger of a part of the store made for no system in particular."""
    return _PartLog(name)
