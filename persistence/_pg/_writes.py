"""The writes of the PostgreSQL store, each on the writer's connection inside its transaction.

SQL is written for a schema ``{s}`` (quoted), filled in once per store by ``sql_for``.
"""

from __future__ import annotations

import functools

from persistence._pg._schema import quote

# A step's UPDATE: the guard is its WHERE clause. It names no indexed column whose value a running
# step changes (``fresh`` is set false, which changes it once, at the first step; ``status`` only
# by a step that ends the workflow), so PostgreSQL can write the new row version on the same page
# without touching an index (a HOT update).
_STEP_SET = (
    "continuation = coalesce(%s, continuation), fingerprint = coalesce(%s, fingerprint), "
    "waiting_on = %s, result = %s, error = %s, step_seq = %s, updated_at = %s, "
    "restarts = coalesce(%s, restarts), recent_steps = coalesce(%s, recent_steps), fresh = false "
    "WHERE id = %s AND step_seq = %s AND status = 'running'"
)
STEP_RUNNING = "UPDATE {s}.workflows SET " + _STEP_SET
STEP_ENDING = "UPDATE {s}.workflows SET status = %s, " + _STEP_SET


@functools.lru_cache(maxsize=256)
def sql_for(template: str, schema: str) -> str:
    """``template`` with its tables in ``schema``."""
    return template.replace("{s}", quote(schema))
