"""How the runtime logs: structlog events handed to the standard library's ``logging``.

It lives below ``actors`` so that the store's writer and a cluster node's membership log as the
rest does, their events naming the node too. Every logger of the runtime is
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

import contextlib
import contextvars
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

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


@dataclass(eq=False)
class _Node:
    node_id: str | None  # None: a system that is no cluster's node (its events name none)
    shards: Callable[[], int]
    threads: Callable[[], Iterable[threading.Thread]]


# The systems this process runs (one in production; a test cluster runs several nodes).
_nodes: list[_Node] = []
_nodes_lock = threading.Lock()
# The system whose code runs now on this thread (or task), whatever thread it is: set by the
# public calls of a system (``acting_for``), so that an event logged on the caller's thread, or
# on the executor thread of an async call, names the node that was called.
_acting: contextvars.ContextVar[_Node | None] = contextvars.ContextVar("actorflow_acting_node", default=None)


def bind_node(node_id: str | None, shards: Callable[[], int],
              threads: Callable[[], Iterable[threading.Thread]] = lambda: ()) -> object:
    """Put ``node_id`` and the node's shard count (``shards()``) in every event of a system from
    now on (``node_id=None``: a system of no cluster, whose events name no node). An event carries
    the node of the system that logs it: the one whose public call runs on the thread
    (``acting_for``), else the one whose thread (``threads()``) logs it, else the only system of
    the process, else none. Returns a token for ``unbind_node`` and ``acting_for``."""
    node = _Node(node_id, shards, threads)
    with _nodes_lock:
        _nodes.append(node)
    return node


def unbind_node(token: object) -> None:
    with _nodes_lock:
        if token in _nodes:
            _nodes.remove(token)


@contextlib.contextmanager
def acting_for(token: object) -> Iterator[None]:
    """Events logged inside (on this thread, or in this task) are the system ``token``'s."""
    if not isinstance(token, _Node):
        yield
        return
    reset = _acting.set(token)
    try:
        yield
    finally:
        _acting.reset(reset)


F = TypeVar("F", bound=Callable[..., Any])


def as_node(method: F) -> F:
    """A method of an object with a ``_log_token`` (from ``bind_node``) that logs as its system."""
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            with acting_for(self._log_token):
                return await method(self, *args, **kwargs)
        return call_async  # type: ignore[return-value]

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with acting_for(self._log_token):
            return method(self, *args, **kwargs)
    return call  # type: ignore[return-value]


C = TypeVar("C", bound=type)


def public_calls_as_node(cls: C) -> C:
    """Every public method ``cls`` defines logs as the system of its object (``as_node``)."""
    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(value):
            setattr(cls, name, as_node(value))
    return cls


def _add_node(context: dict[str, Any]) -> None:
    node = _acting.get()
    if node is None:
        nodes = _nodes
        if len(nodes) == 1:
            node = nodes[0]
        else:
            me = threading.current_thread()
            node = next((n for n in list(nodes) if me in n.threads()), None)
    if node is None or node.node_id is None:
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
