"""A user module with a cached function: corpus_cached and test_checkpoint_cached_results hold
its results in workflow locals across awaits."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=64)
def profile(pid):
    return {"pid": pid, "visits": 0}
