"""Jepsen's set checker: adds, then a final read that must hold every acknowledged add.

lost: acknowledged adds missing from the final read; unexpected: read elements
never added; duplicated: elements the read lists more than once; recovered:
indeterminate (info) adds that did make it. Valid iff nothing is lost,
unexpected or duplicated; without any successful read the verdict is unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from faultline.checkers.models import freeze
from faultline.checkers.ops import Op, pairs


def _ranges(xs: list[Any], limit: int = 50) -> list[Any]:
    return sorted(xs, key=repr)[:limit]


class SetChecker:
    """`SetChecker().check(test, history, opts)`; adds are `f: "add"`, reads `f: "read"` (value: all elements)."""

    def __init__(self, add_f: str = "add", read_f: str = "read") -> None:
        self.add_f, self.read_f = add_f, read_f

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        attempted: set[Any] = set()
        acked: set[Any] = set()
        indeterminate: set[Any] = set()
        final: list[Any] | None = None
        final_read: Op | None = None
        reads = 0
        for p in pairs(history):
            if p.f == self.add_f:
                v = freeze(p.invoke.get("value"))
                attempted.add(v)
                if p.type == "ok":
                    acked.add(v)
                elif p.type == "info":
                    indeterminate.add(v)
            elif p.f == self.read_f and p.type == "ok":
                reads += 1
                final = list(p.completion.get("value") or []) if p.completion else []
                final_read = p.completion
        if final is None:
            return {"valid": "unknown", "error": "no successful read", "attempt_count": len(attempted),
                    "acknowledged_count": len(acked)}
        counts = Counter(freeze(x) for x in final)
        seen = set(counts)
        lost = acked - seen
        unexpected = seen - attempted
        duplicated = {x: n for x, n in counts.items() if n > 1}
        recovered = indeterminate & seen
        valid = not lost and not unexpected and not duplicated
        out: dict[str, Any] = {
            "valid": valid,
            "attempt_count": len(attempted),
            "acknowledged_count": len(acked),
            "read_count": reads,
            "ok_count": len(acked & seen),
            "lost_count": len(lost),
            "lost": _ranges(list(lost)),
            "unexpected_count": len(unexpected),
            "unexpected": _ranges(list(unexpected)),
            "duplicated_count": len(duplicated),
            "duplicated": [[k, n] for k, n in sorted(duplicated.items(), key=lambda kv: repr(kv[0]))[:50]],
            "recovered_count": len(recovered),
            "recovered": _ranges(list(recovered)),
        }
        if not valid and final_read is not None:
            # the read that showed the anomaly: when it became observable (time to detection)
            out["op"] = {k: final_read[k] for k in ("process", "f", "index", "time") if k in final_read}
        return out
