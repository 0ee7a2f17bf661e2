"""A ``memoryview`` of part of an object (``memoryview(buf)[2:6]``, ``[::2]``, a cast of such a
slice) made again over the same object: where it starts in the object's buffer is read.

A view records its first byte's address (``view.buf``) and its managed buffer, which records
the address of the object's whole buffer (``master.buf``); the difference is the view's offset,
which Python does not show. With it, its shape and strides (which it shows), the view is made
again as Python makes it: a slice of a byte view of the object, cast to its format and shape,
then stepped along its first dimension.

The offset is read through ``ctypes``, by the layouts of CPython 3.11 to 3.13
(``Include/cpython/memoryobject.h``): ``PyMemoryViewObject`` is the variable-size object header,
then ``mbuf``, ``hash``, ``flags`` (an int, padded), ``exports``, then its ``Py_buffer`` (``buf``
first); ``_PyManagedBufferObject`` is the object header, ``flags`` (padded), ``exports``, then
``master`` (``buf`` first). The layout is checked against the running interpreter when this
module loads; where it does not hold ``SUPPORTED`` is False and such a view is refused.
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import Any

from . import _layouts

_WORD = ctypes.sizeof(ctypes.c_ssize_t)
_VIEW_BUF = object.__basicsize__ + _WORD + 4 * _WORD  # var header, mbuf, hash, flags, exports
_MBUF = object.__basicsize__ + _WORD
_MASTER_BUF = object.__basicsize__ + 2 * _WORD  # header, flags, exports


def _word(address: int) -> int:
    return ctypes.c_ssize_t.from_address(address).value


def offset(mv: memoryview) -> int:
    """Where ``mv``'s first byte is in the buffer of the object it views (``mv.obj``)."""
    mbuf = _word(id(mv) + _MBUF)
    return _word(id(mv) + _VIEW_BUF) - _word(mbuf + _MASTER_BUF)


def make(obj: Any, start: int, fmt: str, shape: tuple[int, ...], strides: tuple[int, ...], readonly: bool) -> memoryview:
    """A view of ``obj`` from byte ``start``, in ``fmt``, ``shape`` and ``strides``; ValueError
    if those are not what a slice of a cast of ``obj`` can have."""
    whole = memoryview(obj).cast("B")
    size = struct.calcsize(fmt)
    rest = shape[1:]
    row = size * math.prod(rest)
    n = shape[0] if shape else 1
    step = 1
    if shape and n > 1 and row:
        step, odd = divmod(strides[0], row)
        if odd or not step:
            raise ValueError(f"strides {strides} are not those of a slice of a cast")
    first = start + (n - 1) * strides[0] if step < 0 else start  # the lowest row's byte
    rows = (n - 1) * abs(step) + 1 if n else 0
    part: Any = whole[first:first + rows * row]
    if fmt != "B" or len(shape) != 1:
        part = part.cast(fmt, (rows, *rest) if shape else ())
    view: memoryview = part[::step] if step != 1 else part
    if readonly and not view.readonly:
        view = view.toreadonly()
    if (view.format, view.shape, view.strides) != (fmt, shape, strides) or offset(view) != start:
        raise ValueError(f"a view of {fmt!r} {shape} {strides} from byte {start} cannot be made again")
    return view


def _self_test() -> bool:
    if not _layouts.known():  # (free-threaded builds lay objects out otherwise)
        return False
    try:
        buf = bytearray(range(24))
        views = [memoryview(buf)[3:11:2], memoryview(buf)[5:][::-3], memoryview(bytes(buf))[4:12].cast("i"),
                 memoryview(buf).cast("B", (4, 6))[1::2], memoryview(buf)[8:]]
        starts = [3, 23, 4, 6, 8]
        for v, s in zip(views, starts, strict=True):
            if offset(v) != s:
                return False
            again = make(v.obj, s, v.format, v.shape or (), v.strides or (), v.readonly)
            if again.tolist() != v.tolist() or again.obj is not v.obj:
                return False
        return True
    except Exception:
        return False


SUPPORTED = _self_test()

__all__ = ["SUPPORTED", "make", "offset"]
