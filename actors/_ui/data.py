"""What the pages of ``wf ui`` show, read through the store's public interface.

Plain data (dicts, lists, text), built here and rendered by the templates, so that the tests can
check what a page holds on either backend without a browser. Values loaded from the database are
shown as text (``repr``), cut at ``VALUE_SHOWN`` characters with a link to see them whole; nothing
here is marked safe for HTML: the templates escape all of it.
"""

from __future__ import annotations

import collections
import json
import time
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from persistence import STATUSES, Store, WorkflowRecord, loads

from .._cli_shared import value_text
from .._info import utc_text, waiting_text

PAGE = 50  # workflows per page of the list, unless ?limit= says otherwise
PAGE_MAX = 500
VALUE_SHOWN = 2000  # characters of a payload, result or error shown on a page
CHILDREN_SHOWN = 50  # children listed under one workflow of the tree
TREE_DEPTH = 3  # levels of the tree below the workflow
HISTORY_SHOWN = 60


def short(key: str) -> str:
    """A workflow type as the list shows it: its qualname."""
    return key.rpartition(":")[2]


def clip(text: str, limit: int = VALUE_SHOWN) -> tuple[str, int | None]:
    """``text`` cut at ``limit`` characters, and its whole length when it was cut (else None)."""
    if len(text) <= limit:
        return text, None
    return text[:limit], len(text)


def shown_value(blob: bytes | None) -> str:
    """A stored (pickled) value as text: its repr, or why it cannot be loaded here."""
    if blob is None:
        return "None"
    try:
        value = loads(blob)
    except Exception as e:  # a class this process cannot import: say so, show the rest
        return f"<cannot load: {type(e).__name__}: {e}>"
    return value_text(value)


def waiting(rec: WorkflowRecord) -> dict[str, Any] | None:
    """The workflow's stored wait (mode, location, arms, blocked), or None."""
    if rec.status != "running" or not rec.waiting_on:
        return None
    try:
        w = json.loads(rec.waiting_on)
    except ValueError:
        return {"mode": "one", "arms": [], "text": rec.waiting_on}
    return w if isinstance(w, dict) else None


# -- the list -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Filters:
    """The list's filters and position, from the query string (checked)."""

    status: str | None = None
    type: str | None = None
    prefix: str | None = None
    newest_first: bool = True
    after: tuple[float, str] | None = None
    back: bool = False  # the page before ``after`` (which is then the first row shown)
    limit: int = PAGE

    @staticmethod
    def parse(q: dict[str, str]) -> Filters:
        """Filters from query parameters; ValueError saying which one is wrong and why."""
        status = q.get("status") or None
        if status is not None and status not in STATUSES:
            raise ValueError(f"status={status!r}: it is one of {', '.join(STATUSES)}, or empty for all")
        order = q.get("order") or "newest"
        if order not in ("newest", "oldest"):
            raise ValueError(f"order={order!r}: it is newest or oldest")
        try:
            limit = int(q.get("limit") or PAGE)
        except ValueError:
            raise ValueError(f"limit={q.get('limit')!r}: give a number of rows, 1 to {PAGE_MAX}") from None
        if not 1 <= limit <= PAGE_MAX:
            raise ValueError(f"limit={limit}: give a number of rows, 1 to {PAGE_MAX}")
        cursor = q.get("after") or q.get("before")
        after = None
        if cursor:
            at, sep, wid = cursor.partition("~")
            try:
                after = (float(at), wid)
            except ValueError:
                after = None
            if not sep or after is None or after[0] != after[0]:  # NaN
                raise ValueError(
                    f"page position {cursor!r} is not one this page made (creation time~id); "
                    f"start again from the first page"
                )
        return Filters(
            status=status, type=q.get("type") or None, prefix=q.get("id") or None,
            newest_first=order == "newest", after=after, back="before" in q and "after" not in q,
            limit=limit,
        )

    def query(self, **change: Any) -> dict[str, str]:
        """The query string of these filters, with ``change`` applied (None drops a key)."""
        q = {
            "status": self.status, "type": self.type, "id": self.prefix,
            "order": None if self.newest_first else "oldest",
            "limit": None if self.limit == PAGE else str(self.limit),
        }
        q.update(change)
        return {k: v for k, v in q.items() if v}


def cursor(rec: WorkflowRecord) -> str:
    return f"{rec.created_at!r}~{rec.id}"


def counts(store: Store) -> dict[str, Any]:
    """Workflows by status, and the types there are (by index: one GROUP BY on the type index)."""
    by_type_status = store.count_workflows()
    by_status: collections.Counter[str] = collections.Counter()
    by_type: collections.Counter[str] = collections.Counter()
    for (t, st), n in by_type_status.items():
        by_status[st] += n
        by_type[t] += n
    total = sum(by_status.values())
    return {
        "total": total,
        "by_status": {st: by_status.get(st, 0) for st in STATUSES},
        "types": sorted(by_type.items()),
        "by_type_status": by_type_status,
    }


def list_page(store: Store, f: Filters) -> dict[str, Any]:
    """A page of the list: the rows, the counts, and where the pages before and after start."""
    c = counts(store)
    kw: dict[str, Any] = {"status": f.status, "type": f.type, "id_prefix": f.prefix, "limit": f.limit + 1}
    if f.back and f.after is not None:
        # The page before: the rows ahead of the first one shown, read the other way round.
        rows = store.browse_workflows(newest_first=not f.newest_first, after=f.after, **kw)
        more_before = len(rows) > f.limit
        rows = list(reversed(rows[: f.limit]))
        if not more_before:  # that was the first page: show it whole
            rows = store.browse_workflows(newest_first=f.newest_first, **kw)
            more_after, more_before = len(rows) > f.limit, False
            rows = rows[: f.limit]
        else:
            more_after = True
    else:
        rows = store.browse_workflows(newest_first=f.newest_first, after=f.after, **kw)
        more_after = len(rows) > f.limit
        rows = rows[: f.limit]
        more_before = f.after is not None
    if f.prefix is None:
        matching: int | None = sum(
            n for (t, st), n in c["by_type_status"].items()
            if f.type in (None, t) and f.status in (None, st)
        )
    else:
        matching = None  # not counted: the prefix is matched as the pages are read
    return {
        "rows": [row(r) for r in rows],
        "counts": c,
        "matching": matching,
        "next": f.query(after=cursor(rows[-1])) if rows and more_after else None,
        "prev": f.query(before=cursor(rows[0])) if rows and more_before else None,
        "first": f.query() if more_before else None,
        "filters": f,
    }


def row(r: WorkflowRecord) -> dict[str, Any]:
    w = waiting(r)
    return {
        "id": r.id,
        "type": r.type,
        "short_type": short(r.type),
        "status": r.status,
        "parent_id": r.parent_id,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
        "waiting": waiting_text(r.waiting_on) if r.status == "running" else None,
        "blocked": w.get("blocked") if w else None,
    }


# -- one workflow ---------------------------------------------------------------------------------


@dataclass
class Node:
    """A workflow of the tree of children, with its own children (up to ``TREE_DEPTH``)."""

    id: str
    short_type: str
    status: str
    children: list[Node] = field(default_factory=list)
    more: int = 0  # children not listed (past CHILDREN_SHOWN)
    by_status: dict[str, int] = field(default_factory=dict)


def _tree(store: Store, root: str) -> tuple[list[Node], int, dict[str, int]]:
    """The root's children, theirs, and so on down ``TREE_DEPTH`` levels: one query per level
    (``children_of``), at most ``CHILDREN_SHOWN`` children under each workflow, and at most
    ``CHILDREN_SHOWN`` workflows of a level looked into for the next."""
    top = Node(root, "", "")
    level = [top]
    for _ in range(TREE_DEPTH):
        found = store.children_of([n.id for n in level[:CHILDREN_SHOWN]], CHILDREN_SHOWN + 1)
        nxt = []
        for node in level[:CHILDREN_SHOWN]:
            kids = found.get(node.id, [])
            node.more = max(0, len(kids) - CHILDREN_SHOWN)
            node.children = [Node(k.id, short(k.type), k.status) for k in kids[:CHILDREN_SHOWN]]
            node.by_status = dict(sorted(collections.Counter(c.status for c in node.children).items()))
            nxt += node.children
        if not nxt:
            break
        level = nxt
    return top.children, top.more, top.by_status


def _as_text(detail: str | None) -> str:
    if not detail:
        return ""
    try:
        d = json.loads(detail)
    except ValueError:
        return detail
    if isinstance(d, dict):
        return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in d.items())
    return json.dumps(d)


def timeline(history: list[Any]) -> list[dict[str, Any]]:
    """History events with their place on the timeline: ``x`` from 0 to 1000, by time."""
    if not history:
        return []
    first, last = history[0].at, history[-1].at
    span = last - first
    out = []
    for i, h in enumerate(history):
        # By time; events all at one instant spread evenly instead.
        frac = (h.at - first) / span if span > 0 else (i / (len(history) - 1) if len(history) > 1 else 0.5)
        out.append({"at": h.at, "event": h.event, "detail": _as_text(h.detail), "step": h.seq is None,
                    "x": round(10 + 980 * frac, 1)})
    return out


def _limit_waits(store: Store, workflow_id: str) -> dict[str, str]:
    from persistence._limits import waits_of
    from persistence._sqlstore import SqlStore

    return waits_of(store, workflow_id) if isinstance(store, SqlStore) else {}


def workflow_page(store: Store, wid: str, *, now: float | None = None, older: int = 0) -> dict[str, Any] | None:
    """Everything the workflow's page shows, or None if there is no such workflow. Its history
    is paged: ``older`` newest events are left out (the page before them is shown)."""
    rec, inbox, timers, procs = store.load_state(wid)
    if rec is None:
        return None
    limited = _limit_waits(store, rec.id) if procs else {}
    now = time.time() if now is None else now
    w = waiting(rec)
    arms = []
    for a in (w or {}).get("arms", []):
        kind = a.get("kind")
        if kind == "timer":
            label = f"timer {a.get('name')!r}"
        elif kind == "signal":
            label = f"signal {a.get('name')!r}"
        elif kind == "request":
            label = f"ask {a.get('name')!r}"
        elif kind == "procedure":
            label = f"procedure {a.get('function')}"
        elif kind == "child":
            label = f"child {a.get('workflow_id')} ({short(str(a.get('type', '')))})"
        else:
            label = json.dumps(a)
        arms.append({"kind": kind, "label": label, "name": a.get("name"), "due_at": a.get("due_at"),
                     "child": a.get("workflow_id") if kind == "child" else None})
    buffered = []
    for m in inbox:
        text, whole = clip(shown_value(m.payload))
        buffered.append({"seq": m.seq, "kind": m.kind, "name": m.name, "payload": text,
                         "whole": whole, "at": m.created_at})
    children, more, by_status = _tree(store, rec.id)
    published = []
    for key, blob in store.published_of([rec.id]).get(rec.id, {}).items():
        text, whole = clip(shown_value(blob))
        published.append({"key": key, "value": text, "whole": whole})
    older = max(0, older)
    rows = store.history(rec.id, limit=older + HISTORY_SHOWN + 1)
    more = len(rows) > older + HISTORY_SHOWN
    history = rows[max(0, len(rows) - older - HISTORY_SHOWN): max(0, len(rows) - older)]
    # Every step is kept, unless the system keeps the newest few (``history_limit``).
    oldest = store.oldest_step_kept(rec.id) if rec.step_seq else None
    result = error = None
    if rec.status == "completed":
        text, whole = clip(shown_value(rec.result))
        result = {"text": text, "whole": whole}
    if rec.error:
        try:
            e = json.loads(rec.error)
        except ValueError:
            e = {"type": "?", "message": rec.error}
        message, whole = clip(str(e.get("message", "")))
        tb, tb_whole = clip(str(e.get("traceback") or ""), 20 * VALUE_SHOWN)
        error = {"type": e.get("type"), "message": message, "whole": whole,
                 "traceback": tb, "traceback_whole": tb_whole}
    pending = [
        {"seq": x.seq, "kind": x.kind.replace("_", " "), "name": x.name, "at": x.created_at}
        for x in store.take_external(0) if x.workflow_id == rec.id
    ]
    return {
        "id": rec.id,
        "type": rec.type,
        "short_type": short(rec.type),
        "status": rec.status,
        "parent_id": rec.parent_id,
        "detached": rec.detached,
        "test_mode": rec.test_mode,
        "created_at": rec.created_at,
        "updated_at": rec.updated_at,
        "finished_at": rec.finished_at,
        "steps": rec.step_seq,
        "fingerprint": rec.fingerprint,
        "mode": (w or {}).get("mode"),
        "location": (w or {}).get("at"),
        "arms": arms,
        "waiting_text": waiting_text(rec.waiting_on) if rec.status == "running" else None,
        "blocked": (w or {}).get("blocked"),
        "timers": [{"id": t.id, "name": t.name, "due_at": t.due_at, "overdue": t.due_at < now} for t in timers],
        "buffered": buffered,
        "procedures": [{"key": p.key, "function": p.function,
                        "status": p.status + (f", waiting for its {limited[p.key]} limit" if p.key in limited else ""),
                        "attempts": p.attempts, "next_attempt_at": p.next_attempt_at} for p in procs],
        "subscriptions": store.subscriptions(rec.id),
        "children": children,
        "children_more": more,
        "children_by_status": by_status,
        "history": timeline(history),
        "history_older": older + HISTORY_SHOWN if more else None,
        "history_newer": max(0, older - HISTORY_SHOWN) if older else None,
        "history_skipped": older,
        "steps_not_kept": max(0, (oldest or 1) - 1),
        "result": result,
        "error": error,
        "published": published,
        "pending": pending,
        "now": now,
    }


def whole_value(store: Store, wid: str, what: str) -> str | None:
    """One value of the workflow whole, as text (``result``, ``error``, ``traceback``,
    ``inbox-SEQ`` or ``published-KEY``), or None if there is no such value."""
    rec = store.load_workflow(wid)
    if rec is None:
        return None
    if what == "result":
        return shown_value(rec.result) if rec.status == "completed" else None
    if what in ("error", "traceback"):
        if not rec.error:
            return None
        try:
            e = json.loads(rec.error)
        except ValueError:
            return rec.error
        return str(e.get("message" if what == "error" else "traceback") or "")
    if what.startswith("inbox-") and what[6:].isdigit():
        seq = int(what[6:])
        for m in store.inbox(wid):
            if m.seq == seq:
                return shown_value(m.payload)
    if what.startswith("published-"):
        blob = store.published_of([wid]).get(wid, {}).get(what[len("published-"):])
        return None if blob is None else shown_value(blob)
    return None


# -- the cluster ---------------------------------------------------------------------------------


def nodes(store: Store) -> list[dict[str, Any]]:
    """The nodes of the cluster the store belongs to, as the store reports them (``nodes()``, a
    backend's own), each as plain fields; [] for a store that reports none or cannot."""
    report = getattr(store, "nodes", None)
    if not callable(report):
        return []
    try:
        found = list(report())
    except Exception:  # a view must not fail on a report it cannot read: the section is left out
        return []
    out = []
    for n in found:
        if is_dataclass(n) and not isinstance(n, type):
            fields = asdict(n)
        elif isinstance(n, dict):
            fields = dict(n)
        elif hasattr(n, "_asdict"):
            fields = n._asdict()
        else:
            fields = {"node": n}
        out.append({str(k): _node_field(str(k), v) for k, v in fields.items()})
    return out


def _node_field(key: str, value: Any) -> Any:
    """A node's field as a person reads it: times (``*_at``, epoch seconds) in UTC, ages
    (``*_age``) in seconds; anything else as it is (escaped by the template)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key.endswith("_at"):
            return utc_text(value, "%Y-%m-%d %H:%M:%S")
        if key.endswith("_age"):
            return f"{value:.1f}s ago"
    return value
