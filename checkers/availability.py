"""Availability: how much of the run clients were served, and how fast they recovered after heals.

Time is split into windows (default 1 s); a window's ok fraction is ok
completions over all completions in it. The longest outage is the longest gap
between successive ok completions. After each heal (a nemesis op whose f starts
with stop/heal/resume/recover/restore/end, see checkers/ops.py), the time to
recover is the delay until the first ok completion of an op invoked after the
heal, counted from when clients resumed if they were idle then (the final reads
start after the quiet period).

A heal at the very end of a run, after which no client op was invoked at all, is
judged by the quiet period the runner waits out for recovery (`quiet_period` in
opts or the test): the run's missing remainder is no evidence of an outage, and
the gap from the last client op to the end of the history is not an outage either.
Informational: valid is True unless `min_ok_fraction` (opts or constructor) is set
and not met, or a heal was followed by client ops none of which succeeded, or by
none at all with no quiet period known ("unknown").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline.checkers.ops import has_times, nemesis_intervals, op_time, pairs
from faultline.core import Op


class Availability:
    def __init__(self, window_s: float = 1.0, min_ok_fraction: float | None = None) -> None:
        self.window_s, self.min_ok_fraction = window_s, min_ok_fraction

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        opts = opts or {}
        window = float(opts.get("availability_window_s", self.window_s))
        min_ok = opts.get("min_ok_fraction", self.min_ok_fraction)
        timed = has_times(history)
        ps = [p for p in pairs(history) if p.completion is not None]
        if not ps:
            return {"valid": "unknown", "error": "no completed client operations"}
        t0 = min(op_time(op) for op in history)
        oks = sorted(op_time(p.done) for p in ps if p.type == "ok")
        windows: dict[int, list[int]] = {}
        for p in ps:
            w = int((op_time(p.done) - t0) // window)
            row = windows.setdefault(w, [0, 0])
            row[1] += 1
            if p.type == "ok":
                row[0] += 1
        series = [
            {"t": round(w * window, 3), "ok": r[0], "total": r[1], "ok_fraction": round(r[0] / r[1], 4)}
            for w, r in sorted(windows.items())
        ]
        end = max(op_time(p.done) for p in ps)  # the clients' end: the quiet period is no outage
        points = [t0, *oks, end]
        gaps = [(points[i + 1] - points[i], points[i]) for i in range(len(points) - 1)]
        longest = max(gaps) if gaps else (0.0, t0)
        _, heals = nemesis_intervals(history)
        quiet = _quiet_period(test, opts)
        recoveries = [_recovery(t_heal, op, ps, t0, quiet, window) for t_heal, op in heals]
        never = sum(r.get("recovered_after_s") is None and "judged_by" not in r for r in recoveries)
        ok_fraction = len(oks) / len(ps)
        valid: Any = True
        if min_ok is not None and ok_fraction < float(min_ok):
            valid = False
        elif never:
            valid = "unknown"
        rec = [r["recovered_after_s"] for r in recoveries if r.get("recovered_after_s") is not None]
        return {
            "valid": valid,
            "time_unit": "s" if timed else "op index",
            "ok_fraction": round(ok_fraction, 4),
            "window_s": window,
            "windows": series,
            "longest_outage_s": round(longest[0], 3),
            "longest_outage_start_s": round(longest[1] - t0, 3),
            "heals": recoveries,
            "max_recovery_s": max(rec) if rec else None,
            "unrecovered_heals": never,
        }


def _quiet_period(test: Mapping[str, Any], opts: Mapping[str, Any]) -> float | None:
    for source in (opts, test or {}):
        q = source.get("quiet_period")
        if isinstance(q, int | float) and not isinstance(q, bool) and q >= 0:
            return float(q)
    return None


def _recovery(
    t_heal: float, op: Op, ps: list[Any], t0: float, quiet: float | None, idle_s: float
) -> dict[str, Any]:
    """How one heal was recovered from: the first ok of a client op invoked after it, timed from the heal
    or, when clients were idle for longer than `idle_s` then, from when they resumed; a heal with no
    client op after it is judged by the quiet period."""
    out: dict[str, Any] = {"heal": op.get("f"), "at_s": round(t_heal - t0, 3)}
    after = [p for p in ps if op_time(p.invoke) >= t_heal]
    if not after:
        out["recovered_after_s"] = None
        if quiet is not None:
            out["judged_by"] = f"the quiet period ({quiet:g} s): no client op came after this heal"
        return out
    resumed = min(op_time(p.invoke) for p in after)
    idle = resumed - t_heal > idle_s
    oks = [op_time(p.completion) for p in after if p.type == "ok"]
    out["recovered_after_s"] = round(min(oks) - (resumed if idle else t_heal), 3) if oks else None
    if idle:
        out["clients_idle_s"] = round(resumed - t_heal, 3)
    return out
