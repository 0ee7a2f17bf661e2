"""How the runtime logs: structlog events handed to the standard library's ``logging``.

Every logger of the runtime is ``logging.getLogger("actorflow.<part>")`` wrapped by structlog, and
the runtime never configures output: what is shown, where and how is the application's choice
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
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from structlog._config import _CONFIG
from structlog.testing import LogCapture

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
    # structlog.testing.capture_logs() puts a LogCapture into the configured processors (the very
    # list every bound logger holds, kept in place): a test that captures sees every event,
    # whatever the level of the standard library's logger. Read from structlog's configuration
    # object, not get_config(), which copies it: this runs for every event logging drops.
    for p in _CONFIG.default_processors:
        if type(p) is LogCapture:
            return True
    return False


def _enabled(logger: logging.Logger, method_name: str) -> bool:
    return logger.isEnabledFor(_LEVELS.get(method_name, logging.INFO)) or _capturing()


@dataclass
class _Node:
    node_id: str
    shards: Callable[[], int]
    threads: Callable[[], Iterable[threading.Thread]]


# The cluster nodes this process runs (one in production; a test cluster runs several).
_nodes: list[_Node] = []
_nodes_lock = threading.Lock()


def bind_node(node_id: str, shards: Callable[[], int],
              threads: Callable[[], Iterable[threading.Thread]] = lambda: ()) -> object:
    """Put ``node_id`` and the node's shard count (``shards()``) in every event of the runtime
    from now on. With several nodes in one process, an event carries the node whose thread
    (``threads()``) logs it, and none if no node's thread does. Returns a token for
    ``unbind_node``."""
    node = _Node(node_id, shards, threads)
    with _nodes_lock:
        _nodes.append(node)
    return node


def unbind_node(token: object) -> None:
    with _nodes_lock:
        if token in _nodes:
            _nodes.remove(token)


def _add_node(context: dict[str, Any]) -> None:
    nodes = _nodes
    if not nodes or "node_id" in context:
        return
    node: _Node | None = nodes[0] if len(nodes) == 1 else None
    if node is None:
        me = threading.current_thread()
        node = next((n for n in list(nodes) if me in n.threads()), None)
        if node is None:
            return
    context["node_id"] = node.node_id
    try:
        context["shards"] = node.shards()
    except Exception:  # a node closing: its name still says where the event comes from
        pass


class RuntimeLogger(structlog.stdlib.BoundLogger):
    """A stdlib-bound structlog logger that skips its processors for a level ``logging`` drops."""

    def _proxy_to_logger(self, method_name: str, event: str | None = None, *event_args: str, **event_kw: Any) -> Any:
        if not _enabled(self._logger, method_name):
            return None
        if _nodes and "node_id" not in self._context:
            _add_node(event_kw)
        return super()._proxy_to_logger(method_name, event, *event_args, **event_kw)


class Log:
    """A part of the runtime's logger, ``actorflow.<part>`` in ``logging``.

    The level is checked before structlog builds anything, so a DEBUG event per step costs next
    to nothing while DEBUG is off. ``bind`` gives a ``RuntimeLogger`` holding context (a
    workflow's id and type).
    """

    __slots__ = ("_proxy", "logger")

    def __init__(self, part: str) -> None:
        self.logger = logging.getLogger(f"actorflow.{part}")
        self._proxy = structlog.wrap_logger(self.logger, wrapper_class=RuntimeLogger)

    def bind(self, **context: Any) -> Any:
        return self._proxy.bind(**context)

    def _log(self, method_name: str, event: str, context: dict[str, Any]) -> None:
        if _enabled(self.logger, method_name):
            getattr(self._proxy, method_name)(event, **context)

    def debug(self, event: str, **context: Any) -> None:
        self._log("debug", event, context)

    def info(self, event: str, **context: Any) -> None:
        self._log("info", event, context)

    def warning(self, event: str, **context: Any) -> None:
        self._log("warning", event, context)

    def error(self, event: str, **context: Any) -> None:
        self._log("error", event, context)

    def exception(self, event: str, **context: Any) -> None:
        self._log("exception", event, context)
