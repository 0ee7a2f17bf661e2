"""A workflow's whole history (SPEC §10): what each step did, kept until the workflow is pruned.

A workflow's row describes its newest steps (``recent_steps``, written by the UPDATE every step
makes anyway): at least ``RECENT_STEPS``, at most ``ROW_MOST``. The step that finds the row full
moves its oldest lines into the history table (``StepWrite.evicted``): inside the step's
transaction, in the same statement as the step's other events (its end, the signals it could not
deliver), once every ``ROW_MOST - RECENT_STEPS`` steps. So every step
is kept, in the row or in the table, and ``ref.history()`` reads both. ``history_limit=N`` keeps
the newest N steps of each workflow instead (older rows are trimmed every few steps; the
store's ``history()`` reads exactly the newest N).

Each step's line says what woke it (``_actor._cause``) and, added here before it commits, what
it armed (timers, procedures, children), published, sent and replied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from persistence import CHILD, RECENT_STEPS, SIGNAL, HistoryRow, StepWrite

# How many names a step's line lists of each kind (the rest are counted).
NAMES_SHOWN = 8
# The most steps a workflow's row describes: when it is full, the oldest go to the history table
# together, in one step's statement, and the row describes the newest RECENT_STEPS again (so a
# long-running workflow writes the history table once every ROW_MOST - RECENT_STEPS steps).
ROW_MOST = 2 * RECENT_STEPS


@dataclass(frozen=True)
class HistoryEntry:
    """One event of a workflow's history (``ref.history()``), oldest first.

    ``position`` is its place in the history kept (0: the oldest kept): pass it as ``before=``
    for the page before it. ``step`` is the step's number for a step's own event (None for an
    end, a block, a dropped signal); ``detail`` its fields.
    """

    position: int
    at: float
    event: str
    step: int | None
    detail: dict[str, Any]


def _names(values: list[str]) -> str:
    shown = values[:NAMES_SHOWN]
    more = len(values) - len(shown)
    return json.dumps(shown + ([f"+{more} more"] if more else []))


def describe(sw: StepWrite) -> None:
    """Add to the step's line (the last line of ``sw.recent``) what the step armed, published,
    sent and replied; nothing when it did none of these (the common step of a loop)."""
    if sw.recent is None or not (
        sw.new_timers
        or sw.new_procedures
        or sw.new_workflows
        or sw.published
        or sw.replies
        or sw.signals
        or sw.broadcasts
    ):
        return
    extra = ""
    armed = [f"timer {t.name}" for t in sw.new_timers]
    armed += [f"procedure {p.function.rpartition(':')[2]}" for p in sw.new_procedures]
    armed += [f"child {w.id}" for w in sw.new_workflows]
    if armed:
        extra += ',"armed":' + _names(armed)
    if sw.published:
        extra += ',"published":' + _names([k for k, _ in sw.published])
    sent = [f"{s.name} to {s.workflow_id}" for s in sw.signals if s.kind == SIGNAL]
    sent += [f"{b.name} to subscribers" for b in sw.broadcasts]
    if sent:
        extra += ',"sent":' + _names(sent)
    if sw.replies:
        extra += ',"replied":' + _names([r.ask_id for r in sw.replies])
    outcome = [s for s in sw.signals if s.kind == CHILD]
    if outcome:
        extra += ',"told_parent":true'
    if extra and sw.recent.endswith("}]"):
        sw.recent = sw.recent[:-2] + extra + "}]"


def keep_rows(history_limit: int | None) -> int | None:
    """How many rows of the history table a workflow keeps (None: all), beside the newest
    ``RECENT_STEPS`` steps its row describes, for ``history_limit`` steps in all."""
    if history_limit is None:
        return None
    return max(history_limit - RECENT_STEPS, 1)


def check_limit(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise (ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError)(
            f"history_limit must be a positive int (the newest steps kept) or None (all), got {value!r}"
        )
    return value


def entries(rows: list[HistoryRow], first: int = 0) -> list[HistoryEntry]:
    out = []
    for i, h in enumerate(rows):
        try:
            detail = json.loads(h.detail) if h.detail else {}
        except ValueError:
            detail = {"text": h.detail}
        if not isinstance(detail, dict):
            detail = {"value": detail}
        step = (
            detail.pop("step", None)
            if h.event not in ("completed", "failed", "cancelled")
            else None
        )
        out.append(
            HistoryEntry(first + i, h.at, h.event, step if isinstance(step, int) else None, detail)
        )
    return out


def check_page(limit: Any, before: Any) -> None:
    """Refuse a ``history()`` page that is not one (``TypeError``, ``ValueError``)."""
    for what, value in (("limit", limit), ("before", before)):
        if value is None:
            continue
        must = "an int >= 0" if what == "limit" else "a position (int >= 0)"
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"history() {what} must be {must} or None, got {value!r}")
        if value < 0:
            raise ValueError(f"history() {what} must be {must} or None, got {value!r}")


def first_step(rows: list[HistoryRow]) -> int | None:
    """The number of the oldest step among ``rows`` (None: no step's event is there)."""
    for h in rows:
        if '"step":' in h.detail or '"step": ' in h.detail:
            try:
                step = json.loads(h.detail).get("step")
            except (ValueError, AttributeError):
                continue
            if isinstance(step, int):
                return step
    return None
