"""``wf ui`` on the demo's file while ``wf demo`` runs on it, in another process: the pages read
a file that a running system owns, and an action is carried out by that process."""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from actors._ui import create_app  # noqa: E402
from persistence import open_store  # noqa: E402
from tests.integration.test_demo_kill import Demo  # noqa: E402


@pytest.mark.slow
def test_the_pages_of_a_running_demo(tmp_path) -> None:
    db = str(tmp_path / "demo.db")
    demo = Demo(db, duration=120, extra=("--scale", "0.2"))
    try:
        demo.wait_for(r"^world running: \d+ directors started", timeout=90)
        demo.wait_for(r"^world \d\d:\d\d:\d\d \| running", timeout=30)
        app = create_app(open_store(db, owner=False), db, allowed_hosts=frozenset({"testserver"}))
        with TestClient(app) as c:
            html = c.get("/").text
            assert f"a system runs on it (pid {demo.proc.pid}" in html
            counts = c.get("/api/counts").json()
            assert counts["by_status"]["running"] > 20
            # Every page of the running list, by keyset, lists each workflow once.
            seen, url = [], "/?status=running&limit=10"
            while url:
                page = c.get(url).text
                seen += re.findall(r'<td class="id"><a href="/w/([^"]+)"', page)
                m = re.search(r'href="(/\?[^"]+)" rel="next"', page)
                url = m.group(1).replace("&amp;", "&") if m else None
            assert len(seen) == len(set(seen)) and "raid-night" in seen
            raid = c.get("/w/raid-night").text
            assert "raid-night%3Apull-" in raid and "Family" in raid
            # A cancel, carried out by the demo's process.
            token = re.search(r'name="csrf" value="([^"]+)"', raid).group(1)
            r = c.post("/cancel", data={"id": "trade-desk-0", "reason": "closed for the night", "csrf": token})
            assert f"cancel carried out by the running system (pid {demo.proc.pid})" in r.text, r.text
            # Carried out: in its inbox. The step it wakes may come after another one of the
            # desk's (a timer, a procedure's reply) that the answer saw; it is cancelled then.
            deadline = time.monotonic() + 30
            while (state := c.get("/api/state", params={"id": "trade-desk-0"}).json())["status"] != "cancelled":
                assert time.monotonic() < deadline, (r.text, state)
                time.sleep(0.05)
    finally:
        demo.proc.terminate()
        demo.finish(timeout=60)
