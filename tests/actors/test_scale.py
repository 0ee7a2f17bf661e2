"""Scale: many suspended workflows held with a bounded number of live actors and threads."""

from __future__ import annotations

import os
import threading
import time

import pytest

from actors import ActorSystem, Status
from actors.testing import VirtualClock

from . import flows
from .runtime_support import reader

N = int(os.environ.get("ACTORFLOW_SCALE_N", "100000"))
MAX_LIVE = 1_000


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_100k_suspended_workflows_complete_after_a_broadcast(tmp_path):
    """100,000 workflows suspended on a signal stay within max_live live actors and a fixed number
    of threads, and all of them complete after one broadcast."""
    peak = {"live": 0, "threads": 0}
    stop = threading.Event()
    base_threads = threading.active_count()

    with ActorSystem(str(tmp_path / "scale.db"), clock=VirtualClock(), max_live=MAX_LIVE) as s:
        def sample() -> None:
            while not stop.is_set():
                peak["live"] = max(peak["live"], s.live_actors())
                peak["threads"] = max(peak["threads"], threading.active_count())
                time.sleep(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        chunk = 5_000
        for start in range(0, N, chunk):
            n = min(chunk, N - start)
            s.start_many(flows.subscriber, [("all",)] * n, ids=[f"s{i}" for i in range(start, start + n)])
        s.idle(timeout=1200)
        t1 = time.perf_counter()
        assert len(s.workflows(status=Status.RUNNING)) == N
        assert s.broadcast("go", "all", 7) == N
        s.idle(timeout=1200)
        t2 = time.perf_counter()
        stop.set()
        sampler.join(5)
        with reader(str(tmp_path / "scale.db")) as r:
            counts = r.count_workflows()
        assert counts == {("tests.actors.flows:subscriber", "completed"): N}
        assert s.get("s0").result(timeout=5) == 7
        assert s.get(f"s{N - 1}").result(timeout=5) == 7
    print(f"\n{N} workflows: started and suspended in {t1 - t0:.1f}s, completed in {t2 - t1:.1f}s; "
          f"peak live actors {peak['live']}, peak threads {peak['threads']} (before: {base_threads})")
    assert peak["live"] <= MAX_LIVE
    # Actor threads are a fixed pool, far below max_live.
    assert peak["threads"] - base_threads <= 64
