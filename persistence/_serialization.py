"""Payload serialization: cloudpickle behind a small format header."""

from __future__ import annotations

import pickle
from typing import Any

import cloudpickle

from persistence._errors import MalformedPayload

# Four magic bytes and a format version byte; the magic keeps a stray blob (or JSON text posted
# by hand) from ever reaching the unpickler.
MAGIC = b"AFp\x00"
FORMAT = 1
HEADER = MAGIC + bytes([FORMAT])


def dumps(obj: Any) -> bytes:
    """Serialize ``obj`` into a payload (header + cloudpickle).

    Raises:
        MalformedPayload: ``obj`` cannot be pickled; the message names its type.
    """
    try:
        return HEADER + cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise MalformedPayload(
            f"cannot serialize a value of type {type(obj).__qualname__}: "
            f"{type(exc).__name__}: {exc}; pass only picklable values (plain data, dataclasses, "
            f"module-level classes)."
        ) from exc


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
    except Exception as exc:
        raise MalformedPayload(
            f"damaged payload ({len(data)} bytes): {type(exc).__name__}: {exc}; the bytes were "
            f"changed after dumps() wrote them, or a class it refers to can no longer be imported."
        ) from exc
