"""Opt-in CPU profile of a whole node process, for finding where per-operation CPU goes.

cProfile only sees the thread that enabled it, and a node's work is spread over gRPC worker threads,
replica drivers, WAL appenders and transport senders. With FAULTLINE_PROFILE=PATH set, every thread
started afterwards runs under its own profiler (counting the thread's CPU time) and `dump()` (called at a clean shutdown) merges them
into one pstats file at PATH. Off (and free) unless the variable is set.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import threading
import time

ENV = "FAULTLINE_PROFILE"
_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()


def install() -> bool:
    """Profile every thread started from now on; False (nothing done) unless FAULTLINE_PROFILE is set."""
    if not os.environ.get(ENV):
        return False
    orig_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        prof = cProfile.Profile(time.thread_time)  # CPU time, not time spent waiting
        with _lock:
            _profiles.append(prof)
        prof.enable()
        try:
            orig_run(self)
        finally:
            prof.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    return True


def dump() -> None:
    """Merge every thread's profile into the FAULTLINE_PROFILE file (no-op when profiling is off)."""
    path = os.environ.get(ENV)
    if not path:
        return
    with _lock:
        profs = list(_profiles)
    stats = None
    for p in profs:
        try:
            p.create_stats()
        except Exception:  # a profiler with nothing recorded yet
            continue
        if not getattr(p, "stats", None):
            continue
        if stats is None:
            stats = pstats.Stats(p)
        else:
            stats.add(p)
    if stats is not None:
        stats.dump_stats(path)
