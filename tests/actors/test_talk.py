"""Talking to a running workflow (SPEC §12): published values, and asks with replies.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from structlog.testing import capture_logs

import actors._talk
from actors import ActorSystem, AskFailed, Status, WorkflowNotRunning
from workflows import WorkflowError, WorkflowFailed

from . import talk_flows as tf
from .runtime_support import Inside, T, _wait_until, reader


@pytest.fixture(autouse=True)
def _fresh() -> None:
    with tf.SEEN_LOCK:
        tf.SEEN.clear()
    tf.REDUCER_FAILS.clear()


# -- published values ---------------------------------------------------------------------------
def test_published_value_is_read_after_its_step_commits_last_write_wins(system):
    """A value published by a step is readable once the step commits; the last write of a key wins;
    nothing published is a KeyError; info() and workflows() hold every key."""
    ref = system.start(tf.progress, 3, id="p")
    system.idle(T)
    with pytest.raises(KeyError, match="published nothing under 'done' yet"):
        ref.published("done")
    ref.signal("tick")
    ref.signal("tick")
    system.idle(T)
    assert ref.published("done") == 2
    assert ref.published("label") == "step 2 of 3"
    assert ref.info().published == {"done": 2, "label": "step 2 of 3"}
    assert [i.published for i in system.workflows()] == [{"done": 2, "label": "step 2 of 3"}]


@pytest.fixture
def no_reread(monkeypatch):
    """A waiting caller rereads the store only after an hour: what it gets, it got woken."""
    monkeypatch.setattr(actors._talk, "RECHECK", 3600.0)
    monkeypatch.setattr(actors._talk, "RECHECK_MAX", 3600.0)


def waits_on(system, workflow_id: str) -> bool:
    """Someone in ``system`` waits for news of ``workflow_id`` (a publish, a reply, its end)."""
    return workflow_id in Inside(system)._rt._finish_waiters


def test_published_with_a_timeout_waits_for_the_first_value_woken_by_the_commit(system, no_reread):
    """``published(key, timeout=...)`` waits for a first value and is woken by the commit that
    publishes it (rereads are an hour apart here); with nothing published it times out."""
    ref = system.start(tf.progress, 1, id="p")
    system.idle(T)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(ref.published("done", timeout=T)))
    reader.start()
    _wait_until(lambda: waits_on(system, "p"), "the reader waits")
    ref.signal("tick")
    reader.join(T)
    assert got == [1]
    assert ref.status() is Status.COMPLETED
    running = system.start(tf.progress, 1, id="q")
    with pytest.raises(TimeoutError, match="published nothing under 'other' within 0.05s"):
        running.published("other", timeout=0.05)


def test_nothing_published_within_the_timeout_is_a_key_error_too(system):
    """``published(key, timeout=...)`` that waited in vain raises a TimeoutError that is also the
    KeyError of "nothing was published" (SPEC §12), so one ``except KeyError`` handles both."""
    ref = system.start(tf.progress, 1, id="p")
    system.idle(T)
    with pytest.raises(KeyError, match="published nothing under 'done' within 0.01s") as caught:
        ref.published("done", timeout=0.01)
    assert isinstance(caught.value, TimeoutError)
    assert str(caught.value).startswith("workflow 'p' published nothing")  # not KeyError's quotes

    async def main() -> None:
        with pytest.raises(KeyError):
            await ref.published_async("done", timeout=0.01)

    asyncio.run(main())


def test_published_values_outlive_passivation_and_the_end_and_a_restart(db, clock):
    """Published values are read from the store: while the workflow is passivated (no actor is loaded
    for it), after a restart, and after it finished."""
    with ActorSystem(db, clock=clock) as s:
        ref = s.start(tf.progress, 2, id="p")
        ref.signal("tick")
        s.idle(T)
        assert Inside(s).passivate_idle(0.0) >= 1
        live = s.live_actors()
        assert ref.published("done") == 1  # read from the store: the actor is not loaded again
        assert s.live_actors() == live
    with ActorSystem(db, clock=clock) as s:
        ref = s.get("p")
        assert ref.published("label") == "step 1 of 2"
        ref.signal("tick")
        assert ref.result(T) == 2
        assert ref.published("done") == 2
        with pytest.raises(KeyError, match="ended without publishing 'nope'"):
            ref.published("nope", timeout=T)  # a finished workflow publishes nothing more


def test_a_step_that_rolled_back_never_published(system):
    """A step whose reducer raises is rolled back with what it published: the value before it stays."""
    ref = system.start(tf.publishes_then_fails_reducer, "rb", id="rb")
    system.idle(T)
    assert ref.published("state") == "before"
    ref.signal("go")
    with pytest.raises(WorkflowFailed, match="reducer of rb fails"):
        ref.result(T)  # the reducer fails at every restart: the workflow fails for good
    assert tf.REDUCER_FAILS["rb"] >= 2
    assert ref.published("state") == "before"


def test_published_async_waits_without_blocking_the_loop(system):
    """published_async waits for a first value while the event loop goes on."""
    ref = system.start(tf.progress, 1, id="p")
    system.idle(T)

    async def main():
        task = asyncio.ensure_future(ref.published_async("done", timeout=T))
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0.01)
            ticks += 1
        await ref.signal_async("tick")
        value = await asyncio.wait_for(task, T)
        with pytest.raises(KeyError):
            await ref.published_async("missing")
        return value, ticks

    assert asyncio.run(main()) == (1, 5)


# -- asks -----------------------------------------------------------------------------------------
def test_ask_returns_the_reply_and_a_refusal_raises_ask_failed(system, no_reread):
    """ask returns the workflow's reply; reply(req, error=...) raises AskFailed carrying the
    exception."""
    ref = system.start(tf.account, 100, id="acct")
    assert ref.ask("withdraw", 30, timeout=T) == 70
    with pytest.raises(AskFailed, match="insufficient funds: balance 70, asked 500") as e:
        ref.ask("withdraw", 500, timeout=T)
    assert e.value.error_type == "ValueError" and isinstance(e.value.error, ValueError)
    assert ref.ask("balance", timeout=T) == 70
    assert ref.published("balance") == 70


def test_a_refusal_with_a_domain_error_carries_it_whole(system):
    """A replied exception whose __init__ takes other arguments than its message (pickle would
    rebuild it as cls(message), which fails) reaches the asker as itself, attributes included."""
    ref = system.start(tf.strict_bank, "zoe", 3, id="bank")
    with pytest.raises(AskFailed, match="zoe has only 3") as e:
        ref.ask("withdraw", 5, timeout=T)
    error = e.value.error
    assert isinstance(error, tf.InsufficientFunds)
    assert (error.owner, error.balance, error.args) == ("zoe", 3, ("zoe has only 3",))
    assert e.value.error_type == "tests.actors.talk_flows.InsufficientFunds"


def test_an_ask_id_asked_again_returns_the_stored_reply_without_asking_twice(system):
    """An ask asked again with its ask_id returns the stored reply and the workflow sees it once; an
    ask_id names one ask of one name."""
    ref = system.start(tf.account, 100, id="acct")
    assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90
    assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90
    assert ref.ask("balance", timeout=T) == 90
    assert tf.SEEN["account"] == ["w-1"]
    with pytest.raises(ValueError, match="was used for an ask 'withdraw', not 'balance'"):
        ref.ask("balance", ask_id="w-1", timeout=T)


def test_an_ask_waits_in_the_inbox_until_it_is_awaited(system):
    """An ask sent before the workflow awaits its request waits in the inbox and is answered later."""
    ref = system.start(tf.answers_one, "late", id="late")
    system.idle(T)
    assert ref.ask("late", "x", timeout=T) == "got x"


def test_ask_on_a_finished_workflow_raises_at_once_but_a_stored_reply_is_still_returned(system):
    """An ask to a finished workflow raises WorkflowNotRunning at once; an ask id it answered before
    still gets its stored reply."""
    ref = system.start(tf.account, 5, id="acct")
    assert ref.ask("withdraw", 1, ask_id="before-end", timeout=T) == 4
    ref.signal("close")
    assert ref.result(T) == 4
    with pytest.raises(
        WorkflowNotRunning, match="cannot ask 'withdraw': workflow 'acct' has already finished"
    ):
        ref.ask("withdraw", 1, timeout=T, ask_id="after-end")  # refused by the write itself
    assert Inside(system)._rt.store.ask("acct", "after-end") is None  # rolled back with it
    assert ref.ask("withdraw", 1, ask_id="before-end", timeout=T) == 4


def test_a_workflow_that_ends_with_unanswered_asks_fails_them(system, no_reread):
    """Asks a workflow never answered fail with WorkflowNotRunning when it ends."""
    ref = system.start(tf.never_answers, id="mute")
    system.idle(T)
    errors: list[BaseException] = []

    def asker(i: int) -> None:
        try:
            ref.ask("anything", i, timeout=T)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=asker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    _wait_until(lambda: len(Inside(system)._rt.store.inbox("mute")) == 3, "three asks stored")
    ref.signal("stop")
    for t in threads:
        t.join(T)
    assert ref.result(T) == "stopped"
    assert len(errors) == 3 and all(isinstance(e, WorkflowNotRunning) for e in errors), errors
    assert "ended (completed) without replying" not in str(errors[0])  # the asker's own words
    assert "cannot answer ask 'anything'" in str(errors[0])


def test_ask_times_out_and_the_request_stays_for_a_second_ask_with_its_id(system):
    """An ask that times out leaves its request stored: asking again with its id goes on waiting for
    that reply."""
    ref = system.start(tf.answers_one, "q", id="slow")
    ref_mute = system.start(tf.never_answers, id="mute")
    with pytest.raises(TimeoutError, match="ask again with ask_id='a1'"):
        ref_mute.ask("q", ask_id="a1", timeout=0.05)
    assert ref.ask("q", 1, ask_id="a1", timeout=T) == "got 1"


def test_an_ask_survives_a_restart_of_the_system(db, clock):
    """An answered ask is stored: after a restart the same ask id returns its reply without asking
    the workflow again."""
    with ActorSystem(db, clock=clock) as s:
        s.start(tf.never_answers, id="gate")
        ref = s.start(tf.answers_one, "late", id="late")
        s.idle(T)
        # Stored, then the asker gives up (or crashes).
        with pytest.raises(TimeoutError):
            s.get("gate").ask("late", ask_id="lost", timeout=0.01)
        assert ref.ask("late", "first", ask_id="k", timeout=T) == "got first"
    with ActorSystem(db, clock=clock) as s:
        assert s.get("late").ask("late", "ignored", ask_id="k", timeout=T) == "got first"
        assert tf.SEEN["answers_one"] == ["k"]


def test_a_second_reply_to_one_request_raises_in_the_workflow_and_the_first_stands(system):
    """A request is answered once: a second reply raises WorkflowError in the workflow, and the asker
    has the first."""
    ref = system.start(tf.replies_twice, id="twice")
    assert ref.ask("q", timeout=T) == 1
    with pytest.raises(Exception, match="was answered already; each request is answered once"):
        ref.result(T)


def test_payloads_of_megabytes_go_through_start_signal_ask_and_reply(system):
    """A start argument, a signal, an ask and its reply of 8 MB each are stored and answered
    (on PostgreSQL such a statement outgrows what the socket takes at once: it must be sent
    whole before the writer waits for its answer, or client and server wait on each other for
    good), and the system goes on answering small asks after them."""
    from . import flows

    big = "x" * (8 * 1024 * 1024)
    pub = system.start(tf.publishes, "big", big, id="big-pub")
    assert pub.published("big", timeout=T) == big
    col = system.start(flows.collect, 2, id="big-sig")
    col.signal("item", big)
    col.signal("item", "small")
    assert col.result(T) == [big, "small"]
    ref = system.start(tf.answers_one, "q", id="big-ask")
    assert ref.ask("q", big, timeout=T) == f"got {big}"
    acct = system.start(tf.account, 10, id="big-after")
    assert acct.ask("withdraw", 3, timeout=T) == 7


def test_a_reply_whose_value_cannot_be_stored_is_refused_at_the_call_and_the_request_stays_open(system):
    """reply() refuses a value it could not store with a TypeError the workflow can catch; the
    request is not answered by it, so the workflow's second reply is the asker's answer."""
    ref = system.start(tf.replies_what_cannot_be_stored, id="unstorable-reply")
    answer = ref.ask("q", timeout=T)
    assert answer.startswith("refused: reply('q') value cannot be stored"), answer
    assert ref.result(T) == "answered"


def test_an_ask_waiting_as_the_system_shuts_down_raises_system_closed(db, clock):
    """shutdown() ends an ask() another thread waits in with SystemClosed, as it ends result():
    not with the store's own error (which would tell the caller to open the store again)."""
    from actors import SystemClosed

    system = ActorSystem(db, clock=clock)
    ref = system.start(tf.never_answers, id="mute")
    system.idle(T)
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            ref.ask("q", 1, timeout=T, ask_id="q-1")
        except BaseException as e:  # noqa: BLE001 - what it raised is the check
            raised.append(e)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    _wait_until(lambda: system._rt.store.ask("mute", "q-1") is not None, "the ask is stored")
    system.shutdown()
    t.join(T)
    assert not t.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], SystemClosed), raised


def test_ask_async_does_not_block_the_loop(system):
    """ask_async answers concurrent asks while the event loop goes on."""
    ref = system.start(tf.account, 10, id="acct")

    async def main():
        ticks = 0
        task = asyncio.ensure_future(
            asyncio.gather(*(ref.ask_async("withdraw", 1, timeout=T) for _ in range(5)))
        )
        while not task.done():
            await asyncio.sleep(0.001)
            ticks += 1
        return sorted(task.result()), ticks

    balances, ticks = asyncio.run(main())
    assert balances == [5, 6, 7, 8, 9] and ticks > 0


def test_an_ask_whose_name_the_workflow_never_awaits_warns(system):
    """An ask of a name the workflow's code never awaits logs ask_not_awaited, naming the names it
    awaits."""
    ref = system.start(tf.account, 10, id="acct")
    system.idle(T)
    with capture_logs() as logs:
        with pytest.raises(TimeoutError):
            ref.ask("deposit", 5, timeout=0.2)
    warned = [e for e in logs if e["event"] == "ask_not_awaited"]
    assert warned and warned[0]["ask"] == "deposit" and "withdraw" in warned[0]["awaited"]


def test_request_in_select_wins_as_an_event_of_kind_request(system):
    """request() is a select arm that wins as Event(name, req) of kind 'request' (harness and
    runtime); the compiler knows its literal name."""
    from workflows import publish
    from workflows.testing import WorkflowHarness

    h = WorkflowHarness(tf.request_or_signal)
    h.ask("r", 7, ask_id="i")
    assert h.result() == ("r", "request", 7, "i")
    assert tf.request_or_signal.signal_names == frozenset({"r", "s"})
    with pytest.raises(WorkflowError, match="outside a running workflow"):
        publish("k", 1)
    ref = system.start(tf.request_or_signal, id="sel")
    with pytest.raises(WorkflowNotRunning, match="cannot answer ask 'r'"):
        ref.ask("r", 8, ask_id="j", timeout=T)  # it won, but the workflow returned without replying
    assert ref.result(T) == ("r", "request", 8, "j")


@pytest.mark.parametrize("bad", [-1, float("nan"), "5"])
def test_ask_refuses_a_timeout_that_is_not_seconds_before_it_sends_anything(system, bad):
    ref = system.start(tf.never_answers, id="n")
    with pytest.raises(ValueError, match=r"ask\(\) timeout must be a number of seconds, 0 or more"):
        ref.ask("question", timeout=bad)
    with pytest.raises(ValueError, match=r"ask_async\(\) timeout must be"):
        asyncio.run(ref.ask_async("question", timeout=bad))
    assert system._rt.store.read_table("SELECT ask_id FROM asks") == []  # nothing was sent


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ("line\nbreak", ValueError, r"ask\(\) ask_id 'line\\nbreak' holds the control character"),
        ("\x1b[31mred", ValueError, r"ask\(\) ask_id .* holds the control character '\\x1b'"),
        ("x" * 1001, ValueError, r"ask\(\) ask_id 'x+'\.\.\. is 1,001 bytes long"),
        (7, TypeError, r"ask\(\) ask_id must be a non-empty string or None, got 7"),
        ("", TypeError, r"ask\(\) ask_id must be a non-empty string or None, got ''"),
    ],
)
def test_ask_refuses_an_ask_id_a_workflow_id_could_not_be_before_it_sends_anything(
    system, bad, error, message
):
    """An ask_id follows the rules of a workflow id (printable text that can be stored, of a
    string type), and the same kind of error names it, from ask and ask_async alike, before
    anything is stored: the workflow sees no request."""
    ref = system.start(tf.account, 100, id="acct")
    with pytest.raises(error, match=message):
        ref.ask("withdraw", 1, timeout=T, ask_id=bad)
    with pytest.raises(error, match=message):
        asyncio.run(ref.ask_async("withdraw", 1, timeout=T, ask_id=bad))
    system.idle(T)
    assert system._rt.store.read_table("SELECT ask_id FROM asks") == []  # nothing was sent
    assert ref.published("balance") == 100 and "account" not in tf.SEEN
    assert ref.ask("withdraw", 1, timeout=T, ask_id="a printable id") == 99


def test_a_reply_from_another_workflow_than_the_one_asked_is_refused_at_that_line(system):
    """Only the workflow an ask was made of answers it: another one given its Request (by send)
    gets a WorkflowError at its reply(), where it can see it, instead of a reply that no asker
    ever got."""
    worker = system.start(tf.worker, id="worker")
    router = system.start(tf.router, id="router")
    with pytest.raises(WorkflowNotRunning, match="cannot answer ask 'job'"):  # the router ended unanswered
        router.ask("job", 7, timeout=T, ask_id="J")
    system.idle(timeout=T)
    with pytest.raises(WorkflowFailed, match=r"request 'job' \(ask 'J'\) was asked of workflow 'router', "
                       r"and only its reply answers it \(this is 'worker'\); send the answer back"):
        worker.result(timeout=T)


@pytest.mark.parametrize("use_async", [False, True], ids=["ask", "ask_async"])
def test_an_ask_ended_by_a_shutdown_names_its_ask_id_to_go_on_waiting_after_a_restart(
    db, clock, use_async
):
    """An ask (with no ask_id of the caller's) ended by shutdown() raises SystemClosed saying the
    request stays stored and naming its generated ask_id (also as ``.ask_id``); asked again
    with it on the next system, it gets the reply, asked once. Before, the id was never told:
    the reply of that stored request could not be had."""
    from actors import SystemClosed

    system = ActorSystem(db, clock=clock)
    ref = system.start(tf.opens_then_answers, id="late")
    system.idle(T)
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            if use_async:
                asyncio.run(ref.ask_async("q", 5))
            else:
                ref.ask("q", 5)
        except BaseException as e:  # noqa: BLE001 - what it raised is the check
            raised.append(e)

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    _wait_until(lambda: bool(system._rt.store.inbox("late")), "the ask is stored")
    system.shutdown()
    t.join(T)
    assert not t.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], SystemClosed), raised
    ask_id = getattr(raised[0], "ask_id", None)
    assert isinstance(ask_id, str) and f"ask_id={ask_id!r}" in str(raised[0]), raised[0]
    assert "stays stored" in str(raised[0])
    with ActorSystem(db, clock=clock) as again:
        again.get("late").signal("open")
        assert again.get("late").ask("q", 5, ask_id=ask_id, timeout=T) == "answered 5"
        assert again.get("late").result(T) == "done"
    assert tf.SEEN["opens_then_answers"] == [ask_id]


def test_an_ask_into_a_full_inbox_raises_inbox_full_as_a_signal_does(db, clock):
    """Asks are bounded by inbox_limit as signals are: past it ask() and ask_async() raise
    InboxFull and store nothing (the workflow never sees that request); an ask asked again by its
    ask_id still gets its stored one. Before, asks were stored without bound, however many a
    client sent to a workflow that never takes them."""
    from actors import InboxFull

    with ActorSystem(db, clock=clock, inbox_limit=2) as system:
        ref = system.start(tf.opens_then_answers, id="full")
        system.idle(T)
        for i in range(2):
            with pytest.raises(TimeoutError):
                ref.ask("q", i, ask_id=f"a{i}", timeout=0)
        with pytest.raises(InboxFull, match="is full: it already buffers 2 asks"):
            ref.ask("q", 2, ask_id="a2", timeout=T)
        with pytest.raises(InboxFull):
            asyncio.run(ref.ask_async("q", 3, timeout=T))
        assert [m.name for m in system._rt.store.inbox("full")] == ["q", "q"]
        with pytest.raises(TimeoutError):  # asked again by its id: the stored one, not refused
            ref.ask("q", 0, ask_id="a0", timeout=0)
        ref.signal("open")  # awaited now: it gets through, and the first ask is answered
        assert ref.ask("q", 0, ask_id="a0", timeout=T) == "answered 0"
        assert ref.result(T) == "done"
        assert tf.SEEN["opens_then_answers"] == ["a0"]


def test_an_ask_a_failed_gather_took_is_refused_not_left_unanswered(system):
    """An ask taken by an arm of a ``gather`` that then fails (another arm raised) was never seen
    by the workflow's code: it is refused with ``AskFailed`` saying so, at once, instead of
    waiting unanswered until the workflow ends; the next ask is answered as usual."""
    ref = system.start(tf.gathers_an_ask_with_a_child, id="g")
    got: list[object] = []

    def ask() -> None:
        try:
            got.append(ref.ask("q", 1, timeout=T, ask_id="first"))
        except AskFailed as e:
            got.append(e)

    asker = threading.Thread(target=ask)
    asker.start()
    _wait_until(lambda: "gather" in str(ref.history()[-1:]), "the gather took the ask")
    system.get("gathered-child").signal("fail")
    asker.join(T)
    assert len(got) == 1 and isinstance(got[0], AskFailed), got
    assert isinstance(got[0].error, WorkflowError)
    assert "taken by the gather at" in str(got[0]) and "ChildFailed" in str(got[0])
    assert "ask again" in str(got[0])
    assert ref.ask("q", 2, timeout=T) == "answered 2"
    assert ref.result(T) == "done"


# -- how long an answered ask is kept -----------------------------------------------------------
DAY = 86400.0


def asks_of(db: str, workflow_id: str) -> dict[str, str]:
    """The asks of ``workflow_id`` as stored (ask id -> status), read by a reader store."""
    with reader(db) as store:
        rows = store.read_table(
            "SELECT ask_id, status FROM asks WHERE workflow_id = ? ORDER BY ask_id", (workflow_id,)
        )
    return {r["ask_id"]: r["status"] for r in rows}


def test_an_answered_ask_is_kept_for_the_id_retention_then_swept_and_the_workflow_answers_on(db, clock):
    """A workflow answering asks forever keeps the replies of a window, not every one: an answered
    ask is kept ``id_retention`` seconds after its reply (asked again with its ask_id meanwhile, it
    returns the stored reply and the workflow sees it once), then the sweep deletes it while the
    workflow runs on and answers. An ask not answered yet is never deleted; an ask_id asked
    again after its row went is a new ask. Before, every answered ask stayed as long as its
    workflow ran."""
    with ActorSystem(db, clock=clock, id_retention=DAY) as system:
        ref = system.start(tf.account, 100, id="acct")
        mute = system.start(tf.never_answers, id="mute")
        system.idle(T)
        with pytest.raises(TimeoutError):
            mute.ask("q", ask_id="pending", timeout=0)
        assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90
        clock.advance(DAY - 1)
        system.idle(T)
        assert asks_of(db, "acct") == {"w-1": "ok"}
        assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90  # its reply, not asked again
        assert ref.ask("withdraw", 5, ask_id="w-2", timeout=T) == 85
        assert tf.SEEN["account"] == ["w-1", "w-2"]

        clock.advance(2)  # w-1 was answered a day and a second ago, w-2 a second ago
        system.idle(T)
        assert asks_of(db, "acct") == {"w-2": "ok"}
        assert asks_of(db, "mute") == {"pending": "pending"}
        assert ref.ask("balance", timeout=T) == 85  # it runs on and answers
        assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 75  # a new ask now
        assert tf.SEEN["account"] == ["w-1", "w-2", "w-1"]

        clock.advance(30 * DAY)
        system.idle(T)
        assert asks_of(db, "acct") == {}
        assert asks_of(db, "mute") == {"pending": "pending"}
        assert ref.status() is Status.RUNNING and mute.status() is Status.RUNNING
        mute.signal("stop")
        assert mute.result(T) == "stopped"
        with pytest.raises(WorkflowNotRunning):  # answered by its end, as before
            mute.ask("q", ask_id="pending", timeout=T)


def test_answered_asks_are_swept_in_batches_between_the_steps(db, clock):
    """Many answered asks past their window go a bounded batch at a time, each its own short
    transaction, and every one of them goes."""
    with ActorSystem(db, clock=clock, id_retention=DAY) as system:
        ref = system.start(tf.account, 1000, id="acct")
        for i in range(25):
            assert ref.ask("withdraw", 1, ask_id=f"w-{i:02}", timeout=T) == 999 - i
        inside = Inside(system)
        inside.retention.reply_batch = 4
        batches: list[tuple[int, int]] = []
        real = inside.store_method("expire_replies")

        def counted(before: float, limit: int) -> int:
            n = real(before, limit)
            batches.append((n, limit))
            return int(n)

        inside.patch_store("expire_replies", counted)
        clock.advance(DAY + 1)
        system.idle(T)
        # idle() returns once nothing is due, which the last batch's commit makes so before
        # ``counted`` records it: the sweep's lock, held for the whole batch, says it is done.
        assert inside.retention._lock.acquire(timeout=T)
        inside.retention._lock.release()
        assert asks_of(db, "acct") == {}
        assert sum(n for n, _ in batches) == 25 and len(batches) > 2, batches
        assert batches[0] == (4, 4) and all(n <= limit for n, limit in batches), batches
        assert ref.ask("balance", timeout=T) == 975


def test_a_reply_is_kept_an_hour_at_least_and_for_good_without_an_id_retention(db, clock):
    """``id_retention=0`` (ids freed as they are pruned) still keeps a reply an hour, so that its
    asker (or ``wf ask``) reads it; ``id_retention=None`` keeps every reply as long as its
    workflow."""
    with ActorSystem(db, clock=clock, id_retention=0) as system:
        ref = system.start(tf.account, 100, id="acct")
        assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90
        clock.advance(3599)
        system.idle(T)
        assert ref.ask("withdraw", 10, ask_id="w-1", timeout=T) == 90
        clock.advance(2)
        system.idle(T)
        assert asks_of(db, "acct") == {}
    with ActorSystem(db, clock=clock, id_retention=None) as system:
        ref = system.get("acct")
        assert ref.ask("withdraw", 10, ask_id="w-2", timeout=T) == 80
        clock.advance(3650 * DAY)
        system.idle(T)
        assert asks_of(db, "acct") == {"w-2": "ok"}
        assert ref.ask("withdraw", 10, ask_id="w-2", timeout=T) == 80
    assert tf.SEEN["account"] == ["w-1", "w-2"]


@pytest.mark.parametrize("call", ["ask", "ask_async"])
def test_an_ask_refused_by_a_full_inbox_is_logged_as_a_warning(db, clock, call):
    """An ask refused because the workflow's inbox is full (InboxFull) is also a warning event
    naming the workflow, its type, the ask and its id (SPEC §8: a full inbox is misuse, logged at
    WARNING), as a signal refused for it is; only the caller heard of it."""
    from actors import InboxFull

    with ActorSystem(db, clock=clock, inbox_limit=1) as system:
        ref = system.start(tf.opens_then_answers, id="full")
        system.idle(T)
        with pytest.raises(TimeoutError):
            ref.ask("q", 0, ask_id="a0", timeout=0)
        with capture_logs() as logs, pytest.raises(InboxFull):
            if call == "ask_async":
                asyncio.run(ref.ask_async("q", 1, timeout=T, ask_id="a1"))
            else:
                ref.ask("q", 1, timeout=T, ask_id="a1")
        refused = [e for e in logs if e["event"] == "ask_refused"]
        assert [(e["log_level"], e["workflow_id"], e["workflow_type"], e["ask"], e["ask_id"]) for e in refused] == [
            ("warning", "full", "tests.actors.talk_flows:opens_then_answers", "q", "a1")
        ]
        assert "inbox full" in refused[0]["reason"]
        ref.signal("open")
        assert ref.ask("q", 0, ask_id="a0", timeout=T) == "answered 0"
