"""The set checker: Jepsen's set-full outcomes, by default with Jepsen's own rules, on unique adds and reads
of the whole set taken while the faults run.

Each element is *known* from its add's ok completion or the completion of the first read that showed it,
whichever comes first in the history; the checker keeps the latest-invoked read that showed it and the
latest-invoked read that missed it (reads are ordered by their invocations, as in Jepsen). Outcomes:

- stable: the latest read that showed it began after the latest that missed it. Its stable latency is
  (invocation of the last read that missed it) - known, in whole milliseconds, 0 when none missed it;
  `stale` when that is over 0;
- lost: known, then missed by a read that began after it was known and after the last read that showed
  it. Its lost latency is (invocation of the last read that showed it) - known, 0 if never shown. The
  loss is proven by the first read to complete of those that began after both; its completion is the
  detection time;
- never-read: neither (no read began after it was known; includes adds never acknowledged nor seen);
- recovered: adds never acknowledged (info, fail or open) that a read showed.

An add of an element already added starts its timeline afresh, as in Jepsen. Beyond Jepsen's set-full:
unexpected (a read shows an element no add had tried by then) and duplicated (a read lists one twice).

Valid is False on a lost, unexpected or duplicated element, or (`linearizable=True`) a stale one; else
"unknown" when nothing was ever stable (no read succeeded, or none showed anything), else True. `op`
names the read that proved the earliest anomaly (the run's time to detection).

Options: `stability_window_s` (off by default) also asks, before a loss is called, for a read that began at
least that many seconds after the element was last seen (known, or the invocation of the last read that
showed it); a loss that no read confirms so late is `unconfirmed_lost` and the verdict "unknown". It only
applies to histories with times. `final_read=True` is Jepsen's plain set checker instead: only the last
ok read is judged against the adds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.models import freeze, thaw
from faultline.checkers.ops import is_nemesis
from faultline.core import Op

NS = 1_000_000_000
QUANTILES = (0, 0.5, 0.95, 0.99, 1)


def _order(xs: Iterable[Any], limit: int = 50) -> list[Any]:
    """The first `limit` elements in natural order where they compare (numbers, tuples of numbers), else
    ordered by repr."""
    xs = list(xs)
    try:
        return sorted(xs)[:limit]
    except TypeError:
        return sorted(xs, key=repr)[:limit]


def _sorted(xs: Iterable[Any]) -> list[Any]:
    return [thaw(x) for x in _order(xs)]


def _quantiles(latencies: list[int]) -> dict[str, int]:
    """The latency at each of QUANTILES: the value at index floor(n * q) of the sorted list (Jepsen's)."""
    s = sorted(latencies)
    return {f"{q:g}": s[min(len(s) - 1, math.floor(len(s) * q))] for q in QUANTILES}


def _ms(ns: float) -> int:
    """Whole milliseconds of a non-negative span, truncated as Jepsen does."""
    return int(max(ns, 0.0) / 1e6)


@dataclass
class _Read:
    """One ok read: history positions and times (ns) of its invocation and completion."""

    inv: int
    comp: int
    inv_t: float
    comp_t: float


@dataclass
class _Element:
    """One element: outcome of its adds, when it became known (position, time), and the latest-invoked reads
    that showed and missed it."""

    acked: bool = False
    info: bool = False
    shown: bool = False
    known: tuple[int, float] | None = None
    last_present: _Read | None = None
    last_absent: _Read | None = None


@dataclass
class _Outcomes:
    """The elements by outcome, with the latencies and the details the result reports, and the history
    positions of the completions that proved an anomaly."""

    stable: list[Any] = field(default_factory=list)
    stale: list[Any] = field(default_factory=list)
    lost: list[Any] = field(default_factory=list)
    unconfirmed: list[Any] = field(default_factory=list)
    never_read: list[Any] = field(default_factory=list)
    stable_ms: list[int] = field(default_factory=list)
    lost_ms: list[int] = field(default_factory=list)
    lost_detail: list[dict[str, Any]] = field(default_factory=list)
    worst_stale: list[dict[str, Any]] = field(default_factory=list)
    proofs: list[int] = field(default_factory=list)


def _time(op: Op, pos: int) -> float:
    t = op.get("time")
    return float(t) if isinstance(t, int | float) and not isinstance(t, bool) else float(pos) * NS


def _timed(history: list[Op]) -> bool:
    return any(
        isinstance(op.get("time"), int | float) and not isinstance(op.get("time"), bool) for op in history
    )


def _brief(op: Op) -> dict[str, Any]:
    return {k: op[k] for k in ("process", "f", "index", "time") if k in op}


def _client(history: list[Op], fs: tuple[str, str]) -> Iterable[tuple[int, Op]]:
    return ((pos, op) for pos, op in enumerate(history) if not is_nemesis(op) and op.get("f") in fs)


class SetChecker:
    """`SetChecker().check(test, history, opts)`; adds are `f: "add"`, reads `f: "read"` (value: all elements)."""

    def __init__(
        self,
        add_f: str = "add",
        read_f: str = "read",
        stability_window_s: float | None = None,
        linearizable: bool = False,
        final_read: bool = False,
    ) -> None:
        if stability_window_s is not None and not (
            isinstance(stability_window_s, int | float)
            and not isinstance(stability_window_s, bool)
            and math.isfinite(stability_window_s)
            and stability_window_s >= 0
        ):
            raise ValueError(
                f"stability_window_s must be a finite number >= 0 or None, not {stability_window_s!r}"
            )
        self.add_f, self.read_f = add_f, read_f
        self.window_s = stability_window_s
        self.linearizable = linearizable
        self.final_read = final_read

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        if self.final_read:
            return self._check_final(history)
        elements: dict[Any, _Element] = {}
        reads: list[_Read] = []
        unexpected: dict[Any, int] = {}  # element -> position of the first read that showed it
        duplicated: dict[Any, int] = {}  # element -> highest multiplicity in one read
        first_dup: int | None = None
        open_ops: dict[Any, tuple[int, Op]] = {}  # process -> (position, invocation)
        for pos, op in _client(history, (self.add_f, self.read_f)):
            proc, typ, f = op.get("process"), op.get("type"), op.get("f")
            if typ == "invoke":
                open_ops[proc] = (pos, op)
                if f == self.add_f:
                    self._invoke_add(elements, freeze(op.get("value")))
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
        window_ns = self.window_s * NS if self.window_s is not None and _timed(history) else None
        return self._results(history, elements, reads, unexpected, duplicated, first_dup, window_ns)

    @staticmethod
    def _invoke_add(elements: dict[Any, _Element], v: Any) -> None:
        """A new timeline for `v` (an element added again starts afresh, as in Jepsen's set-full); what its
        earlier adds returned and whether a read showed it stay, for `recovered`."""
        old = elements.get(v)
        elements[v] = _Element() if old is None else _Element(acked=old.acked, info=old.info, shown=old.shown)

    def _loss_proof(self, e: _Element, reads: list[_Read], window_ns: float | None) -> _Read | None:
        """The first read to complete of those that began after the element was known and after the last read
        that showed it (and, with a window, that long after it was last seen); None if there is none."""
        assert e.known is not None
        lp = e.last_present
        floor = max(e.known[0], lp.inv if lp is not None else -1)
        later = [r for r in reads if r.inv > floor]
        if window_ns is not None:
            seen_t = max(e.known[1], lp.inv_t if lp is not None else e.known[1])
            later = [r for r in later if r.inv_t >= seen_t + window_ns]
        return min(later, key=lambda r: (r.comp_t, r.comp)) if later else None

    def _classify(
        self, history: list[Op], elements: dict[Any, _Element], reads: list[_Read], window_ns: float | None
    ) -> _Outcomes:
        """Each element's outcome (stable, lost, unconfirmed or never read), with its latencies."""
        o = _Outcomes()
        for v, e in elements.items():
            la, lp, known = e.last_absent, e.last_present, e.known
            if lp is not None and (la is None or la.inv < lp.inv):
                assert known is not None  # a read that shows an element makes it known
                o.stable.append(v)
                ms = _ms((la.inv_t + 1 if la is not None else 0.0) - known[1])
                o.stable_ms.append(ms)
                if ms > 0:
                    assert la is not None
                    o.stale.append(v)
                    o.worst_stale.append(
                        {
                            "element": thaw(v),
                            "stable_latency_ms": ms,
                            "stable_latency_s": (la.inv_t - known[1]) / NS,
                            "known": _op_ref(history, known[0]),
                            "last_absent": _op_ref(history, la.inv),
                        }
                    )
                    if self.linearizable:
                        o.proofs.append(la.comp)
            elif known is not None and la is not None and la.inv > known[0]:
                proof = self._loss_proof(e, reads, window_ns)
                if proof is None:
                    o.unconfirmed.append(v)
                    continue
                o.lost.append(v)
                o.lost_ms.append(_ms((lp.inv_t + 1 if lp is not None else 0.0) - known[1]))
                o.proofs.append(proof.comp)
                seen_t = lp.inv_t if lp is not None else known[1]
                o.lost_detail.append(
                    {
                        "element": thaw(v),
                        "known_s": known[1] / NS,
                        "last_seen_s": seen_t / NS,
                        "lost_latency_s": max(seen_t - known[1], 0.0) / NS,
                        "detected_s": proof.comp_t / NS,
                        "detected_index": _index(history, proof.comp),
                    }
                )
            else:
                o.never_read.append(v)
        return o

    def _results(
        self,
        history: list[Op],
        elements: dict[Any, _Element],
        reads: list[_Read],
        unexpected: dict[Any, int],
        duplicated: dict[Any, int],
        first_dup: int | None,
        window_ns: float | None,
    ) -> dict[str, Any]:
        o = self._classify(history, elements, reads, window_ns)
        stable, stale, lost, unconfirmed, never_read = o.stable, o.stale, o.lost, o.unconfirmed, o.never_read
        lost_detail, worst_stale, proofs = o.lost_detail, o.worst_stale, o.proofs
        proofs += list(unexpected.values()) + ([first_dup] if first_dup is not None else [])
        recovered = [v for v, e in elements.items() if not e.acked and e.shown]
        bad = bool(lost or unexpected or duplicated or (self.linearizable and stale))
        valid: bool | str = False if bad else ("unknown" if unconfirmed or not stable else True)
        lost_detail.sort(key=lambda d: d["detected_s"])
        worst_stale.sort(key=lambda d: -d["stable_latency_s"])
        out: dict[str, Any] = {
            "valid": valid,
            "attempt_count": len(elements),
            "acknowledged_count": sum(e.acked for e in elements.values()),
            "read_count": len(reads),
            "stability_window_s": None if window_ns is None else window_ns / NS,
            "stable_count": len(stable),
            "ok_count": len(stable),
            "lost_count": len(lost),
            "lost": _sorted(lost),
            "worst_lost": lost_detail[:8],
            "unconfirmed_lost_count": len(unconfirmed),
            "unconfirmed_lost": _sorted(unconfirmed),
            "stale_count": len(stale),
            "stale": _sorted(stale),
            "worst_stale": worst_stale[:8],
            "never_read_count": len(never_read),
            "never_read": _sorted(never_read),
            "unexpected_count": len(unexpected),
            "unexpected": _sorted(unexpected),
            "duplicated_count": len(duplicated),
            "duplicated": [[thaw(k), duplicated[k]] for k in _order(duplicated)],
            "recovered_count": len(recovered),
            "recovered": _sorted(recovered),
        }
        if o.stable_ms:
            out["stable_latencies_ms"] = _quantiles(o.stable_ms)
        if o.lost_ms:
            out["lost_latencies_ms"] = _quantiles(o.lost_ms)
        if lost_detail:
            out["first_lost_detected_s"] = lost_detail[0]["detected_s"]
        if valid is False and proofs:
            # the read that proved the earliest anomaly: when it became observable (time to detection)
            out["op"] = _brief(history[min(proofs, key=lambda p: (_time(history[p], p), p))])
        elif not reads:
            out["error"] = "no successful read"
        elif unconfirmed:
            assert window_ns is not None  # without a window every loss by Jepsen's rule is proven
            out["error"] = (
                f"{len(unconfirmed)} acknowledged elements missing from the last reads, but no read "
                f"began {window_ns / NS:g} s after they were last seen: lost or not yet visible"
            )
        return out

    def _check_final(self, history: list[Op]) -> dict[str, Any]:
        """Jepsen's plain set checker: the last ok read (in history order) against every add."""
        attempts: set[Any] = set()
        acked: set[Any] = set()
        final: tuple[int, list[Any]] | None = None
        open_ops: dict[Any, Op] = {}
        reads = 0
        for pos, op in _client(history, (self.add_f, self.read_f)):
            typ, proc = op.get("type"), op.get("process")
            if typ == "invoke":
                open_ops[proc] = op
                if op.get("f") == self.add_f:
                    attempts.add(freeze(op.get("value")))
                continue
            inv = open_ops.pop(proc, op)
            if typ == "ok" and op.get("f") == self.add_f:
                acked.add(freeze(inv.get("value")))
            elif typ == "ok":
                reads += 1
                final = (pos, [freeze(x) for x in (op.get("value") or [])])
        base = {"attempt_count": len(attempts), "acknowledged_count": len(acked), "read_count": reads}
        if final is None:
            return {"valid": "unknown", "error": "the set was never read", **base}
        pos, values = final
        read = set(values)
        ok, unexpected, lost = read & attempts, read - attempts, acked - read
        dups = {v: n for v, n in Counter(values).items() if n > 1}
        out: dict[str, Any] = {
            "valid": not (lost or unexpected or dups),
            **base,
            "ok_count": len(ok),
            "ok": _sorted(ok),
            "lost_count": len(lost),
            "lost": _sorted(lost),
            "unexpected_count": len(unexpected),
            "unexpected": _sorted(unexpected),
            "recovered_count": len(ok - acked),
            "recovered": _sorted(ok - acked),
            "duplicated_count": len(dups),
            "duplicated": [[thaw(k), dups[k]] for k in _order(dups)],
        }
        if out["valid"] is False:
            out["op"] = _brief(history[pos])
        return out


def _op_ref(history: list[Op], pos: int) -> dict[str, Any]:
    """An op named in the evidence: its type besides what `_brief` keeps."""
    return {**_brief(history[pos]), "type": history[pos].get("type")}


def _index(history: list[Op], pos: int) -> Any:
    return history[pos].get("index", pos)
