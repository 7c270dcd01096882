"""Counts of operations by f and completion type (Jepsen's stats checker).

Invalid when no client op succeeded at all (the workload or the cluster never
worked); an f that never succeeded is listed in `never_ok` but does not fail the
run (under heavy faults a rare op may legitimately never get through), unlike
Jepsen's stricter rule. "unknown" when the history has no client ops.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from faultline.checkers.ops import pairs
from faultline.core import Op


class Stats:
    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        by_f: dict[str, dict[str, int]] = defaultdict(lambda: {"count": 0, "ok": 0, "fail": 0, "info": 0})
        for p in pairs(history):
            row = by_f[str(p.f)]
            row["count"] += 1
            row[p.type] += 1
        total = {k: sum(r[k] for r in by_f.values()) for k in ("count", "ok", "fail", "info")}
        if total["count"] == 0:
            return {"valid": "unknown", "error": "no client operations", **total, "by_f": {}}
        never = sorted(f for f, r in by_f.items() if r["ok"] == 0)
        out: dict[str, Any] = {
            "valid": total["ok"] > 0,
            **total,
            "by_f": {f: dict(r) for f, r in sorted(by_f.items())},
        }
        for r in out["by_f"].values():
            r["ok_fraction"] = round(r["ok"] / r["count"], 4)
        if never:
            out["never_ok"] = never
        return out
