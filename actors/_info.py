"""What the system says of a workflow and of a node (``WorkflowInfo``, ``NodeInfo``), and the text
of what a workflow waits for: shared by the system, ``wf`` and the web view."""

from __future__ import annotations

import datetime as _dt
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from persistence import (
    RUNNING,
    WorkflowRecord,
    loads,
)
from workflows import Status


@dataclass(frozen=True)
class NodeInfo:
    """A live node of a cluster (``system.nodes()``): its name, how many shards it leases, how
    old its last heartbeat is (seconds, by the database's clock) and when it joined (epoch
    seconds)."""

    node_id: str
    shards: int
    heartbeat_age: float
    started_at: float
    state: str = "up"  # or "stale": its heartbeat is older than its lease (frozen, or killed alone)


@dataclass(frozen=True)
class WorkflowInfo:
    """A snapshot of one workflow, as ``system.workflows()`` and ``ref.info()`` return it."""

    id: str
    type: str
    status: Status
    parent_id: str | None
    waiting_on: str | None
    created_at: float
    updated_at: float
    result: Any
    error: dict[str, Any] | None
    test_mode: bool
    scheduled_at: float | None = None  # the tick (epoch seconds) of a workflow a schedule started
    # What the workflow published (``publish(key, value)``): the last value of each key.
    published: dict[str, Any] = field(default_factory=dict)


def utc_text(t: float, fmt: str = "%Y-%m-%d %H:%M:%SZ") -> str:
    """A time as ``wf`` and the web view print it, UTC (``fmt``; marked Z: ``2026-01-31
    02:00:00Z``), never failing: a
    time past the year 9999 (a timer armed thousands of years ahead) is written by the C
    library's calendar, and one beyond any calendar as seconds from 1970."""
    try:
        return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime(fmt)
    except (OverflowError, ValueError, OSError):
        pass
    try:
        return time.strftime(fmt, time.gmtime(t))
    except (OverflowError, ValueError, OSError):
        pass
    if not math.isfinite(t):
        return f"{t!r} (not a time)"
    return f"{t:.6g}s from 1970-01-01 (too far from now to write as a date)"


def waiting_text(waiting_on: str | None) -> str | None:
    if not waiting_on:
        return None
    try:
        w = json.loads(waiting_on)
    except ValueError:
        return waiting_on
    parts = []
    for a in w.get("arms", []):
        if a["kind"] == "timer":
            parts.append(f"timer {a['name']!r} due {utc_text(a['due_at'])}")
        elif a["kind"] == "signal":
            parts.append(f"signal {a['name']!r}")
        elif a["kind"] == "request":
            parts.append(f"ask {a['name']!r}")
        elif a["kind"] == "procedure":
            parts.append(f"procedure {a['function']}")
        else:
            parts.append(f"child {a['workflow_id']} ({a['type']})")
    text = (" or " if w.get("mode") == "select" else " and ").join(parts)
    if w.get("at"):
        text += f" at {w['at']}"
    if w.get("blocked"):
        text = f"BLOCKED ({w['blocked']}); was waiting on {text or 'nothing'}"
    return text


def info_from_record(rec: WorkflowRecord, published: dict[str, Any] | None = None) -> WorkflowInfo:
    result = None
    if rec.result is not None:
        try:
            result = loads(rec.result)
        except Exception as e:  # a result whose class is gone: show what happened instead
            result = f"<result cannot be loaded: {e}>"
    return WorkflowInfo(
        id=rec.id,
        type=rec.type,
        status=Status(rec.status),
        parent_id=rec.parent_id,
        waiting_on=waiting_text(rec.waiting_on) if rec.status == RUNNING else None,
        created_at=rec.created_at,
        updated_at=rec.updated_at,
        result=result,
        error=json.loads(rec.error) if rec.error else None,
        test_mode=rec.test_mode,
        published=published if published is not None else {},
    )


def types_named(types: Iterable[str], name: str) -> list[str]:
    """The stored workflow types (``module:qualname``) whose name alone is ``name``, sorted: what
    ``wf list --type`` and ``system.workflows(type=...)`` take a short name for."""
    return sorted({t for t in types if t.rpartition(":")[2] == name})
