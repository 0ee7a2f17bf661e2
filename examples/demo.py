"""``wf demo``: a living game world on one SQLite file. Kill it, start it again, watch it recover.

Run it with ``wf demo`` (or ``python -m examples.demo``)::

    wf demo --db demo.db                   # live view; Ctrl-C to stop
    wf demo --db demo.db --duration 30 --no-view

The world runs on an accelerated clock (``--speed 60``: a virtual minute per real second), so a
34-minute day passes in half a minute. On start the demo prints how many unfinished workflows it
recovered from the file, then starts the world's directors (``examples.simulation``) unless they
are already there: they have fixed ids, so a restart resumes them instead of starting copies.

The accelerated clock is the public ``VirtualClock`` moved forward by a driver loop (every 50 ms
of real time, ``speed * 0.05`` seconds of virtual time). Its reading is saved next to the database
(``demo.db.clock``) so that after a restart the world's time continues where it stopped, instead of
jumping back and leaving every timer far in the future.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

from actors import ActorSystem, Status
from actors.testing import VirtualClock

from . import simulation, world

TICK = 0.05  # real seconds between clock advances
WORLD_TABLES = ("world_effects", "world_announcements", "world_notifications", "world_log")


def _clock_file(db_path: str) -> Path:
    return Path(f"{db_path}.clock")


def _resume_time(db_path: str) -> float:
    """The virtual time the world had reached when it last ran (or now, for a new world)."""
    try:
        return float(json.loads(_clock_file(db_path).read_text())["now"])
    except (OSError, ValueError, KeyError):
        return time.time()


def _save_time(db_path: str, now: float) -> None:
    path = _clock_file(db_path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"now": now}))
    os.replace(tmp, path)  # atomic: a kill mid-write leaves the previous reading


def _short_type(key: str) -> str:
    return key.rpartition(":")[2]


class WorldWatch:
    """What the live view shows, gathered through the public API and the world's own tables."""

    def __init__(self, system: ActorSystem, db_path: str) -> None:
        self.system = system
        self.db_path = db_path
        self.running: dict[str, str] = {}  # id -> type
        self.finished: Counter[tuple[str, str]] = Counter()  # (type, status) -> count, this run
        self.recent: deque[tuple[str, str, str, str]] = deque(maxlen=12)
        self.events = 0
        self.events_per_sec = 0.0
        self._last_events: int | None = None
        self._last_t = time.monotonic()
        self.world: dict[str, Any] = {}

    def refresh(self) -> None:
        infos = self.system.workflows(status=Status.RUNNING)
        now_running = {i.id: i.type for i in infos}
        for wid in set(self.running) - set(now_running):
            try:
                info = self.system.get(wid).info()
            except Exception:  # noqa: BLE001 - a view must not die of one odd row
                continue
            kind = _short_type(info.type)
            self.finished[(kind, info.status.value)] += 1
            detail = info.result if info.status is Status.COMPLETED else (info.error or {}).get("message", "")
            self.recent.appendleft((wid, kind, info.status.value, _summary(detail)))
        self.running = now_running
        self._read_world()

    def _read_world(self) -> None:
        con = sqlite3.connect(self.db_path, timeout=5)
        try:
            total = 0
            for t in WORLD_TABLES:
                total += con.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0]
            purses = con.execute("SELECT COALESCE(SUM(gold), 0) FROM world_characters").fetchone()[0]
            held = con.execute("SELECT COALESCE(SUM(amount), 0) FROM world_holds").fetchone()[0]
            minted = con.execute("SELECT COALESCE(SUM(amount), 0) FROM world_mint").fetchone()[0]
            state = dict(con.execute("SELECT key, value FROM world_state").fetchall())
            boss = con.execute("SELECT hp, max_hp, phase FROM world_characters WHERE id = 'dragon'").fetchone()
            open_auctions = con.execute("SELECT COUNT(*) FROM world_auctions WHERE status = 'open'").fetchone()[0]
            sold = con.execute("SELECT COUNT(*) FROM world_auctions WHERE status = 'sold'").fetchone()[0]
            locked = con.execute("SELECT COUNT(*) FROM world_items WHERE locked_by IS NOT NULL").fetchone()[0]
            last = con.execute("SELECT text FROM world_announcements ORDER BY id DESC LIMIT 1").fetchone()
        except sqlite3.OperationalError:
            return  # the world is not set up yet
        finally:
            con.close()
        t = time.monotonic()
        if self._last_events is not None and t > self._last_t:
            self.events_per_sec = (total - self._last_events) / (t - self._last_t)
        self._last_events, self._last_t, self.events = total, t, total
        self.world = {
            "phase": json.loads(state.get("time_of_day", '"?"')),
            "day": json.loads(state.get("day", "0")),
            "gold (purses + escrow / minted)": f"{purses} + {held} / {minted}",
            "auctions open / sold": f"{open_auctions} / {sold}",
            "items locked": locked,
            "dragon": f"{boss[0]}/{boss[1]} hp, phase {boss[2]}" if boss else "-",
            "last announcement": last[0] if last else "",
        }

    def status_line(self, clock: VirtualClock) -> str:
        return (
            f"world {time.strftime('%H:%M:%S', time.gmtime(clock.now()))} | running {len(self.running)} | "
            f"finished {sum(self.finished.values())} | events/s {self.events_per_sec:.0f} | "
            f"day {self.world.get('day', 0)}, {self.world.get('phase', '?')} | "
            f"gold {self.world.get('gold (purses + escrow / minted)', '?')}"
        )

    def render(self, clock: VirtualClock, speed: float, recovered: dict[str, int]) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table

        by_type: Counter[str] = Counter(_short_type(t) for t in self.running.values())
        kinds = sorted(set(by_type) | {k for k, _ in self.finished})
        wf = Table(title="Workflows (finished: this run)", expand=True)
        for col in ("type", "running", "completed", "failed", "cancelled"):
            wf.add_column(col, justify="left" if col == "type" else "right")
        for k in kinds:
            wf.add_row(k, str(by_type[k]), *(str(self.finished[(k, s)]) for s in ("completed", "failed", "cancelled")))
        wf.add_row("[b]total", f"[b]{len(self.running)}", *(
            f"[b]{sum(n for (_, st), n in self.finished.items() if st == s)}" for s in ("completed", "failed", "cancelled")
        ))

        w = Table(title="World", show_header=False, expand=True)
        w.add_column("what")
        w.add_column("value")
        for k, v in self.world.items():
            w.add_row(k, str(v))

        recent = Table(title="Recent completions", expand=True)
        recent.add_column("workflow", overflow="ellipsis", no_wrap=True, ratio=3)
        recent.add_column("type", no_wrap=True, min_width=12)
        recent.add_column("status", no_wrap=True, min_width=9)
        recent.add_column("result", overflow="ellipsis", no_wrap=True, ratio=4)
        for row in self.recent:
            recent.add_row(*row)

        header = (
            f"[b]actorflow demo[/b]  {self.db_path}  world time "
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(clock.now()))}  x{speed:g}  "
            f"events/s {self.events_per_sec:.0f}  recovered at start: {recovered.get('running', 0)} running "
            f"({recovered.get('timers', 0)} timers, {recovered.get('procedures', 0)} procedures)"
        )
        return Group(Panel(header), wf, w, recent)


def _summary(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def start_world(system: ActorSystem, seed: int, scale: float) -> int:
    """Create the world and start its directors, unless they are already in the file.

    Returns how many directors were started now (0 on a restart).
    """
    pop = simulation.population(scale)
    world.init_world(system, pop["characters"], pop["items"], pop["resources"])
    known = {i.id for i in system.workflows(status=Status.RUNNING)}
    started = 0
    for wid, wf, args in simulation.directors(seed, scale):
        if wid not in known:
            started += 1
        system.start(wf, *args, id=wid)  # an existing id starts nothing new
    return started


def run_demo(
    db_path: str = "demo.db",
    *,
    duration: float | None = None,
    speed: float = 60.0,
    view: bool = True,
    seed: int = 7,
    scale: float = 1.0,
) -> dict[str, Any]:
    """Run the world on ``db_path`` for ``duration`` real seconds (None: until Ctrl-C).

    Returns a summary: what was recovered at start, how many directors were started, and how many
    workflows were running and finished at the end.
    """
    if speed <= 0:
        raise ValueError(f"--speed must be > 0 (virtual seconds per real second), got {speed}")
    # Procedures may run as soon as the system opens (recovery), so point them at the file first.
    world.use_database(db_path)
    clock = VirtualClock(start=_resume_time(db_path))
    with ActorSystem(db_path, clock=clock) as system:
        recovered = dict(system.recovered)
        print(
            f"actorflow demo on {db_path}: recovered {recovered['running']} running workflows "
            f"({recovered['activated']} activated, {recovered['timers']} timers, "
            f"{recovered['procedures']} procedures)",
            flush=True,
        )
        started = start_world(system, seed, scale)
        print(f"world running: {started} directors started, speed x{speed:g}", flush=True)

        watch = WorldWatch(system, db_path)
        end = None if duration is None else time.monotonic() + duration
        live = None
        if view:
            from rich.live import Live

            live = Live(watch.render(clock, speed, recovered), refresh_per_second=4, screen=False)
            live.start()
        try:
            next_tick = time.monotonic()
            next_refresh = next_tick
            while end is None or time.monotonic() < end:
                clock.advance(speed * TICK)
                now = time.monotonic()
                if now >= next_refresh:
                    next_refresh = now + 1.0
                    _save_time(db_path, clock.now())
                    watch.refresh()
                    if live is not None:
                        live.update(watch.render(clock, speed, recovered))
                    else:
                        print(watch.status_line(clock), flush=True)
                next_tick += TICK
                time.sleep(max(0.0, next_tick - time.monotonic()))
        except KeyboardInterrupt:
            pass
        finally:
            if live is not None:
                live.stop()
                print()
            _save_time(db_path, clock.now())
        watch.refresh()
        summary = {
            "recovered": recovered,
            "started": started,
            "running": len(watch.running),
            "finished": sum(watch.finished.values()),
        }
        print(f"stopping: {summary['running']} workflows still running, all saved in {db_path}", flush=True)
        return summary


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--db``, ``--duration SECONDS``, ``--speed``, ``--no-view``, ``--seed``, ``--scale``."""
    p = argparse.ArgumentParser(prog="wf demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--db", default="demo.db", help="SQLite file of the world (default demo.db)")
    p.add_argument("--duration", type=float, default=None, help="stop after this many real seconds (default: until Ctrl-C)")
    p.add_argument("--speed", type=float, default=60.0, help="virtual seconds per real second (default 60)")
    p.add_argument("--no-view", action="store_true", help="print a status line per second instead of the live view")
    p.add_argument("--seed", type=int, default=7, help="seed of the scripted players (default 7)")
    p.add_argument("--scale", type=float, default=1.0, help="size of the world (default 1.0: ~40 heroes)")
    p.add_argument("--verbose", action="store_true", help="show the runtime's warnings too")
    args = p.parse_args(argv)
    for flag, value, ok in (
        ("--speed", args.speed, args.speed > 0),
        ("--duration", args.duration, args.duration is None or args.duration >= 0),
        ("--scale", args.scale, args.scale > 0),
    ):
        if not ok:
            print(f"wf demo: error: {flag} must be a positive number, got {value}", file=sys.stderr)
            return 2
    # Logging is the application's to configure, and here the application is the demo. The view is
    # its output and runtime logs would scroll it away; scripted players often signal a workflow
    # that just finished (a bid after the hammer fell), which the runtime logs as a warning, so
    # only errors are shown unless asked for.
    # The runtime logs through the standard library's logging, under "actorflow".
    handler = logging.StreamHandler(sys.stderr)
    runtime = logging.getLogger("actorflow")
    runtime.addHandler(handler)
    runtime.setLevel(logging.WARNING if args.verbose else logging.ERROR)
    runtime.propagate = False
    try:
        run_demo(args.db, duration=args.duration, speed=args.speed, view=not args.no_view,
                 seed=args.seed, scale=args.scale)
    finally:
        runtime.removeHandler(handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
