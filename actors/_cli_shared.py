"""What ``wf`` and its web view (``actors/_ui``) share: opening a database for a request, the
errors shown to the user, naming a workflow type, checking a request before it is queued, and
reading a workflow's signal names from its source. Both import it; it imports neither."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from persistence import FINISHED, PersistenceError, Store, open_store
from persistence._open import check_scheme
from persistence._urls import display_url
from workflows._compiler._signals import names_in_source
from workflows._errors import check_text

from ._info import types_named, utc_text


class CliError(Exception):
    """A user error: printed without a traceback, exit status 1."""


def _shown(db: str) -> str:
    """``db`` for a message: a PostgreSQL URL without its password."""
    return display_url(db)


def _open(db: str) -> Store:
    check_scheme(db)
    url = db.startswith(("postgresql://", "postgres://"))
    if db != ":memory:" and not url and not Path(db).exists():
        raise CliError(
            f"database {db!r} does not exist (give --db PATH; the default is workflows.db)"
        )
    try:
        return open_store(db, owner=False)
    except (PersistenceError, ValueError) as e:  # ValueError: a URL that cannot be read
        raise CliError(str(e)) from e


def _short(key: str) -> str:
    return key.rpartition(":")[2]


def type_names(types: Any) -> dict[str, str]:
    """{stored type: the name the TYPE column shows}: its name alone (``qualname``) when no other
    of ``types`` has that name, else the full ``module:qualname``, so two types are never shown
    alike (and the name shown is one ``--type`` takes)."""
    types = set(types)
    seen: dict[str, int] = {}
    for t in types:
        seen[_short(t)] = seen.get(_short(t), 0) + 1
    return {t: _short(t) if seen[_short(t)] == 1 else t for t in types}


def _resolve_type(counts: dict[tuple[str, str], int], given: str, db: str) -> str:
    """The stored type ``given`` names: a full ``module:qualname``, or the short name of the TYPE
    column when one type alone has it."""
    types = sorted({t for t, _ in counts})
    if given in types or ":" in given:
        return given
    matches = types_named(types, given)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise CliError(
            f"--type {given!r} is ambiguous in {db}: {', '.join(matches)}; give the full module:qualname"
        )
    known = ", ".join(sorted(type_names(types).values())) or "none"
    raise CliError(f"no workflow type named {given!r} in {db}; the types there: {known}")


def value_text(value: Any) -> str:
    """``repr(value)``, or what the value is where its repr fails (an int of more digits than
    Python writes, a class whose ``__repr__`` raises): a value shown by ``wf`` never ends it
    in a traceback."""
    try:
        return repr(value)
    except Exception as e:
        return f"<{type(value).__name__} that cannot be shown: {type(e).__name__}: {e}>"


class NotStandardJson(ValueError):
    """A payload that Python's ``json`` reads but standard JSON (RFC 8259) does not have: a
    ``NaN``, an ``Infinity``, a number too large for a float (read as an infinity), or an
    integer too long for Python to read."""


def _no_constant(name: str) -> Any:
    raise NotStandardJson(
        f"holds {name}, which is not standard JSON (JSON has no NaN or infinity); send null, a "
        f"finite number or a string instead"
    )


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotStandardJson(
            f"holds the number {text[:40]}, too large for a float (it would be read as an "
            f"infinity, which is not standard JSON); send a smaller number or a string"
        )
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # more digits than int() reads (sys.get_int_max_str_digits())
        raise NotStandardJson(
            f"holds an integer of {len(text.lstrip('-')):,} digits, more than can be read "
            f"here; send it as a string"
        ) from None


def strict_json(text: str) -> Any:
    """``text`` read as standard JSON: ``json.JSONDecodeError`` where it is not JSON at all,
    ``NotStandardJson`` (its message says what it holds) where it is JSON only to Python.
    A payload from the command line or the web view reaches the workflow as exactly what it
    says, and a NaN that other JSON readers refuse is never stored."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite, parse_int=_integer)


def check_request(store: Store, rec: Any, kind: str, name: str | None) -> None:
    """Refuse a request that cannot be carried out (CliError saying why): a signal or an ask
    with an empty name (refused as ``signal()`` and ``ask()`` refuse it), the workflow has
    finished, or a fire-timer names no armed timer. Shared by ``wf`` and ``wf ui``."""
    if kind in ("signal", "ask"):
        if not name:
            raise CliError(f"{kind} name must be a non-empty string, got {name!r}")
        try:
            check_text(name, f"{kind} name")
        except ValueError as e:
            raise CliError(str(e)) from e
    if rec.status in FINISHED:
        raise CliError(
            f"workflow {rec.id!r} has already finished ({rec.status}); nothing to {kind.replace('_', ' ')}"
        )
    if kind == "fire_timer":
        armed = [t.name for t in store.timers(rec.id)]
        if name not in armed:
            listing = ", ".join(repr(a) for a in armed) or "none"
            raise CliError(
                f"workflow {rec.id!r} has no armed timer named {name!r}; armed timers: {listing}"
            )


def owner_of(store: Store) -> dict[str, object] | None:
    """The system running on the store's database (pid, host, since), or None if none runs."""
    info = getattr(store, "owner_info", None)
    owner: dict[str, object] | None = info() if callable(info) else None
    return owner


def _module_file(module: str) -> Path | None:
    """The source file of ``module``, found on disk without importing anything: in the current
    directory (an application's checkout, where wf is usually run), on ``sys.path``, or in the
    checkout wf itself comes from (the examples of ``wf demo``)."""
    parts = module.split(".")
    for base in (os.getcwd(), *sys.path, str(Path(__file__).resolve().parent.parent)):
        root = Path(base or ".").joinpath(*parts)
        for candidate in (root.parent / f"{parts[-1]}.py", root / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


_AT_FILE = re.compile(r"(.+?\.py):\d+(?:\s|$)")


def wait_location(waiting_on: str | None) -> str | None:
    """Where a workflow's stored wait is (``auction.py:15 await ...``), or None."""
    try:
        at = json.loads(waiting_on).get("at") if waiting_on else None
    except (ValueError, AttributeError):
        return None
    return at if isinstance(at, str) else None


def _script_file(at: str | None) -> Path | None:
    """The script a workflow stored under ``__main__`` comes from: the file its wait is ``at``
    (``auction.py:15 await ...``), found as a module's file is."""
    match = _AT_FILE.match(at) if at else None
    if match is None:
        return None
    name = Path(match.group(1))
    if name.is_absolute():
        return name if name.is_file() else None
    for base in (os.getcwd(), *sys.path):
        candidate = Path(base or ".") / name
        if candidate.is_file():
            return candidate
    return None


SIGNAL_COMMANDS = frozenset({"signal", "subscribe"})
REQUEST_COMMANDS = frozenset({"request"})


def _signal_names_of(key: str, at: str | None = None,
                     named: frozenset[str] | None = None) -> frozenset[str] | None:
    """The signal names the workflow stored as ``key`` awaits, read from its module's source file:
    wf runs none of the application's code. None when the file cannot be found or does not tell.
    A workflow of a script (``__main__:name``) is read from the file its wait is ``at``.
    ``named``: only the names of these commands (SIGNAL_COMMANDS, REQUEST_COMMANDS); all by
    default."""
    module, _, qualname = key.partition(":")
    if not module or not qualname or "." in qualname:
        return None
    path = _script_file(at) if module == "__main__" else _module_file(module)
    if path is None:
        return None
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return names_in_source(source, qualname) if named is None else names_in_source(source, qualname, named)


def _listed(names: frozenset[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names)) or "none"


def awaited_text(key: str, at: str | None, kind: str) -> str | None:
    """The names the code of workflow type ``key`` awaits, signals and requests apart, for a
    warning about a ``kind`` ("signal" or "request") name it never awaits: a request name is
    never offered as a signal to send, nor a signal's as one to ask. None when its source does
    not tell."""
    signals = _signal_names_of(key, at, SIGNAL_COMMANDS)
    requests = _signal_names_of(key, at, REQUEST_COMMANDS)
    if signals is None or requests is None:
        names = _signal_names_of(key, at)
        if names is None:
            return None
        return f"the {'signals' if kind == 'signal' else 'signal and request names'} it awaits: {_listed(names)}"
    if kind == "signal":
        text = f"the signals it awaits: {_listed(signals)}"
        return text + (f"; the requests it awaits (asked with `wf ask`, not sent as signals): "
                       f"{_listed(requests)}" if requests else "")
    text = f"the signal and request names it awaits: requests {_listed(requests)}"
    return text + (f"; signals (sent with `wf signal`, not asked) {_listed(signals)}" if signals else "")


def other_kind_note(key: str, at: str | None, name: str, kind: str) -> str | None:
    """When the workflow awaits ``name`` only as the other kind (a request for a signal sent,
    a signal for an ask), what to say: a signal is never taken by ``request(name)``, nor an ask
    by ``signal(name)``. None otherwise, or when its source does not tell."""
    mine, other = ((SIGNAL_COMMANDS, REQUEST_COMMANDS) if kind == "signal"
                   else (REQUEST_COMMANDS, SIGNAL_COMMANDS))
    same = _signal_names_of(key, at, mine)
    if same is None or name in same:
        return None
    others = _signal_names_of(key, at, other)
    if others is None or name not in others:
        return None
    if kind == "signal":
        return (f"the code of {key} awaits {name!r} as a request (an ask), not as a signal: a "
                f"signal of that name stays in its inbox, never taken; ask it instead (wf ask)")
    return (f"the code of {key} awaits {name!r} as a signal, not as a request: an ask of that "
            f"name is never taken and gets no reply; send a signal instead (wf signal)")


def why_missing(store: Store, wid: str) -> str:
    """Why ``store`` holds no workflow ``wid``: its tombstone if it was pruned (its type, how it
    ended, when it was pruned), else whether the file ever pruned any."""
    stone = store.tombstone(wid)
    if stone is not None:
        return (
            f"it ({stone.type}) ended {stone.status} at {_utc(stone.ended_at)} and was pruned at "
            f"{_utc(stone.pruned_at)}, with its result and history"
        )
    pruned = store.pruned_total()
    if pruned:
        return f"it never existed, or it finished and was pruned after its retention ({pruned:,} pruned so far)"
    return "it never existed (nothing was ever pruned from this database); check the id"


def _utc(t: float) -> str:
    return utc_text(t)
