"""The SQL both stores run, written once, and the dialect that fits it to each backend.

Every statement here is written with ``?`` placeholders and names the store's tables as
``{s}.table``. A ``Dialect`` turns a template into its backend's text (cached): SQLite drops the
``{s}.`` prefix and keeps ``?``; PostgreSQL puts the schema in and uses ``%s``. What truly
differs between the two (a list of ids, the planner hints, the queue query's shape, a column
only one schema has) is a field or method of the dialect, not a second copy of a statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WORKFLOW_COLUMNS = (
    "id, type, status, parent_id, detached, test_mode, continuation, fingerprint, waiting_on, "
    "result, error, step_seq, created_at, updated_at, recent_steps, finished_at"
)
PROCEDURE_COLUMNS = (
    "key, workflow_id, function, args, status, attempts, result, error, next_attempt_at"
)

# -- reads ---------------------------------------------------------------------------------------
# One workflow's rows, by index (each read is shared by its method and by load_state).
WORKFLOW = f"SELECT {WORKFLOW_COLUMNS} FROM {{s}}.workflows WHERE id = ?"
# Ids read together (``Store.load_workflows``), this many to a statement: one template, the last
# chunk padded with an id it holds already.
IN_CHUNK = 100
_IN = ", ".join(["?"] * IN_CHUNK)
WORKFLOWS = f"SELECT {WORKFLOW_COLUMNS} FROM {{s}}.workflows WHERE id IN ({_IN})"
SCHEDULED_TICK = "SELECT tick FROM {s}.schedule_runs WHERE workflow_id = ?"
INBOX = (
    "SELECT seq, workflow_id, kind, name, payload, created_at FROM {s}.inbox "
    "WHERE workflow_id = ? ORDER BY seq"
)
TIMERS = (
    "SELECT id, workflow_id, name, due_at FROM {s}.timers WHERE workflow_id = ? "
    "ORDER BY due_at, id"
)
PROCEDURES = (
    f"SELECT {PROCEDURE_COLUMNS} FROM {{s}}.procedures WHERE workflow_id = ? "
    f"ORDER BY created_at, key"
)
SUBSCRIBERS = "SELECT workflow_id FROM {s}.subscriptions WHERE name = ? AND filter_key = ?"
TIMERS_DUE = (
    "SELECT id, workflow_id, name, due_at FROM {s}.timers WHERE due_at < ? "
    "ORDER BY due_at, id LIMIT ?"
)
NEXT_TIMER = "SELECT min(due_at) FROM {s}.timers"
CANCELLING = "SELECT DISTINCT workflow_id FROM {s}.inbox WHERE kind = ?"
COUNT_WORKFLOWS = "SELECT type, status, count(*) FROM {s}.workflows GROUP BY type, status"
HISTORY = (
    "SELECT seq, workflow_id, at, event, detail FROM (SELECT * FROM {s}.history "
    "WHERE workflow_id = ? ORDER BY seq DESC LIMIT ?) AS h ORDER BY seq"
)
RECENT_STEPS = "SELECT recent_steps FROM {s}.workflows WHERE id = ?"
HISTORY_COUNT = "SELECT count(*) FROM {s}.history WHERE workflow_id = ?"
# The latest time of a workflow's history rows older than a seq (its "trimmed" row is a count).
HISTORY_LATEST_BEFORE = (
    "SELECT max(at) FROM {s}.history WHERE workflow_id = ? AND seq < ? AND event <> 'trimmed'"
)
EXTERNAL_AFTER = (
    "SELECT seq, kind, workflow_id, name, payload, created_at FROM {s}.external "
    "WHERE seq > ? ORDER BY seq"
)
PRUNED_TOTAL = "SELECT value FROM {s}.meta WHERE key = 'pruned_total'"
META_VALUE = "SELECT value FROM {s}.meta WHERE key = ?"

# -- writes ----
# The inserts whose new row's key is wanted back (an inbox message's seq, a timer's id, a
# request's seq) are sent with ``Writer.insert_id``: PostgreSQL adds ``RETURNING``, SQLite reads
# the connection's last rowid (a RETURNING clause costs SQLite about as much as the insert).----------------------------------------------------------------------------------
_STEP_SET = (
    "fingerprint = coalesce(?, fingerprint), "
    "waiting_on = ?, result = ?, error = ?, step_seq = ?, updated_at = ?, "
    "recent_steps = coalesce(?, recent_steps){fresh} "
    "WHERE id = ? AND step_seq = ? AND status = 'running'"
)
# The guard of a step is its UPDATE's own WHERE clause. A step that leaves the workflow running
# does not name the status column (nor, on PostgreSQL, any indexed column whose value it
# changes): SQLite then leaves the indexes on it alone, and PostgreSQL can update in place (HOT).
STEP_RUNNING = "UPDATE {s}.workflows SET continuation = coalesce(?, continuation), " + _STEP_SET
# A step that ends the workflow drops its continuation (nothing resumes a finished workflow: its
# record keeps the result or error and the history) and stamps its end, for retention.
STEP_ENDING = (
    "UPDATE {s}.workflows SET status = ?, finished_at = ?, continuation = NULL, " + _STEP_SET
)
_INSERT_WORKFLOW = (
    "INSERT INTO {s}.workflows (id, type, status, parent_id, detached, test_mode, continuation, "
    "fingerprint, waiting_on, result, error, step_seq, created_at, updated_at, "
    "recent_steps, finished_at{fresh}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
    "?{fresh_value}) ON CONFLICT (id) DO NOTHING"
)
STATUS = "SELECT status FROM {s}.workflows WHERE id = ?"
STATUS_AND_SEQ = "SELECT status, step_seq FROM {s}.workflows WHERE id = ?"
# One inbox row, if its target is running: the check and the insert in one statement, so that it
# needs no answer before the next statement goes.
DELIVER = (
    "INSERT INTO {s}.inbox (workflow_id, kind, name, payload, created_at) "
    "SELECT ?, ?, ?, ?, ? FROM {s}.workflows AS w WHERE w.id = ? AND w.status = 'running'"
)
# A child's outcome, into the inbox of the parent its row names: the child's actor keeps its
# parent's id from its start, but a parent pruned unlinks its children (``prune_finished``), and a
# new workflow may have started under its id since (``reuse_id``), which never spawned the child.
# (The condition is on the row of the message's name, if there is one: a store's caller may
# append an outcome of no workflow's; the engine's own come from the ending child's step.)
DELIVER_CHILD = DELIVER + (
    " AND NOT EXISTS (SELECT 1 FROM {s}.workflows AS c WHERE c.id = ? "
    "AND (c.parent_id IS NULL OR c.parent_id <> w.id))"
)
# A setting kept in the meta table (beside the schema's version).
PUT_META = (
    "INSERT INTO {s}.meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
GET_META = "SELECT value FROM {s}.meta WHERE key = ?"
# The messages waiting in inboxes: in all, and in the fullest one workflow's (``inbox_depth``).
INBOX_DEPTH = (
    "SELECT coalesce(sum(n), 0), coalesce(max(n), 0) FROM "
    "(SELECT count(*) AS n FROM {s}.inbox GROUP BY workflow_id) AS x"
)
INBOX_DEPTH_OF_SHARDS = (
    "SELECT coalesce(sum(n), 0), coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM {s}.inbox "
    "AS i JOIN {s}.workflows AS w ON w.id = i.workflow_id WHERE w.shard = ANY(?) "
    "GROUP BY i.workflow_id) AS x"
)
# A signal counts against the inbox's bound. Counting stops at the limit, by index, so a full
# inbox costs at most ``limit`` index steps.
COUNT_INBOX = "SELECT count(*) FROM (SELECT 1 FROM {s}.inbox WHERE workflow_id = ? LIMIT ?) AS x"
# A pipelined writer counts in the insert itself; a writer answered at once counts first (SQLite
# would copy the SELECT of an insert that reads its own table aside before inserting).
# A signal its workflow awaits now (its name in ``waits``), none of that name buffered before it,
# is taken whatever the bound: it is the one the workflow takes next, and refusing it would hold
# the workflow for good. More of that name are bounded as any signal is.
AWAITED_NOW = (
    "SELECT 1 FROM {s}.waits AS a WHERE a.workflow_id = ? AND a.name = ? AND NOT EXISTS "
    "(SELECT 1 FROM {s}.inbox AS b WHERE b.workflow_id = a.workflow_id AND b.name = a.name "
    "AND b.kind = 'signal')"
)
DELIVER_BOUNDED = DELIVER + f" AND (({COUNT_INBOX}) < ? OR EXISTS ({AWAITED_NOW}))"
BROADCAST_TO = (
    "SELECT workflow_id FROM {s}.subscriptions WHERE name = ? AND filter_key = ? "
    "ORDER BY workflow_id"
)
DELETE_EXTERNAL = "DELETE FROM {s}.external WHERE seq = ?"
INSERT_TIMER = "INSERT INTO {s}.timers (workflow_id, name, due_at) VALUES (?, ?, ?)"
# A timer whose id the writer drew from the table's own sequence (``Writer.timer_ids``).
INSERT_TIMER_WITH_ID = (
    "INSERT INTO {s}.timers (id, workflow_id, name, due_at) OVERRIDING SYSTEM VALUE VALUES (?, ?, ?, ?)"
)
# A new call's row counts its first attempt as started (it is dispatched once the step commits):
# an attempt is counted before it runs, in a write made anyway, so one that takes the process
# down has used up an attempt of its retry policy at the next start.
INSERT_PROCEDURE = (
    "INSERT INTO {s}.procedures (key, workflow_id, function, args, status, attempts, "
    "next_attempt_at, created_at) VALUES (?, ?, ?, ?, 'pending', 1, ?, ?) "
    "ON CONFLICT (key) DO NOTHING"
)
DELETE_WAITS = "DELETE FROM {s}.waits WHERE workflow_id = ?"
INSERT_WAIT = "INSERT INTO {s}.waits (workflow_id, name) VALUES (?, ?)"
SUBSCRIBE = (
    "INSERT INTO {s}.subscriptions (name, filter_key, workflow_id) VALUES (?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)
UNSUBSCRIBE = (
    "DELETE FROM {s}.subscriptions WHERE name = ? AND filter_key = ? AND workflow_id = ?"
)
INSERT_HISTORY = "INSERT INTO {s}.history (workflow_id, at, event, detail) VALUES (?, ?, ?, ?)"
# A history limit drops a workflow's oldest entries; its "trimmed" row counts them (in ``at``),
# so that an entry's position (its place in the whole history) stays put as older ones go.
TRIMMED = "trimmed"
TRIM_HISTORY = (
    "DELETE FROM {s}.history WHERE workflow_id = ? AND event <> 'trimmed' AND seq < (SELECT seq "
    "FROM {s}.history WHERE workflow_id = ? AND event <> 'trimmed' ORDER BY seq DESC LIMIT 1 "
    "OFFSET ?)"
)
COUNT_TRIMMED = "UPDATE {s}.history SET at = at + ? WHERE workflow_id = ? AND event = 'trimmed'"
FIRST_TRIMMED = "INSERT INTO {s}.history (workflow_id, at, event, detail) VALUES (?, ?, 'trimmed', '')"
# One statement where writes can go in a WITH (PostgreSQL): the trim, and its count added.
TRIM_AND_COUNT_HISTORY = (
    "WITH d AS (" + TRIM_HISTORY + " RETURNING 1), n AS (SELECT count(*) + ? AS n FROM d), "
    "u AS (UPDATE {s}.history SET at = at + (SELECT n FROM n) WHERE workflow_id = ? AND "
    "event = 'trimmed' RETURNING 1) "
    "INSERT INTO {s}.history (workflow_id, at, event, detail) SELECT ?, n, 'trimmed', '' FROM n "
    "WHERE n > 0 AND NOT EXISTS (SELECT 1 FROM u)"
)
HISTORY_TRIMMED = "SELECT at FROM {s}.history WHERE workflow_id = ? AND event = 'trimmed'"
PROCEDURE_FINISHED = (
    "UPDATE {s}.procedures SET status = ?, result = ?, error = ?, attempts = ? "
    "WHERE key = ? AND status = 'pending'"
)
PROCEDURE_EXISTS = "SELECT 1 FROM {s}.procedures WHERE key = ?"
PROCEDURE_RETRY = (
    "UPDATE {s}.procedures SET attempts = ?, next_attempt_at = ? "
    "WHERE key = ? AND status = 'pending'"
)
INSERT_EXTERNAL = (
    "INSERT INTO {s}.external (kind, workflow_id, name, payload, created_at) "
    "VALUES (?, ?, ?, ?, ?)"
)
SET_META = (
    "INSERT INTO {s}.meta (key, value) VALUES (?, ?) ON CONFLICT (key) "
    "DO UPDATE SET value = excluded.value"
)
TAKE_META = "DELETE FROM {s}.meta WHERE key = ? RETURNING value"
ADD_PRUNED = (
    "INSERT INTO {s}.meta (key, value) VALUES ('pruned_total', ?) ON CONFLICT (key) "
    "DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + CAST(excluded.value AS BIGINT) "
    "AS TEXT)"
)


class Dialect:
    """How one backend spells the shared SQL.

    Args:
        name: ``"sqlite"`` or ``"postgresql"``, for messages.
        prefix: What ``{s}.`` becomes: ``""``, or the quoted schema and a dot.
        placeholder: ``"?"`` or ``"%s"``.
        fresh: The schema keeps a ``fresh`` column (PostgreSQL: true until the first step, so
            the index of workflows to start names no column a step changes).
        hints: SQLite's ``INDEXED BY`` hints are written (PostgreSQL's planner takes none).
        skip_locked: A prune locks the rows it selects and skips those locked by another.
        arrays: A list of ids goes as one array parameter (``= ANY(?)``), not as ``IN (?, ...)``.
        writable_ctes: Independent writes go as one statement (data-modifying ``WITH``,
            ``together``), one round of the client's and the server's work instead of one each.
        with_work: The query of running workflows with work now (its plan is the backend's).
        binary: What makes a text comparison go by code point (SQLite's default; PostgreSQL's
            ``COLLATE "C"``).
    """

    def __init__(
        self, *, name: str, prefix: str, placeholder: str, fresh: bool, hints: bool,
        skip_locked: bool, arrays: bool, with_work: str, binary: str, writable_ctes: bool = False,
    ) -> None:
        self.name = name
        self.prefix = prefix
        self.placeholder = placeholder
        self.fresh = fresh
        self.hints = hints
        self.skip_locked = skip_locked
        self.arrays = arrays
        self.with_work = with_work
        self.binary = binary
        self.writable_ctes = writable_ctes
        self._texts: dict[str, str] = {}
        self._deletes: dict[tuple[str, ...], list[str]] = {}
        # The statements with a part only one schema has, as templates.
        self.step_running = STEP_RUNNING.replace("{fresh}", ", fresh = false" if fresh else "")
        self.step_ending = STEP_ENDING.replace("{fresh}", ", fresh = false" if fresh else "")
        self.insert_workflow = _INSERT_WORKFLOW.replace(
            "{fresh}", ", fresh" if fresh else ""
        ).replace("{fresh_value}", ", ?" if fresh else "")

    def sql(self, template: str) -> str:
        """``template`` in this dialect (cached: the templates are a finite set)."""
        text = self._texts.get(template)
        if text is None:
            text = template.replace("{s}.", self.prefix)
            if self.placeholder != "?":
                # psycopg reads % as the start of a placeholder: the shared SQL has no other %.
                assert "%" not in text, text
                text = text.replace("?", self.placeholder)
            self._texts[template] = text
        return text

    def delete_of_workflow(self, tables: Sequence[str]) -> list[str]:
        """The statements (templates) that delete one workflow's rows from each of ``tables``, by
        their ``workflow_id`` column, one per table. Each ``?`` of them is the workflow's id."""
        key = tuple(tables)
        found = self._deletes.get(key)
        if found is None:
            found = self._deletes[key] = [f"DELETE FROM {{s}}.{table} WHERE workflow_id = ?" for table in key]
        return found

    def together(self, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, tuple[Any, ...]]]:
        """``statements`` (templates and their parameters: INSERTs, UPDATEs and DELETEs that
        return nothing and touch rows none of the others touches) as few statements as the
        dialect allows: one (a data-modifying ``WITH``, ``writable_ctes``) or each on its own.
        All of them see the rows as they were before any of them ran."""
        if not self.writable_ctes or len(statements) < 2:
            return list(statements)
        *first, (last, last_params) = statements
        text = "WITH " + ", ".join(f"s{k} AS ({t})" for k, (t, _p) in enumerate(first)) + " " + last
        params: tuple[Any, ...] = ()
        for _t, p in first:
            params += p
        return [(text, params + last_params)]

    def indexed(self, index: str) -> str:
        """A hint to read a table through ``index`` (SQLite), or nothing."""
        return f" INDEXED BY {index}" if self.hints else ""

    def any_of(self, column: str, values: Sequence[Any], kind: str) -> tuple[str, tuple[Any, ...]]:
        """A condition ``column`` is one of ``values`` (of SQL type ``kind``), and its params."""
        if self.arrays:
            items = [str(v) for v in values] if kind == "text" else list(values)
            return f"{column} = ANY(?::{kind}[])", (items,)
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)


# Running workflows with something to do now. Every arm starts from a small set (never-stepped
# workflows by their partial index, control messages by their partial index, buffered signals,
# finished procedures by their partial index) and reaches the workflows table by primary key;
# on SQLite, CROSS JOIN pins that order so the planner never walks the (huge) set of idle
# workflows.
SQLITE_WITH_WORK = """
SELECT id FROM workflows INDEXED BY workflows_fresh WHERE status = 'running' AND step_seq = 0
UNION
SELECT i.workflow_id FROM inbox AS i INDEXED BY inbox_control
  CROSS JOIN workflows AS w ON w.id = i.workflow_id
  WHERE i.kind != 'signal' AND w.status = 'running'
UNION
SELECT i.workflow_id FROM inbox AS i
  CROSS JOIN waits AS s ON s.workflow_id = i.workflow_id AND s.name = i.name
  CROSS JOIN workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'signal' AND w.status = 'running'
UNION
SELECT p.workflow_id FROM procedures AS p INDEXED BY procedures_finished
  CROSS JOIN workflows AS w ON w.id = p.workflow_id
  WHERE p.status != 'pending' AND w.status = 'running'
"""
PG_WITH_WORK = """
SELECT id FROM {s}.workflows WHERE status = 'running' AND fresh
UNION
SELECT i.workflow_id FROM {s}.inbox AS i JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind != 'signal' AND w.status = 'running'
UNION
SELECT i.workflow_id FROM {s}.inbox AS i
  JOIN {s}.waits AS a ON a.workflow_id = i.workflow_id AND a.name = i.name
  JOIN {s}.workflows AS w ON w.id = i.workflow_id
  WHERE i.kind = 'signal' AND w.status = 'running'
UNION
SELECT p.workflow_id FROM {s}.procedures AS p JOIN {s}.workflows AS w ON w.id = p.workflow_id
  WHERE p.status != 'pending' AND w.status = 'running'
"""

SQLITE = Dialect(
    name="sqlite", prefix="", placeholder="?", fresh=False, hints=True, skip_locked=False,
    arrays=False, with_work=SQLITE_WITH_WORK, binary="",
)


def postgresql(quoted_schema: str) -> Dialect:
    """The dialect of a PostgreSQL store whose tables are in ``quoted_schema``."""
    return Dialect(
        name="postgresql", prefix=f"{quoted_schema}.", placeholder="%s", fresh=True, hints=False,
        skip_locked=True, arrays=True, with_work=PG_WITH_WORK, binary=' COLLATE "C"',
        writable_ctes=True,
    )
