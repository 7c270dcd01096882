"""Helpers shared by the checkers: pairing invocations with completions, nemesis intervals.

Conventions (docs/checkers.md): nemesis ops have process "nemesis". A nemesis op
whose `f` starts with one of HEAL_PREFIXES ends a fault (`stop-partition`,
`heal`, `resume-...`); one starting with "start-" begins the fault named by the
rest (`start-partition` ... `stop-partition`); any other nemesis op begins a
fault that lasts until the next heal, unless its completion's value says
`"transient": true` (the nemesis left nothing of its own behind: the fault ends
with the op, and what the cluster does next is the store's doing). Such an op may
also say `"watched_s": S`: it spent its last S seconds only watching the cluster
(waiting for it to report healthy), so its fault ended S seconds before its
completion. An op that failed with a `skipped` value did nothing: it is no fault
at all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from faultline.core import Op
from faultline.core.inputs import is_non_negative_number

HEAL_PREFIXES = ("stop", "heal", "resume", "recover", "restore", "end")


class BadOp(ValueError):
    """An op a checker cannot judge (an f its model does not know, a value of the wrong shape): bad input,
    never a verdict. `position` is the op's place in the history, so a reader can name its line."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position


def is_nemesis(op: Op) -> bool:
    return op.get("process") == "nemesis"


def is_heal(f: Any) -> bool:
    return isinstance(f, str) and f.startswith(HEAL_PREFIXES)


def fault_name(f: str) -> str:
    """`start-partition` / `stop-partition` -> `partition`."""
    for p in ("start-", "stop-", "heal-", "resume-", "recover-", "restore-", "end-"):
        if f.startswith(p):
            return f[len(p) :]
    return f


def op_time(op: Op) -> float:
    """Seconds since the run began (our `time` is ns); the index stands in when a format has no time."""
    t = op.get("time")
    if isinstance(t, int | float):
        return t / 1e9
    return float(op.get("index", 0))


def has_times(history: list[Op]) -> bool:
    return any(isinstance(op.get("time"), int | float) for op in history)


@dataclass
class Pair:
    """An invocation and its completion (None if it never completed)."""

    invoke: Op
    completion: Op | None

    @property
    def type(self) -> str:
        return self.completion.get("type", "info") if self.completion else "info"

    @property
    def f(self) -> Any:
        return self.invoke.get("f")

    @property
    def done(self) -> Op:
        """The completion of a pair its caller knows completed (it kept only those, or saw an `ok`)."""
        assert self.completion is not None
        return self.completion

    @property
    def value(self) -> Any:
        """The completion's value if it has one (reads), else the invocation's."""
        if self.completion is not None and self.completion.get("value") is not None:
            return self.completion.get("value")
        return self.invoke.get("value")


def pairs(history: list[Op], nemesis: bool = False) -> list[Pair]:
    """Client (or, with nemesis=True, nemesis) invocations paired with completions, in invocation order."""
    out: list[Pair] = []
    pending: dict[Any, int] = {}
    for op in history:
        if is_nemesis(op) != nemesis:
            continue
        proc = op.get("process")
        typ = op.get("type")
        if typ == "invoke":
            pending[proc] = len(out)
            out.append(Pair(op, None))
        elif typ in ("ok", "fail", "info"):
            i = pending.pop(proc, None)
            if i is None:
                # A completion without invocation (nemesis ops are often logged as info only).
                out.append(Pair(op, op))
            else:
                out[i].completion = op
    return out


@dataclass
class Interval:
    """A fault from its start to its heal (end None: never healed in the history)."""

    name: str
    start: float
    end: float | None
    start_op: Op
    end_op: Op | None


def nemesis_intervals(history: list[Op]) -> tuple[list[Interval], list[tuple[float, Op]]]:
    """(fault intervals, heal events) from the nemesis ops."""
    open_: dict[str, Interval] = {}
    intervals: list[Interval] = []
    heals: list[tuple[float, Op]] = []
    for p in pairs(history, nemesis=True):
        f = p.f
        if not isinstance(f, str):
            continue
        done = p.completion or p.invoke
        if did_nothing(p.completion):
            continue
        if is_heal(f):
            t = op_time(done)
            heals.append((t, done))
            name = fault_name(f)
            targets = [name] if name in open_ else (list(open_) if name in ("", f) else [])
            for n in targets:
                iv = open_.pop(n)
                iv.end, iv.end_op = t, done
        else:
            name = fault_name(f)
            if name in open_:
                continue
            iv = Interval(name, op_time(p.invoke), None, p.invoke, None)
            intervals.append(iv)
            if is_transient(p.completion):
                iv.end, iv.end_op = max(iv.start, op_time(p.done) - _watched_s(p.completion)), p.done
            else:
                open_[name] = iv
    return intervals, heals


def is_transient(completion: Op | None) -> bool:
    """A nemesis op whose completion says `transient`: it left no fault behind (a leadership moved and
    came back, a master replaced and caught up), so its interval ends with it rather than at the heal."""
    v = completion.get("value") if completion is not None else None
    return isinstance(v, Mapping) and v.get("transient") is True


def _watched_s(completion: Op | None) -> float:
    """Seconds a transient op spent only watching at its end: 0 unless it says so (and has a time)."""
    v = completion.get("value") if completion is not None else None
    w = v.get("watched_s") if isinstance(v, Mapping) else None
    timed = completion is not None and isinstance(completion.get("time"), int | float)
    return float(w) if timed and w is not None and is_non_negative_number(w) and w < 1e6 else 0.0


def did_nothing(completion: Op | None) -> bool:
    """A nemesis op that failed and says it skipped: no fault at all."""
    v = completion.get("value") if completion is not None else None
    return (
        completion is not None
        and completion.get("type") == "fail"
        and isinstance(v, Mapping)
        and "skipped" in v
    )


def fault_free_at(intervals: list[Interval], t0: float, t1: float) -> bool:
    """True when no fault interval overlaps [t0, t1]."""
    return not any(iv.start <= t1 and (iv.end is None or iv.end >= t0) for iv in intervals)


def iter_client(history: list[Op]) -> Iterator[Op]:
    return (op for op in history if not is_nemesis(op))
