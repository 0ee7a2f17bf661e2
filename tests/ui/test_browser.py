"""``wf ui`` in a real headless Chromium: the installed ``wf ui`` serving a file that a running
system (this test's) owns, driven as a person would: filter, open a workflow, send a signal and
watch it move on, cancel one; a ``<script>`` id is text; a POST without the token is refused.
The same run writes the screenshots of docs/ (the list, a boss fight with its children, a
blocked workflow), so that they stay current.

Chromium is Debian's (/usr/bin/chromium, installed by .ci/run when missing), driven by
Playwright; under CI=true these tests fail rather than skip without it.
"""

from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import ActorSystem, Status
from actors.testing import VirtualClock
from examples import world
from examples.auction import auction
from examples.demo import start_world
from workflows._registry import _REGISTRY

# A browser per test: the slow tier (pytest -m slow, .ci/run).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "images"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
T = 30
WAIT_MS = 15_000  # every wait for the page is bounded
EVIL = "<script>document.title='pwned';alert(1)</script>"
SHOP = '''
from workflows import signal, workflow

@workflow
async def order(n: int) -> int:
    paid = await signal("pay")
    return n + paid
'''


def browser_unavailable(why: str) -> None:
    """Skip for ``why``; under CI=true fail instead: CI must run the browser tests."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the browser tests must run, but {why}. .ci/run installs the "
                    f"chromium package when it is missing; check that step's output.", pytrace=False)
    pytest.skip(f"browser tests skipped: {why}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def playwright_api() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        browser_unavailable("playwright is not installed (pip install -e '.[test]' installs it)")
    if not os.access(CHROMIUM, os.X_OK):
        browser_unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, playwright_api: Any) -> Iterator[dict[str, Any]]:
    """The demo's world (small) on a file this process's system owns, with a README auction, one
    whose id is a script, and a workflow blocked for want of its code; ``wf ui`` serving it."""
    tmp = tmp_path_factory.mktemp("ui")
    db = str(tmp / "world.db")
    # A workflow whose module this process will not have: started, then its code taken away.
    sys.path.insert(0, str(tmp))
    (tmp / "shop_orders.py").write_text(textwrap.dedent(SHOP))
    import shop_orders  # type: ignore[import-not-found]

    with ActorSystem(db, clock=VirtualClock(start=time.time() - 3600)) as s:
        s.start(shop_orders.order, 3, id="order-1001")
        s.idle(timeout=T)
    (tmp / "shop_orders.py").unlink()
    sys.modules.pop("shop_orders", None)
    for key in [k for k in _REGISTRY["workflow"] if k.startswith("shop_orders:")]:
        del _REGISTRY["workflow"][key]
    sys.path.remove(str(tmp))

    world.use_database(db)
    # The wall clock's time, so that the due times the page counts down to are near.
    clock = VirtualClock(start=time.time())
    system = ActorSystem(db, clock=clock)
    proc = None
    try:
        start_world(system, seed=7, scale=0.2)
        system.start(auction, 7, "hero-1", id="auction-7")
        system.start(auction, 8, "hero-2", id="auction-8")
        system.start(auction, 10, "hero-4", id="auction-10")
        system.start(auction, 9, "hero-3", id=EVIL)
        system.idle(timeout=T)
        # The boss down to 60 %: phase 2, two adds summoned as its children.
        system.broadcast("health_changed", "dragon", {"hp_pct": 60})
        system.get("order-1001").signal("pay", 5)  # loads it: without its code it is blocked
        system.idle(timeout=T)
        assert "BLOCKED" in (system.get("order-1001").info().waiting_on or "")

        port = _free_port()
        proc = subprocess.Popen(
            # From the database's directory, as an operator runs it (and as the pages then name it).
            [str(Path(sys.executable).with_name("wf")), "ui", "--db", "world.db", "--port", str(port)],
            cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + T
        while True:
            try:
                with urllib.request.urlopen(base + "/api/counts", timeout=5) as r:
                    assert r.status == 200
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else ""
                    pytest.fail(f"wf ui did not start: {out}")
                time.sleep(0.1)
        browser = playwright_api.chromium.launch_persistent_context(
            str(tmp / "profile"), executable_path=CHROMIUM, args=ARGS, headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield {"base": base, "system": system, "browser": browser, "db": db}
        finally:
            browser.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=T)
        system.shutdown()


@pytest.fixture
def page(site: dict[str, Any]) -> Iterator[Any]:
    p = site["browser"].new_page()
    p.set_default_timeout(WAIT_MS)
    p.dialogs = []
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    yield p
    p.close()


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name))


def _submit(page: Any, form: str) -> str:
    """Submit ``form`` and return the answer the server gave to it (the page's ``#outcome``).

    Read from the answer itself, not from the page: the page follows its workflow and reloads
    without the answer as soon as the workflow moves on, which on a busy machine can come before
    this test looks (an action the system takes after the server stopped waiting for it)."""
    # The server waits up to ACTION_WAIT (10 s) for the running system before it answers.
    with page.expect_response(lambda r: "outcome=" in r.url, timeout=WAIT_MS + 10_000) as answer:
        page.click(f'{form} button[type="submit"]')
    found = re.search(r'<p class="message [a-z]+" id="outcome">(.*?)</p>', answer.value.text(), re.S)
    assert found, f"no outcome in the answer to {form}: {answer.value.text()[:2000]}"
    return html.unescape(found.group(1))


def test_filter_the_list_and_open_a_workflow(site, page) -> None:
    page.goto(site["base"] + "/")
    counts = site["system"].workflows()
    assert page.locator('[data-count="total"]').inner_text() == f"{len(counts):,}"
    _shot(page, "ui-list.png")
    page.fill('input[name="id"]', "auction-house-")
    page.select_option('select[name="status"]', "running")
    page.click('button:has-text("Filter")')
    page.wait_for_url(re.compile(r"id=auction-house-"))
    ids = page.locator("td.id > a").all_inner_texts()
    assert ids and all(i.startswith("auction-house-") for i in ids)
    page.click("td.id > a >> nth=0")
    page.wait_for_url(re.compile(r"/w/auction-house-"))
    assert page.locator("h1 .the-id").inner_text() == ids[0]
    assert page.locator("h1 .status").inner_text() == "running"


def test_a_boss_fight_and_its_children(site, page) -> None:
    boss = "raid-night:pull-1:boss"
    page.goto(site["base"] + "/w/raid-night")
    page.click(f'a.node[href="/w/{boss.replace(":", "%3A")}"]')
    page.wait_for_url(re.compile(r"/w/raid-night%3Apull-1%3Aboss"))
    tree = page.locator(".tree")
    assert tree.locator(".node.self").inner_text().startswith(boss)
    children = tree.locator("ul ul a.node").all_inner_texts()
    assert sum("boss_add · running" in c for c in children) == 2, children
    assert page.locator(".parent-link").inner_text() == "raid-night"
    assert "Subscriptions" in page.content()
    _shot(page, "ui-boss.png")


def test_send_a_signal_and_watch_the_workflow_move_on(site, page) -> None:
    page.goto(site["base"] + "/w/auction-7")
    steps_before = site["system"].get("auction-7").info()
    page.fill('#signal-form input[name="name"]', "bid")
    page.fill('#signal-form textarea[name="payload"]', '{"bidder": "hero-5", "amount": 500}')
    outcome = _submit(page, "#signal-form")
    # The server waits up to 10 s for the system to take the signal and its step; on a busy
    # machine it answers before the step (or before the signal is taken), and the page follows.
    assert re.search(
        r"signal 'bid' carried out by the running system \(pid \d+\): (it is running|delivered; "
        r"the workflow has not taken its step yet)|queued signal 'bid' \(request #\d+\): the running system "
        r"\(pid \d+\) has not taken it", outcome), outcome
    # The history shows the step the signal woke.
    woke = page.locator("table.events tr >> nth=0", has_text="step=3,")
    woke.wait_for()
    assert woke.inner_text().split()[2:4] == ["signal", "step=3,"]
    assert steps_before.status is Status.RUNNING
    # Another bid, sent by the system's own API: the open page follows by itself.
    site["system"].get("auction-7").signal("bid", {"bidder": "hero-6", "amount": 600})
    page.locator("table.events tr >> nth=0", has_text="step=4").wait_for()
    assert page.locator("#outcome").count() == 0  # the answer to the last action went with it
    # Its deadline, fired from the page.
    page.click('button.fire[data-timer="end"]')
    page.locator("h1 .status", has_text="completed").wait_for()
    assert "hero-6" in page.locator("#result").inner_text()
    assert site["system"].get("auction-7").result(timeout=T) == {"winner": "hero-6", "price": 600}


def test_an_action_sent_while_its_workflow_moves_on_gets_its_answer(site, page) -> None:
    """The page follows its workflow, reloading when it moves on, but not once one of its forms
    was sent: that reload would cancel the form's answer (the server waits for the system before
    it answers, and the workflow may move on meanwhile, by this action or another)."""
    page.goto(site["base"] + "/w/auction-10")
    held: list[Any] = []
    page.route("**/signal", lambda route: held.append(route))  # held until the workflow moved on
    page.fill('#signal-form input[name="name"]', "bid")
    page.fill('#signal-form textarea[name="payload"]', '{"bidder": "hero-7", "amount": 700}')
    with page.expect_request(lambda r: r.url.endswith("/signal")):
        page.click('#signal-form button[type="submit"]', no_wait_after=True)
    deadline = time.monotonic() + T
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # (the route's handler runs while playwright is waited on)
    assert held, "the form's request was not sent"
    site["system"].get("auction-10").signal("bid", {"bidder": "hero-6", "amount": 600})
    site["system"].idle(timeout=T)
    # Time for two of the page's polls (one each 1.5 s) to see the step: the page stays.
    page.wait_for_timeout(4_000)
    with page.expect_response(lambda r: "outcome=" in r.url, timeout=WAIT_MS + 10_000) as answer:
        held[0].continue_()
    # (on a busy machine the answer may say the system has not taken it yet: an answer all the same)
    text = html.unescape(answer.value.text())
    assert re.search(r"signal 'bid' carried out by the running system|queued signal 'bid' \(request #\d+\)",
                     text), text[:2000]
    page.unroute("**/signal")
    site["system"].idle(timeout=T)  # (the answer may come before the step: it says so)
    assert site["system"].get("auction-10").published("state")["price"] == 700


def test_cancel_a_workflow(site, page) -> None:
    listing = site["browser"].new_page()
    listing.set_default_timeout(WAIT_MS)
    listing.goto(site["base"] + "/")
    cancelled = int(listing.locator('[data-count="cancelled"]').inner_text())
    page.goto(site["base"] + "/w/auction-8")
    page.fill('#cancel-form input[name="reason"]', "the seller left")
    outcome = _submit(page, "#cancel-form")
    assert "cancel carried out by the running system" in outcome, outcome
    page.locator("h1 .status", has_text="cancelled").wait_for()
    assert site["system"].get("auction-8").status() is Status.CANCELLED
    # The list open in another tab counts it by itself.
    listing.locator('[data-count="cancelled"]', has_text=re.compile(rf"^{cancelled + 1}$")).wait_for()
    listing.close()


def test_a_script_in_an_id_is_text(site, page) -> None:
    page.goto(site["base"] + "/?id=%3Cscript")
    link = page.locator("td.id > a")
    assert link.all_inner_texts() == [EVIL]
    link.click()
    page.wait_for_url(re.compile(r"/w/%3Cscript"))
    assert page.locator("h1 .the-id").inner_text() == EVIL
    assert page.title() != "pwned" and page.dialogs == []


def test_a_post_without_the_token_is_refused(site, page) -> None:
    page.goto(site["base"] + "/w/auction-house-0")
    status, text = page.evaluate(
        """async () => {
            const body = new URLSearchParams({id: "auction-house-0", reason: "forged"});
            const r = await fetch("/cancel", {method: "POST", body});
            return [r.status, await r.text()];
        }"""
    )
    assert status == 403 and "anti-forgery token" in text
    assert site["system"].get("auction-house-0").status() is Status.RUNNING


def test_a_blocked_workflow(site, page) -> None:
    page.goto(site["base"] + "/w/order-1001")
    assert "Blocked:" in page.locator("#blocked").inner_text()
    assert "shop_orders" in page.locator("#blocked").inner_text()
    assert page.locator("table.events").inner_text().count("code_missing") == 1
    _shot(page, "ui-blocked.png")


def test_screenshots_are_in_the_docs() -> None:
    """The tutorial and the reference show the pictures this module takes."""
    for doc in ("tutorial.md", "reference.md"):
        text = (ROOT / "docs" / doc).read_text()
        for name in ("ui-list.png", "ui-boss.png", "ui-blocked.png"):
            assert f"images/{name}" in text, f"docs/{doc} does not show {name}"
