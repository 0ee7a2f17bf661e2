"""Checkpoints: a ``Continuation`` written as bytes (``checkpoint``) and read back
(``restore``, ``restore_upgrading``, ``check_upgrade``), refused at ``checkpoint()`` where it
could not be restored.
"""

from __future__ import annotations

import gc
import io
import json
import operator
import os
import pickle
import struct
import sys
import threading
import traceback
import types
from collections import Counter
from collections.abc import Iterator
from typing import Any

from .._commands import Event
from .._errors import CheckpointError, UnknownWorkflowType, VersionMismatch
from .._registry import resolve
from . import _settable
from ._driver import Continuation
from ._pickle_caches import CachedCallRefused
from ._pickle_modules import _LIBRARY_DIRS, process_objects
from ._pickle_sets import (
    BY_VALUE,
    ElementHashRefused,
    StaleKeyRefused,
    hash_identities,
    hashed_by_value,
)
from ._pickler import (
    _LOW_ADDRESS,
    REFS,
    FinalizerRefused,
    GlobalsPickler,
    LiveIter,
    ModuleData,
    ModulePathBroken,
    ModuleTooLarge,
    Observed,
    PathsPickler,
    PositionRefused,
    ResourceRefused,
    SetNotRestorable,
    aliased,
    dumps,
    global_function_ref,
    loads,
    maybe_addresses,
    number_ids,
    plain_path,
    reduced_state,
)
from ._procstate import ProcessStateRefused
from ._runtime import Frame, WithExit, builtin_iter
from ._scope import variable_of
from ._upgrade import FramePlan, Point, Upgrade, apply_frame, plan_frame

FORMAT = 1
MAGIC = b"AFWF"
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


# --------------------------------------------------------------------------------------------
# Checkpoints


def checkpoint(cont: Continuation) -> bytes:
    """Serialise ``cont``: a header (format, keys and fingerprints, Python minor) + cloudpickle.

    Raises:
        CheckpointError: a live local cannot be pickled; the message names it, its type and the
            await it is live at.
    """
    if not isinstance(cont, Continuation):
        raise TypeError(f"checkpoint() takes a Continuation, got {cont!r}")
    if cont._state == 2:
        raise CheckpointError(
            f"workflow {cont._key} has finished; there is nothing to checkpoint",
            variable=None,
            value_type=None,
            location=None,
        )
    frames = cont._frames
    hkey = (cont._key, cont._fingerprint, cont._state, *map(_POINT, frames))
    cached = _HEADERS.get(hkey)
    if cached is None:
        started = cont._state != 0
        header = {
            "format": FORMAT,
            "key": cont._key,
            "fingerprint": cont._fingerprint,
            "state": cont._state,
            # Per frame: its code, and the point it is suspended at (identity, enclosing
            # constructs, live locals), so that newer code can tell whether it may move there.
            "frames": [
                [f._af_code.key, f._af_code.fingerprint,
                 f._af_code.table.record(f.__dict__.get("_af_pc"), started)
                 if f._af_code.table is not None else None]
                for f in frames
            ],
            "python": PY,
        }
        hb = json.dumps(header, separators=(",", ":")).encode()
        cached = (MAGIC + struct.pack(">I", len(hb)) + hb, _spaces(frames))
        if len(_HEADERS) >= 4096:
            _HEADERS.clear()
        _HEADERS[hkey] = cached
    prefix, spaces = cached
    data = ModuleData(spaces, frames)  # the module data, looked into only if needed
    observers = data.observers() if any(f._af_code.closures for f in frames) else None
    if observers:
        try:
            return prefix + dumps(Observed(frames, observers), spaces, data)
        except BaseException as e:
            if _passes_through(e):
                raise
            raise _explain_pickle_failure(cont, e) from e
    if _plain_frames(frames, data):
        # Plain locals: the C pickler writes exactly what cloudpickle would, several times faster
        # (asked only about the functions, where the locals hold some).
        obj = aliased(frames, data.aliases, data.find_constants())
        if data.by_path:
            buf = io.BytesIO()
            buf.write(REFS)
            PathsPickler(buf, data.by_name or {}, data.by_path).dump(obj)
            return prefix + buf.getvalue()
        if not data.by_name:
            return prefix + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        buf = io.BytesIO()
        GlobalsPickler(buf, data.by_name).dump(obj)
        return prefix + buf.getvalue()
    try:
        payload = dumps(frames, spaces, data)
    except BaseException as e:
        if _passes_through(e):
            raise
        raise _explain_pickle_failure(cont, e) from e
    return prefix + payload


def _passes_through(e: BaseException) -> bool:
    """Whether ``e``, raised while the state was pickled or unpickled, goes on as it is rather
    than as the state's ``CheckpointError``: Ctrl-C on the main thread (the program is
    interrupted, not its pickling) and what is no error. A ``SystemExit`` (a ``__reduce__`` or
    ``__setstate__`` that calls ``sys.exit()``), or a ``KeyboardInterrupt`` raised by code on
    another thread, is the value's failure: it would otherwise end the engine's thread."""
    if isinstance(e, Exception):
        return False
    if isinstance(e, KeyboardInterrupt):
        return threading.current_thread() is threading.main_thread()
    return not isinstance(e, SystemExit)


# Checkpoint header bytes and the frames' namespaces by (workflow, state, code and point of each
# frame): the same few for every step.
_HEADERS: dict[tuple[Any, ...], tuple[bytes, dict[int, tuple[str, dict[str, Any]]]]] = {}
_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_BuiltinMethod: type = type([].append)
# Iterators over a range hold no object (a range and a position: what cloudpickle writes too,
# as they are never module data).
_RANGE_ITERS = frozenset({type(builtin_iter(range(0))), type(builtin_iter(range(1 << 64)))})
_LEAVES = _SCALARS | _RANGE_ITERS  # nothing in them to walk
# Set elements hashed alike after a restore, in this process (not a NaN, nor a range iterator).
_HASHED_AS_IS = BY_VALUE | {type(None)}
_FUNCTION = types.FunctionType
# What _plain_frames looks into. An Event: what `await select(...)` gives, held across the next.
_PLAIN_KINDS = _LEAVES | _SEQUENCES | {dict, _BuiltinMethod, _FUNCTION, Event}
_POINT = operator.attrgetter("_af_code", "_af_pc")  # a frame's code and where it is
_PLAIN_BUDGET = 100_000  # containers walked before leaving a huge continuation to the checkpoint pickler


def _plain_frames(frames: list[Frame], data: ModuleData | None = None) -> bool:
    """True if every frame holds only plain data (scalars, iterators over ranges, builtin
    containers of them, functions bound to a global of the frames' modules, Events) that the C
    pickler writes as the checkpoint pickler would: no set whose table a plain rebuild would not
    give, nor one holding an element hashed by the address of a copy (a range iterator, a NaN:
    the checkpoint pickler refuses it), no frozenset of several elements (their tables are kept,
    and their elements checked, by the checkpoint pickler), no module-level list, dict or set
    (kept by name) and none reached through module data (kept by its path); a float or big int
    held twice only by locals (the restore makes them one object again: ``data.aliases``); the
    functions and classes the checkpoint pickler writes as globals (``data.by_name``, for
    ``GlobalsPickler``). Sets ``data.shared_numbers`` where such a number is held twice
    otherwise."""
    values: list[Any] = []
    for f in frames:
        if type(f) is not Frame:
            return False
        values.extend(f.__dict__.values())
    kinds = set(map(type, values))
    if not kinds <= _PLAIN_KINDS:
        return False  # a local of another kind (an iterator, an instance, a class, ...)
    if data is None:
        data = ModuleData(_spaces(frames), frames)
    if kinds <= _LEAVES:
        # Nothing to walk (most continuations: counters, strings, ids): a float or big int held
        # twice is held by two locals, which the aliases make one object again.
        big = [n for n in values if type(n) is int and n >= _LOW_ADDRESS]
        if big and maybe_addresses(big, set(map(id, values)), data):
            return False  # the id of a string, or of a module's object: written as a reference
        data.find_aliases()
        return True
    budget = _PLAIN_BUDGET
    tops = len(values)  # the locals; then the items of the containers they hold
    # The items of each container met are appended to ``values``, which the loop reaches in
    # turn: once walked, it holds every value at each of its occurrences in what the C pickler
    # writes. A container met again (`xs` and the `xs.append` held across an await) is written
    # once (pickle's memo), its items with it: walked once.
    walked: set[int] = set()
    methods: set[int] = set()
    records: list[Any] = []  # the Events met and their class, which must not be module data
    own: list[Any] = []  # the containers (and methods of containers) met
    bigs: list[int] = []  # the ints that may be the id of an object
    process = process_objects()  # sys.path, os.environ...: kept as the process's own
    low = _LOW_ADDRESS
    for o in values:
        t = type(o)
        if t in _LEAVES:
            if t is int and o >= low:
                bigs.append(o)
            continue
        if t is _BuiltinMethod:
            if type(o.__self__) not in _CONTAINERS:
                return False
            # A method of a plain container, held across an await (`xs.append(await ...)`).
            if id(o) not in methods:  # (its one reference to the container)
                methods.add(id(o))
                own.append(o)
                values.append(o.__self__)
            continue
        if t is _FUNCTION:
            # A function of the module, held across an await (`procedure` and `inc` in
            # `await procedure(inc, await ...)`): written as the global it is bound to.
            ref = global_function_ref(data, o)
            if ref is None:
                return False  # made in the workflow, or another module's: cloudpickle decides
            if data.by_name is None:
                data.by_name = {}
            data.by_name[id(o)] = ref
            continue
        if t is Event:
            if id(o) in walked:
                continue
            walked.add(id(o))
            budget -= 1
            state = reduced_state(data, o)  # its class, then its __dict__
            if budget < 0 or state is None:
                return False
            if not records:
                records.append(Event)
            records.append(o)
            values.extend(state.keys())
            values.extend(state.values())
            continue
        if t not in _CONTAINERS:
            return False  # an item of another kind
        if id(o) in walked:
            continue
        walked.add(id(o))
        budget -= 1
        if budget < 0:
            return False
        if id(o) in process:
            return False  # the process's own (sys.path): kept as the restoring process's
        if t is dict:
            if id(o) in data.containers():
                return False  # a module-level container: kept by name
            own.append(o)
            values.extend(o.keys())
            values.extend(o.values())
            continue
        if t is set:
            if not (_settable.SUPPORTED and _settable.plain(o)):  # a table a plain rebuild would not give
                return False
            if not hashed_by_value(o, _HASHED_AS_IS) and _hashed_by_a_copy(o):
                return False  # the checkpoint pickler refuses it
        elif t is frozenset and len(o) > 1:
            return False
        if t is not tuple and id(o) in data.containers():
            return False
        own.append(o)
        values.extend(o)
    o = state = None
    if (own or records) and data.active and not all(
        map(_BASE_REFS.__eq__, _refs_beyond(values, [*own, *records[1:]]))
    ):
        # Something else holds one of them too (or what holds them): they may be module data
        # (written by their paths). Else they are not: held by nothing module data reaches.
        paths = data.paths()
        if data.truncated is not None:
            return False  # the walk stopped early
        for o in own:
            if id(o) in paths:
                # A list or dict reached through module data (a cached function's result):
                # the C pickler writes its plain reference, as the checkpoint pickler would.
                path = plain_path(data, o) if type(o) is list or type(o) is dict else None
                if path is None:
                    return False  # written otherwise: by the checkpoint pickler
                if data.by_path is None:
                    data.by_path = {}
                data.by_path[id(o)] = (path, o)
    if data.find_constants():
        data.held_elsewhere(values[tops:], locals_too=False)
    if (data.by_name or records) and data.active:
        # Where module data is walked, the checkpoint pickler refuses a function or an Event if
        # the walk stopped before it could tell whether it is module data, and writes an Event
        # (or its class) reached through module data by its path.
        paths = data.quick_paths()  # (the Events are checked above)
        if data.truncated is not None or any(id(o) in paths for o in records):
            return False
    if bigs and maybe_addresses(bigs, walked, data):
        return False  # the id of a container or a module's object: written as a reference
    ids = number_ids(values)
    repeats = len(ids) - len(set(ids))
    if repeats and repeats > len(data.find_aliases()):
        if data.by_name or records or data.by_path:
            return False  # the checkpoint pickler writes the numbers, and the rest
        # A float or big int held twice, not only by locals: the C pickler is asked to write
        # each of those once (all of them are known).
        data.shared_numbers = {i for i, n in Counter(ids).items() if n > 1}
        data.aliases = []
        return False
    return True


def _refs_beyond(values: list[Any], objects: list[Any]) -> Iterator[int]:
    """Per object of ``objects``: its references beyond two per occurrence in ``values`` (where
    each occurrence stands for one reference, a local's or a container's, and is one itself),
    the caller's and this function's own. ``_BASE_REFS`` for an object held by nothing else."""
    count = sys.getrefcount
    if len(objects) <= 8:  # (most continuations: a few lists or dicts)
        ids = list(map(id, values))
        for o in objects:
            yield count(o) - 2 * ids.count(id(o))
        return
    counts = Counter(map(id, values))
    for o in objects:
        yield count(o) - 2 * counts[id(o)]


def _base_refs() -> int:
    probe: list[Any] = []
    holder = [probe]  # the one reference an occurrence stands for
    own, records = [probe], [Event]  # as _plain_frames holds a list it met
    del probe
    (n,) = _refs_beyond(list(holder), [*own, *records[1:]])
    return n


# The references to a list the locals hold that ``_refs_beyond`` counts where nothing else holds
# it, measured here (as ``_plain_frames`` counts) so that it holds for this Python.
_BASE_REFS = _base_refs()


def _hashed_by_a_copy(s: set[Any]) -> bool:
    """True if an element of ``s`` hashes by the address of an object the C pickler writes as a
    copy (a range iterator, a NaN, the list of a bound ``append``, one in a tuple): the copy hashes
    otherwise, so the set would come back in another order. The functions met are the module's
    (written by name: the walk returns False for any other), and ``None`` is itself."""
    for e in s:
        for _part, obj in hash_identities(e):
            if obj is not None and type(obj) is not _FUNCTION:
                return True
    return False


def _spaces(frames: list[Frame]) -> dict[int, tuple[str, dict[str, Any]]]:
    """The module namespaces the frames' code runs in, by id (for the checkpoint pickler)."""
    out = {}
    for f in frames:
        code = f._af_code
        g = code.globals
        out[id(g)] = (code.key, g)
    return out


def _dumps(obj: Any, spaces: dict[int, tuple[str, dict[str, Any]]] | None = None) -> bytes:
    if spaces is None:
        spaces = _spaces(obj) if isinstance(obj, list) else {}
    if isinstance(obj, list) and obj and all(type(f) is Frame for f in obj):
        return dumps(obj, spaces, ModuleData(spaces, obj))  # as checkpoint() writes frames
    return dumps(obj, spaces)


def _explain_pickle_failure(cont: Continuation, err: BaseException) -> CheckpointError:
    # The failed pickling's frames hold what it was writing (a reduce's arguments): freed, so
    # that each variable is pickled below as it would be alone (a __dict__ they still held
    # would count as held apart from its instance).
    e: BaseException | None = err
    while e is not None:
        traceback.clear_frames(e.__traceback__)
        e = e.__cause__ or e.__context__
    spaces = _spaces(cont._frames)
    refused = getattr(err, "value", None)  # the object refused, if the pickler said which
    # First each variable with the frames holding it alone (a function closing over the
    # workflow's variables, or a dict keyed by one, reaches every other through its frame);
    # then, if none fails so, each with the frames as they are.
    for isolated in (True, False):
        found = _first_refused(cont, err, spaces, refused, isolated)
        if found is not None:
            return found
    return CheckpointError(
        f"cannot checkpoint workflow {cont._key}: {type(err).__name__}: {err}",
        variable=None,
        value_type=None,
        location=cont.location(),
    )


def _first_refused(
    cont: Continuation, err: BaseException, spaces: dict[int, tuple[str, dict[str, Any]]],
    refused: Any, isolated: bool,
) -> CheckpointError | None:
    frames = cont._frames
    for f in reversed(frames):
        code = f._af_code
        # The variable that holds the refused object itself first, then those that reach it.
        names = sorted(f.__dict__.items(), key=lambda kv: _holds(kv[1], refused))
        for name, value in names:
            saved = [fr.__dict__.copy() for fr in frames] if isolated else None
            try:
                if saved is not None:
                    for fr in frames:
                        fr.__dict__.clear()
                    f.__dict__[name] = value
                try:
                    _dumps(value, spaces)
                finally:
                    if saved is not None:
                        for fr, d in zip(frames, saved, strict=True):
                            fr.__dict__.clear()
                            fr.__dict__.update(d)
                if _holds(value, refused) < 2:
                    # Refused for what other variables hold too (the id of an object another
                    # variable holds): this one holds the refused value itself.
                    if isolated:
                        continue  # (with the others gone, it may not be this one's to name)
                    raise err
            except BaseException as e:
                if _passes_through(e):
                    raise
                where = code.describe_point(f.__dict__.get("_af_pc")) or "its start"
                what = code.describe_slot(name)
                if type(value) is WithExit:
                    value = value.manager  # (what a 'with' holds: its manager, named as such)
                tname = type(value).__qualname__
                mod: str | None = type(value).__module__
                if type(value) is LiveIter:
                    tname, mod = f"{type(value._c).__name__} iterator", None
                if mod not in ("builtins", None):
                    tname = f"{mod}.{tname}"
                if isinstance(e, ModuleTooLarge):
                    hint = "or del the variable before the await"
                elif isinstance(e, DeprecationWarning) or mod == "itertools" or "itertools" in str(e):
                    hint = (
                        "itertools objects cannot be checkpointed reliably (their pickling is "
                        "deprecated and removed in Python 3.14); wrap it in list(...)"
                    )
                elif tname == "typing.TypeAliasType":
                    hint = (
                        "a type alias made by a 'type' statement in a workflow is checkpointed "
                        "with its value, which must evaluate and must not refer back to the "
                        "alias; define the alias at module level, or del it before the await"
                    )
                elif tname in ("generator", "async_generator"):
                    hint = (
                        "a generator that can still run cannot be checkpointed (its frame "
                        "cannot be written; one that has finished or was closed can); wrap it "
                        "in list(...)"
                    )
                elif isinstance(e, RecursionError) or "excessively deep recursion" in str(e):
                    hint = (
                        "it reaches its objects through a chain of references deeper than "
                        "pickle follows (a long linked list: node.next.next...); hold the nodes "
                        "in a list across the await and link them again after it"
                    )
                elif isinstance(e, ResourceRefused):
                    hint = (
                        "close it before the await (a 'with open(...)' block that does not span "
                        "it), or move the I/O into a procedure"
                    )
                elif isinstance(e, StaleKeyRefused):
                    hint = (
                        "take a key out of its dict or set before changing what its hash or "
                        "equality is made of, and put it back after (v = d.pop(k); k.x = ...; "
                        "d[k] = v), or del the variable before the await"
                    )
                elif isinstance(e, ProcessStateRefused):
                    hint = (
                        "keep the awaits out of its 'with' body (enter it again after the await), "
                        "or make the change part of the workflow's own state, or a procedure's"
                    )
                elif isinstance(e, FinalizerRefused):
                    hint = "or del it before the await"
                elif isinstance(e, (ElementHashRefused, PositionRefused, CachedCallRefused)):
                    hint = "or del the variable before the await"
                elif isinstance(value, BaseException) or "cannot be rebuilt at restore" in str(e):
                    hint = "or del the variable before the await"
                elif "iterates" in str(e) and "changed" in str(e):
                    hint = (
                        "do not add or remove keys of a dict or set that a loop iterates across "
                        "an await; iterate over a copy (for k, v in list(d.items()): ...)"
                    )
                elif tname == "coroutine":
                    hint = (
                        "a coroutine cannot be checkpointed; await it at once (workflows await "
                        "commands and @workflow calls only) instead of keeping it across an await"
                    )
                elif what.startswith("an intermediate value"):
                    hint = (
                        "it is a part of an expression evaluated before an await later in the "
                        "same expression, so it is held across that await; await first into a "
                        "variable (v = await ...) and use v in the expression after it, or make "
                        "the value picklable"
                    )
                elif any(
                    (held is value or type(held) is WithExit and held.manager is value)
                    and code.describe_slot(slot).startswith("the context manager of")
                    for slot, held in f.__dict__.items()
                ):  # it is (also) the manager of a 'with' open across the await
                    hint = (
                        "a context manager open across an await is checkpointed with the "
                        "workflow and must pickle (one made by @contextmanager holds a generator, "
                        "which does not); keep the awaits out of its 'with' body, or write it as "
                        "a class with __enter__/__exit__ whose state pickles"
                    )
                elif "generator" in str(e):
                    hint = (
                        "it holds a generator, which cannot be checkpointed; keep a list(...) "
                        "of the generator's items instead, or del it before the await"
                    )
                else:
                    hint = (
                        "make it picklable, del it before the await, or move the work that "
                        "needs it into a procedure"
                    )
                return CheckpointError(
                    f"cannot checkpoint workflow {code.key}: {what} ({tname}) is live at the "
                    f"await at {where}: {type(e).__name__}: {e}; {hint}",
                    variable=variable_of(name),
                    value_type=tname,
                    location=where,
                )
    return None


def _holds(value: Any, refused: Any) -> int:
    """0 if ``value`` is the refused object, 1 if a list, tuple, set or dict holds it as an item
    (or a dict as a value), 2 otherwise: the order in which variables are tried (functions
    made in the workflow reach every variable, through its frame)."""
    if refused is None:
        return 2
    if value is refused:
        return 0
    t = type(value)
    items = value.values() if t is dict else value if t in _SEQUENCES else ()
    return 1 if any(x is refused for x in items) else 2


def _read_header(blob: Any) -> tuple[dict[str, Any], bytes]:
    """The header of a checkpoint (never to be modified: headers read are shared, by their
    bytes) and its payload."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"restore() takes the bytes made by checkpoint(), got {type(blob).__name__}")
    blob = bytes(blob)
    try:
        if blob[:4] != MAGIC:
            raise ValueError("it does not start with the checkpoint marker")
        n = int.from_bytes(blob[4:8], "big")
        hb = blob[8 : 8 + n]
        payload = blob[8 + n :]
        header = _READ_HEADERS.get(hb)
        if header is not None:
            return header, payload
        header = json.loads(hb)
        fmt = header["format"]
    except Exception as e:
        raise CheckpointError(
            f"malformed workflow checkpoint ({len(blob)} bytes): {e}",
            variable=None,
            value_type=None,
            location=None,
        ) from None
    if fmt != FORMAT:
        raise CheckpointError(
            f"workflow checkpoint format {fmt} is not supported (this version reads {FORMAT})",
            variable=None,
            value_type=None,
            location=None,
        )
    key = header["key"]
    if header["python"] != PY:
        raise VersionMismatch(
            f"continuation of workflow {key} was made by Python {header['python']}, this is "
            f"Python {PY}; run it on Python {header['python']} (checkpoints hold code objects "
            "that are tied to one Python minor version)",
            workflow_type=key,
            stored=header["python"],
            loaded=PY,
        )
    if len(_READ_HEADERS) >= 4096:
        _READ_HEADERS.clear()
    _READ_HEADERS[hb] = header
    return header, payload


# Headers read, by their bytes: the same few for every step of a workflow.
_READ_HEADERS: dict[bytes, dict[str, Any]] = {}


def _unpickle_frames(key: str, payload: bytes) -> list[Frame]:
    try:
        frames: list[Frame] = loads(payload)
    except AttributeError as e:
        raiser = _application_frame(e)
        if raiser is None:
            raise _code_missing(key, e) from e
        # Raised by the application's own code that the restore ran (a __setstate__, a
        # __setattr__): not code missing in this process.
        raise CheckpointError(
            f"cannot restore workflow {key}: restoring its state ran {raiser} of the "
            f"application, which raised {type(e).__name__}: {e}",
            variable=None,
            value_type=None,
            location=None,
        ) from e
    except ImportError as e:
        raise _code_missing(key, e) from e
    except SetNotRestorable as e:
        raise _not_restorable(key, e.frames, e.the_set, "a set", e.reason) from None
    except ModulePathBroken as e:
        raise _not_restorable(key, e.frames, e.stand_in, "an object", e.reason) from None
    except BaseException as e:
        if _passes_through(e):
            raise
        raise CheckpointError(
            f"cannot restore workflow {key}: unpickling its state failed: {type(e).__name__}: {e}",
            variable=None,
            value_type=None,
            location=None,
        ) from e
    return frames


def _code_missing(key: str, e: BaseException) -> UnknownWorkflowType:
    # A class (or function) its locals hold cannot be found: code missing in this process,
    # as for the workflow's own, not damaged bytes.
    return UnknownWorkflowType(
        f"workflow {key} cannot be restored in this process: its state refers to code that "
        f"cannot be found ({type(e).__name__}: {e}). Make that module importable (on "
        f"sys.path) in the process that opens the database.",
        key=key,
        kind="workflow",
    )


def _application_frame(e: BaseException) -> str | None:
    """Where the application's own code raised ``e`` during a restore (its innermost frame in
    a file of the application: not of the standard library, site-packages or this project), as
    ``Class.method (file:line)``; None where no code of the application raised it (pickle
    could not find a class or function by its name: code missing in this process)."""
    found = None
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if _application_file(code.co_filename):
            found = f"{code.co_qualname} ({code.co_filename}:{tb.tb_lineno})"
        tb = tb.tb_next
    return found


def _application_file(filename: str) -> bool:
    if filename.startswith("<") or not filename.endswith(".py"):
        return False
    real = os.path.realpath(filename)
    return not real.startswith(_LIBRARY_DIRS) and not real.startswith(_ENGINE_DIRS)


# This project's packages: their frames are the restore's own, not the application's.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
_ENGINE_DIRS = tuple(os.path.join(_ROOT, p) + os.sep for p in ("workflows", "actors", "persistence"))


def _not_restorable(key: str, frames: Any, target: Any, what: str, reason: str) -> CheckpointError:
    """The restore's error for a value that cannot be given back as it was (a set whose table
    cannot be rebuilt, an object whose path through module data broke), naming the variable
    that holds it (directly, or through containers and objects)."""
    hint = (
        "hold sorted(...) or a dict.fromkeys(...) of its elements across awaits"
        if what == "a set"
        else "keep the module's data as it was when the workflow was checkpointed, or read "
        "it again from the module after the await instead of holding it in a variable"
    )
    for f in reversed(frames if isinstance(frames, list) else []):
        code = getattr(f, "_af_code", None)
        for name, value in getattr(f, "__dict__", {}).items():
            if code is not None and _reaches(value, target):
                return CheckpointError(
                    f"cannot restore workflow {key}: {code.describe_slot(name)} holds {what} "
                    f"that cannot be given back as it was: {reason}; {hint}",
                    variable=variable_of(name),
                    value_type=type(target).__name__ if what == "a set" else None,
                    location=code.describe_point(f.__dict__.get("_af_pc")) or None,
                )
    return CheckpointError(
        f"cannot restore workflow {key}: {what} it holds cannot be given back as it was: "
        f"{reason}; {hint}",
        variable=None,
        value_type=None,
        location=None,
    )


def _reaches(value: Any, target: Any, budget: int = 100_000) -> bool:
    """Whether ``value`` holds ``target``, directly or through what it refers to. A dict's keys
    and values are read from the dict: on 3.13, ``gc.get_referents`` of an instance's
    ``__dict__`` (``d = vars(obj)``) sees none of the values the instance keeps inline."""
    seen: set[int] = set()
    stack = [value]
    while stack and budget > 0:
        o = stack.pop()
        if o is target:
            return True
        if id(o) in seen or type(o) in _SCALARS:
            continue
        seen.add(id(o))
        budget -= 1
        if type(o) is dict:
            stack.extend(o.keys())
            stack.extend(o.values())
        else:
            stack.extend(gc.get_referents(o))
    return False


def _plan(header: dict[str, Any], payload: bytes) -> tuple[Upgrade, list[Frame] | None]:
    """How each frame of a checkpoint moves onto the loaded code; the restored frames too if
    some frame's code changed (restored with the loaded code, not yet rewritten)."""
    key = header["key"]
    plans = []
    for entry in header["frames"]:
        fkey, fp, rec = entry
        wf = resolve("workflow", fkey)
        unreadable = None
        try:
            old = Point.from_record(rec) if isinstance(rec, dict) else None
        except (ValueError, KeyError, TypeError) as e:
            old, unreadable = None, str(e) if isinstance(e, ValueError) else f"its point record is damaged ({e!r})"
        plan = FramePlan(fkey, fp, wf.fingerprint, old, how="unchanged" if wf.fingerprint == fp else "held")
        if unreadable is not None and plan.how == "held":
            plan.reasons.append(unreadable)
        plans.append(plan)
    up = Upgrade(key, plans)
    if all(p.how == "unchanged" for p in plans):
        return up, None
    frames = _unpickle_frames(key, payload)
    for p, f in zip(plans, frames, strict=True):
        if p.how == "unchanged" or p.reasons:
            continue
        wf = resolve("workflow", p.key)
        table = wf._code.table
        if table is None:  # pragma: no cover  (every compiled workflow has one)
            p.reasons.append("the loaded code has no table of its points")
            continue
        plan_frame(p, f.__dict__, table, wf.upgrader_for(p.stored))
    return up, frames


def _mismatch(up: Upgrade) -> VersionMismatch:
    held = [p for p in up.frames if p.how == "held"]
    first = held[0]
    why = "; ".join(p.summary() for p in held)
    return VersionMismatch(
        f"continuation of workflow {first.key} was made by code {first.stored[:12]}, loaded code "
        f"is {first.loaded[:12]} (stored fingerprint {first.stored}, loaded {first.loaded}); the "
        f"workflow's code changed since it was checkpointed and it cannot be moved onto the new "
        f"code automatically: {why}. Deploy the old code to finish in-flight instances, register "
        f"an upgrade function (@{first.key.rpartition(':')[2] or first.key}.upgrade(from_version="
        f"\"{first.stored[:8]}\")), or cancel them",
        workflow_type=first.key,
        stored=first.stored,
        loaded=first.loaded,
        reasons=tuple(p.summary() for p in held),
    )


def check_upgrade(blob: bytes) -> Upgrade:
    """Whether (and how) the continuation in ``blob`` would move onto the code loaded now.

    Changes nothing. ``Upgrade.needed`` says if some frame's code changed, ``possible`` if every
    such frame can move; ``frames`` says how each does, or why not.

    Raises:
        VersionMismatch: the checkpoint was made by another Python minor version.
        CheckpointError, UnknownWorkflowType: as ``restore``.
    """
    header, payload = _read_header(blob)
    return _plan(header, payload)[0]


def restore_upgrading(blob: bytes) -> tuple[Continuation, Upgrade | None]:
    """``restore``, moving the continuation onto the loaded code if its code changed and that
    is safe (or an upgrade function says how); the Upgrade done, or None.

    Raises:
        VersionMismatch: some frame cannot move; its ``reasons`` say which point and which
            locals did not match. Nothing is changed: ``blob`` restores as before.
        CheckpointError, UnknownWorkflowType: as ``restore``.
    """
    header, payload = _read_header(blob)
    up, frames = _plan(header, payload)
    if frames is None:
        return restore(blob), None
    if not up.possible:
        raise _mismatch(up)
    for p, f in zip(up.frames, frames, strict=True):
        if p.how != "unchanged":
            apply_frame(p, f, resolve("workflow", p.key)._code)
    return Continuation(frames, header["key"], up.loaded, header["state"]), up


def restore(blob: bytes) -> Continuation:
    """Rebuild a continuation from ``checkpoint`` bytes, resolving its code through the registry.

    Raises:
        VersionMismatch: the loaded code (or Python minor version) differs from the one that made
            the checkpoint; the continuation is never resumed silently.
        CheckpointError: the bytes are not a checkpoint, or cannot be unpickled.
        UnknownWorkflowType: a workflow key is not registered and its module cannot be imported,
            or its state refers to a class or function that cannot be found.
    """
    header, payload = _read_header(blob)
    key = header["key"]
    for fkey, fp, *_ in header["frames"]:
        wf = resolve("workflow", fkey)
        if wf.fingerprint != fp:
            raise VersionMismatch(
                f"continuation of workflow {fkey} was made by code {fp[:12]}, loaded code is "
                f"{wf.fingerprint[:12]} (stored fingerprint {fp}, loaded {wf.fingerprint}); the "
                "workflow's code changed since it was checkpointed, so it is not resumed: "
                "deploy the old code to finish in-flight instances, or cancel them",
                workflow_type=fkey,
                stored=fp,
                loaded=wf.fingerprint,
            )
    frames = _unpickle_frames(key, payload)
    return Continuation(frames, key, header["fingerprint"], header["state"])

