"""What every benchmark process shares: result reporting, quiet logging, memory and percentiles.

Each workload runs in a fresh interpreter (one engine per process) and reports one line
``RESULT {json}`` on stdout; ``benchmarks/run.py`` collects those lines.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import logging
import os
import statistics
import sys
import time
from typing import Any

RESULT_PREFIX = "RESULT "
READY_PREFIX = "READY"


def report(**figures: Any) -> None:
    """Print the workload's figures as the one result line the runner reads."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(figures) + "\n")
    sys.stdout.flush()


def start_clock() -> float:
    """``time.perf_counter()`` after a full garbage collection: the timed part of a workload.

    The first full collection of a process walks every object its imports made (25 to 30 ms
    here); left to chance it falls inside a window of a few tens of milliseconds (workload 3)
    in one run or one revision and after it in another. Collected before the clock starts, it
    is in no engine's window; the collections the workload's own garbage causes still are.
    """
    gc.collect()
    return time.perf_counter()


def result_of(stdout: str) -> dict[str, Any] | None:
    """The figures of a workload process's result line, or None if it printed none."""
    for line in stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :])
    return None


def announce_ready() -> None:
    """Tell the runner that a prepared process may now be killed."""
    sys.stdout.write(READY_PREFIX + "\n")
    sys.stdout.flush()


def quiet_structlog() -> None:
    """Drop structlog events below WARNING: a benchmark must not time the console."""
    import structlog

    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        # As structlog recommends in production: the logger is assembled once, not per event.
        cache_logger_on_first_use=True,
    )


def rss_mb() -> float:
    """Return the resident set size of this process now, in MB (from /proc)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("VmRSS not found in /proc/self/status (Linux only)")


def file_size_mb(path: str) -> float:
    """Return the size of a SQLite database with its -wal file, in MB."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 1e6


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (0..100) of ``values``, nearest rank."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def lateness(values: list[float]) -> dict[str, float]:
    """Summarise timer lateness samples (seconds) as p50/p99 in milliseconds."""
    return {
        "late_p50_ms": percentile(values, 50) * 1e3,
        "late_p99_ms": percentile(values, 99) * 1e3,
        "late_mean_ms": statistics.fmean(values) * 1e3,
    }


def dbos_available() -> bool:
    """Whether DBOS (the peer of the comparisons) is installed."""
    try:
        importlib.metadata.version("dbos")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def wait_to_start(start_after: str, wait: float) -> None:
    """One process of several started together: say it is ready, then wait (up to ``wait``
    seconds) for the file ``start_after`` that says every process is."""
    announce_ready()
    deadline = time.monotonic() + wait
    while not os.path.exists(start_after):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{start_after} never appeared")
        time.sleep(0.005)
