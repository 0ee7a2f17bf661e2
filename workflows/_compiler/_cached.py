"""Objects the standard library hands out from a cache of its own, checkpointed so that a restore
gets them from that cache again (and so the same object as the module's next call returns).

``re.compile(p)`` returns the pattern object it compiled for ``p`` before: natively ``pat is
re.compile(p)`` holds across an await. pickle rebuilds a pattern with ``re._compile(source,
pattern.flags)``, whose flags include the implicit ``re.UNICODE`` (and inline flags), so the rebuild
misses the cache entry ``re.compile(p)`` made, and the restored pattern is a second object. Here a
pattern is written with the flags ``re.compile`` was called with: the rebuild is ``re.compile``'s
own cached object in this process, and in a new one it becomes the cache entry that the
workflow's next ``re.compile(p)`` returns.
"""

from __future__ import annotations

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


REDUCERS: dict[type, Any] = {re.Pattern: _reduce_pattern}
