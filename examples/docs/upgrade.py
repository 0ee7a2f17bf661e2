# examples/docs/upgrade.py
"""Running patrols moved onto new code in place: automatically, held, then by an upgrade function.

Each ``with ActorSystem(...)`` block is a process of its own, started after a deploy. Run from the
root of a checkout:  python -m examples.docs upgrade
"""

import importlib
import json
import tempfile
from pathlib import Path

from actors import ActorSystem
from actors.testing import VirtualClock
from persistence import open_store


def upgrades(db: str, wid: str) -> list[str]:
    """The ``upgraded`` events of a workflow's history: how each frame moved, and from where."""
    store = open_store(db, owner=False)
    try:
        out = []
        for h in store.history(wid):
            if h.event == "upgraded":
                for f in json.loads(h.detail)["frames"]:
                    out.append(f"{f['how']} at {f['point']}")
        return out
    finally:
        store.close()


def main() -> None:
    clock = VirtualClock()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "patrols.db")
        v1 = importlib.import_module("examples.docs.patrol_v1")
        with ActorSystem(db, clock=clock) as system:
            ann = system.start(v1.patrol, "ann", id="patrol-ann")
            clock.advance(5)
            system.idle(timeout=10)
            print("version 1: patrol-ann waits on", ann.info().waiting_on.split(" due ")[0], "after one lap")

        v2 = importlib.import_module("examples.docs.patrol_v2")  # deploy: rests are 2 s
        with ActorSystem(db, clock=clock) as system:
            clock.advance(5)  # ann's rest, armed by version 1 for 5 s, ends
            system.idle(timeout=10)
            print("version 2 loaded: patrol-ann", upgrades(db, "patrol-ann"))
            clock.advance(2)
            system.idle(timeout=10)
            print("patrol-ann:", system.get("patrol-ann").result(timeout=10))
            system.start(v2.patrol, "bob", id="patrol-bob")
            clock.advance(2)
            system.idle(timeout=10)

        v3 = importlib.import_module("examples.docs.patrol_v3")  # deploy: laps renamed rounds
        with ActorSystem(db, clock=clock) as system:
            clock.advance(2)
            system.idle(timeout=10)
            waiting = system.get("patrol-bob").info().waiting_on
            print("version 3 loaded: patrol-bob", waiting.split(": ", 1)[0].split(" (")[0])
            print("  because", waiting.split("automatically: ", 1)[1].split(". Deploy")[0])

        # In an application: @patrol.upgrade(from_version="<the fingerprint wf upgrade printed>")
        v3.patrol.upgrade(from_version=v2.patrol.fingerprint[:12])(v3.from_v2)
        with ActorSystem(db, clock=clock) as system:
            system.idle(timeout=10)
            print("with an upgrade function: patrol-bob", upgrades(db, "patrol-bob"))
            for _ in range(2):
                clock.advance(2)
                system.idle(timeout=10)
            print("patrol-bob:", system.get("patrol-bob").result(timeout=10))
