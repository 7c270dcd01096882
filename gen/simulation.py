"""`simulate`: a generator run on a simulated clock, for tests that check timing and routing in
milliseconds; it asks and updates the generator, and retires processes, as a live run does."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from faultline.core.ops import Op, OpType
from faultline.gen.base import Gen, lift
from faultline.gen.context import NS, PENDING, Context, Pending, Thread


def simulate(
    gen: Any,
    concurrency: int,
    seed: int = 0,
    latency_s: float | Callable[[Op], float] = 0.0,
    complete: Callable[[Op], OpType] | None = None,
    nemesis_thread: bool = True,
    max_ops: int = 100_000,
    max_time_s: float = 3600.0,
) -> list[Op]:
    """Runs `gen` on a simulated clock and returns the history (invocations and completions).

    Each invocation completes after `latency_s` (a number or a function of the op) with the type
    `complete(op)` returns (default "ok"); `info` retires the process, as in a live run.
    """
    rng = random.Random(seed)
    ctx = Context.initial(concurrency, rng, nemesis=nemesis_thread)
    g: Gen = lift(gen)
    history: list[Op] = []
    inflight: list[tuple[int, int, Op, Thread]] = []  # (done_time, seq, op, thread)
    seqno = 0
    deadline = int(max_time_s * NS)
    while len(history) < max_ops:
        ans = g.op(ctx)
        next_done = min(inflight)[0] if inflight else None
        if ans is None:
            if not inflight:
                break
            o: Op | Pending = PENDING
        else:
            o, g2 = ans
            if isinstance(o, Pending):
                g = g2  # a pending answer only starts deadlines (sleeps, time limits): keep them
        if not isinstance(o, Pending) and (next_done is None or o["time"] <= next_done):
            t = max(ctx.time, o["time"])
            ctx = ctx.at(t)
            due: Op = {**o, "time": t}
            thread = ctx.thread_of(due["process"])
            assert thread is not None and thread in ctx.free, f"op on a busy or unknown thread: {due}"
            history.append(due)
            ctx = ctx.busy(thread)
            g = g2.update(ctx, due)
            lat = latency_s(due) if callable(latency_s) else latency_s
            seqno += 1
            inflight.append((t + int(lat * NS), seqno, due, thread))
            continue
        # Advance the clock: to the next completion, or to when the generator wants to be asked again.
        wake = o.until if isinstance(o, Pending) else o["time"]
        if next_done is not None and (wake is None or next_done <= wake):
            inflight.sort()
            done_t, _, inv, thread = inflight.pop(0)
            ctx = ctx.at(max(ctx.time, done_t))
            typ: OpType = complete(inv) if complete else "ok"
            comp: Op = {**inv, "type": typ, "time": ctx.time}
            history.append(comp)
            ctx = ctx.freed(thread)
            g = g.update(ctx, comp)
            if typ == "info":
                ctx = ctx.with_retired(thread)
        elif wake is not None:
            ctx = ctx.at(max(ctx.time, wake))
        else:
            break  # pending for ever with nothing in flight: the generator is stuck
        if ctx.time > deadline:
            break
    for i, op in enumerate(history):
        op["index"] = i
    return history
