"""Availability: how much of the run clients were served, and how fast they recovered after heals.

Time is split into windows (default 1 s); a window's ok fraction is ok
completions over all completions in it. The longest outage is the longest gap
between successive ok completions. After each heal (a nemesis op whose f starts
with stop/heal/resume/recover/restore/end, see checkers/ops.py), the time to
recover is the delay until the first ok completion of an op invoked after the
heal. Informational: valid is True unless `min_ok_fraction` (opts or constructor)
is set and not met, or a heal was never followed by any ok op ("unknown").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline.checkers.ops import Op, has_times, nemesis_intervals, op_time, pairs


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
        oks = sorted(op_time(p.completion) for p in ps if p.type == "ok")
        windows: dict[int, list[int]] = {}
        for p in ps:
            w = int((op_time(p.completion) - t0) // window)
            row = windows.setdefault(w, [0, 0])
            row[1] += 1
            if p.type == "ok":
                row[0] += 1
        series = [
            {"t": round(w * window, 3), "ok": r[0], "total": r[1], "ok_fraction": round(r[0] / r[1], 4)}
            for w, r in sorted(windows.items())
        ]
        end = max(op_time(op) for op in history)
        points = [t0, *oks, end]
        gaps = [(points[i + 1] - points[i], points[i]) for i in range(len(points) - 1)]
        longest = max(gaps) if gaps else (0.0, t0)
        _, heals = nemesis_intervals(history)
        recoveries = []
        never = 0
        for t_heal, op in heals:
            after = [op_time(p.completion) for p in ps if p.type == "ok" and op_time(p.invoke) >= t_heal]
            if after:
                recoveries.append({"heal": op.get("f"), "at_s": round(t_heal - t0, 3),
                                   "recovered_after_s": round(min(after) - t_heal, 3)})
            else:
                never += 1
                recoveries.append({"heal": op.get("f"), "at_s": round(t_heal - t0, 3), "recovered_after_s": None})
        ok_fraction = len(oks) / len(ps)
        valid: Any = True
        if min_ok is not None and ok_fraction < float(min_ok):
            valid = False
        elif never:
            valid = "unknown"
        rec = [r["recovered_after_s"] for r in recoveries if r["recovered_after_s"] is not None]
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
