"""The web view's workflow page shows what the workflow published, escaped, on both backends."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from actors import ActorSystem  # noqa: E402
from actors.testing import VirtualClock  # noqa: E402
from tests.actors import talk_flows as tf  # noqa: E402

from .test_pages import EVIL, client_for, db  # noqa: E402, F401  (the fixture)

T = 30


def test_the_workflow_page_shows_published_values(db) -> None:  # noqa: F811
    """The workflow's page lists what it published (escaped) and an ask it waits for."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(tf.account, 100, id="acct")
        assert ref.ask("withdraw", 25, timeout=T) == 75
        s.start(tf.publishes, EVIL, EVIL, id="p")
        s.idle(timeout=T)
        with client_for(db) as c:
            html = c.get("/w/acct").text
            assert "<h2>Published</h2>" in html
            assert '<td class="k">balance</td><td><pre class="value">75</pre>' in html
            assert "ask &#39;withdraw&#39;" in html or "ask 'withdraw'" in html
            html = c.get("/w/p").text
            assert EVIL not in html  # a key and a value from the database are text, escaped
            assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html


def test_a_published_value_whose_repr_fails_is_shown_saying_why(db) -> None:  # noqa: F811
    """A value loaded fine whose repr fails (an int of more digits than Python writes) is shown
    as such, not as a value that cannot be loaded."""
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.publishes, "big", 10**5000, id="big")
        s.idle(timeout=T)
        with client_for(db) as c:
            html = c.get("/w/big").text
            assert "&lt;int that cannot be shown: ValueError: Exceeds the limit (4300 digits)" in html
            assert "cannot load" not in html


def test_a_long_published_value_is_cut_and_links_to_the_whole(db) -> None:  # noqa: F811
    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.publishes, "big <k>", "z" * 5000, id="long")
        s.idle(timeout=T)
        with client_for(db) as c:
            html = c.get("/w/long").text
            assert "cut: see all 5,002 characters" in html
            link = html.split('<a href="/value?', 1)[1].split('"', 1)[0].replace("&amp;", "&")
            whole = c.get("/value?" + link)
            assert whole.status_code == 200 and whole.text == repr("z" * 5000)
            assert c.get("/value", params={"id": "long", "what": "published-other"}).status_code == 404


def test_the_workflow_page_pages_the_whole_history(db) -> None:  # noqa: F811
    """The workflow's page shows the newest history events and links to the older ones, down to the
    start."""
    from actors._ui.data import HISTORY_SHOWN
    from tests.actors import flows

    n = HISTORY_SHOWN + 10
    with ActorSystem(db, clock=VirtualClock()) as s:
        ref = s.start(flows.collect, n, id="long")
        for i in range(n):
            ref.signal("item", i)
        assert len(ref.result(timeout=T)) == n
        with client_for(db) as c:
            html = c.get("/w/long").text
            assert f"newest {HISTORY_SHOWN} events" in html and "not kept" not in html
            assert "?older=" + str(HISTORY_SHOWN) in html and "newer events" not in html
            html = c.get(f"/w/long?older={HISTORY_SHOWN}").text
            # The rest: the start and the first signals (n + 2 events in all).
            assert f"{n + 2 - HISTORY_SHOWN} events before the newest {HISTORY_SHOWN}" in html
            assert "started" in html and "older events" not in html and "newer events" in html


def test_a_signal_of_a_name_awaited_only_as_a_request_is_noted(db) -> None:  # noqa: F811
    """The signal form says when the code awaits the name as a request (an ask) only: such a
    signal is never taken."""
    from .test_pages import token_of

    with ActorSystem(db, clock=VirtualClock()) as s:
        s.start(tf.account, 100, id="acct")
        s.idle(timeout=T)
        with client_for(db) as c:
            token = token_of(c.get("/w/acct").text)
            r = c.post("/signal", data={"id": "acct", "name": "withdraw", "payload": "5", "csrf": token})
            assert "awaits &#39;withdraw&#39; as a request (an ask), not as a signal" in r.text, r.text
            r = c.post("/signal", data={"id": "acct", "name": "close", "payload": "", "csrf": token})
            assert "as a request" not in r.text and "never awaits" not in r.text
