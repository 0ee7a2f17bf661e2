"""How the runtime logs: structlog events handed to the standard library's ``logging``.

The store's writer and a cluster node's membership log as the rest does, their events naming the
system and node too: each system binds its context once (``SystemLog``) and hands each part it
makes a logger of its own (``SystemLog.part``), the store's parts included (``persistence``
imports no structlog: it logs through what it is handed, see ``persistence._log``). Every logger of the runtime is
``logging.getLogger("actorflow.<part>")`` wrapped by structlog, and the runtime never configures
output: what is shown, where and how is the application's choice
(``logging.basicConfig``, or structlog's own configuration rendering through ``logging``). An
application that configures nothing sees only WARNING and above, on stderr, from the standard
library's last-resort handler.

Levels: ERROR when a workflow or a procedure failed for good, a fault went beyond the restart
intensity, or a workflow is blocked; WARNING for misuse (an unknown signal name, a full inbox)
and faults the runtime recovers from; INFO for lifecycle (started, recovered, finished); DEBUG
for every step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import structlog
from structlog._config import _CONFIG as _STRUCTLOG_CONFIG  # structlog's configuration itself
from structlog.testing import LogCapture

from persistence import _log as _store_log

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
}


def _capturing() -> bool:
    # structlog.testing.capture_logs() appends a LogCapture to the configured processors (the
    # very list every bound logger holds, kept in place): a test that captures sees every event,
    # whatever the level of the standard library's logger. get_config() would hand that list in
    # a new dict at every event logging drops (a DEBUG event per step): it is read directly.
    for p in _STRUCTLOG_CONFIG.default_processors:
        if type(p) is LogCapture:
            return True
    return False


def _enabled(logger: logging.Logger, method_name: str) -> bool:
    return logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)) or _capturing()


class SystemLog:
    """What a system says about itself in every event, bound once when it opens and handed down
    to each part of the runtime it makes (``part``): the database it runs on (``system``), and
    for a cluster's node its name (``node_id``) and how many shards it holds at the moment
    (``shards``). The parts log through the ``Log`` they were handed, so an event names its
    system whatever thread logs it, with no per-thread or per-call bookkeeping."""

    def __init__(self, system: str, node_id: str | None = None) -> None:
        self.system = system
        self.node_id = node_id  # None: a system of no cluster, whose events name no node
        self.shards: Callable[[], int] | None = None  # set once the node's cluster is known
        # The bound loggers of this system's parts are of a class that knows it: ``bind``
        # (a workflow's id and type) keeps the class, so the context stays bound too.
        self.wrapper: type[RuntimeLogger] = type("SystemLogger", (RuntimeLogger,), {"system_log": self})

    def part(self, name: str) -> Log:
        """The logger ``actorflow.<name>`` of this system."""
        return Log(name, self)

    def add_to(self, event: dict[str, Any]) -> None:
        event.setdefault("system", self.system)
        if self.node_id is None:
            return
        event.setdefault("node_id", self.node_id)
        if self.shards is not None:
            try:
                event.setdefault("shards", self.shards())
            except Exception:  # a node closing: its name still says where the event comes from
                pass


class RuntimeLogger(structlog.stdlib.BoundLogger):
    """A stdlib-bound structlog logger that skips its processors for a level ``logging`` drops,
    and adds its system's context (``SystemLog``) to each event it lets through."""

    system_log: SystemLog | None = None

    def _proxy_to_logger(self, method_name: str, event: str | None = None, *event_args: str, **event_kw: Any) -> Any:
        if not _enabled(self._logger, method_name):
            return None
        if self.system_log is not None:
            self.system_log.add_to(event_kw)
        return super()._proxy_to_logger(method_name, event, *event_args, **event_kw)


class Log:
    """A part of the runtime's logger, ``actorflow.<part>`` in ``logging``: a system's own
    (``SystemLog.part``), whose events carry the system's context, or none's (``Log(part)``,
    for code that runs for no system in particular).

    The level is checked before structlog builds anything, so a DEBUG event per step costs next
    to nothing while DEBUG is off. ``bind`` gives a ``RuntimeLogger`` holding context (a
    workflow's id and type).
    """

    __slots__ = ("_proxy", "logger")

    def __init__(self, part: str, system: SystemLog | None = None) -> None:
        self.logger = logging.getLogger(f"actorflow.{part}")
        wrapper = system.wrapper if system is not None else RuntimeLogger
        self._proxy = structlog.wrap_logger(self.logger, wrapper_class=wrapper)

    def bind(self, **context: Any) -> Any:
        return self._proxy.bind(**context)

    def _log(self, method_name: str, event: str, context: dict[str, Any]) -> None:
        if _enabled(self.logger, method_name):
            getattr(self._proxy, method_name)(event, **context)

    def debug(self, event: str, **context: Any) -> None:
        # (a step's event: its level checked here, with no call more while DEBUG is off)
        if self.logger.isEnabledFor(logging.DEBUG) or _capturing():
            self._proxy.debug(event, **context)

    def info(self, event: str, **context: Any) -> None:
        self._log("info", event, context)

    def warning(self, event: str, **context: Any) -> None:
        self._log("warning", event, context)

    def error(self, event: str, **context: Any) -> None:
        self._log("error", event, context)

    def exception(self, event: str, **context: Any) -> None:
        self._log("exception", event, context)


# The parts of stores opened for no system (and the store's promises) log as the runtime's own.
_store_log.install(Log)
