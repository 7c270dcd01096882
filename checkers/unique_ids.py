"""Jepsen's unique-ids checker: every acknowledged `generate` returned a distinct id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from faultline.checkers.models import freeze, thaw
from faultline.checkers.ops import pairs
from faultline.core import Op


class UniqueIds:
    def __init__(self, f: str = "generate") -> None:
        self.f = f

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        ids = [
            freeze(p.completion.get("value"))
            for p in pairs(history)
            if p.f == self.f and p.type == "ok" and p.completion is not None
        ]
        counts = Counter(ids)
        dups = {k: n for k, n in counts.items() if n > 1}
        ranged = [thaw(i) for i in ids if isinstance(thaw(i), int | float) and not isinstance(thaw(i), bool)]
        return {
            "valid": not dups,
            "attempted_count": sum(1 for p in pairs(history) if p.f == self.f),
            "acknowledged_count": len(ids),
            "duplicated_count": len(dups),
            "duplicated": [[thaw(k), n] for k, n in sorted(dups.items(), key=lambda kv: -kv[1])[:50]],
            "range": [min(ranged), max(ranged)] if ranged else None,
        }
