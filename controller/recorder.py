"""The history recorder: one writer, in order, streamed to history.jsonl and flushed per line.

Flushed is not durable: the file is also fsynced every SYNC_EVERY_S while ops are recorded, at the end
of each phase (the runner calls `sync`) and on close, so a crash of the host loses at most the last
few seconds of history.

Every op passes through `record`, which stamps `index` and `time` (nanoseconds since the run began, from
the monotonic clock). Invocations are recorded before they are handed to a worker and completions after
the worker hands them back, so each recorded interval contains the real one: the checkers can only see
more concurrency than happened, never less, which keeps a linearizability verdict sound.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

from faultline.core import Op

SYNC_EVERY_S = 2.0


class Recorder:
    """Thread-safe; keeps the ops in memory too (the checkers read them at the end) and live counts."""

    def __init__(self, path: Path | str | None, clock: Any = time.monotonic_ns) -> None:
        self.path = Path(path) if path is not None else None
        self._clock = clock
        self._t0 = clock()
        self._lock = threading.Lock()
        self._writer: Any = None
        if self.path is not None:
            from faultline.history import JsonlWriter

            self._writer = JsonlWriter(self.path)
        self.ops: list[Op] = []
        self.counts: Counter[str] = Counter()  # completions of client ops by type
        self.last_time = 0
        self._synced_at = self._t0
        self._synced_count = 0

    def restart_clock(self) -> None:
        """Time 0 is when the first op can happen (not when the cluster started coming up)."""
        with self._lock:
            if not self.ops:
                self._t0 = self._clock()

    def now(self) -> int:
        """Nanoseconds since the run began."""
        return self._clock() - self._t0

    def record(self, op: Op) -> Op:
        with self._lock:
            t = max(self.now(), self.last_time)
            self.last_time = t
            out = cast(
                Op,
                {
                    "index": len(self.ops),
                    "time": t,
                    **{k: v for k, v in op.items() if k not in ("index", "time")},
                },
            )
            if self._writer is not None:
                self._writer.write(out)
                if self._clock() - self._synced_at >= SYNC_EVERY_S * 1e9:
                    self._sync_locked()
            self.ops.append(out)
            if out["type"] != "invoke" and out.get("process") != "nemesis":
                self.counts[out["type"]] += 1
            return out

    def client_ok_since(self, t_ns: int) -> int:
        """ok completions of client ops after `t_ns` (for the ops/s figure); scans from the end."""
        n = 0
        for op in reversed(self.ops):
            if op["time"] < t_ns:
                break
            if op["type"] == "ok" and op.get("process") != "nemesis":
                n += 1
        return n

    def sync(self) -> None:
        """fsyncs the history written so far (end of a phase)."""
        with self._lock:
            self._sync_locked()

    def _sync_locked(self) -> None:
        self._synced_at = self._clock()
        if self._writer is not None and self._writer.count != self._synced_count:
            self._writer.sync()
            self._synced_count = self._writer.count

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._sync_locked()
                self._writer.close()
                self._writer = None
