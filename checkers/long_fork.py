"""The long-fork check (parallel snapshot isolation's anomaly; Jepsen's long-fork test).

Writes insert unique, write-once keys; reads read a group of keys in one transaction. Under snapshot
isolation every read sees a prefix of one order of the writes, so the sets of keys two reads of the same
group saw are ordered by inclusion. Two reads that each saw a write the other did not (read A saw x but
not y, read B saw y but not x) observed the writes in opposite orders: a long fork.

Each read is compared with every other read on the keys both read. Reads of exactly the same keys form a
chain when sorted by how many keys they saw, so one sort decides a group; reads whose key sets only
overlap are compared pair by pair, up to `max_pairs` comparisons, past which the verdict is `unknown`
rather than a `valid` that skipped evidence.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faultline.checkers.ops import BadOp, pairs
from faultline.core import Op

FS = frozenset({"read", "write", "insert", "txn"})


@dataclass(frozen=True)
class _Read:
    """One ok read: its history index and, for each key it read, whether a write was visible."""

    index: Any
    seen: Mapping[Any, Any]  # key -> the value read (None: not yet written)

    def visible(self, keys: frozenset[Any]) -> frozenset[Any]:
        return frozenset(k for k in keys if self.seen[k] is not None)


def _micro_ops(op: Op, pos: int) -> list[tuple[str, Any, Any]]:
    """The value as (kind, key, value) micro-ops, or BadOp: a read is `[["r", k, v], ...]`."""
    value = op.get("value")
    if not isinstance(value, list) or not all(isinstance(m, list | tuple) and len(m) == 3 for m in value):
        raise BadOp(pos, f"long-fork needs a list of [r|w key value] micro-ops as the value, not {value!r}")
    out = []
    for kind, key, val in value:
        if kind not in ("r", "w", "read", "write", "append") or isinstance(key, list | dict):
            raise BadOp(pos, f"long-fork has no micro-op [{kind!r}, {key!r}, ...]")
        out.append((kind[0], key, val))
    return out


def _reads(history: list[Op]) -> tuple[list[_Read], dict[Any, set[Any]]]:
    """The ok reads, and every non-nil value observed or written per key (write-once: one each)."""
    pos = {id(op): i for i, op in enumerate(history)}
    reads: list[_Read] = []
    values: dict[Any, set[Any]] = defaultdict(set)
    for p in pairs(history):
        at = pos[id(p.invoke)]
        if p.f not in FS:
            raise BadOp(
                at, f"the long-fork checker has no operation {p.f!r} (it knows {', '.join(sorted(FS))})"
            )
        done = p.completion if p.type == "ok" else None
        for kind, key, val in _micro_ops(done or p.invoke, pos[id(done)] if done else at):
            if val is not None and (kind == "w" or done is not None):
                values[repr(key)].add(repr(val))
        if done is not None and all(kind == "r" for kind, _, _ in _micro_ops(done, pos[id(done)])):
            reads.append(_Read(done.get("index", pos[id(done)]), {k: v for _, k, v in _micro_ops(done, 0)}))
    return reads, values


def _fork(a: _Read, b: _Read, keys: frozenset[Any]) -> dict[str, Any] | None:
    """The evidence that a and b saw the writes to `keys` in opposite orders, or None."""
    sa, sb = a.visible(keys), b.visible(keys)
    only_a, only_b = sorted(sa - sb, key=repr), sorted(sb - sa, key=repr)
    if not only_a or not only_b:
        return None
    x, y = only_a[0], only_b[0]
    return {
        "reads": [a.index, b.index],
        "keys": [x, y],
        "explanation": f"read {a.index} saw the write of {x!r} but not that of {y!r}; read {b.index} saw "
        f"{y!r} but not {x!r}: the two writes were seen in opposite orders",
    }


def _chain_forks(group: list[_Read], keys: frozenset[Any]) -> list[dict[str, Any]]:
    """Reads of the same keys: sorted by how much they saw, each must be within the next."""
    ordered = sorted(group, key=lambda r: len(r.visible(keys)))
    return [f for a, b in itertools.pairwise(ordered) if (f := _fork(a, b, keys))]


class LongForkChecker:
    """`LongForkChecker().check(test, history, opts)`: invalid when two reads saw writes in opposite orders."""

    def __init__(self, max_pairs: int = 2_000_000) -> None:
        self.max_pairs = max_pairs

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        reads, values = _reads(history)
        multiple = {k: sorted(v) for k, v in values.items() if len(v) > 1}
        by_keys: dict[frozenset[Any], list[_Read]] = defaultdict(list)
        for r in reads:
            by_keys[frozenset(r.seen)].append(r)
        forks = [f for keys, group in by_keys.items() for f in _chain_forks(group, keys)]
        compared, complete = self._overlapping(by_keys, forks)
        out: dict[str, Any] = {
            "read_count": len(reads),
            "key_groups": len(by_keys),
            "fork_count": len(forks),
            "forks": forks[:20],
            "pairs_compared": compared,
        }
        if forks:
            out["valid"] = False
        elif multiple:
            out["valid"] = "unknown"
            out["error"] = (
                f"{len(multiple)} keys hold more than one value, so they are not write-once and "
                "visibility says nothing of order: " + ", ".join(list(multiple)[:5])
            )
        elif not complete:
            out["valid"] = "unknown"
            out["error"] = (
                f"more than {self.max_pairs} pairs of reads with overlapping keys; not all were compared"
            )
        else:
            out["valid"] = True
        return out

    def _overlapping(
        self, by_keys: Mapping[frozenset[Any], list[_Read]], forks: list[dict[str, Any]]
    ) -> tuple[int, bool]:
        """Reads of different but overlapping key sets, compared on the keys they share."""
        groups = list(by_keys.items())
        compared = 0
        for i, (ka, ra) in enumerate(groups):
            for kb, rb in groups[i + 1 :]:
                shared = ka & kb
                if not shared:
                    continue
                for a in ra:
                    for b in rb:
                        compared += 1
                        if compared > self.max_pairs:
                            return compared - 1, False
                        if f := _fork(a, b, shared):
                            forks.append(f)
        return compared, True
