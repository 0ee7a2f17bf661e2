"""Prometheus metrics (SPEC §13): a scrape of the system's registry after a known workload holds
exactly the expected counts, labelled by workflow type and procedure function, never by id."""

from __future__ import annotations

import sys

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from actors import ActorSystem, Status, WorkflowNotRunning  # noqa: E402
from actors.testing import VirtualClock  # noqa: E402

from . import metric_flows, talk_flows  # noqa: E402
from .metric_flows import doomed, order  # noqa: E402

T = 30.0
ORDER = "tests.actors.metric_flows:order"
DOOMED = "tests.actors.metric_flows:doomed"
CHARGE = "tests.actors.metric_flows:charge"
REFUSE = "tests.actors.metric_flows:refuse"


def test_a_scrape_after_a_known_workload_has_exactly_the_expected_counts(db: str) -> None:
    metric_flows.FAILED_ONCE.clear()
    clock = VirtualClock()
    registry = CollectorRegistry()
    with ActorSystem(db, clock=clock, metrics=registry) as system:
        refs = [system.start(order, n, id=f"ord-{n}") for n in range(3)]
        bad = system.start(doomed, id="doom-1")
        system.idle(T)
        for r in refs:
            r.signal("pay", 1)
        system.idle(T)
        clock.advance(1.0)  # charge(0)'s retry
        system.idle(T)
        clock.advance(5.0)  # the timers: orders 1 and 2 a second late, order 0 on time
        system.idle(T)
        assert [r.result(timeout=T) for r in refs] == [1, 11, 21]
        assert bad.status() is Status.FAILED

        def value(name: str, **labels: str) -> float | None:
            v: float | None = registry.get_sample_value(name, labels)
            return v

        # Each workflow's row counts its committed steps (step_seq).
        store = system._rt.store
        steps = {
            t: sum(store.load_workflow(i.id).step_seq for i in system.workflows(type=t))
            for t in (ORDER, DOOMED)
        }
        assert value("actorflow_workflows_started_total", type=ORDER) == 3
        assert value("actorflow_workflows_started_total", type=DOOMED) == 1
        assert value("actorflow_workflows_finished_total", type=ORDER, status="completed") == 3
        assert value("actorflow_workflows_finished_total", type=DOOMED, status="failed") == 1
        assert value("actorflow_workflows_finished_total", type=ORDER, status="failed") is None
        assert value("actorflow_steps_total", type=ORDER) == steps[ORDER]
        assert value("actorflow_steps_total", type=DOOMED) == steps[DOOMED]
        assert value("actorflow_step_duration_seconds_count", type=ORDER) == steps[ORDER]
        assert value("actorflow_signals_sent_total", source="client") == 3
        with pytest.raises(WorkflowNotRunning):  # refused: not sent
            system.get(system.workflows(type=DOOMED)[0].id).signal("go", 1)
        assert value("actorflow_signals_sent_total", source="client") == 3
        assert value("actorflow_timers_fired_total") == 3
        assert value("actorflow_timer_lateness_seconds_count") == 3
        assert value("actorflow_timer_lateness_seconds_sum") == pytest.approx(2.0)
        assert value("actorflow_procedure_attempts_total", function=CHARGE) == 4
        assert value("actorflow_procedure_retries_total", function=CHARGE) == 1
        assert value("actorflow_procedure_failures_total", function=CHARGE) is None
        assert value("actorflow_procedure_attempts_total", function=REFUSE) == 1
        assert value("actorflow_procedure_failures_total", function=REFUSE) == 1
        assert value("actorflow_procedure_duration_seconds_count", function=CHARGE) == 4
        assert (
            value("actorflow_storage_faults_total") is None
            or value("actorflow_storage_faults_total") == 0
        )
        assert value("actorflow_actors_live") == system.live_actors()
        assert value("actorflow_mailbox_messages") == 0
        assert value("actorflow_inbox_messages") == value("actorflow_inbox_messages_max") == 0
        writer = system._rt.store._writer
        assert value("actorflow_commit_batches_total") == writer.batches > 0
        assert (
            value("actorflow_commit_batch_writes_total") == writer.batched_writes >= writer.batches
        )
        assert (value("actorflow_commit_batch_seconds_total") or 0) > 0
        text = generate_latest(registry).decode()
        assert "ord-" not in text and "doom-1" not in text  # ids are never labels
        if db.startswith("postgresql"):
            assert value("actorflow_cluster_shards_owned") == 256
    # Shut down: its families are gone from the registry, which the next system may use.
    assert registry.get_sample_value("actorflow_workflows_started_total", {"type": ORDER}) is None
    with ActorSystem(db, clock=clock, metrics=registry) as system:
        assert registry.get_sample_value("actorflow_actors_live") == 0


def test_the_inbox_gauges_count_the_messages_waiting_in_the_inboxes(db: str) -> None:
    """Signals a workflow does not await yet wait in its inbox: ``actorflow_inbox_messages``
    counts them all, ``actorflow_inbox_messages_max`` those of the fullest inbox (the one that
    nears ``InboxFull``); a step that takes them empties the count."""
    from . import flows

    registry = CollectorRegistry()
    with ActorSystem(db, metrics=registry) as system:
        first, second = system.start(flows.collect, 5), system.start(flows.collect, 2)
        for _ in range(5):
            first.signal("later", 1)
        for _ in range(2):
            second.signal("later", 1)
        system.idle(T)
        value = registry.get_sample_value
        assert value("actorflow_inbox_messages") == 7
        assert value("actorflow_inbox_messages_max") == 5
        assert value("actorflow_mailbox_messages") == 0
        for ref, n in ((first, 5), (second, 2)):
            for _ in range(n):
                ref.signal("item", 1)
        assert first.result(T) == [1] * 5 and second.result(T) == [1] * 2
        system.idle(T)
        assert value("actorflow_inbox_messages") == 0  # (the workflows ended: their inboxes went)


def test_asks_are_counted_once_each_also_when_asked_again_by_their_ask_id(db: str) -> None:
    """Each ask a client sends counts once in ``actorflow_asks_sent_total``; asking again with the
    same ``ask_id`` (after a crash) returns the stored reply and counts nothing more."""
    registry = CollectorRegistry()
    with ActorSystem(db, metrics=registry) as system:
        ref = system.start(talk_flows.answers_one, "q", id="asked")
        assert ref.ask("q", 1, timeout=T, ask_id="a-1") == "got 1"
        assert ref.ask("q", 1, timeout=T, ask_id="a-1") == "got 1"
        assert registry.get_sample_value("actorflow_asks_sent_total") == 1


def test_signals_are_counted_by_source_a_workflow_broadcast_once_per_recipient(db: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """signals_sent_total counts a workflow's send() as "workflow", each workflow its broadcast()
    went into as "broadcast", and a signal sent with `wf signal` (a client's) as "client"."""
    from .test_cli import wf

    registry = CollectorRegistry()
    with ActorSystem(db, clock=VirtualClock(), metrics=registry) as system:
        one = system.start(metric_flows.listener, id="l-1")
        two = system.start(metric_flows.listener, id="l-2")
        three = system.start(metric_flows.listener, id="l-3")
        system.idle(T)
        system.start(metric_flows.announcer, "l-1", id="a-1").result(timeout=T)
        assert one.result(timeout=T) in ("direct", "everyone")
        assert two.result(timeout=T) == three.result(timeout=T) == "everyone"
        late = system.start(metric_flows.listener, id="l-4")  # subscribed after the broadcast
        system.idle(T)
        assert wf(capsys, "signal", "l-4", "news", '"shell"', "--db", db)[0] == 0
        system.idle(T)
        assert late.result(timeout=T) == "shell"

        def value(source: str) -> float | None:
            v: float | None = registry.get_sample_value("actorflow_signals_sent_total", {"source": source})
            return v

        assert value("workflow") == 1
        assert value("broadcast") == 3  # l-1, l-2 and l-3 were subscribed
        assert value("client") == 1


def test_metrics_true_without_prometheus_client_says_what_to_install(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # an import of it now fails
    with pytest.raises(ImportError, match=r"pip install -e '\.\[metrics\]'"):
        ActorSystem(str(tmp_path / "wf.db"), metrics=True)
    with pytest.raises(TypeError, match="metrics= takes True"):
        monkeypatch.undo()
        ActorSystem(str(tmp_path / "wf.db"), metrics="yes")
    with ActorSystem(str(tmp_path / "wf.db")) as system:  # the file was never taken
        assert system.workflows() == []


def test_a_registry_holds_the_metrics_of_one_open_system(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A second open system on the registry of another is refused, as prometheus_client refuses
    a duplicated metric (a scrape would show each series twice, told apart by nothing); once the
    first shuts down, the registry is free again."""
    registry = CollectorRegistry()
    with ActorSystem(str(tmp_path / "a.db"), metrics=registry):
        with pytest.raises(ValueError, match=r"holds the actorflow_\* metrics of the system on .*a\.db.* its own registry"):
            ActorSystem(str(tmp_path / "b.db"), metrics=registry)
        with ActorSystem(str(tmp_path / "c.db"), metrics=CollectorRegistry()) as other:
            assert other.live_actors() == 0
    with ActorSystem(str(tmp_path / "b.db"), metrics=registry):
        assert registry.get_sample_value("actorflow_actors_live") == 0


def test_metrics_true_uses_the_default_registry_and_leaves_it_at_shutdown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from prometheus_client import REGISTRY

    with ActorSystem(str(tmp_path / "wf.db"), metrics=True) as system:
        system.start(order, 5, id="o")
        system.idle(T)
        assert REGISTRY.get_sample_value("actorflow_workflows_started_total", {"type": ORDER}) == 1
    assert REGISTRY.get_sample_value("actorflow_workflows_started_total", {"type": ORDER}) is None


def test_the_counters_without_labels_are_scraped_at_zero_before_anything_happens(db: str) -> None:
    """A dashboard's rate() of a counter needs its series from the start: the counters with no
    labels (asks sent, timers fired, storage faults) are in the first scrape, at 0."""
    from actors._metrics import COUNTERS

    registry = CollectorRegistry()
    with ActorSystem(db, clock=VirtualClock(), metrics=registry):
        unlabelled = [name for name, _doc, labels in COUNTERS.values() if not labels]
        assert "actorflow_asks_sent" in unlabelled
        for name in unlabelled:
            assert registry.get_sample_value(name + "_total", {}) == 0.0, name
