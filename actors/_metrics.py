"""Prometheus metrics of a system (SPEC §13): ``ActorSystem(metrics=True)`` or a registry.

Every family is ``actorflow_*``, in Prometheus' conventions: counters end in ``_total``, durations
are ``_seconds`` histograms, and the labels are bounded: a workflow's type (its ``module:qualname``)
and a procedure's function, never an id. What the runtime counts anyway (live actors, commits,
shards) is read when the registry is scraped, by a collector; what it does not is counted where it
happens, by a call that costs one dict lookup and a lock-protected add (a workflow type's children
are made once and kept).

With ``metrics=True`` the families go in ``prometheus_client``'s default registry, which
``prometheus_client.start_http_server(port)`` serves; they are taken out again at ``shutdown()``,
so a process may open one system after another.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterator
from typing import Any

from persistence import FINISHED, SIGNAL

INSTALL = (
    "ActorSystem(metrics=...) needs prometheus_client, which is not installed; install the "
    "metrics extra from a checkout with pip install -e '.[metrics]'"
)

# Buckets of the duration histograms (seconds): a step or a commit takes a millisecond or so,
# a procedure may take seconds, a timer may fire late by seconds after a restart.
FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
SLOW = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def registry_for(metrics: Any) -> Any:
    """The ``CollectorRegistry`` that ``metrics`` names (True: the default one), or None."""
    if metrics is None or metrics is False:
        return None
    try:
        import prometheus_client
    except ImportError:
        raise ImportError(INSTALL) from None
    if metrics is True:
        return prometheus_client.REGISTRY
    if not isinstance(metrics, prometheus_client.CollectorRegistry):
        raise TypeError(
            f"metrics= takes True (prometheus_client's default registry), a "
            f"prometheus_client.CollectorRegistry, or None; got {metrics!r}"
        )
    return metrics


class _Histogram:
    """Bucket counts, a sum and a count (``le`` upper bounds), added to under the metrics' lock."""

    __slots__ = ("bounds", "counts", "total", "n")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.n = 0

    def add(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def merge(self, other: _Histogram) -> None:
        for i, c in enumerate(list(other.counts)):
            self.counts[i] += c
        self.total += other.total
        self.n += other.n

    def buckets(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, c in zip(
            (*map(repr, map(float, self.bounds)), "+Inf"), self.counts, strict=True
        ):
            running += c
            out.append((bound, float(running)))
        return out


# The families: (name without _total, help, label names). Counters first, then histograms.
COUNTERS = {
    "started": (
        "actorflow_workflows_started",
        "Workflows started (their record created), by type.",
        ("type",),
    ),
    "finished": (
        "actorflow_workflows_finished",
        "Workflows that ended, by type and status (completed, failed, cancelled).",
        ("type", "status"),
    ),
    "steps": ("actorflow_steps", "Workflow steps committed, by workflow type.", ("type",)),
    "signals": (
        "actorflow_signals_sent",
        "Signals sent: by clients (signal), by workflows (send) and by broadcasts (one per recipient).",
        ("source",),
    ),
    "asks": (
        "actorflow_asks_sent",
        "Asks sent to workflows by clients (ask, ask_async, wf ask); an ask repeated with its ask_id is not counted again.",
        (),
    ),
    "timers": ("actorflow_timers_fired", "Timers fired.", ()),
    "attempts": (
        "actorflow_procedure_attempts",
        "Procedure attempts run, by function.",
        ("function",),
    ),
    "failures": (
        "actorflow_procedure_failures",
        "Procedure calls failed for good (retries used up, or not retryable), by function.",
        ("function",),
    ),
    "retries": (
        "actorflow_procedure_retries",
        "Procedure attempts that failed and are tried again, by function.",
        ("function",),
    ),
    "limited": (
        "actorflow_procedure_limit_waits",
        "Procedure attempts that waited for their concurrency or rate limit, by function and limit.",
        ("function", "limit"),
    ),
    "storage_faults": (
        "actorflow_storage_faults",
        "Writes that failed for a reason of the storage (retried with backoff).",
        (),
    ),
    "ticks": (
        "actorflow_schedule_ticks",
        "Schedule ticks done, by outcome (started, skipped, missed).",
        ("outcome",),
    ),
}
HISTOGRAMS = {
    "step_seconds": (
        "actorflow_step_duration_seconds",
        "Time of a step, from its start to its commit, by workflow type.",
        ("type",),
        FAST,
    ),
    "timer_late": (
        "actorflow_timer_lateness_seconds",
        "How late a timer fired after its due time (system clock).",
        (),
        SLOW,
    ),
    "proc_seconds": (
        "actorflow_procedure_duration_seconds",
        "Time of one procedure attempt, by function.",
        ("function",),
        SLOW,
    ),
}


class _Tally:
    """One thread's counts and histograms: only that thread adds to them, so no lock is taken
    on the hot path; a scrape reads every thread's (a dict copy is atomic under the GIL)."""

    __slots__ = ("counts", "hists")

    def __init__(self) -> None:
        self.counts: dict[str, dict[tuple[str, ...], float]] = {k: {} for k in COUNTERS}
        self.hists: dict[str, dict[tuple[str, ...], _Histogram]] = {k: {} for k in HISTOGRAMS}

    def inc(self, key: str, labels: tuple[str, ...], n: float = 1) -> None:
        d = self.counts[key]
        d[labels] = d.get(labels, 0) + n

    def hist(self, key: str, labels: tuple[str, ...]) -> _Histogram:
        h = self.hists[key].get(labels)
        if h is None:
            h = self.hists[key][labels] = _Histogram(HISTOGRAMS[key][3])
        return h


# The registries holding a system's metrics now: id -> (the registry, the system's database).
_IN_USE: dict[int, tuple[Any, str]] = {}
_IN_USE_LOCK = threading.Lock()


class Metrics:
    """The metrics of one system, registered in ``registry``; ``close()`` unregisters them.

    The runtime's calls add to plain dicts of the calling thread's own (``_Tally``): no lock, a
    few hundred nanoseconds a call, where prometheus_client's own metrics take a lock and a few
    microseconds; ``collect`` sums the threads' tallies into the families when the registry is
    scraped.
    """

    def __init__(self, registry: Any, rt: Any, system: str = "") -> None:
        self.registry = registry
        self._rt = rt
        self._lock = threading.Lock()  # the list of tallies only
        self._local = threading.local()
        self._tallies: list[_Tally] = []
        with _IN_USE_LOCK:
            other = _IN_USE.get(id(registry))
            if other is not None and other[0] is registry:
                # Two systems' families of one name in one registry: a scrape would show each
                # series twice, told apart by nothing (prometheus_client refuses duplicates
                # for the collectors whose names it knows; these are collected at scrape time).
                raise ValueError(
                    f"the metrics registry holds the actorflow_* metrics of the system on "
                    f"{other[1]!r} already; give each open system its own registry "
                    f"(ActorSystem(metrics=prometheus_client.CollectorRegistry())), or shut that "
                    f"system down first"
                )
            registry.register(self)
            _IN_USE[id(registry)] = (registry, system)

    def close(self) -> None:
        with _IN_USE_LOCK:
            held = _IN_USE.get(id(self.registry))
            if held is not None and held[0] is self.registry:
                del _IN_USE[id(self.registry)]
        try:
            self.registry.unregister(self)
        except KeyError:
            pass

    # -- what the runtime calls ----------------------------------------------------------------
    def _tally(self) -> _Tally:
        try:
            t: _Tally = self._local.tally
        except AttributeError:
            t = self._local.tally = _Tally()
            with self._lock:
                self._tallies.append(t)
        return t

    def step(self, workflow_type: str, sw: Any, started: float, broadcast_to: int = 0) -> None:
        """A step of a workflow of ``workflow_type`` committed (``started``: perf_counter at its
        start; 0 if it is not a step the workflow's code ran; ``broadcast_to``: the workflows its
        broadcasts went into)."""
        t = self._tally()
        labels = (workflow_type,)
        t.inc("steps", labels)
        if started:
            t.hist("step_seconds", labels).add(time.perf_counter() - started)
        if sw.create is not None:
            t.inc("started", labels)
        if sw.status in FINISHED:
            t.inc("finished", (workflow_type, sw.status))
        if sw.signals:
            sent = sum(1 for s in sw.signals if s.kind == SIGNAL)
            if sent:
                t.inc("signals", ("workflow",), sent)
        if broadcast_to:
            t.inc("signals", ("broadcast",), broadcast_to)

    def count(self, key: str, *labels: str, n: float = 1) -> None:
        """Add ``n`` to the counter ``key`` (of ``COUNTERS``) with these label values."""
        if n:
            self._tally().inc(key, labels, n)

    def workflow_started(self, workflow_type: str | None, n: int = 1) -> None:
        self.count("started", workflow_type or "unknown", n=n)

    def signal_sent(self, source: str, n: int = 1) -> None:
        self.count("signals", source, n=n)

    def timer_fired(self, late: float) -> None:
        t = self._tally()
        t.inc("timers", ())
        t.hist("timer_late", ()).add(max(0.0, late))

    def attempt(self, function: str, seconds: float, outcome: str) -> None:
        """A procedure attempt ended: ``"ok"``, ``"retry"`` or ``"failed"`` (for good)."""
        t = self._tally()
        labels = (function,)
        t.inc("attempts", labels)
        t.hist("proc_seconds", labels).add(seconds)
        if outcome == "retry":
            t.inc("retries", labels)
        elif outcome == "failed":
            t.inc("failures", labels)

    # -- the collector ---------------------------------------------------------------------------
    def describe(self) -> list[Any]:
        return []  # (a describe would make the registry run collect at registration)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        with self._lock:
            tallies = list(self._tallies)
        counts: dict[str, dict[tuple[str, ...], float]] = {k: {} for k in COUNTERS}
        for key, (_name, _doc, labels) in COUNTERS.items():
            if not labels:  # one series: shown from the start, at 0
                counts[key][()] = 0.0
        merged: dict[str, dict[tuple[str, ...], _Histogram]] = {k: {} for k in HISTOGRAMS}
        for t in tallies:
            for key in COUNTERS:
                for lv, v in dict(t.counts[key]).items():
                    counts[key][lv] = counts[key].get(lv, 0.0) + v
            for key in HISTOGRAMS:
                for lv, h in dict(t.hists[key]).items():
                    m = merged[key].get(lv)
                    if m is None:
                        m = merged[key][lv] = _Histogram(h.bounds)
                    m.merge(h)
        for key, (_name, _doc, labels, bounds) in HISTOGRAMS.items():
            if not labels and () not in merged[key]:  # one series: shown from the start, empty
                merged[key][()] = _Histogram(bounds)
        hists = {k: {lv: (h.buckets(), h.total) for lv, h in v.items()} for k, v in merged.items()}
        # Every family is yielded from the start, a labelled one with no series until its first
        # (as prometheus_client shows its own): a scrape lists each family the system registers.
        for key, (name, doc, labels) in COUNTERS.items():
            c = CounterMetricFamily(name, doc, labels=labels)
            for lv, value in sorted(counts[key].items()):
                c.add_metric(lv, value)
            yield c
        for key, (name, doc, labels, _bounds) in HISTOGRAMS.items():
            family = HistogramMetricFamily(name, doc, labels=labels)
            for lv, (buckets, total) in sorted(hists[key].items()):
                family.add_metric(lv, buckets, total)
            yield family
        yield from _live(self._rt)


def _live(rt: Any) -> Iterator[Any]:
    """The families read at scrape time from what the runtime keeps anyway."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    act = rt.activator
    yield GaugeMetricFamily(
        "actorflow_actors_live",
        "Workflow actors alive now (at most max_live).",
        value=act.live_count(),
    )
    yield CounterMetricFamily(
        "actorflow_actors_passivated",
        "Idle workflow actors stopped (their state is stored).",
        value=act.passivated,
    )
    yield GaugeMetricFamily(
        "actorflow_mailbox_messages",
        "Messages handed to workflow actors and not handled yet (signals, timer firings, procedure "
        "replies, child results).",
        value=act.queued(),
    )
    try:
        buffered, fullest = rt.store.inbox_depth()
    except Exception:  # the store is away: the scrape goes on without these two
        pass
    else:
        yield GaugeMetricFamily(
            "actorflow_inbox_messages",
            "Messages waiting in the workflows' inboxes (signals, asks, cancels and children's "
            "outcomes stored and not taken yet).",
            value=buffered,
        )
        yield GaugeMetricFamily(
            "actorflow_inbox_messages_max",
            "Messages waiting in the fullest one workflow's inbox (InboxFull at inbox_limit).",
            value=fullest,
        )
    writer = getattr(rt.store, "_writer", None)
    if writer is not None:
        yield CounterMetricFamily(
            "actorflow_commit_batches",
            "Group commits of the writer (transactions).",
            value=writer.batches,
        )
        yield CounterMetricFamily(
            "actorflow_commit_batch_writes",
            "Writes (steps, starts, signals) in the writer's group commits: over batches, the mean batch size.",
            value=writer.batched_writes,
        )
        yield CounterMetricFamily(
            "actorflow_commit_batch_seconds",
            "Seconds spent in the writer's group commits (statements and COMMIT): over batches, the mean latency.",
            value=writer.batch_seconds,
        )
    cluster = rt.cluster  # on SQLite, a cluster of one: one shard, no rounds, no takeovers
    yield GaugeMetricFamily(
        "actorflow_cluster_shards_owned",
        "Shards this node leases now.",
        value=len(cluster.owned_shards()),
    )
    yield CounterMetricFamily(
        "actorflow_cluster_lease_renewals",
        "Rounds that renewed this node's heartbeat and leases.",
        value=getattr(cluster, "rounds", 0),
    )
    yield CounterMetricFamily(
        "actorflow_cluster_takeovers",
        "Nodes this node declared dead (their shards were taken over).",
        value=getattr(cluster, "takeovers", 0),
    )
    yield CounterMetricFamily(
        "actorflow_cluster_shards_gained",
        "Shards this node took (at a takeover or a handoff).",
        value=rt.shards_taken,
    )
