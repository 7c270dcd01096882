"""Time to detection: when the earliest anomaly any checker reported became observable.

Checkers name the operation that proved an anomaly (`op`, `first_anomaly` or `bad_op` in their evidence,
or `failure.op`), either with its own `time` or by history indexes (`complete_index`, `index`,
`invoke_index`). The anomaly counts from the op's completion: the first moment the history held the proof.
Analysis stores the result in results.json (`time_to_detection_s`, `first_anomaly`); campaigns and
scoring read it from there.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from faultline.core import Op


def history_index_times(history: list[Op]) -> dict[int, int]:
    """index -> time (ns) of the ops that carry both."""
    return {op["index"]: op["time"] for op in history if isinstance(op.get("index"), int) and "time" in op}


def first_anomaly(results: Mapping[str, Any], times: Mapping[int, int]) -> tuple[float | None, str | None]:
    """(seconds since the run began, description) of the earliest anomaly any checker reported;
    `times` maps history index -> time (ns)."""
    best: tuple[float | None, str | None] = (None, None)

    def op_time(op: Mapping[str, Any]) -> float | None:
        for k in ("complete_index", "index", "invoke_index"):
            if isinstance(op.get(k), int) and op[k] in times:
                return times[op[k]] / 1e9
        return op["time"] / 1e9 if isinstance(op.get("time"), int | float) else None

    def visit(node: Any, path: str) -> None:
        nonlocal best
        if isinstance(node, Mapping):
            if node.get("valid") is False:
                for candidate in (node.get("failure"), node):
                    op = (
                        candidate.get("op") or candidate.get("first_anomaly") or candidate.get("bad_op")
                        if isinstance(candidate, Mapping)
                        else None
                    )
                    if isinstance(op, Mapping) and (t := op_time(op)) is not None:
                        if best[0] is None or t < best[0]:
                            desc = {k: op[k] for k in ("process", "f", "key", "value") if k in op}
                            best = (t, f"{path or 'checker'}: {json.dumps(desc, default=str)}")
                        break
                else:
                    if best[1] is None:
                        best = (best[0], path or "checker")
            for k, v in node.items():
                if isinstance(v, Mapping | list):
                    visit(v, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for v in node[:50]:
                visit(v, path)

    visit(results, "")
    return best
