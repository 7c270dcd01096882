"""total-queue: what goes into a queue must come out, once (after Jepsen's total-queue checker).

Ops: `enqueue` (the invocation's value is the element), `dequeue` (an ok completion's value is the element
taken; a `fail` found the queue empty) and `drain` (the final read: its completion's value is the list of
elements it took; an `info` drain took at least the list it carries, if any). Elements are compared by
value, as multisets:

- lost: acknowledged enqueues never dequeued;
- unexpected: dequeued elements no enqueue ever attempted;
- duplicated: elements dequeued more often than enqueues of them were attempted;
- recovered: enqueues of unknown outcome (info) whose element came out (not an error).

A dequeue of unknown outcome (`info`) may have taken an element that no one saw. A lost element is then
only proven lost when those in-doubt dequeues cannot account for it: each takes at most one element, and
only one enqueued before the dequeue completed. An `info` drain may have taken any number. Losses they may
account for give `unknown`, never `false`. Without a drain that completed, elements still queued are not lost: the verdict
on losses is `unknown`. A history with no drain op at all (a foreign one whose drain was written as
dequeues) is judged as it stands, as Jepsen does. Unlike Jepsen's checker, duplicates make the verdict
false unless `allow_duplicates` (an at-least-once queue): a list or a table hands each element out once.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.models import freeze, thaw
from faultline.checkers.ops import BadOp, pairs
from faultline.core import Op

FS = frozenset({"enqueue", "dequeue", "drain"})
EXAMPLES = 50
NEVER = float("inf")


@dataclass
class _Tally:
    """What the history says went in and came out, and the in-doubt dequeues (completion positions)."""

    attempts: Counter[Any] = field(default_factory=Counter)
    acked: Counter[Any] = field(default_factory=Counter)
    dequeued: Counter[Any] = field(default_factory=Counter)
    enqueued_at: dict[Any, int] = field(default_factory=dict)
    in_doubt: list[float] = field(default_factory=list)
    drains: int = 0
    drained: bool = False
    drain_in_doubt: bool = False


class TotalQueue:
    def __init__(self, allow_duplicates: bool = False) -> None:
        self.allow_duplicates = allow_duplicates

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        t = self._tally(history)
        lost = t.acked - t.dequeued
        unexpected = Counter({v: n for v, n in t.dequeued.items() if v not in t.attempts})
        duplicated = t.dequeued - t.attempts - unexpected
        recovered = (t.dequeued & t.attempts) - t.acked
        lost_items = sorted(lost.elements(), key=lambda v: t.enqueued_at.get(v, 0))
        unexplained = 0 if t.drain_in_doubt else _unexplained(lost_items, t.enqueued_at, t.in_doubt)
        losses_known = t.drained or t.drains == 0
        bad = bool(unexpected) or (bool(duplicated) and not self.allow_duplicates)
        valid: bool | str
        if bad or (losses_known and unexplained):
            valid = False
        elif lost:
            valid = "unknown"
        else:
            valid = True
        return {
            "valid": valid,
            "attempt_count": sum(t.attempts.values()),
            "acknowledged_count": sum(t.acked.values()),
            "dequeued_count": sum(t.dequeued.values()),
            "lost_count": sum(lost.values()),
            "lost": [thaw(v) for v in lost_items[:EXAMPLES]],
            "lost_unexplained_count": unexplained,
            "in_doubt_dequeue_count": len(t.in_doubt),
            "unexpected_count": sum(unexpected.values()),
            "unexpected": [thaw(v) for v in sorted(unexpected, key=repr)[:EXAMPLES]],
            "duplicated_count": sum(duplicated.values()),
            "duplicates_allowed": self.allow_duplicates,
            "duplicated": [[thaw(v), t.dequeued[v]] for v in sorted(duplicated, key=repr)[:EXAMPLES]],
            "recovered_count": sum(recovered.values()),
            "drained": t.drained,
        }

    @staticmethod
    def _tally(history: list[Op]) -> _Tally:
        """One pass over the client ops (nemesis ops are left out by `pairs`)."""
        t = _Tally()
        pos = {id(op): i for i, op in enumerate(history)}
        for p in pairs(history):
            done = NEVER if p.completion is None or p.completion is p.invoke else pos[id(p.completion)]
            if p.f == "enqueue":
                v = freeze(p.invoke.get("value"))
                t.attempts[v] += 1
                t.enqueued_at.setdefault(v, pos[id(p.invoke)])
                if p.type == "ok":
                    t.acked[v] += 1
            elif p.f == "dequeue":
                if p.type == "ok" and p.done.get("value") is not None:
                    t.dequeued[freeze(p.done.get("value"))] += 1
                elif p.type == "info":
                    t.in_doubt.append(done)
            elif p.f == "drain":
                t.drains += 1
                got = p.completion.get("value") if p.completion is not None else None
                if p.type in ("ok", "info") and got is not None:
                    if not isinstance(got, list):
                        raise BadOp(
                            pos[id(p.completion)], f"a drain's value is a list of elements, not {got!r}"
                        )
                    t.dequeued.update(freeze(x) for x in got)
                if p.type == "ok":
                    t.drained = True
                elif p.type == "info":
                    t.drain_in_doubt = True
            else:
                raise BadOp(
                    pos[id(p.invoke)],
                    f"the total-queue checker has no operation {p.f!r} (it knows {', '.join(sorted(FS))})",
                )
        return t


def _unexplained(lost: list[Any], enqueued_at: Mapping[Any, int], in_doubt: list[float]) -> int:
    """How many lost elements no in-doubt dequeue can account for: a dequeue may have taken an element
    enqueued (invoked) before it completed, one element each. The dequeues fit for an element include
    those fit for any later one, so matching the latest-enqueued elements first is a maximum matching."""
    ends = sorted(in_doubt)
    free = len(ends)
    unmatched = 0
    for v in sorted(lost, key=lambda x: enqueued_at.get(x, 0), reverse=True):
        fit = len(ends) - bisect.bisect_right(ends, enqueued_at.get(v, 0))
        used = len(ends) - free
        if fit > used:
            free -= 1
        else:
            unmatched += 1
    return unmatched
