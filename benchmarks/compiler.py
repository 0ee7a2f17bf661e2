"""Compiler benchmarks: the compiled state machine against the native coroutine, same run.

Run as ``python benchmarks/compiler.py``. Prints, as medians of several repetitions:

* overhead per suspension (driver only, and with a checkpoint/restore round-trip);
* a hot await-free loop inside a workflow vs the same loop in the native coroutine (target: at
  most 2x);
* the checkpoint size of a looping workflow after 10 and after 100,000 iterations (must not grow);
* the time of one checkpoint of a workflow holding a big state of plain data (a dict of 1,000
  and of 10,000 small dicts), and of one holding, or looping over, a module's dict of 10,000
  (and of a step and checkpoint of one that changes a value of that dict at each step).

``python benchmarks/compiler.py --against REV [--reps N]`` compares this code with the commit
REV on the same programs (this file's): REV is checked out into a temporary git worktree and
installed into a temporary venv, and each repetition runs the measurements once in a fresh
interpreter on this code and once on REV's (alternating which goes first; within one, each figure
is the best of three runs), so that the load of a shared machine falls on both alike. It prints
per figure both medians and their ratio, and the load average (1 minute) seen around the
repetitions; the worktree and venv are removed when the run ends. It also counts, per
suspension, the Python bytecode instructions executed and the Python-level calls made (through
``sys.settrace``): figures that load does not change, for when the timings are too noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
if __name__ == "__main__" and "--code" in sys.argv:  # a child of --against: that tree's workflows
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
else:
    sys.path.insert(0, str(HERE.parent))

from workflows import signal, timer, workflow  # noqa: E402
from workflows._compiler import checkpoint, restore, step  # noqa: E402

# These workflows live in the script on purpose (each run is one process, nothing recovers), and
# run on revisions whose CompileWarning may not exist yet: the warning about __main__ is not news.
warnings.filterwarnings("ignore", message=r"workflow __main__:")
from workflows._context import StepContext  # noqa: E402

REPS = 7


@workflow
async def ping(n):
    """Suspend ``n`` times, keeping a little state."""
    total = 0
    for _ in range(n):
        total += await signal("tick")
    return total


@workflow
async def hot(n):
    """One await, then a hot CPU loop with no await in it."""
    await timer("start", 1)
    acc = 0
    i = 0
    while i < n:
        if i % 3 == 0:
            acc += i * 2
        else:
            acc -= 1
        i += 1
    xs = [j * j for j in range(n // 10)]
    return acc + len(xs)


@workflow
async def patrol(k):
    """A loop that suspends once per turn and keeps only bounded state."""
    position = 0
    turns = 0
    while True:
        await timer("step", 1)
        position = (position + 1) % k
        turns += 1


@workflow
async def hoard(n):
    """Hold a dict of ``n`` small dicts across its awaits: a big continuation of plain data."""
    players = {f"p{i}": {"hp": i, "items": [i, i + 1]} for i in range(n)}
    total = 0
    while True:
        total += await signal("tick")
        players["p0"]["hp"] = total


# Module data: a registry the application fills (10,000 players), which workflows hold or loop
# over; a checkpoint writes it by name, never by value.
PLAYERS = {}


@workflow
async def roster(n):
    """Hold the module's dict of players across its awaits."""
    players = PLAYERS
    total = 0
    while True:
        total += await signal("tick") + len(players)


@workflow
async def visit(n):
    """Loop over the module's dict of players, one await per player."""
    total = 0
    for _name, player in PLAYERS.items():
        total += player["hp"] + await signal("tick")
    return total


@workflow
async def wound(n):
    """Hold the module's dict of players, one player's hit points changed at each step."""
    players = PLAYERS
    total = 0
    while True:
        total += await signal("tick")
        players["p0"]["hp"] -= 1


def registry(n):
    PLAYERS.clear()
    PLAYERS.update({f"p{i}": {"hp": i, "items": [i, i + 1]} for i in range(n)})


def hoarding(n, wf=None):
    """A continuation of ``hoard(n)`` suspended at its second await."""
    cont = (wf or hoard).start(n)
    step(cont)
    step(cont, 1)
    return cont


def paired(fa, fb, reps=REPS):
    """Medians of ``fa`` and ``fb`` timed alternately, so load changes hit both alike."""
    ta, tb = [], []
    for _ in range(reps):
        for fn, out in ((fa, ta), (fb, tb)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def drive_native(wf, *args, sends):
    coro = wf.__wrapped__(*args)
    try:
        coro.send(None)
        for _ in range(sends):
            coro.send(1)
        coro.send(1)
    except StopIteration as e:
        return e.value
    raise AssertionError("native run did not finish")


def drive_compiled(wf, *args, sends, roundtrip=False):
    cont = wf.start(*args)
    step(cont)
    for _ in range(sends):
        step(cont, 1)
        if roundtrip:
            cont = restore(checkpoint(cont))
    r = step(cont, 1)
    return r.value


def measure_once(tries: int = 3) -> dict[str, float]:
    """Each figure (a child of ``--against``), the best of ``tries`` runs in this interpreter (the
    least disturbed by other processes): microseconds per suspension, milliseconds for the hot
    loop."""
    n, m, loop_n = 20_000, 2_000, 300_000
    figures = {
        "native coroutine, per suspension (us)": (
            lambda: drive_native(ping, n, sends=n - 1), 1e6 / n),
        "compiled, no checkpoint, per suspension (us)": (
            lambda: drive_compiled(ping, n, sends=n - 1), 1e6 / n),
        "compiled, checkpoint+restore, per suspension (us)": (
            lambda: drive_compiled(ping, m, sends=m - 1, roundtrip=True), 1e6 / m),
        "hot loop, native (ms)": (lambda: drive_native(hot, loop_n, sends=-1), 1e3),
        "hot loop, compiled (ms)": (lambda: drive_compiled(hot, loop_n, sends=-1), 1e3),
        "checkpoint of a dict of 1,000 small dicts (ms)": (lambda: checkpoint(big), 1e3),
        "checkpoint of a dict of 10,000 small dicts (ms)": (lambda: checkpoint(huge), 1e3),
        "checkpoint holding a module dict of 10,000 small dicts (ms)": (lambda: checkpoint(held), 1e3),
        "checkpoint in a loop over a module dict of 10,000 (ms)": (lambda: checkpoint(looping), 1e3),
        "step and checkpoint holding a module dict of 10,000 a step changes (ms)": (
            lambda: (step(wounded, 1), checkpoint(wounded)), 1e3),
    }
    out = {}
    with StepContext().active():
        big, huge = hoarding(1_000), hoarding(10_000)
        registry(10_000)
        held, looping, wounded = hoarding(1, roster), hoarding(1, visit), hoarding(1, wound)
        checkpoint(held)  # (the first checkpoint walks the module data: timed apart, below)
        checkpoint(wounded)
        for name, (fn, scale) in figures.items():
            best = float("inf")
            for _ in range(tries):
                t0 = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t0)
            out[name] = best * scale
    return out


def count_once() -> dict[str, float]:
    """Python bytecode instructions and Python-level calls per suspension (``sys.settrace`` with
    opcode events): the same on a loaded machine as on an idle one, unlike the timings."""
    counts = {"op": 0, "call": 0}

    def tracer(frame, event, arg):
        if event == "call":
            counts["call"] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            counts["op"] += 1
        return tracer

    out = {}
    with StepContext().active():
        for label, roundtrip, n in (("no checkpoint", False, 400), ("checkpoint+restore", True, 100)):
            cont = ping.start(n + 10)
            step(cont)
            for _ in range(5):  # warm: caches filled, as in a long run
                step(cont, 1)
                if roundtrip:
                    cont = restore(checkpoint(cont))
            counts.update(op=0, call=0)
            sys.settrace(tracer)
            try:
                for _ in range(n):
                    step(cont, 1)
                    if roundtrip:
                        cont = restore(checkpoint(cont))
            finally:
                sys.settrace(None)
            out[f"compiled, {label}: bytecodes per suspension"] = counts["op"] / n
            out[f"compiled, {label}: Python calls per suspension"] = counts["call"] / n
    return out


def against(rev: str, reps: int) -> None:
    """This code and ``rev``'s, each repetition side by side in fresh interpreters."""
    sys.path.insert(0, str(HERE))
    import run  # the --against machinery of benchmarks/run.py: a worktree and a venv of ``rev``

    with tempfile.TemporaryDirectory(prefix="compiler-against-") as tmp:
        rev_side = run.prepare_against(rev, tmp)
        sha, src, python = rev_side.sha, rev_side.src, rev_side.python
        try:
            sides = {
                "this": (sys.executable, str(HERE.parent)),
                sha[:7]: (python, str(src)),
            }
            runs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
            loads = []
            for r in range(reps):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    exe, code = sides[name]
                    loads.append(os.getloadavg()[0])
                    proc = subprocess.run(
                        [exe, str(HERE / "compiler.py"), "--child", "--code", code],
                        capture_output=True, text=True, cwd=tmp,
                    )
                    if proc.returncode != 0:
                        raise SystemExit(f"the {name} run failed:\n{proc.stderr[-3000:]}")
                    runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(f"  repetition {r + 1}/{reps} done (load {os.getloadavg()[0]:.2f})", flush=True)
            loads.append(os.getloadavg()[0])
        finally:
            run.remove_against(src)
    old = sha[:7]
    print(f"\nthis code against {rev} ({old}), medians of {reps} repetitions, each in a fresh "
          "interpreter, the two side by side:")
    print(f"  {'figure':62s} {'this':>9s} {old:>9s}  ratio")
    for key in runs["this"][0]:
        a = statistics.median(x[key] for x in runs["this"])
        b = statistics.median(x[key] for x in runs[old])
        print(f"  {key:62s} {a:9.2f} {b:9.2f}  {a / b:5.2f}x")
    print(f"load average (1 min) around the repetitions: min {min(loads):.2f}, "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f} "
          f"({os.cpu_count()} cores)")


def main() -> None:
    ctx = StepContext()
    with ctx.active():
        n = 20_000
        tn, tc = paired(
            lambda: drive_native(ping, n, sends=n - 1), lambda: drive_compiled(ping, n, sends=n - 1)
        )
        m = 2_000
        tn_small, tr = paired(
            lambda: drive_native(ping, m, sends=m - 1),
            lambda: drive_compiled(ping, m, sends=m - 1, roundtrip=True),
        )
        print(f"per suspension (median of {REPS} runs):")
        print(f"  native coroutine              {tn / n * 1e6:8.2f} us")
        print(f"  compiled, no checkpoint       {tc / n * 1e6:8.2f} us   ({tc / tn:.1f}x native)")
        print(
            f"  compiled, checkpoint+restore  {tr / m * 1e6:8.2f} us   "
            f"({tr / tn_small:.1f}x native)"
        )

        loop_n = 300_000
        hn, hc = paired(
            lambda: drive_native(hot, loop_n, sends=-1),
            lambda: drive_compiled(hot, loop_n, sends=-1),
            reps=11,
        )
        assert drive_native(hot, 1000, sends=-1) == drive_compiled(hot, 1000, sends=-1)
        ratio = hc / hn
        verdict = "ok" if ratio <= 2.0 else "ABOVE TARGET"
        print(f"hot await-free loop ({loop_n:,} iterations):")
        print(f"  native    {hn * 1e3:8.2f} ms")
        print(f"  compiled  {hc * 1e3:8.2f} ms   ratio {ratio:.2f}x (target <= 2x: {verdict})")

        cont = patrol.start(7)
        step(cont)
        sizes = {}
        for i in range(1, 100_001):
            step(cont, None)
            if i in (10, 100_000):
                sizes[i] = len(checkpoint(cont))
        # Larger integers take a few more bytes; anything beyond that would be real growth.
        grew = "does not grow" if sizes[100_000] <= sizes[10] + 8 else "GROWS"
        print("continuation size of a looping workflow:")
        print(f"  after 10 iterations       {sizes[10]:6d} bytes")
        print(f"  after 100,000 iterations  {sizes[100_000]:6d} bytes   ({grew})")

        print("one checkpoint of a workflow holding a dict of N small dicts (best of 5):")
        for n in (1_000, 10_000):
            cont = hoarding(n)
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                blob = checkpoint(cont)
                best = min(best, time.perf_counter() - t0)
            print(f"  N = {n:6,d}  {best * 1e3:8.2f} ms   ({len(blob):,} bytes)")
        registry(10_000)
        print("one checkpoint of a workflow over a module dict of 10,000 small dicts (best of 5; "
              "the first, which walks the module data, apart):")
        for label, wf in (("holding it", roster), ("in a loop over it", visit)):
            cont = hoarding(1, wf)
            t0 = time.perf_counter()
            blob = checkpoint(cont)
            first = time.perf_counter() - t0
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                checkpoint(cont)
                best = min(best, time.perf_counter() - t0)
            print(f"  {label:18}  {best * 1e3:8.2f} ms   (first {first * 1e3:.1f} ms; {len(blob):,} bytes)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="REV", help="compare with this commit, same run")
    parser.add_argument("--reps", type=int, default=REPS, help="repetitions of --against")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps({**measure_once(), **count_once()}))
    elif args.against:
        against(args.against, args.reps)
    else:
        print(f"load average (1 min): {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
        main()
