"""``wf``: inspect and drive the workflows in a database file, from the command line.

Reads go straight to the file. Actions (signal, cancel, fire-timer) are appended as requests that the
system running on the file carries out within a second; with none running, they wait in the file
for the next system to open it.
``prune`` deletes finished workflows: itself when no system owns the file, else by a request to the
owner, whose answer it waits for. Payloads from the command line are JSON, never pickle.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from persistence import (
    DatabaseLocked,
    PersistenceError,
    SqliteStore,
    Store,
    loads,
    open_store,
)
from persistence._open import check_scheme
from persistence._types import NodeRow
from workflows._errors import check_printable

from . import _talk
from ._cli_shared import (
    CliError,
    NotStandardJson,
    _open,
    _resolve_type,
    _short,
    _shown,
    _signal_names_of,
    awaited_text,
    check_request,
    other_kind_note,
    owner_of,
    strict_json,
    type_names,
    value_text,
    wait_location,
    why_missing,
)
from ._errors import ActorSystemError, AskFailed, WorkflowNotRunning, span
from ._info import info_from_record, utc_text, waiting_text
from ._wait import unpack_step


def _ts(t: float | None) -> str:
    """A time as wf prints it: UTC, marked Z as the due times of a wait and wf nodes are. Never
    fails: a time past the year 9999 (a timer armed thousands of years ahead) is written too."""
    if t is None:
        return "-"
    return utc_text(t)


def _safe_loads(blob: bytes | None) -> Any:
    if blob is None:
        return None
    try:
        return loads(blob)
    except Exception as e:
        return f"<cannot load: {e}>"


def _jsonable(v: Any) -> Any:
    """``v`` if it is strict JSON, else its ``repr``: a NaN or an infinity (which ``json``
    writes as ``NaN``/``Infinity``, refused by JSON parsers other than Python's) included."""
    try:
        json.dumps(v, allow_nan=False)
        return v
    except (TypeError, ValueError, RecursionError):
        return value_text(v)


def _detail_text(detail: str) -> str:
    """A history event's fields, written one way whichever table kept them (a step's line moved
    to the history table was written without spaces)."""
    try:
        return json.dumps(json.loads(detail))
    except ValueError:
        return detail


def _record_or_fail(store: Store, wid: str, db: str) -> Any:
    rec = store.load_workflow(wid)
    if rec is None:
        raise CliError(f"no workflow with id {wid!r} in {db}: {why_missing(store, wid)}. List them with "
                       f"`wf list --db {db}`")
    return rec


DEFAULT_LIMIT = 50  # wf list
CHILDREN_SHOWN = 10  # wf show, without --all-children
VALUE_SHOWN = 2000  # characters of a payload, result or error message wf show prints, without --full


def _clip(text: str, full: bool) -> str:
    """``text``, or its start and how long it is, with how to see it whole."""
    if full or len(text) <= VALUE_SHOWN:
        return text
    return f"{text[:VALUE_SHOWN]}... (cut: {len(text):,} characters in all; --full or --json shows it whole)"


def cmd_list(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        raise CliError(f"--limit must be 0 (no limit) or more, got {args.limit}")
    limit = DEFAULT_LIMIT if args.limit is None else (min(args.limit, 2**62) or None)  # (an int SQL holds)
    store = _open(args.db)
    try:
        counts = store.count_workflows()
        wtype = _resolve_type(counts, args.type, _shown(args.db)) if args.type is not None else None
        total = sum(n for (t, st), n in counts.items() if wtype in (None, t) and args.status in (None, st))
        recs = store.list_workflows(status=args.status, type=wtype, limit=limit)
        more = total - len(recs)
        note = (
            f"... {more} more of {total} (oldest first); --limit N shows N, --limit 0 all"
            + ("" if args.type or args.status else ", --type/--status filter them")
        )
        if args.json:
            # The fields of ``WorkflowInfo`` (``published`` is in ``wf show``), as ``wf show`` writes them.
            out = [
                {
                    "id": r.id,
                    "type": r.type,
                    "status": r.status,
                    "parent_id": r.parent_id,
                    "waiting_on": json.loads(r.waiting_on) if r.waiting_on and r.status == "running" else None,
                    "created_at": r.created_at,
                    "updated_at": r.updated_at,
                    "result": _jsonable(info.result),
                    "error": info.error,
                    "test_mode": r.test_mode,
                }
                for r, info in ((r, info_from_record(r)) for r in recs)
            ]
            print(json.dumps(out, indent=2))
            if more > 0:
                print(f"wf: {note}", file=sys.stderr)  # stdout stays one JSON document
            return 0
        if not recs:
            what = " ".join(x for x in (args.status, f"of type {wtype}" if wtype else None) if x)
            print(f"no {what + ' ' if what else ''}workflows in {_shown(args.db)}")
            return 0
        # A type's name alone, unless another type in the database has that name too.
        shown = type_names(t for t, _ in counts)
        w_id = max(len("ID"), *(len(r.id) for r in recs))
        w_ty = max(len("TYPE"), *(len(shown.get(r.type, r.type)) for r in recs))
        print(f"{'ID':<{w_id}}  {'TYPE':<{w_ty}}  {'STATUS':<9}  {'UPDATED':<20}  WAITING ON")
        for r in recs:
            waiting = waiting_text(r.waiting_on) if r.status == "running" else ""
            ty = shown.get(r.type, r.type)
            print(f"{r.id:<{w_id}}  {ty:<{w_ty}}  {r.status:<9}  {_ts(r.updated_at):<20}  {waiting or ''}")
        if more > 0:
            print(note)
        return 0
    finally:
        store.close()


def _limit_waits(store: Store, workflow_id: str) -> dict[str, str]:
    """{procedure key: the limit it waits for} of the workflow's calls (``@procedure(concurrency=,
    rate=)``)."""
    from persistence._limits import waits_of
    from persistence._sqlstore import SqlStore

    return waits_of(store, workflow_id) if isinstance(store, SqlStore) else {}


def cmd_show(args: argparse.Namespace) -> int:
    store = _open(args.db)
    try:
        rec = _record_or_fail(store, args.id, _shown(args.db))
        published = {k: _safe_loads(v) for k, v in store.published_of([rec.id]).get(rec.id, {}).items()}
        info = info_from_record(rec, published)
        timers = store.timers(rec.id)
        inbox = store.inbox(rec.id)
        procs = store.procedures(rec.id)
        limited = _limit_waits(store, rec.id) if procs else {}
        if args.history < 0:
            raise CliError(f"--history must be 0 or more, got {args.history}")
        if args.before is not None and args.before < 0:
            raise CliError(f"--before must be a history position, 0 or more, got {args.before}")
        children = store.list_workflows(parent_id=rec.id)
        by_status = collections.Counter(c.status for c in children)
        shown_children = children if args.all_children else children[:CHILDREN_SHOWN]
        # One more than asked: whether older events are left out. The page ends before
        # position ``--before`` (each event's place in the whole history, as ref.history() has it).
        if args.history:
            history, first = store.history_page(rec.id, args.history + 1, args.before)
            unshown = 0
        else:
            # --history 0 shows none: how many there are (the page of none ends where the events
            # before --before end; that before position 0 starts at the oldest kept).
            history, end = store.history_page(rec.id, 0, args.before)
            first = end
            unshown = end - store.history_page(rec.id, 0, 0)[1]
        cut = len(history) > args.history
        if cut:
            history, first = history[1:], first + 1
        cut = cut or unshown > 0  # (--history 0 left every one out)
        # Every step is kept, unless the system keeps the newest few (``history_limit``).
        oldest = store.oldest_step_kept(rec.id) if rec.step_seq else None
        steps_not_kept = max(0, (oldest or 1) - 1)
        # Requests wf or the web view queued that the system has not carried out yet.
        queued = [x for x in store.take_external(0) if x.workflow_id == rec.id]
        nobody = _nobody_runs(store, args.db) if queued and owner_of(store) is None else None
        data = {
            "id": rec.id,
            "type": rec.type,
            "status": rec.status,
            "parent_id": rec.parent_id,
            "test_mode": rec.test_mode,
            "created_at": rec.created_at,
            "updated_at": rec.updated_at,
            "steps": rec.step_seq,
            "waiting_on": json.loads(rec.waiting_on) if rec.waiting_on and rec.status == "running" else None,
            "timers": [{"id": t.id, "name": t.name, "due_at": t.due_at} for t in timers],
            "buffered": [
                {"seq": m.seq, "kind": m.kind, "name": m.name, "payload": _jsonable(_safe_loads(m.payload)), "at": m.created_at}
                for m in inbox
            ],
            "procedures": [
                {"key": p.key, "function": p.function, "status": p.status, "attempts": p.attempts,
                 "waiting_for_limit": limited.get(p.key)} for p in procs
            ],
            "children": [{"id": c.id, "type": c.type, "status": c.status} for c in shown_children],
            "children_by_status": dict(sorted(by_status.items())),
            "result": _jsonable(info.result),
            "error": info.error,
            "published": {k: _jsonable(v) for k, v in published.items()},
            "history": [
                {"position": first + i, "seq": h.seq, "at": h.at, "event": h.event, "detail": json.loads(h.detail or "null")}
                for i, h in enumerate(history)
            ],
            "history_cut": cut,
            "steps_not_kept": steps_not_kept,
            "queued": [{"seq": x.seq, "kind": x.kind, "name": x.name, "at": x.created_at} for x in queued],
        }
        if args.json:
            print(json.dumps(data, indent=2))
            return 0
        print(f"workflow  {rec.id}")
        print(f"type      {rec.type}")
        print(f"status    {rec.status}" + ("  (test mode)" if rec.test_mode else ""))
        if rec.parent_id:
            print(f"parent    {rec.parent_id}")
        print(f"created   {_ts(rec.created_at)}   updated {_ts(rec.updated_at)}   steps {rec.step_seq}")
        if rec.status == "running":
            print(f"waiting   {info.waiting_on or '-'}")
            for p in procs:
                if p.key in limited:
                    print(f"          (procedure {p.function} is waiting for its {limited[p.key]} limit)")
        if queued:
            print("queued" + (f" ({nobody}: the next one to start carries them out)" if nobody else
                              " (not carried out yet)"))
            for x in queued:
                name = f" {x.name}" if x.name else ""
                print(f"  #{x.seq} {x.kind.replace('_', ' ')}{name}, queued {_ts(x.created_at)}")
        if timers:
            print("timers")
            for t in timers:
                print(f"  {t.name:<20} due {_ts(t.due_at)}")
        if inbox:
            print("buffered")
            for m in inbox:
                print(f"  #{m.seq} {m.kind} {m.name} {_clip(value_text(_safe_loads(m.payload)), args.full)}")
        if procs:
            print("procedures")
            for p in procs:
                wait = f", waiting for its {limited[p.key]} limit" if p.key in limited else ""
                if p.status == "pending" and p.next_attempt_at > time.time():
                    wait += f", next attempt at {_ts(p.next_attempt_at)}"  # in its retry's backoff
                print(f"  {p.function} [{p.status}, {p.attempts} attempt(s){wait}] key {p.key}")
        if children:
            counts = ", ".join(f"{n} {st}" for st, n in sorted(by_status.items()))
            print(f"children  {len(children)}: {counts}")
            for c in shown_children:
                print(f"  {c.id} ({_short(c.type)}) {c.status}")
            if len(shown_children) < len(children):
                print(f"  ... {len(children) - len(shown_children)} more (--all-children lists them all)")
        if published:
            print("published")
            for k, v in published.items():
                print(f"  {k:<20} {_clip(value_text(v), args.full)}")
        if rec.status == "completed":
            print(f"result    {_clip(value_text(info.result), args.full)}")
        if info.error:
            print(f"error     {info.error.get('type')}: {_clip(str(info.error.get('message')), args.full)}")
            tb = info.error.get("traceback")
            if isinstance(tb, str) and tb.strip():
                if args.full:
                    print("traceback")
                    for line in tb.rstrip().splitlines():
                        print(f"  {line}")
                else:
                    frames = [line.strip() for line in tb.splitlines() if line.startswith("  File ")]
                    if frames:  # where it was raised: the innermost frame
                        print(f"at        {frames[-1]} (--full prints the traceback)")
        if unshown:
            before = f" before position {args.before}" if args.before is not None else ""
            print(f"history ({unshown:,} event{'' if unshown == 1 else 's'}{before}, none shown with "
                  f"--history 0; --history N shows the newest N)")
        if history:
            before = f" before position {args.before}" if args.before is not None else ""
            print("history" + (
                f" (the newest {len(history)} events{before}; --history N shows more, "
                f"--before {first} the ones before)" if cut else
                f" (the events{before})" if before else ""
            ))
            for h in history:
                print(f"  {_ts(h.at)}  {h.event:<14} {_detail_text(h.detail)}")
        if steps_not_kept and not cut and args.history:
            print(
                f"  (steps 1 to {steps_not_kept} are not kept: the system that ran it keeps the newest "
                f"steps of each workflow, ActorSystem(history_limit=...))"
            )
        return 0
    finally:
        store.close()


def _post(args: argparse.Namespace, kind: str, name: str | None, payload: str | None) -> int:
    store = _open(args.db)
    try:
        rec = _record_or_fail(store, args.id, _shown(args.db))
        check_request(store, rec, kind, name)
        if kind == "signal" and name is not None:
            _warn_if_never_awaited(rec, name, "a signal")
        seq = store.post_external(kind, rec.id, name, payload, at=time.time())
        try:
            owner = owner_of(store)
        except PersistenceError:  # queued all the same; who carries it out cannot be told now
            owner, unknown = None, True
        else:
            unknown = False
        if owner is not None:
            node = f"node {owner['node_id']}, " if owner.get("node_id") else ""
            when = f"the system running on it ({node}pid {owner.get('pid')}) carries it out within a second"
        elif unknown:
            when = "a system running on it carries it out within a second, or the next one to start"
        else:
            when = f"{_nobody_runs(store, args.db)}: the request waits in the {_kept_in(store)} for the next one to start"
        # The request's number in the queue of wf's requests, which is not the number the
        # signal gets in the workflow's inbox (`wf show` lists it under buffered).
        what = kind.replace("_", " ") + (f" {name!r}" if name is not None else "")
        print(f"queued {what} for {rec.id} (request #{seq}): {when}")
        return 0
    finally:
        store.close()


class Interrupted(Exception):
    """Ctrl-C while wf waited for a request it queued, which stays queued: what to run to
    see it through (exit status 130, as a shell gives an interrupted command)."""


def _nobody_runs(store: Store, db: str) -> str:
    """What an operator is told when no system carries a request out now: no process has the
    file open, or no node of a cluster runs on the URL."""
    if isinstance(store, SqliteStore):
        return f"no system has {_shown(db)} open"
    return f"no node runs on {_shown(db)}"


def _kept_in(store: Store) -> str:
    return "file" if isinstance(store, SqliteStore) else "database"


def _warn_if_never_awaited(rec: Any, name: str, what: str = "a signal") -> None:
    """Warn on stderr when the workflow's code never awaits a signal (or request) ``name``
    (SPEC: the compiler knows every literal signal and request name). It is queued all the same."""
    at = wait_location(rec.waiting_on)
    names = _signal_names_of(rec.type, at)
    if names is None:
        return
    if name in names:
        note = other_kind_note(rec.type, at, name, "signal" if what == "a signal" else "request")
        if note is not None:
            print(f"wf: warning: {note}. Queued anyway.", file=sys.stderr)
        return
    awaited = awaited_text(rec.type, at, "signal" if what == "a signal" else "request")
    print(
        f"wf: warning: the code of workflow {rec.id!r} ({rec.type}) never awaits {what} named "
        f"{name!r}; {awaited}. Queued anyway: it stays in the workflow's inbox.",
        file=sys.stderr,
    )


def _payload(text: str | None, example: str) -> Any:
    """The JSON payload of a command line (None when left out), standard JSON only: a NaN or an
    infinity (``1e999``) is refused, as other JSON readers refuse it."""
    if text is None:
        return None
    try:
        return strict_json(text)
    except json.JSONDecodeError as e:
        raise CliError(f"payload is not valid JSON ({e.msg} at column {e.colno}): {text!r}; e.g. {example}") from e
    except NotStandardJson as e:
        raise CliError(f"payload {text[:80]!r} {e}") from e


def cmd_signal(args: argparse.Namespace) -> int:
    value = _payload(args.payload, "'{\"amount\": 100}'")
    return _post(args, "signal", args.name, json.dumps(value))


def _reply_json(reply: Any) -> str | None:
    """``reply`` as standard JSON, or None where JSON would not say it: a NaN, an infinity, a
    value JSON has no type for (a set, bytes, an object), or a dict key that is not a string
    (which ``json`` turns into one: ``{1: "a"}`` would print as ``{"1": "a"}``). A tuple is an
    array, as every JSON writer has it."""
    def keys_are_text(v: Any) -> bool:
        if isinstance(v, dict):
            return all(isinstance(k, str) and keys_are_text(x) for k, x in v.items())
        if isinstance(v, list | tuple):
            return all(keys_are_text(x) for x in v)
        return True

    try:
        text = json.dumps(reply, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if keys_are_text(reply) else None


def cmd_ask(args: argparse.Namespace) -> int:
    """Ask a workflow (through the system that runs it, as every `wf` request goes) and print
    its reply as JSON (repr where it is not JSON); a refusal exits 1 with the replied error."""
    value = _payload(args.payload, "'50'")
    if args.ask_id is not None:
        if not args.ask_id:
            raise CliError("--ask-id must name the ask, got ''; leave it out for a new ask")
        try:
            check_printable(args.ask_id, "--ask-id")
        except ValueError as e:
            raise CliError(str(e)) from e
    store = _open(args.db)
    try:
        rec = _record_or_fail(store, args.id, _shown(args.db))
        ask_id = args.ask_id or _talk.new_ask_id()
        row = store.ask(rec.id, ask_id)
        if row is not None and row.name != args.name:
            raise CliError(
                f"ask id {ask_id} of {rec.id} was used for an ask {row.name!r}, not {args.name!r}: an ask "
                f"id names one ask; leave --ask-id out for a new one"
            )
        if row is None:
            check_request(store, rec, "ask", args.name)
            _warn_if_never_awaited(rec, args.name, "a request")
            store.post_external("ask", rec.id, args.name, json.dumps({"ask_id": ask_id, "payload": value}), at=time.time())
        deadline = time.monotonic() + args.timeout
        pause = 0.02
        again = (f"`wf ask {shlex.quote(rec.id)} {shlex.quote(args.name)} --ask-id {shlex.quote(ask_id)} "
                 f"--db {shlex.quote(_shown(args.db))}`")
        try:
            while row is None or not row.answered:
                if time.monotonic() >= deadline:
                    now = store.load_workflow(rec.id)
                    held = waiting_text(now.waiting_on) if now is not None and now.status == "running" else None
                    raise CliError(
                        f"no reply to ask {args.name!r} from {rec.id} within {args.timeout:g}s (ask id {ask_id}); "
                        f"the request stays: {again} waits for its reply"
                        + ("" if owner_of(store) else
                           f" ({_nobody_runs(store, args.db)}: the next one to start carries it out)")
                        + (f"; the workflow is held as {held}" if held and held.startswith("BLOCKED (") else "")
                    )
                time.sleep(pause)  # the CLI shares no notification with the system: a short reread
                pause = min(pause * 2, 0.25)
                row = store.ask(rec.id, ask_id)
                if row is None and store.running(rec.id) is False and store.ask(rec.id, ask_id) is None:
                    raise CliError(f"workflow {rec.id!r} finished before it took ask {args.name!r}")
        except KeyboardInterrupt:
            # The ask is durable: it is answered all the same; its id fetches that reply.
            raise Interrupted(
                f"ask {args.name!r} of {rec.id} (ask id {ask_id}) stays queued and is answered all "
                f"the same: {again} waits for its reply without asking again"
            ) from None
        try:
            reply = _talk.ask_outcome(row)
        except (AskFailed, WorkflowNotRunning) as e:
            print(f"wf: {e}", file=sys.stderr)
            return 1
        text = _reply_json(reply)
        if text is None:
            # Not JSON: its repr (not a JSON string, which a string reply prints), said on stderr
            # so that what a script reads on stdout stays the reply alone.
            print(value_text(reply))
            print(f"wf: note: the reply ({type(reply).__name__}) is not JSON; printed as Python's repr",
                  file=sys.stderr)
        else:
            print(text)
        return 0
    finally:
        store.close()


def cmd_cancel(args: argparse.Namespace) -> int:
    return _post(args, "cancel", None, json.dumps(args.reason))


def cmd_fire_timer(args: argparse.Namespace) -> int:
    return _post(args, "fire_timer", args.name, None)


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The largest --older-than: 1,000 years, which keeps the cut-off a date (wf prints it).
MAX_AGE_DAYS = 365_000
# Workflows deleted per transaction by `wf prune` on a file no system owns.
PRUNE_BATCH = 1000


def wait_seconds(text: str) -> float:
    """``--timeout``: seconds to wait, a finite number more than 0 (``nan`` waited for good)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a number of seconds, e.g. 30 or 0.5; got {text!r}") from None
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds more than 0, got {text!r}")
    return value


def duration(text: str) -> float:
    """``--older-than``: a number and a unit (s, m, h, d), as seconds."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"is an age, which cannot be negative: got {text!r}; e.g. 90s, 30m, 1h or 7d")
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", text)
    if m is None and re.fullmatch(r"\s*0+(?:\.0*)?\s*", text):
        return 0.0  # no age is the same in every unit: every finished workflow
    if m is None:
        raise argparse.ArgumentTypeError(
            f"takes a number and a unit (s, m, h or d), e.g. 90s, 30m, 1h or 7d; got {text!r}"
        )
    age = float(m.group(1)) * UNITS[m.group(2)]
    if not age <= MAX_AGE_DAYS * UNITS["d"]:  # (an infinity too: digits past a float's range)
        raise argparse.ArgumentTypeError(
            f"is too large: got {text.strip()[:40]!r}; an age is accepted up to {MAX_AGE_DAYS}d "
            f"(1,000 years; {MAX_AGE_DAYS * 24}h)"
        )
    return age


def _count(n: int) -> str:
    return f"{n:,} finished workflow{'' if n == 1 else 's'}"


def cmd_prune(args: argparse.Namespace) -> int:
    check_scheme(args.db)
    url = args.db.startswith(("postgresql://", "postgres://"))
    if args.db == ":memory:" or (not url and not Path(args.db).exists()):
        raise CliError(f"database {_shown(args.db)!r} does not exist (give --db PATH; the default is workflows.db)")
    here = ""
    store: Store | None = None
    if url:
        # A cluster's schema is never locked: a node that runs on it carries the prune out
        # (its leader, between its steps), as the owner of a file does. With none, this prunes
        # on a connection of its own: wf never joins the cluster (no node row of its own).
        store = _open(args.db)
        try:
            node = owner_of(store)
        except PersistenceError as e:
            store.close()
            raise CliError(str(e)) from e
        if node is not None:
            store.close()
            return _prune_through_owner(args, node.get("pid"), node.get("node_id"))
        here = " (no node runs on it: pruned here, without joining the cluster)"
    else:
        # Read first, as every other command: a file with no actorflow schema (an empty file
        # included) is refused, not made an actorflow database by opening it as its owner.
        _open(args.db).close()
    try:
        store = store or open_store(args.db, owner=True)
    except DatabaseLocked as e:
        return _prune_through_owner(args, e.pid)
    except (PersistenceError, ValueError) as e:  # ValueError: a URL that cannot be read
        raise CliError(str(e)) from e
    # No system owns the file: prune here, batch by batch (no system can open it meanwhile).
    # Ages are measured from the later of this machine's clock and the file's newest finish: a
    # system on an accelerated clock (the demo's) stamps its workflows ahead of the wall clock.
    try:
        wall = time.time()
        newest = store.newest_finished()
        now = max(wall, newest or wall)
        cutoff = now - args.older_than
        total = 0
        while True:
            n = len(store.prune_finished(cutoff, PRUNE_BATCH))
            total += n
            if n < PRUNE_BATCH:
                break
        kept = store.tombstone_count()
    finally:
        store.close()
    ahead = f" (the file's clock is ahead of this machine's: ages measured from its newest finish, {_ts(now)})" if now > wall else ""
    print(f"pruned {_count(total)} that finished before {_ts(cutoff)} from {_shown(args.db)}{ahead}{here}; "
          f"{_ids_kept(kept)}")
    return 0


def _prune_through_owner(args: argparse.Namespace, pid: object, node_id: object = None) -> int:
    """A system owns the file (or a node runs on the schema): ask it (a request it carries out
    batch by batch between its workflows' steps, on its own clock) and wait for its answer."""
    store = _open(args.db)
    try:
        who = f"the running system (pid {pid})" if pid else "the running system"
        if node_id is not None:
            who = f"the running system (pid {pid}, node {node_id}; the cluster's leader prunes)"
        seq = store.post_external("prune", "", None, json.dumps({"older_than": args.older_than}), at=time.time())
        deadline = time.monotonic() + args.timeout
        try:
            while True:
                answer = store.take_external_result(seq)
                if answer is not None:
                    break
                if time.monotonic() >= deadline:
                    raise CliError(
                        f"{who} has not finished prune request #{seq} within {args.timeout:g}s; it goes "
                        f"on by itself (or at the system's next start). Check with `wf list --db {_shown(args.db)}`."
                    )
                time.sleep(0.1)
        except KeyboardInterrupt:
            raise Interrupted(
                f"prune request #{seq} stays queued: {who} carries it out all the same. Check with "
                f"`wf list --db {shlex.quote(_shown(args.db))}`."
            ) from None
        kept = store.tombstone_count()
    finally:
        store.close()
    result = json.loads(answer)
    if "error" in result:
        raise CliError(f"{who} refused the prune request: {result['error']}")
    print(f"pruned {_count(int(result['pruned']))} that finished more than {span(args.older_than)} ago, "
          f"through {who}, on its clock; {_ids_kept(kept)}")
    return 0


def _ids_kept(n: int) -> str:
    return (f"{n:,} id{'' if n == 1 else 's'} of pruned workflows kept taken (starting one raises "
            f"WorkflowPruned for the system's id_retention, unless start(..., reuse_id=True))")


def _upgrade_row(rec: Any) -> dict[str, Any]:
    """What would happen to running workflow ``rec`` if a system with the loaded code loaded it."""
    from workflows._compiler import check_upgrade
    from workflows._errors import CheckpointError, UnknownWorkflowType, VersionMismatch

    row: dict[str, Any] = {"id": rec.id, "type": rec.type, "stored": rec.fingerprint}
    try:
        up = check_upgrade(unpack_step(rec.continuation)[0])
    except (UnknownWorkflowType, VersionMismatch, CheckpointError) as e:
        row.update(outcome="held" if isinstance(e, VersionMismatch) else "unknown",
                   reasons=[str(e)])
        return row
    row["loaded"] = up.loaded
    if not up.needed:
        row["outcome"] = "unchanged"
        return row
    row["frames"] = up.detail()["frames"]
    if up.possible:
        row["outcome"] = "moves"
        row["how"] = ",".join(sorted({f.how for f in up.frames if f.how != "unchanged"}))
        moved = [f for f in up.frames if f.how != "unchanged"]
        row["at"] = "; ".join(f.summary() for f in moved)
    else:
        row["outcome"] = "held"
        row["reasons"] = up.reasons()
    return row


def cmd_upgrade(args: argparse.Namespace) -> int:
    if not args.dry_run:
        raise CliError(
            "wf upgrade only reports what would happen (give --dry-run): a running workflow whose "
            "code changed moves onto the new code when a system with that code loads it (when the "
            "system starts, or at its next message), before its next step"
        )
    # The application's code is what decides: import it as the application would.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in args.imports or []:
        try:
            importlib.import_module(module)
        except Exception as e:
            raise CliError(f"--import {module}: importing it failed: {type(e).__name__}: {e}") from e
    store = _open(args.db)
    try:
        counts = store.count_workflows()
        wtype = _resolve_type(counts, args.type, _shown(args.db)) if args.type is not None else None
        rows = [_upgrade_row(r) for r in store.list_workflows(status="running", type=wtype)]
    finally:
        store.close()
    tally = collections.Counter(r["outcome"] for r in rows)
    if args.json:
        print(json.dumps({"workflows": rows, "counts": dict(tally)}, indent=2))
        return 0
    for r in rows:
        if r["outcome"] == "moves":
            print(f"would move ({r['how']}): {r['id']} ({_short(r['type'])}) {r['stored'][:12]} -> "
                  f"{r['loaded'][:12]}: {r['at']}")
    for r in rows:
        if r["outcome"] in ("held", "unknown"):
            what = "held" if r["outcome"] == "held" else "code missing"
            print(f"{what}: {r['id']} ({_short(r['type'])}): {' | '.join(r['reasons'])}")
    print(f"{tally['moves']} would move, {tally['held']} would stay held, {tally['unchanged']} run the "
          f"loaded code already, {tally['unknown']} whose code cannot be found "
          f"(nothing was changed in {_shown(args.db)})")
    return 0


def cmd_nodes(args: argparse.Namespace) -> int:
    store = _open(args.db)
    try:
        report = getattr(store, "nodes", None)
        solo = not callable(report)
        # A SQLite file is a cluster of one: the system that owns it now, if one does (as its
        # ``system.nodes()`` says), holding its one shard.
        nodes = report() if callable(report) else _solo_node(store)
    finally:
        store.close()
    if args.json:
        print(json.dumps([{"node_id": n.node_id, "state": n.state, "shards": n.shards,
                           "heartbeat_age": round(n.heartbeat_age, 3), "started_at": n.started_at,
                           "incarnation": n.incarnation, "pid": n.pid, "host": n.host} for n in nodes],
                         indent=2))
        return 0
    if not nodes:
        print("no system has this SQLite file open now (a SQLite file has one node: the system "
              "that owns it)" if solo else "no node has run on this database yet")
        return 0
    width = max(len("NODE"), *(len(n.node_id) for n in nodes))
    print(f"{'NODE':<{width}}  STATE  SHARDS  HEARTBEAT  STARTED               PROCESS")
    for n in nodes:
        started = _ts(n.started_at)
        age = f"{n.heartbeat_age:.1f}s ago"
        print(f"{n.node_id:<{width}}  {n.state:<5}  {n.shards:>6}  {age:>9}  {started}  {n.pid} on {n.host}")
    return 0


def _solo_node(store: Any) -> list[NodeRow]:
    """The node of a SQLite file: the system that owns it now (none if none does)."""
    owner = store.owner_info() if isinstance(store, SqliteStore) else None
    if not owner:
        return []
    pid, host = owner.get("pid"), owner.get("host")
    node_id = owner.get("node_id")
    started = owner.get("started_at")
    if not isinstance(started, int | float):  # a record written before it told its start
        try:
            started = _dt.datetime.fromisoformat(str(owner.get("since"))).timestamp()
        except ValueError:
            started = 0.0
    return [NodeRow(
        str(node_id) if node_id is not None else f"{host}-{pid}", "", "up", 0.0, float(started),
        pid if isinstance(pid, int) else None, str(host) if host is not None else None, 1,
    )]


def cmd_schedules(args: argparse.Namespace) -> int:
    from ._schedules import print_schedules

    store = _open(args.db)
    try:
        return print_schedules(store, as_json=args.json)
    finally:
        store.close()


def cmd_ui(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise CliError(f"--port must be 1 to 65535, got {args.port}")
    missing = [m for m in ("starlette", "uvicorn", "jinja2", "multipart") if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(
            f"wf ui needs Starlette, uvicorn, Jinja2 and python-multipart, which are not installed "
            f"(no {', '.join(missing)}); install the ui extra from a checkout with pip install -e '.[ui]'"
        )
    from actors._ui import serve

    try:
        serve(args.db, host=args.host, port=args.port, read_only=args.read_only)
    except KeyboardInterrupt:
        pass
    except OSError as e:  # the port is taken, the address is not this machine's
        raise CliError(f"cannot serve on {args.host}:{args.port}: {e}; give another --port or --host") from e
    return 0


def cmd_demo(args: argparse.Namespace, rest: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    if not (root / "examples" / "demo.py").exists():
        raise CliError(
            f"wf demo runs the examples of a source checkout, and none was found next to {root}; "
            "clone the repository and install it with `pip install -e .`"
        )
    check_scheme(args.db)
    directory = Path(args.db).parent
    if not args.db.startswith(("postgresql://", "postgres://")) and not directory.is_dir():
        raise CliError(f"cannot run the demo on {args.db}: the directory {directory} does not exist; "
                       "create it first or pass another --db")
    sys.path.insert(0, str(root))
    # Loaded by name: the examples are an application of the public API, not part of the runtime.
    demo = importlib.import_module("examples.demo")
    argv = ["--db", args.db, *rest]
    try:
        code = int(demo.main(argv) or 0)
    except SystemExit as e:  # its parser: after --help (0), as argparse does; or a mistake (2)
        if not e.code:
            raise
        code = e.code if isinstance(e.code, int) else 1
    # Status 2 is the demo's for a mistake in its options: as every other error of wf, 1.
    return 1 if code == 2 else code


class _Parser(argparse.ArgumentParser):
    """wf's parsers: a mistake in the command line is one line on stderr and status 1, as every
    other error of wf (argparse's own: the usage, then the error, and status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="wf", description="Inspect and drive actorflow workflows in a SQLite file or a PostgreSQL database.")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help: str, default_db: str = "workflows.db", env: bool = True, **kw: Any) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, **kw)
        default = os.environ.get("WF_DB", default_db) if env else default_db
        shown = f"$WF_DB, else {default_db}" if env else default_db
        sp.add_argument("--db", default=default, metavar="PATH_OR_URL",
                        help=f"a SQLite file or a postgresql:// URL (default {shown})")
        return sp

    sp = add("list", "list workflows")
    sp.add_argument("--status", choices=["running", "completed", "failed", "cancelled"])
    sp.add_argument("--type", help="a workflow type: its name as the TYPE column shows it, or module:qualname")
    sp.add_argument("--limit", type=int, default=None,
                    help=f"show at most this many, oldest first (default {DEFAULT_LIMIT}; 0: all)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_list)

    sp = add("show", "show one workflow: state, what it waits for, timers, buffered signals, history")
    sp.add_argument("id")
    sp.add_argument("--history", type=int, default=20, help="how many history events, newest last (default 20)")
    sp.add_argument("--before", type=int, default=None, metavar="POSITION",
                    help="the history events before this position (0 is the first event; --json "
                         "gives each its position): the page before the one shown")
    sp.add_argument("--full", action="store_true",
                    help=f"print payloads, the result and the error whole (cut at {VALUE_SHOWN:,} characters otherwise)")
    sp.add_argument("--all-children", action="store_true",
                    help=f"list every child (default: counts by status and the first {CHILDREN_SHOWN})")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_show)

    sp = add("signal", "send a signal with a JSON payload")
    sp.add_argument("id")
    sp.add_argument("name")
    sp.add_argument("payload", nargs="?", default=None, help="JSON payload (default null)")
    sp.set_defaults(func=cmd_signal)

    sp = add("ask", "ask a workflow (its `await request(NAME)`) with a JSON payload; print its reply")
    sp.add_argument("id")
    sp.add_argument("name")
    sp.add_argument("payload", nargs="?", default=None, help="JSON payload (default null)")
    sp.add_argument("--timeout", type=wait_seconds, default=30.0, help="seconds to wait for the reply (default 30)")
    sp.add_argument("--ask-id", default=None, help="the ask's id: asked again, it prints the stored reply")
    sp.set_defaults(func=cmd_ask)

    sp = add("cancel", "cancel a workflow (its finally blocks run)")
    sp.add_argument("id")
    sp.add_argument("--reason", default=None)
    sp.set_defaults(func=cmd_cancel)

    sp = add("fire-timer", "fire an armed timer now")
    sp.add_argument("id")
    sp.add_argument("name")
    sp.set_defaults(func=cmd_fire_timer)

    sp = add("prune", "delete the finished workflows older than --older-than, with all their rows")
    sp.add_argument("--older-than", dest="older_than", type=duration, required=True, metavar="AGE",
                    help="how long ago they finished: a number and a unit, s m h or d (e.g. 1h, 7d)")
    sp.add_argument("--timeout", type=wait_seconds, default=600.0,
                    help="seconds to wait for a running system to finish the request (default 600)")
    sp.set_defaults(func=cmd_prune)

    sp = add("upgrade", "with --dry-run: which running workflows would move onto the code loaded here, "
             "which would stay held, and why")
    sp.add_argument("--dry-run", dest="dry_run", action="store_true",
                    help="report only (required: workflows move when a system with the new code loads them)")
    sp.add_argument("--type", help="only workflows of this type (as in wf list --type)")
    sp.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                    help="import MODULE first (one that registers workflows under a name=); repeatable")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_upgrade)


    sp = add("nodes", "list the nodes of the cluster on a postgresql:// URL: state, shards, heartbeat "
             "(on a SQLite file: the system that has it open, its one node)")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_nodes)

    sp = add("schedules", "list the schedules: what each starts, when, its next tick and last run")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.set_defaults(func=cmd_schedules)

    sp = add("ui", "serve a web view of the workflows, with actions (needs the ui extra)")
    sp.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only)")
    sp.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765)")
    sp.add_argument("--read-only", dest="read_only", action="store_true",
                    help="serve no action: no signal, cancel or fire-timer, every POST refused")
    sp.set_defaults(func=cmd_ui)

    # The demo parses its own options (--duration, --speed, ...); its --help lists them all.
    # Never $WF_DB: the demo writes its world into the file, which must not be the application's.
    sp = add("demo", "run the game-world demo (Ctrl-C or kill -9 it, run it again: it recovers)", "demo.db",
             env=False, add_help=False)
    sp.set_defaults(func=None)
    return p


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment, not the one there when it was made (a
    redirect or a capture made later; one closed since)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _log_to_stderr() -> None:
    # wf is an application: it configures its own output. The runtime's warnings and errors (the
    # store's, when a file is busy or damaged) go to stderr, never mixed into what wf prints.
    # A program that calls main() and has configured logging keeps its configuration.
    runtime = logging.getLogger("actorflow")
    if runtime.handlers or logging.getLogger().handlers:
        return
    runtime.addHandler(_Stderr())
    runtime.setLevel(logging.WARNING)
    runtime.propagate = False


def _attach_values(argv: list[str]) -> list[str]:
    """``--older-than -5s`` as ``--older-than=-5s``: argparse takes a value that starts with "-"
    (and is not a plain number) for another option, and says only "expected one argument"."""
    out: list[str] = []
    it = iter(argv)
    for a in it:
        if a == "--older-than":
            v = next(it, None)
            if v is not None and v.startswith("-") and v[1:2].isdigit():
                out.append(f"{a}={v}")
                continue
            out.append(a)
            if v is not None:
                out.append(v)
            continue
        out.append(a)
    return out


def _db_first(argv: list[str]) -> list[str]:
    """``wf --db FILE list ...`` as ``wf list --db FILE ...``: ``--db`` is each subcommand's
    option, and a user may well put it first."""
    if len(argv) >= 3 and argv[0] == "--db" and not argv[2].startswith("-"):
        return [argv[2], "--db", argv[1], *argv[3:]]
    if len(argv) >= 2 and argv[0].startswith("--db=") and not argv[1].startswith("-"):
        return [argv[1], argv[0], *argv[2:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    _log_to_stderr()
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["--db"] and len(given) <= 2 or len(given) == 1 and given[0].startswith("--db="):
        parser.error(f"no command after {' '.join(given)}: wf --db game.db list, say")
    args, rest = parser.parse_known_args(_db_first(_attach_values(given)))
    try:
        if args.command == "demo":
            return cmd_demo(args, rest)
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return int(args.func(args))
    except Interrupted as e:
        print(f"wf: interrupted: {e}", file=sys.stderr)
        return 130
    except (CliError, PersistenceError, ActorSystemError) as e:
        # What went wrong with the file or the system, in one line (the messages say what to do).
        print(f"wf: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("wf: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
