"""The lines a workflow's row keeps of its newest steps (``recent_steps``), as history rows."""

from __future__ import annotations

import json
import re

_STEP = re.compile(r'\{"step": ?(\d+)')


def split_line(line: str) -> tuple[float, str, str]:
    """``(at, event, detail)`` of a ``recent_steps`` line ``[at_ms,"event",{detail}]`` (as the
    runtime writes them: no spaces, an event name without quotes), without parsing the JSON. A
    line that is not one (a row edited by hand) is kept as an ``unreadable_step`` event."""
    try:
        comma = line.index(",")
        end = line.index('"', comma + 2)
        return int(line[1:comma]) / 1000, line[comma + 2 : end], line[end + 2 : -1]
    except ValueError:
        return 0.0, "unreadable_step", json.dumps({"line": line})


def step_of(detail: str | None) -> int | None:
    """The step number a step's event detail starts with (None: not a step's own event)."""
    m = _STEP.match(detail or "")
    return int(m.group(1)) if m else None
