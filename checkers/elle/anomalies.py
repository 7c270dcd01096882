"""Anomaly names, which anomalies imply which, and the classification of a cycle by its edges.

Cycle anomalies after Adya: G0 (ww only), G1c (ww and wr, at least one wr), G-single (exactly one rw),
G2 (one or more rw). As in Elle, `-item` marks item (not predicate) anti-dependencies, which are the
only ones these checkers infer; G-nonadjacent is a G2 cycle whose rw edges are never adjacent (what
snapshot isolation forbids); a `-process` or `-realtime` suffix says the cycle needs process-order or
realtime-order edges besides the data dependencies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache

from faultline.checkers.elle.graph import DERIVED, PR_ANY, RT_ANY, RW_ANY, WR, WW_ANY

CYCLE_BASES = ("G0", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item")
VARIANTS = ("", "-process", "-realtime")
# Searched in this order: data-only cycles first, then those needing process order, then realtime.
CYCLE_TYPES = tuple(b + v for v in VARIANTS for b in CYCLE_BASES)

# Anomalies that a history is checked for without cycles.
DIRECT = (
    "internal",
    "future-read",
    "G1a",
    "G1b",
    "dirty-update",
    "incompatible-order",
    "duplicate-elements",
    "cyclic-versions",
    "lost-update",
)
# Reported, but proof of nothing by themselves (a history may be incomplete), as in Elle.
INFORMATIONAL = frozenset({"garbage-read"})
# Make a verdict `unknown` (never `false`): the evidence needed for a verdict is missing.
UNKNOWN = frozenset(
    {"duplicate-appends", "duplicate-writes", "cycle-search-timeout", "empty-transaction-graph"}
)

_BASE_IMPLIES = {
    "G0": ("G1c",),
    "G1c": ("G1",),
    "G1a": ("G1",),
    "G1b": ("G1",),
    "G-single-item": ("G-single", "G-nonadjacent-item"),
    "G-single": ("G-nonadjacent",),
    "G-nonadjacent-item": ("G-nonadjacent", "G2-item"),
    "G-nonadjacent": ("G2",),
    "G2-item": ("G2",),
    "incompatible-order": ("G1a",),
    "dirty-update": ("G1a",),
    "future-read": ("G1c",),
    "lost-update": ("G2-item",),
}
_CYCLIC = (
    "G0",
    "G1c",
    "G1",
    "G-single-item",
    "G-single",
    "G-nonadjacent-item",
    "G-nonadjacent",
    "G2-item",
    "G2",
)


def _implies() -> dict[str, set[str]]:
    """Direct implications, with process and realtime variants: X -> X-process -> X-realtime."""
    out: dict[str, set[str]] = {}
    for a, bs in _BASE_IMPLIES.items():
        out.setdefault(a, set()).update(bs)
    for base in _CYCLIC:
        out.setdefault(base, set()).add(base + "-process")
        out.setdefault(base + "-process", set()).add(base + "-realtime")
        for b in _BASE_IMPLIES.get(base, ()):
            if b in _CYCLIC:
                out.setdefault(base + "-process", set()).add(b + "-process")
                out.setdefault(base + "-realtime", set()).add(b + "-realtime")
    return out


IMPLIES = _implies()


@cache
def _closure(name: str) -> frozenset[str]:
    seen = {name}
    todo = [name]
    while todo:
        for b in IMPLIES.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return frozenset(seen)


def implied(names: Iterable[str]) -> set[str]:
    """The anomalies `names` and every anomaly they imply."""
    out: set[str] = set()
    for n in names:
        out |= _closure(n)
    return out


def implying(names: Iterable[str]) -> set[str]:
    """Every known anomaly whose presence would imply one of `names`."""
    targets = set(names)
    known = set(IMPLIES) | {b for bs in IMPLIES.values() for b in bs}
    return {a for a in known if _closure(a) & targets} | targets


def classify(labels: Sequence[int]) -> str:
    """The anomaly a cycle shows, from the relation of each step in order (Elle's rules).

    A cycle that needs a register version order known only from process or realtime order proves only
    that the strong-session (strict) serializable claim fails: it is named G2-item-process (-realtime)."""
    if any(x & DERIVED for x in labels):
        return "G2-item-realtime" if any(x & RT_ANY for x in labels) else "G2-item-process"
    rws = [bool(x & RW_ANY) for x in labels]
    rw = sum(rws)
    if rw == 1:
        base = "G-single-item"
    elif rw > 1:
        adjacent = any(rws[i] and rws[i - 1] for i in range(len(rws)))
        base = "G2-item" if adjacent else "G-nonadjacent-item"
    elif any(x & WR for x in labels):
        base = "G1c"
    elif any(x & WW_ANY for x in labels):
        base = "G0"
    else:
        raise ValueError(f"a cycle without data dependencies: {labels}")
    if any(x & RT_ANY for x in labels):
        return base + "-realtime"
    if any(x & PR_ANY for x in labels):
        return base + "-process"
    return base
