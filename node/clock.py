"""The node's one clock: real time plus an offset the harness can move.

Every timer of a node (Raft ticks, master liveness, tablet server heartbeats, copy-session expiry) and
every wall-clock timestamp it writes reads time here, so a clock fault moves all of them together.
The offset comes from the file named by `FAULTLINE_CLOCK_OFFSET_FILE` (the cluster backends write
"+3.500000" into it); libfaketime would do the same from outside the process, but on this platform it
breaks CPython's `time.sleep`, so the node applies the offset itself.

The file is checked at most every `CHECK_EVERY_S` (a `stat`, then a read only when it changed), so
calling the clock in hot loops is cheap. No variable, no file, or "0" means real time. Sleeps stay in
real time: callers turn a deadline on this clock into a bounded real wait with `wait_s`/`wait_until`,
so a clock that jumps back never makes anyone sleep for an hour, and one that jumps forward never
yields a negative sleep.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

CLOCK_ENV = "FAULTLINE_CLOCK_OFFSET_FILE"
CHECK_EVERY_S = 0.05
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

log = logging.getLogger("faultline.node.clock")


def parse_offset(text: str) -> float:
    """Parse "+3.5", "-2", "0", "+1h" (libfaketime's relative forms); raises ValueError otherwise."""
    t = text.strip()
    if not t:
        return 0.0
    scale = 1.0
    if t[-1] in _UNITS:
        scale, t = _UNITS[t[-1]], t[:-1]
    value = float(t) * scale
    if value != value or abs(value) > 10 * 365 * 86400:  # NaN or absurd: refuse rather than wreck timers
        raise ValueError(f"clock offset out of range: {text.strip()!r}")
    return value


class Clock:
    """Monotonic and wall time shifted by the offset in `path` (None: always real time)."""

    def __init__(self, path: str | None = None, check_every_s: float = CHECK_EVERY_S) -> None:
        self.path = path or None
        self.check_every_s = check_every_s
        self._offset = 0.0
        self._stamp: tuple[int, int, int, int] | None = None
        self._next_check = 0.0
        self._lock = threading.Lock()
        self._warned = False

    @classmethod
    def from_env(cls) -> Clock:
        return cls(os.environ.get(CLOCK_ENV) or None)

    def offset(self) -> float:
        """Current offset in seconds; re-reads the file when it changed and the check interval passed."""
        if self.path is None:
            return 0.0
        real = time.monotonic()
        if real < self._next_check:
            return self._offset
        note = None
        with self._lock:
            if real >= self._next_check:
                self._next_check = real + self.check_every_s
                note = self._refresh()
            offset = self._offset
        if note:
            # Logged outside the lock: log records read this clock (install_log_time), and a record made
            # while holding the lock deadlocked the node whenever logging took longer than check_every_s.
            log.log(*note)
        return offset

    def _refresh(self) -> tuple[Any, ...] | None:
        """Re-reads the file if it changed; returns what to log (level, message, args...), if anything."""
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except OSError:
            self._stamp, self._offset = None, 0.0  # no file: no offset
            return None
        # ctime too: a writer may set mtime with one-second resolution (tar extraction)
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if stamp == self._stamp:
            return None
        try:
            with open(self.path, encoding="utf-8") as f:
                text = f.read(256)
            value = parse_offset(text)
        except (OSError, ValueError) as exc:
            # half-written or garbage: keep the last good offset and look again next time
            if self._warned:
                return None
            self._warned = True
            return (
                logging.WARNING,
                "clock offset file %s unreadable (%s); keeping offset %+.3f s",
                self.path,
                exc,
                self._offset,
            )
        self._stamp = stamp
        old, self._offset = self._offset, value
        if value != old:
            return (logging.INFO, "clock offset %+.6f s -> %+.6f s", old, value)
        return None

    def monotonic(self) -> float:
        """Seconds on a monotonic scale that moves with the offset (for timers and liveness)."""
        return time.monotonic() + self.offset()

    def time(self) -> float:
        """Wall-clock seconds since the epoch, shifted by the offset (for timestamps the node writes)."""
        return time.time() + self.offset()

    def wait_s(self, deadline: float, max_s: float = 0.1) -> float:
        """Real seconds to sleep towards `deadline` (on this clock): in [0, max_s], so a jump is noticed
        within `max_s` and a clock set back never turns into one long sleep."""
        left = deadline - self.monotonic()
        if left <= 0:
            return 0.0
        return min(left, max_s)

    def wait_until(self, ev: threading.Event, deadline: float, step_s: float = 0.1) -> bool:
        """Wait until `ev` is set (True) or this clock reaches `deadline` (ev's state)."""
        while True:
            s = self.wait_s(deadline, step_s)
            if s <= 0:
                return ev.is_set()
            if ev.wait(s):
                return True

    def sleep_on(self, ev: threading.Event, seconds: float, step_s: float = 0.1) -> bool:
        """`ev.wait(seconds)` measured on this clock: a periodic loop's pause."""
        return self.wait_until(ev, self.monotonic() + seconds, step_s)


_default: Clock | None = None
_default_lock = threading.Lock()


def clock() -> Clock:
    """The process's clock, configured from the environment on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Clock.from_env()
    return _default


def set_clock(c: Clock | None) -> None:
    """Replace the process's clock (tests; None: read the environment again on next use)."""
    global _default
    _default = c


def monotonic() -> float:
    return clock().monotonic()


def wall() -> float:
    return clock().time()


def install_log_time() -> None:
    """Make log timestamps follow the node's clock, as they would under a real clock fault."""
    old = logging.getLogRecordFactory()
    if getattr(old, "_faultline_clock", False):
        return

    def factory(*args, **kwargs) -> logging.LogRecord:
        rec = old(*args, **kwargs)
        off = clock().offset()
        if off:
            rec.created += off
            rec.msecs = int((rec.created - int(rec.created)) * 1000) + 0.0
        return rec

    factory._faultline_clock = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
