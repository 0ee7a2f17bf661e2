"""The key CPython's compiler merges equal constants by, for the code generator and the
checkpoint's module constants (a leaf: it imports nothing of the compiler)."""

from __future__ import annotations

import math
from typing import Any

_BY_VALUE_CONSTS = frozenset({str, bytes, int, bool})


def const_key(c: Any) -> Any:
    """What CPython's compiler merges equal constants by (``_PyCode_ConstantKey``); None for a
    constant it keeps as it is (a NaN, a type it does not merge)."""
    t = type(c)
    if t in _BY_VALUE_CONSTS:
        return (t, c)
    if t is float:
        if c != c:
            return None
        return (t, c, math.copysign(1.0, c))
    if t is complex:
        if c != c:
            return None
        return (t, c, math.copysign(1.0, c.real), math.copysign(1.0, c.imag))
    if t is tuple or t is frozenset:
        keys = [const_key(x) for x in c]
        if any(k is None for k in keys):
            return None
        return (t, tuple(keys) if t is tuple else frozenset(keys))
    return None
