"""``wf demo``: a living game world on one SQLite file (or a PostgreSQL database). Kill it, start it
again, watch it recover.

Run it with ``wf demo`` (or ``python -m examples.demo``)::

    wf demo --db demo.db                   # live view; Ctrl-C to stop
    wf demo --db demo.db --duration 30 --no-view
    wf demo --db postgresql://me@localhost/game   # the same world on PostgreSQL

The world runs on an accelerated clock (``--speed 60``: a virtual minute per real second), so a
34-minute day passes in half a minute. On start the demo prints how many unfinished workflows it
recovered from the file, then starts the world's directors (``examples.simulation``) unless they
are already there: they have fixed ids, so a restart resumes them instead of starting copies.

The accelerated clock is the public ``VirtualClock`` moved forward by a driver loop (every 50 ms
of real time, ``speed * 0.05`` seconds of virtual time). Next to the database (``demo.db.clock``)
it keeps a reading the world has not reached yet: before the clock passes the saved reading, the
next second's worth is saved. Whenever the process dies, even by ``kill -9``, the saved reading is
ahead of every time the world has used, and the next run starts there: world time never goes
back (it may skip ahead by up to a second of real time after a kill). On PostgreSQL the reading is
kept in the current directory, in ``demo-<schema>-<digest of the URL>.clock`` (``--clock-file``
names another).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import sys
import time
import urllib.parse
from collections import Counter, deque
from pathlib import Path
from typing import Any, NoReturn

from actors import ActorSystem, Status, UnknownWorkflow
from actors.testing import VirtualClock
from persistence import PersistenceError, display_url, is_url, loads, open_store

from . import simulation, world

TICK = 0.05  # real seconds between clock advances
# Finished workflows are kept one world hour (a real minute at the default speed), then deleted:
# the file stays bounded however long the world runs.
RETENTION = 3600.0
WORLD_TABLES = ("world_effects", "world_announcements", "world_notifications", "world_log")


def clock_file(db: str) -> Path:
    """Where the world's clock reading is kept: next to a SQLite file, or for a PostgreSQL URL in
    the current directory, named after the URL's schema and a digest of the URL (no password)."""
    if not is_url(db):
        return Path(f"{db}.clock")
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(db).query))
    digest = hashlib.sha256(display_url(db).encode()).hexdigest()[:12]
    return Path(f"demo-{query.get('schema', 'actorflow')}-{digest}.clock")


def _resume_time(path: Path) -> float:
    """The virtual time the world had reached when it last ran (or now, for a new world)."""
    try:
        return float(json.loads(path.read_text())["now"])
    except (OSError, ValueError, KeyError):
        return time.time()


def _save_time(path: Path, now: float) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"now": now}))
    os.replace(tmp, path)  # atomic: a kill mid-write leaves the previous reading


class DemoError(Exception):
    """The demo cannot run on this database: printed as one line, exit status 1."""


def check_demo_file(db: str) -> None:
    """Refuse a database that holds another application's workflows: the demo would add its world.

    Read through a read-only store, before any system opens it (a system would run that
    application's workflows). A new database, or one that is no actorflow database at all, passes
    here: opening the system creates it, or says what it is.
    """
    try:
        store = open_store(db, owner=False)
    except (PersistenceError, ValueError):
        return
    try:
        others = sum(n for (_, status), n in store.count_workflows().items())
        if not others:
            return
        try:
            store.read_table("SELECT count(*) AS n FROM world_state")
            return  # a demo world
        except PersistenceError:
            pass
    finally:
        store.close()
    where = "a database (or schema) of its own" if is_url(db) else "a file of its own: wf demo --db demo.db"
    raise DemoError(
        f"{display_url(db)} holds {others} workflows of another application and no demo world; the "
        f"demo would write its world into it. Run it on {where}"
    )


def _short_type(key: str) -> str:
    return key.rpartition(":")[2]


class WorldWatch:
    """What the live view shows, gathered through the public API and the world's own tables."""

    def __init__(self, system: ActorSystem, db_path: str) -> None:
        self.system = system
        self.db_path = db_path
        self.running: dict[str, str] = {}  # id -> type
        # (type, status) -> count, as the file holds them: they survive a restart.
        self.finished: Counter[tuple[str, str]] = Counter()
        self.new: list[tuple[str, str, str, str]] = []  # finished since the last refresh
        self.recent: deque[tuple[str, str, str, str]] = deque(maxlen=12)
        self.events = 0
        self.events_per_sec = 0.0
        self._last_events: int | None = None
        self._last_t = time.monotonic()
        self.world: dict[str, Any] = {}
        # Workflows moved onto new code (a restart after an edit of their workflow, see the
        # versioning guide): the file's history table says so, with the old and new fingerprints.
        self.upgraded = 0
        self._upgrade_seq = 0

    def refresh(self) -> None:
        infos = self.system.workflows(status=Status.RUNNING)
        now_running = {i.id: i.type for i in infos}
        for wid in set(self.running) - set(now_running):
            try:
                info = self.system.get(wid).info()
            except Exception:  # noqa: BLE001 - a view must not die of one odd row
                continue
            kind = _short_type(info.type)
            detail = info.result if info.status is Status.COMPLETED else (info.error or {}).get("message", "")
            self.new.append((wid, kind, info.status.value, _summary(detail)))
            self.recent.appendleft(self.new[-1])
        self.running = now_running
        self._read_world()
        self._read_upgrades()

    def _read_upgrades(self) -> None:
        store = world.reader()
        # The runtime's own history table: on PostgreSQL in the URL's schema (``?schema=``).
        schema = getattr(store, "schema", None)
        table = f'"{schema}".history' if schema else "history"
        try:
            rows = [
                (r["seq"], r["workflow_id"], r["detail"])
                for r in store.read_table(
                    f"SELECT seq, workflow_id, detail FROM {table} WHERE event = 'upgraded' AND seq > ? "
                    "ORDER BY seq",
                    (self._upgrade_seq,),
                )
            ]
        except PersistenceError:
            return
        for seq, wid, detail in rows:
            self._upgrade_seq = seq
            self.upgraded += 1
            d = json.loads(detail)
            moved = [f for f in d.get("frames", []) if f.get("how") != "unchanged"]
            at = f" at {moved[0]['point']}" if moved and moved[0].get("point") else ""
            text = f"code {d['old_fingerprint'][:12]} -> {d['new_fingerprint'][:12]}{at}"
            self.new.append((wid, _short_type(self.running.get(wid, "?")), "upgraded", text))
            self.recent.appendleft(self.new[-1])

    def take_new(self) -> list[tuple[str, str, str, str]]:
        """The workflows seen finishing since the last call, oldest first."""
        new, self.new = self.new, []
        return new

    def _read_world(self) -> None:
        """The world's tables and the workflows' counts, read as any application could (a
        read-only store; on SQLite and PostgreSQL alike)."""
        store = world.reader()

        def value(sql: str) -> Any:
            rows = store.read_table(sql)
            return next(iter(rows[0].values())) if rows else None

        try:
            total = sum(value(f"SELECT COALESCE(MAX(id), 0) AS n FROM {t}") for t in WORLD_TABLES)
            purses = value("SELECT COALESCE(SUM(gold), 0) AS n FROM world_characters")
            held = value("SELECT COALESCE(SUM(amount), 0) AS n FROM world_holds")
            minted = value("SELECT COALESCE(SUM(amount), 0) AS n FROM world_mint")
            state = {r["key"]: r["value"] for r in store.read_table("SELECT key, value FROM world_state")}
            boss = store.read_table("SELECT hp, max_hp, phase FROM world_characters WHERE id = 'dragon'")
            open_ids = [r["id"] for r in store.read_table("SELECT id FROM world_auctions WHERE status = 'open'")]
            open_auctions = len(open_ids)
            # The live bids, as the auctions publish them (read without loading their actors).
            bids = [loads(values["bid"]) for values in store.published_of(open_ids).values() if "bid" in values]
            sold = value("SELECT COUNT(*) AS n FROM world_auctions WHERE status = 'sold'")
            locked = value("SELECT COUNT(*) AS n FROM world_items WHERE locked_by IS NOT NULL")
            last = value("SELECT text FROM world_announcements ORDER BY id DESC LIMIT 1")
            # The finished workflows the database holds: counted there, not by this run, so a
            # restart does not reset them.
            finished = [(t, st, n) for (t, st), n in store.count_workflows().items() if st != "running"]
        except PersistenceError:
            return  # the world is not set up yet
        t = time.monotonic()
        if self._last_events is not None and t > self._last_t:
            self.events_per_sec = (total - self._last_events) / (t - self._last_t)
        self._last_events, self._last_t, self.events = total, t, total
        self.finished = Counter()
        for wtype, status, n in finished:
            self.finished[(_short_type(wtype), status)] += n
        day, phase = json.loads(state.get("day", "0")), json.loads(state.get("time_of_day", '"?"'))
        self.world = {
            "day": f"{day}, {phase}",
            "gold": f"{purses} + {held} escrow / {minted}",
            "auctions": f"{open_auctions} open, {sold} sold",
            "top bid": _top_bid(bids),
            "items locked": locked,
            "dragon": f"{boss[0]['hp']}/{boss[0]['max_hp']} hp, phase {boss[0]['phase']}" if boss else "-",
            "last announcement": last or "",
        }

    def status_line(self, clock: VirtualClock) -> str:
        return (
            f"world {time.strftime('%H:%M:%S', time.gmtime(clock.now()))} | running {len(self.running)} | "
            f"finished {sum(self.finished.values())} | events/s {self.events_per_sec:.0f} | "
            f"day {self.world.get('day', '?')} | gold {self.world.get('gold', '?')}"
        )

    def render(
        self, clock: VirtualClock, speed: float, recovered: dict[str, int], height: int = 24, width: int = 80
    ) -> Any:
        """The live view in ``height`` lines of ``width`` (at least 80x24): the header, the
        workflows by type, the world, and as many recent completions as fit."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        header = Text.from_markup(
            f"[b]actorflow demo[/b] {display_url(self.db_path)}  world {time.strftime('%Y-%m-%d %H:%M', time.gmtime(clock.now()))}"
            f" x{speed:g}  {self.events_per_sec:.0f} events/s\n"
            f"recovered at start: {recovered.get('running', 0)} running, {recovered.get('timers', 0)} timers, "
            f"{recovered.get('procedures', 0)} procedures"
            + (f", {self.upgraded} moved onto new code" if self.upgraded else "")
            + "  (kill -9 me, rerun)",
            overflow="ellipsis",
        )
        header.no_wrap = True

        by_type: Counter[str] = Counter(_short_type(t) for t in self.running.values())
        done: Counter[str] = Counter()
        for (k, _), n in self.finished.items():
            done[k] += n
        kinds = sorted(set(by_type) | set(done))
        totals = {st: sum(n for (_, s2), n in self.finished.items() if s2 == st) for st in ("completed", "failed", "cancelled")}
        per_col = max(1, min(4, width // 26))
        wf = Table(
            title=f"Workflows running/finished: {len(self.running)} running, {totals['completed']} "
            f"completed, {totals['failed']} failed, {totals['cancelled']} cancelled",
            title_justify="left", box=None, show_header=False, padding=(0, 1), expand=True,
        )
        for _ in range(per_col):
            wf.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
            wf.add_column(justify="right", no_wrap=True, min_width=8)
        rows = -(-len(kinds) // per_col)
        # Never so many rows that the recent completions get fewer than three lines: the types
        # with the most running workflows are kept, and one cell says how many are left out.
        most = max(1, max(height, 24) - 11 - 3 - 3)
        if rows > most:
            rows = most
            keep = set(sorted(kinds, key=lambda k: (-by_type[k], k))[: rows * per_col - 1])
            left = len(kinds) - len(keep)
            kinds = [k for k in kinds if k in keep]
        else:
            left = 0
        cells_all = [[k, f"{by_type[k]}/{done[k]}"] for k in kinds]
        if left:
            cells_all.append([f"+{left} more types", ""])
        for r in range(rows):
            cells: list[str] = []
            for c in range(per_col):
                i = c * rows + r
                cells += cells_all[i] if i < len(cells_all) else ["", ""]
            wf.add_row(*cells)

        w = Table(title="World", title_justify="left", box=None, show_header=False, padding=(0, 1), expand=True)
        for _ in range(2):
            w.add_column(style="dim", no_wrap=True)
            w.add_column(no_wrap=True, overflow="ellipsis")
        items = [(k, str(v)) for k, v in self.world.items() if k != "last announcement"]
        for i in range(0, len(items), 2):
            pair = items[i:i + 2] + [("", "")] * (2 - len(items[i:i + 2]))
            w.add_row(*(x for kv in pair for x in kv))
        last = Text(f"last: {self.world.get('last announcement', '')}", no_wrap=True, overflow="ellipsis")

        # Header 2, titles 3, the recent table's header, the last announcement, the cursor's line.
        used = 2 + 3 + 1 + 1 + 1 + rows + -(-len(items) // 2)
        fit = max(1, max(height, 24) - used)
        recent = Table(title="Recent completions", title_justify="left", box=None, expand=True, padding=(0, 1))
        recent.add_column("workflow", overflow="ellipsis", no_wrap=True, ratio=3)
        recent.add_column("type", no_wrap=True, overflow="ellipsis", ratio=2)
        recent.add_column("status", no_wrap=True, min_width=9)
        recent.add_column("result", overflow="ellipsis", no_wrap=True, ratio=3)
        for row in list(self.recent)[:fit]:
            recent.add_row(*row)
        return Group(header, wf, w, last, recent)


def _top_bid(bids: list[dict[str, Any]]) -> str:
    """The open auction with the highest price, from what the auctions published."""
    top = max(bids, key=lambda b: b.get("price") or 0, default=None)
    if top is None:
        return "-"
    who = top.get("high_bidder") or "no bids yet"
    return f"{top.get('price')} for {top.get('item')} ({who})"


def _summary(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def start_world(system: ActorSystem, seed: int, scale: float) -> int:
    """Create the world and start its directors, unless they are already in the file.

    Returns how many directors were started now (0 on a restart).
    """
    pop = simulation.population(scale)
    world.init_world(system, pop["characters"], pop["items"], pop["resources"])
    started = 0
    for wid, wf, args in simulation.directors(seed, scale):
        try:
            system.get(wid)  # there already, whatever its status: starting it starts nothing new
        except UnknownWorkflow:
            system.start(wf, *args, id=wid)
            started += 1
    return started


def run_demo(
    db_path: str = "demo.db",
    *,
    clock_path: str | Path | None = None,
    duration: float | None = None,
    speed: float = 60.0,
    view: bool = True,
    seed: int = 7,
    scale: float = 1.0,
) -> dict[str, Any]:
    """Run the world on ``db_path`` (a SQLite file or a PostgreSQL URL) for ``duration`` real
    seconds (None: until Ctrl-C); the clock's reading is kept in ``clock_path`` (default:
    ``clock_file(db_path)``).

    Returns a summary: what was recovered at start, how many directors were started, and how many
    workflows were running and finished at the end.
    """
    if speed <= 0:
        raise ValueError(f"--speed must be > 0 (virtual seconds per real second), got {speed}")
    check_demo_file(db_path)
    # Procedures may run as soon as the system opens (recovery), so point them at the file first.
    world.use_database(db_path)
    clock_at = Path(clock_path) if clock_path is not None else clock_file(db_path)
    clock = VirtualClock(start=_resume_time(clock_at))
    # Saved ahead of the clock before it gets there (see the module's docstring).
    lease = speed * 1.0
    saved = clock.now() + lease
    _save_time(clock_at, saved)
    shown = display_url(db_path)
    with ActorSystem(db_path, clock=clock, retention=RETENTION) as system:
        recovered = dict(system.recovered)
        print(
            f"actorflow demo on {shown}: recovered {recovered['running']} running workflows "
            f"({recovered['activated']} activated, {recovered['timers']} timers, "
            f"{recovered['procedures']} procedures)",
            flush=True,
        )
        started = start_world(system, seed, scale)
        total = len(simulation.directors(seed, scale))
        if started == total:
            what = f"{started} directors started"
        elif started == 0:
            what = f"0 directors started (all {total} resumed from the file)"
        else:
            what = f"{started} directors started, {total - started} resumed from the file"
        print(f"world running: {what}, speed x{speed:g}", flush=True)

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
                if clock.now() + speed * TICK > saved:
                    saved = clock.now() + speed * TICK + lease
                    _save_time(clock_at, saved)
                clock.advance(speed * TICK)
                now = time.monotonic()
                if now >= next_refresh:
                    next_refresh = now + 1.0
                    watch.refresh()
                    if live is not None:
                        size = live.console.size
                        live.update(watch.render(clock, speed, recovered, size.height, size.width))
                    else:
                        # Plain lines, printed as things happen: what finished, then where the world is.
                        stamp = time.strftime("%H:%M:%S", time.gmtime(clock.now()))
                        for wid, kind, status, detail in watch.take_new():
                            print(f"{stamp} {status:<9} {kind:<16} {wid}  {detail}", flush=True)
                        print(watch.status_line(clock), flush=True)
                next_tick += TICK
                time.sleep(max(0.0, next_tick - time.monotonic()))
        except KeyboardInterrupt:
            pass
        finally:
            if live is not None:
                live.stop()
                print()
        watch.refresh()
        summary = {
            "recovered": recovered,
            "started": started,
            "running": len(watch.running),
            "finished": sum(watch.finished.values()),
            "upgraded": watch.upgraded,
        }
        moved = f" ({watch.upgraded} moved onto new code)" if watch.upgraded else ""
        print(f"stopping: {summary['running']} workflows still running{moved}, all saved in {shown}", flush=True)
    world.close_database()
    # Closed: nothing uses a later time now, so the next run continues from exactly here.
    _save_time(clock_at, clock.now())
    return summary


class _Parser(argparse.ArgumentParser):
    """A mistake in the command line is one line on stderr (not the usage too), status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--db``, ``--duration SECONDS``, ``--speed``, ``--no-view``, ``--seed``, ``--scale``.
    A mistake in it is status 2, one of the world or its file status 1."""
    p = _Parser(
        prog="wf demo",
        description="A living game world of workflows on one SQLite file (or a PostgreSQL database): buffs, patrols, fights, "
        "auctions, trades, quests, a boss raid and a day/night cycle. Kill it (Ctrl-C or kill -9) "
        "and run it again: it recovers every unfinished workflow and the world goes on.",
        epilog="Piped (not a terminal), it prints plain lines instead of the live view. Inspect the "
        "world while it runs: wf list --db demo.db --type patrol; wf show ID --db demo.db.",
    )
    p.add_argument("--db", default="demo.db",
                   help="SQLite file of the world (default demo.db), or a postgresql:// URL")
    p.add_argument("--clock-file", default=None,
                   help="where the world's clock is kept (default: DB.clock next to a SQLite file; "
                   "demo-SCHEMA-DIGEST.clock in the current directory for a URL)")
    p.add_argument("--duration", type=float, default=None, help="stop after this many real seconds (default: until Ctrl-C)")
    p.add_argument("--speed", type=float, default=60.0, help="virtual seconds per real second (default 60)")
    p.add_argument("--no-view", action="store_true",
                   help="plain lines (what finished, a status line per second) instead of the live view; "
                   "the default when stdout is not a terminal")
    p.add_argument("--seed", type=int, default=7, help="seed of the scripted players (default 7)")
    p.add_argument("--scale", type=float, default=1.0, help="size of the world (default 1.0: ~40 heroes)")
    p.add_argument("--verbose", action="store_true", help="show the runtime's warnings too")
    args = p.parse_args(argv)
    for flag, value, ok in (
        ("--speed", args.speed, 0 < args.speed < math.inf),
        ("--duration", args.duration, args.duration is None or args.duration >= 0),
        ("--scale", args.scale, 0 < args.scale < math.inf),
    ):
        if not ok:
            print(f"wf demo: error: {flag} must be a positive number (and finite), got {value}", file=sys.stderr)
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
        run_demo(args.db, clock_path=args.clock_file, duration=args.duration, speed=args.speed, view=not args.no_view and sys.stdout.isatty(),
                 seed=args.seed, scale=args.scale)
    except DemoError as e:
        print(f"wf demo: error: {e}", file=sys.stderr)
        return 1
    finally:
        runtime.removeHandler(handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
