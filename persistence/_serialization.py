"""Payload serialization: pickle behind a small format header.

Plain data (scalars and builtin containers of them, and the registered record types whose fields
are plain) is pickled by the standard library's C pickler: for such values its bytes are exactly
cloudpickle's, at a fraction of the cost. Everything else goes through cloudpickle, which pickles
functions and classes that cannot be imported by name (lambdas, ``__main__``) by value.
"""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no type information

from persistence._errors import MalformedPayload

# Four magic bytes and a format version byte; the magic keeps a stray blob (or JSON text posted
# by hand) from ever reaching the unpickler.
MAGIC = b"AFp\x00"
FORMAT = 1
HEADER = MAGIC + bytes([FORMAT])


_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_SEQUENCES = frozenset({list, tuple, set, frozenset})
# Record types (module-level classes pickled by reference with their __dict__ as state) whose
# instances count as plain when every attribute value is.
_RECORDS: set[type] = set()
# Past this many values the walk stops and cloudpickle takes the value: it is big enough that the
# pickling itself, not the choice of pickler, is what costs.
_PLAIN_BUDGET = 2_000
# A container at least this long is first asked whether it holds scalars only.
_WIDE = 16


def register_plain(cls: type) -> type:
    """Let instances of ``cls`` (an importable class, state in ``__dict__``) take the fast path."""
    _RECORDS.add(cls)
    return cls


def is_plain(obj: Any) -> bool:
    """True if ``obj`` is plain data that the standard pickler writes exactly like cloudpickle."""
    if type(obj) in _SCALARS:  # most payloads: nothing to walk
        return True
    stack = [obj]
    budget = _PLAIN_BUDGET
    while stack:
        o = stack.pop()
        t = type(o)
        if t in _SCALARS:
            continue
        budget -= 1
        if budget < 0:
            return False
        if t in _SEQUENCES:
            if len(o) < _WIDE or not set(map(type, o)) <= _SCALARS:
                stack.extend(o)
        elif t is dict:
            # (a wide one of scalars, a gather's results, is looked at in C: not value by value)
            if len(o) < _WIDE or not (set(map(type, o.values())) <= _SCALARS and set(map(type, o)) <= _SCALARS):
                stack.extend(o.keys())
                stack.extend(o.values())
        elif t in _RECORDS:
            stack.extend(o.__dict__.values())
        else:
            return False
    return True


def dumps(obj: Any) -> bytes:
    """Serialize ``obj`` into a payload (header + pickle).

    Raises:
        MalformedPayload: ``obj`` cannot be pickled; the message names its type.
    """
    try:
        if is_plain(obj):
            return HEADER + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        pickled: bytes = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        return HEADER + pickled
    except Exception as exc:
        raise MalformedPayload(
            f"cannot serialize a value of type {type(obj).__qualname__}: "
            f"{type(exc).__name__}: {exc}; pass only picklable values (plain data, dataclasses, "
            f"module-level classes)."
        ) from exc


def check_loads(blob: bytes, value: Any) -> None:
    """Raise ``MalformedPayload`` if ``blob`` (what ``dumps(value)`` wrote) cannot be loaded back:
    a value that pickles and whose restore fails (a ``__setstate__`` that raises) is refused at the
    call that stores it, not at every restore of the workflow that takes it, which it would fail.
    A scalar is not loaded again."""
    if type(value) not in _SCALARS:
        loads(blob)


def loads(data: bytes) -> Any:
    """Deserialize a payload written by ``dumps``.

    Raises:
        MalformedPayload: ``data`` has no valid header, a format this version does not read, or
            a damaged body.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedPayload(
            f"a payload must be bytes, got {type(data).__qualname__}; pass what dumps() returned."
        )
    data = bytes(data)
    if data[: len(MAGIC)] != MAGIC or len(data) <= len(HEADER):
        raise MalformedPayload(
            f"not an actorflow payload (starts with {data[:8]!r}, {len(data)} bytes); only bytes "
            f"written by persistence.dumps() can be loaded."
        )
    version = data[len(MAGIC)]
    if version != FORMAT:
        raise MalformedPayload(
            f"payload format {version} is not supported (this version reads format {FORMAT}); "
            f"upgrade actorflow to read it."
        )
    try:
        return pickle.loads(data[len(HEADER) :])
    except (ImportError, AttributeError) as exc:
        # Whole, but its class is not importable here (another directory, another PYTHONPATH, a
        # module renamed): not the payload's fault.
        raise MalformedPayload(
            f"cannot load a payload of {len(data)} bytes here: {type(exc).__name__}: {exc}; a class "
            f"it holds is not importable in this process (run it where the application's modules "
            f"import, or set PYTHONPATH), or was renamed or removed since it was written."
        ) from exc
    except Exception as exc:
        raiser = _restoring_code(exc)
        if raiser is not None:
            # Whole, but code of the application that restoring it runs raised (a class's
            # __setstate__, __reduce__'s callable, __init__): not damage.
            raise MalformedPayload(
                f"cannot load a payload of {len(data)} bytes: restoring it ran {raiser}, which "
                f"raised {type(exc).__name__}: {exc}; fix that code (it runs whenever a value of "
                f"its class is loaded), or send data whose restore does not fail."
            ) from exc
        raise MalformedPayload(
            f"damaged payload ({len(data)} bytes): {type(exc).__name__}: {exc}; the bytes were "
            f"changed after dumps() wrote them, or a class it refers to can no longer be imported."
        ) from exc


_PICKLING_FILES = ("pickle.py", "copyreg.py", "_compat_pickle.py")


def _restoring_code(exc: BaseException) -> str | None:
    """The function (``name (file:line)``) of the application that raised ``exc`` while
    ``pickle.loads`` restored a value, or None when no such code ran (the bytes are damaged)."""
    tb = exc.__traceback__
    if tb is None or tb.tb_next is None:
        return None  # raised by the unpickler itself
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    filename = code.co_filename.replace("\\", "/")
    if filename.endswith(_PICKLING_FILES) or "/cloudpickle/" in filename:
        return None
    name = getattr(code, "co_qualname", code.co_name)
    return f"{name} ({filename.rsplit('/', 1)[-1]}:{tb.tb_lineno})"
