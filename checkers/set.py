"""The set checker, after Jepsen's set-full: unique adds and reads of the whole set, while the faults run.

For each element it tracks when it became known (its add's ok completion, or the completion of the first
read that showed it, whichever came first), the latest-invoked read that showed it and the latest-invoked
read that missed it. Outcomes, as Jepsen's set-full names them:

- stable: shown by the latest read that began after it was known; `stale` if some read that began after
  it was known missed it before that (its stable latency, known -> last miss, is over 0);
- lost: known, then missed by every read that began after the last read that showed it (Jepsen's rule).
  A loss is proven once a read that began at least `stability_window_s` after the element was last seen
  (known or shown) missed it too: reads are given that long to settle (by default the test's
  `quiet_period`, the settling time the final read gets, else 5 s; none in a history without times, where
  order is all there is). Its detection time is the completion
  of the first such read; a loss no read confirmed that late is `unconfirmed_lost`;
- never-read: no read began after it was known (including adds never acknowledged nor seen);
- recovered: adds of unknown outcome (info) that some read showed.

Also: unexpected (a read shows an element nobody tried to add) and duplicated (a read lists one twice).
Valid is False only on proof: a proven loss, an unexpected or duplicated element, or (with
`linearizable=True`) a stale element. Otherwise it is "unknown" when no read succeeded, when nothing was
ever stable (the test showed nothing), or when a loss is unconfirmed; else True. `op` names the read that
proved the earliest anomaly (the run's time to detection).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faultline.checkers.models import freeze, thaw
from faultline.core import Op

NS = 1_000_000_000


def _ranges(xs: list[Any], limit: int = 50) -> list[Any]:
    return [thaw(x) for x in sorted(xs, key=repr)[:limit]]


@dataclass
class _Read:
    """One ok read: history positions and times (ns) of its invocation and completion."""

    inv: int
    comp: int
    inv_t: float
    comp_t: float


@dataclass
class _Element:
    """One element's timeline: known (position, time), the latest-invoked reads that showed and missed it."""

    acked: bool = False
    info: bool = False
    known: tuple[int, float] | None = None
    last_present: _Read | None = None
    last_absent: _Read | None = None
    shown: bool = False


def _time(op: Op, pos: int) -> float:
    t = op.get("time")
    return float(t) if isinstance(t, int | float) else float(pos) * NS


def _brief(op: Op) -> dict[str, Any]:
    return {k: op[k] for k in ("process", "f", "index", "time") if k in op}


class SetChecker:
    """`SetChecker().check(test, history, opts)`; adds are `f: "add"`, reads `f: "read"` (value: all elements)."""

    def __init__(self, add_f: str = "add", read_f: str = "read", stability_window_s: float | None = None,
                 linearizable: bool = False) -> None:
        self.add_f, self.read_f = add_f, read_f
        self.window_s = stability_window_s
        self.linearizable = linearizable

    def _window_ns(self, test: Mapping[str, Any], history: list[Op]) -> float:
        """The stability window in ns; zero for a history without times, where only order is known, so a
        loss is Jepsen's rule alone: missed by every read that began after the last read that showed it."""
        if not any(isinstance(op.get("time"), int | float) and not isinstance(op.get("time"), bool)
                   for op in history):
            return 0.0
        w = self.window_s
        if w is None:
            quiet = test.get("quiet_period") if isinstance(test, Mapping) else None
            w = quiet if isinstance(quiet, int | float) and not isinstance(quiet, bool) and quiet >= 0 else 5.0
        return float(w) * NS

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        elements: dict[Any, _Element] = {}
        reads: list[_Read] = []
        unexpected: dict[Any, int] = {}   # element -> position of the first read that showed it
        duplicated: dict[Any, int] = {}   # element -> highest multiplicity in one read
        first_dup: int | None = None
        open_ops: dict[Any, tuple[int, Op]] = {}   # process -> (position, invocation)
        for pos, op in enumerate(history):
            proc, typ, f = op.get("process"), op.get("type"), op.get("f")
            if proc == "nemesis" or f not in (self.add_f, self.read_f):
                continue
            if typ == "invoke":
                open_ops[proc] = (pos, op)
                if f == self.add_f:
                    elements.setdefault(freeze(op.get("value")), _Element())
                continue
            inv_pos, inv = open_ops.pop(proc, (pos, op))
            if f == self.add_f:
                e = elements.setdefault(freeze(inv.get("value")), _Element())
                if typ == "ok":
                    e.acked = True
                    e.known = e.known or (pos, _time(op, pos))
                elif typ == "info":
                    e.info = True
                continue
            if typ != "ok":
                continue
            read = _Read(inv_pos, pos, _time(inv, inv_pos), _time(op, pos))
            reads.append(read)
            counts = Counter(freeze(x) for x in (op.get("value") or []))
            for v, n in counts.items():
                if n > 1:
                    duplicated[v] = max(n, duplicated.get(v, 0))
                    first_dup = pos if first_dup is None else first_dup
                if v not in elements:
                    unexpected.setdefault(v, pos)
            for v, e in elements.items():
                if v in counts:
                    e.shown = True
                    e.known = e.known or (pos, read.comp_t)
                    if e.last_present is None or e.last_present.inv < inv_pos:
                        e.last_present = read
                elif e.last_absent is None or e.last_absent.inv < inv_pos:
                    e.last_absent = read
        if not reads:
            acked = sum(e.acked for e in elements.values())
            return {"valid": "unknown", "error": "no successful read", "attempt_count": len(elements),
                    "acknowledged_count": acked}
        return self._results(history, elements, reads, unexpected, duplicated, first_dup, self._window_ns(test, history))

    def _results(self, history: list[Op], elements: dict[Any, _Element], reads: list[_Read],
                 unexpected: dict[Any, int], duplicated: dict[Any, int], first_dup: int | None,
                 window_ns: float) -> dict[str, Any]:
        by_inv = sorted(reads, key=lambda r: (r.inv_t, r.inv))
        inv_times = [r.inv_t for r in by_inv]
        stable, stale, lost, unconfirmed, never_read = [], [], [], [], []
        lost_detail: list[dict[str, Any]] = []
        stale_latency: dict[Any, float] = {}
        proofs: list[int] = []   # positions of the completions that proved an anomaly
        for v, e in elements.items():
            la, lp, known = e.last_absent, e.last_present, e.known
            if lp is not None and (la is None or la.inv < lp.inv):
                stable.append(v)
                if known is not None and la is not None and la.inv > known[0]:
                    stale.append(v)
                    stale_latency[v] = (la.inv_t - known[1]) / NS
                    if self.linearizable:
                        proofs.append(la.comp)
            elif known is not None and la is not None and la.inv > known[0]:
                seen_t = max(known[1], lp.comp_t if lp is not None else known[1])
                # the first read to complete of those begun past the window after the element was last
                # seen (and, by position, after it was known and after the last read that showed it)
                floor = max(known[0], lp.inv if lp is not None else -1)
                later = [r for r in by_inv[bisect.bisect_left(inv_times, seen_t + window_ns):] if r.inv > floor]
                if later:
                    proof = min(later, key=lambda r: r.comp_t)
                    lost.append(v)
                    proofs.append(proof.comp)
                    lost_detail.append({"element": v, "known_s": known[1] / NS, "last_seen_s": seen_t / NS,
                                        "detected_s": proof.comp_t / NS, "detected_index": _index(history, proof.comp),
                                        "lost_latency_s": (seen_t - known[1]) / NS})
                else:
                    unconfirmed.append(v)
            else:
                never_read.append(v)
        proofs += list(unexpected.values()) + ([first_dup] if first_dup is not None else [])
        recovered = [v for v, e in elements.items() if e.info and not e.acked and e.shown]
        bad = bool(lost or unexpected or duplicated or (self.linearizable and stale))
        valid: bool | str = False if bad else ("unknown" if unconfirmed or not stable else True)
        lost_detail.sort(key=lambda d: d["detected_s"])
        out: dict[str, Any] = {
            "valid": valid,
            "attempt_count": len(elements),
            "acknowledged_count": sum(e.acked for e in elements.values()),
            "read_count": len(reads),
            "stability_window_s": window_ns / NS,
            "stable_count": len(stable),
            "ok_count": len(stable),
            "lost_count": len(lost),
            "lost": _ranges(lost),
            "worst_lost": lost_detail[:8],
            "unconfirmed_lost_count": len(unconfirmed),
            "unconfirmed_lost": _ranges(unconfirmed),
            "stale_count": len(stale),
            "stale": _ranges(stale),
            "worst_stale": [{"element": v, "stable_latency_s": s} for v, s in
                            sorted(stale_latency.items(), key=lambda kv: -kv[1])[:8]],
            "never_read_count": len(never_read),
            "never_read": _ranges(never_read),
            "unexpected_count": len(unexpected),
            "unexpected": _ranges(list(unexpected)),
            "duplicated_count": len(duplicated),
            "duplicated": [[thaw(k), n] for k, n in sorted(duplicated.items(), key=lambda kv: repr(kv[0]))[:50]],
            "recovered_count": len(recovered),
            "recovered": _ranges(recovered),
        }
        if lost_detail:
            out["first_lost_detected_s"] = lost_detail[0]["detected_s"]
        if valid is False and proofs:
            # the read that proved the earliest anomaly: when it became observable (time to detection)
            out["op"] = _brief(history[min(proofs, key=lambda p: _time(history[p], p))])
        elif unconfirmed:
            out["error"] = (f"{len(unconfirmed)} acknowledged elements missing from the last reads, but no read "
                            f"began {window_ns / NS:g} s after they were last seen: lost or not yet visible")
        return out


def _index(history: list[Op], pos: int) -> Any:
    return history[pos].get("index", pos)
