"""Objects the standard library hands out from a cache of its own, checkpointed so that a restore
gets them from that cache again (and so the same object as the module's next call returns).

``re.compile(p)`` returns the pattern object it compiled for ``p`` before: natively ``pat is
re.compile(p)`` holds across an await. pickle rebuilds a pattern with ``re._compile(source,
pattern.flags)``, whose flags include the implicit ``re.UNICODE`` (and inline flags), so the rebuild
misses the cache entry ``re.compile(p)`` made, and the restored pattern is a second object. Here a
pattern is written with the flags ``re.compile`` was called with: the rebuild is ``re.compile``'s
own cached object in this process, and in a new one it becomes the cache entry that the
workflow's next ``re.compile(p)`` returns.

A match object (``m = PATTERN.match(line)``) is written as its pattern, its string, the bounds it
was searched in, and which match of that search it is; the restore runs the search again.
"""

from __future__ import annotations

import itertools
import re
from typing import Any


def _reduce_pattern(p: re.Pattern[Any]) -> Any:
    flags = p.flags
    source = p.pattern
    candidates = [flags]
    if isinstance(source, str) and not flags & (re.ASCII | re.LOCALE):
        # what re.compile(source, flags) was given: the flags without the implicit one, or no
        # flags at all (a pattern whose flags are inline, "(?i)...")
        candidates[:0] = [flags & ~re.UNICODE, 0]
    for f in candidates:
        if re.compile(source, f) is p:
            return (re.compile, (source, f))
    return (re.compile, (source, flags))  # not (or no longer) cached: an equal pattern


def _same_match(a: re.Match[Any], b: re.Match[Any]) -> bool:
    return (a.regs, a.lastindex, a.pos, a.endpos) == (b.regs, b.lastindex, b.pos, b.endpos)


def _reduce_match(m: re.Match[Any]) -> Any:
    """A match as the search that finds it again: its pattern's ``fullmatch`` over the bounds it
    was searched in (-1), or the n-th match of its ``finditer`` there (which ``match`` and
    ``search`` give first), checked now to give back the same groups and spans. The search
    runs again at the restore, on the same string: a regular expression matches alike each
    time. A match over a ``bytearray`` or a ``memoryview`` (which may change under it), or one
    that no such search gives back, does not pickle."""
    p, s = m.re, m.string
    if type(s) in (str, bytes):
        found = p.fullmatch(s, m.pos, m.endpos)
        if found is not None and _same_match(found, m):
            return (_rebuild_match, (p, s, m.pos, m.endpos, -1))
        start = m.start()
        for n, found in enumerate(p.finditer(s, m.pos, m.endpos)):
            if _same_match(found, m):
                return (_rebuild_match, (p, s, m.pos, m.endpos, n))
            if found.start() > start:
                break
    raise TypeError("cannot pickle 're.Match' object")


def _rebuild_match(p: re.Pattern[Any], s: Any, pos: int, endpos: int, n: int) -> re.Match[Any] | None:
    if n < 0:
        return p.fullmatch(s, pos, endpos)
    found: re.Match[Any] = next(itertools.islice(p.finditer(s, pos, endpos), n, None))
    return found


REDUCERS: dict[type, Any] = {re.Pattern: _reduce_pattern, re.Match: _reduce_match}
