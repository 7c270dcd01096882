"""Jepsen's counter checker: each read lies between what must and what may have been added.

For a read, the lower bound is the sum of acknowledged adds that completed
before the read was invoked; the upper bound is the sum of every add (ok or
indeterminate) invoked before the read completed. Failed adds count for neither.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from faultline.checkers.ops import pairs
from faultline.core import Op


class CounterChecker:
    def __init__(self, initial: int = 0) -> None:
        self.initial = initial

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        ps = pairs(history)
        pos = {id(op): i for i, op in enumerate(history)}
        done_at: list[tuple[int, int]] = []  # (completion position, amount) of ok adds
        invoked_at: list[tuple[int, int]] = []  # (invoke position, amount) of ok or info adds
        reads = []
        for p in ps:
            if p.f in ("add", "increment", "inc"):
                amount = p.invoke.get("value")
                amount = 1 if amount is None else amount
                if p.type == "ok":
                    done_at.append((pos[id(p.completion)], amount))
                if p.type in ("ok", "info"):
                    invoked_at.append((pos[id(p.invoke)], amount))
            elif p.f == "read" and p.type == "ok" and p.completion is not None:
                reads.append(p)
        done_at.sort()
        invoked_at.sort()
        done_pref = [0]
        for _, a in done_at:
            done_pref.append(done_pref[-1] + a)
        inv_pref = [0]
        for _, a in invoked_at:
            inv_pref.append(inv_pref[-1] + a)
        errors = []
        for r in reads:
            lo = self.initial + done_pref[bisect.bisect_left(done_at, (pos[id(r.invoke)], -(10**18)))]
            hi = self.initial + inv_pref[bisect.bisect_left(invoked_at, (pos[id(r.completion)], -(10**18)))]
            v = r.done.get("value")
            if not isinstance(v, int | float) or not lo <= v <= hi:
                errors.append({"index": r.done.get("index"), "value": v, "lower": lo, "upper": hi})
        return {
            "valid": not errors,
            "read_count": len(reads),
            "add_count": len(invoked_at),
            "error_count": len(errors),
            "errors": errors[:20],
            "final_upper_bound": self.initial + inv_pref[-1],
        }
