"""The generator interpreter: drives a generator against live workers on the real clock, recording every
operation it hands out and every completion it gets back.

The runner (controller/runner.py) owns the lifecycle around it: cluster, setup, phases, heal, analysis.
This module knows nothing of clusters or databases: workers are callables, and the generator decides
which operation each gets and when (faultline.gen).
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from faultline import gen
from faultline.controller.recorder import Recorder
from faultline.core import Op
from faultline.gen import NEMESIS, NS, Context, Pending

log = logging.getLogger("faultline.runner")


class CutShort(Exception):
    """Raised inside the interpreter when the run must stop early; the message says why."""


# Every signal that asks a run to stop: Ctrl-C, `kill`/`timeout`/`docker stop`/systemd/CI cancellation, a
# closed terminal. All three lead to the same orderly stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class Interrupts:
    """Counts stop signals (SIGINT, SIGTERM, SIGHUP alike): the first asks for a clean stop, the second for
    an immediate one that still heals and tears down, the third gives up healing. Only inside a region
    marked `interruptible` (a checker's search) does the third raise KeyboardInterrupt; elsewhere the
    runner reads the count between steps, so no step is cut in the middle."""

    count: int = 0
    event: threading.Event = field(default_factory=threading.Event)
    last: str = ""
    interruptible: bool = False

    def handler(self, signum: int, frame: Any) -> None:
        self.count += 1
        self.last = signal.Signals(signum).name
        self.event.set()
        if self.count >= 3 and self.interruptible:
            raise KeyboardInterrupt

    @property
    def stop(self) -> bool:
        return self.count >= 1

    @property
    def abort(self) -> bool:
        return self.count >= 2

    @property
    def give_up(self) -> bool:
        return self.count >= 3

    def why(self) -> str:
        return f"interrupted ({self.last or 'SIGINT'}{f' x{self.count}' if self.count > 1 else ''})"


# Hand-offs between the interpreter and its workers: a SimpleQueue (in C, no Condition to notify) costs a
# fraction of a queue.Queue per op, and the interpreter is the only consumer of completions.
Completions = queue.SimpleQueue[Any]


class Worker(threading.Thread):
    """One thread of the generator: runs its client (or the nemesis) on the ops it is handed."""

    def __init__(
        self,
        thread: Any,
        invoke: Callable[[Op], Op],
        completions: Completions,
        reopen: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"worker-{thread}", daemon=True)
        self.thread_id = thread
        self.invoke = invoke
        self.completions = completions
        self.inbox: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self.reopen = reopen

    def run(self) -> None:
        while True:
            op = self.inbox.get()
            if op is None:
                return
            try:
                done = self.invoke(op)
                if not isinstance(done, dict) or done.get("type") not in ("ok", "fail", "info"):
                    raise TypeError(f"invoke returned {done!r}, not an op with type ok/fail/info")
                self.completions.put((self.thread_id, op, done, None))
            except BaseException as exc:  # a crash of the client or nemesis: reported, run cut short
                crash = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                log.error("thread %s crashed on %s: %s", self.thread_id, op.get("f"), traceback.format_exc())
                self.completions.put((self.thread_id, op, {**op, "type": "info", "error": crash}, crash))
                continue
            if done.get("type") == "info" and self.reopen is not None:
                try:
                    self.reopen()
                except Exception as exc:
                    log.warning("thread %s: reopening its client failed: %s", self.thread_id, exc)


def _strip(op: Op) -> Op:
    return cast(Op, {k: v for k, v in op.items() if k not in ("index", "time")})


class Interpreter:
    """Drives a generator against live workers with the real clock, recording every op."""

    def __init__(
        self,
        recorder: Recorder,
        workers: Mapping[Any, Worker],
        completions: Completions,
        ctx: Context,
        interrupts: Interrupts,
        on_nemesis: Callable[[Op], None] | None = None,
    ) -> None:
        self.recorder = recorder
        self.workers = workers
        self.completions = completions
        self.ctx = ctx
        self.interrupts = interrupts
        self.outstanding: dict[Any, Op] = {}
        self.crash: str | None = None
        self.on_nemesis = on_nemesis

    def _complete(self, item: tuple[Any, Op, Op, str | None], g: gen.Gen | None) -> gen.Gen | None:
        thread, inv, done, crash = item
        out: Op = {**_strip(done), "process": inv["process"], "f": done.get("f", inv["f"])}
        if "key" in inv:
            out.setdefault("key", inv["key"])
        rec = self.recorder.record(out)
        self.outstanding.pop(thread, None)
        self.ctx = self.ctx.at(self.recorder.now()).freed(thread)
        if g is not None:
            g = g.update(self.ctx, rec)
        if rec["type"] == "info" and isinstance(thread, int):
            self.ctx = self.ctx.with_retired(thread)
        if thread == NEMESIS and self.on_nemesis:
            self.on_nemesis(rec)
        if crash is not None and self.crash is None:
            who = "nemesis" if thread == NEMESIS else f"client (process {inv['process']})"
            self.crash = f"{who} crashed on {inv['f']}: {crash}"
        return g

    def drain(self, timeout_s: float) -> bool:
        """Waits (bounded) for outstanding ops; True if none is left."""
        deadline = time.monotonic() + timeout_s
        while self.outstanding and time.monotonic() < deadline and not self.interrupts.abort:
            try:
                item = self.completions.get(timeout=0.05)
            except queue.Empty:
                continue
            self._complete(item, None)
        return not self.outstanding

    def run(self, g: gen.Gen, phase: str, hard_limit_s: float) -> None:
        """Runs `g` until it is exhausted, the hard limit passes, or a stop is requested."""
        deadline = time.monotonic() + hard_limit_s
        while True:
            if self.interrupts.stop:
                raise CutShort(self.interrupts.why())
            if self.crash:
                raise CutShort(self.crash)
            if time.monotonic() > deadline:
                raise CutShort(f"the {phase} phase overran its {hard_limit_s:.0f} s limit")
            # completions first: they free threads and may change what the generator wants (the
            # interpreter is their only consumer, so a non-empty queue has an item to get)
            while not self.completions.empty():
                g = self._complete(self.completions.get_nowait(), g)  # type: ignore[assignment]
            now = self.recorder.now()
            self.ctx = self.ctx.at(now)
            ans = g.op(self.ctx)
            if ans is None:
                if not self.outstanding:
                    return
                wait_ns: int | None = None
            else:
                o, g2 = ans
                if isinstance(o, Pending):
                    g = g2
                    wait_ns = None if o.until is None else max(0, o.until - now)
                elif o["time"] > now:
                    wait_ns = o["time"] - now  # not due yet: wait, then ask again (the answer may change)
                else:
                    thread = self.ctx.thread_of(o["process"])
                    if thread is None or thread not in self.ctx.free:
                        raise RuntimeError(f"generator produced an op for a busy or unknown process: {o}")
                    rec = self.recorder.record(_strip(o))
                    self.ctx = self.ctx.busy(thread)
                    g = g2.update(self.ctx, rec)
                    self.outstanding[thread] = rec
                    if thread == NEMESIS and self.on_nemesis:
                        self.on_nemesis(rec)
                    self.workers[thread].inbox.put(rec.copy())  # the worker's own copy
                    continue
            timeout = 0.1 if wait_ns is None else min(0.1, wait_ns / NS)
            try:
                item = self.completions.get(timeout=max(0.0005, timeout))
            except queue.Empty:
                continue
            g = self._complete(item, g)  # type: ignore[assignment]
