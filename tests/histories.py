"""Hand-written histories for checker and page tests: events as (time_s, process, type, f, value[, key])
tuples, and operations written once as their invocation and completion."""

from __future__ import annotations

from typing import Any

S = 1_000_000_000  # ns per second

Event = tuple[Any, ...]


def ops(*events: Event) -> list[dict[str, Any]]:
    """(time_s, process, type, f, value[, key]) -> history, indexed in the order given."""
    out = []
    for i, e in enumerate(events):
        op = {"index": i, "time": int(e[0] * S), "process": e[1], "type": e[2], "f": e[3], "value": e[4]}
        if len(e) > 5:
            op["key"] = e[5]
        out.append(op)
    return out


def call(start: float, end: float, process: Any, f: str, value: Any, outcome: str = "ok") -> list[Event]:
    """One client operation, invoked at `start` and completed at `end`: a read is invoked without a value,
    anything else with the value it completes with."""
    return [(start, process, "invoke", f, None if f == "read" else value), (end, process, outcome, f, value)]


def fault(start: float, end: float, f: str) -> list[Event]:
    """One nemesis operation: its invocation and the `info` that reports it done."""
    return [(start, "nemesis", "invoke", f, None), (end, "nemesis", "info", f, None)]


# a write acknowledged, a partition begun, then a read of the value before the write: not linearizable
STALE_READ_IN_PARTITION = [
    *call(0.0, 0.2, 0, "write", 1),
    *fault(0.3, 0.35, "start-partition"),
    *call(0.5, 0.7, 1, "read", 0),
]
