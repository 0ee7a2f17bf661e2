"""Compiler benchmarks: the compiled state machine against the native coroutine, same run.

Run as ``python benchmarks/compiler.py``. Prints, as medians of several repetitions:

* overhead per suspension (driver only, and with a checkpoint/restore round-trip);
* a hot await-free loop inside a workflow vs the same loop in the native coroutine (target: at
  most 2x);
* the checkpoint size of a looping workflow after 10 and after 100,000 iterations (must not grow).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workflows import signal, timer, workflow  # noqa: E402
from workflows._compiler import checkpoint, restore, step  # noqa: E402
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


if __name__ == "__main__":
    main()
