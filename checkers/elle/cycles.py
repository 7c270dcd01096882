"""The shortest cycle of each kind inside one strongly connected component (Elle §6).

Each kind is a search *spec*: the relation of an anchor edge a -> b, the relations the way back from b to
a may use, how many rw edges the cycle needs (none besides the anchor; two or more; two or more and
never adjacent) and whether it must use a process or realtime edge. A breadth-first search over
(node, flags) states finds the shortest way back for one anchor; the shortest over all anchors is the
answer, and a found length bounds the later searches. A deadline turns an unfinished search into
`SearchTimeout`; the caller reports that kind as unknown for this component.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from faultline.checkers.elle.graph import (
    PR,
    PR_ANY,
    RT,
    RT_ANY,
    RW,
    RW_ANY,
    RWP,
    RWT,
    WR,
    WW,
    WWP,
    WWT,
    topo_ranks,
)

NO_MORE_RW, MULTI_RW, NONADJACENT_RW, ANY_RW = 0, 1, 2, 3
_LAST_RW, _RW2, _NEED = 1, 2, 4


class SearchTimeout(Exception):
    """The component's time budget ran out during a search."""


@dataclass(frozen=True)
class Spec:
    """What one kind of cycle looks like (see the module docstring); relations are bit masks."""

    name: str
    anchor: int
    allowed: int
    rw: int
    need: int = 0


def _specs() -> dict[str, tuple[Spec, ...]]:
    """Each cycle kind's specs, tried in order. Process and realtime variants need an edge of that order;
    G2-item-process (-realtime) also covers cycles through register version orders known only from
    process (realtime) order, anchored on such an edge, with any number of rw edges."""
    base = (
        Spec("G0", WW, WW, NO_MORE_RW),
        Spec("G1c", WR, WW | WR, NO_MORE_RW),
        Spec("G-single-item", RW, WW | WR, NO_MORE_RW),
        Spec("G-nonadjacent-item", RW, WW | WR | RW, NONADJACENT_RW),
        Spec("G2-item", RW, WW | WR | RW, MULTI_RW),
    )
    out: dict[str, tuple[Spec, ...]] = {s.name: (s,) for s in base}
    for s in base:
        out[s.name + "-process"] = (Spec(s.name + "-process", s.anchor, s.allowed | PR, s.rw, PR),)
        out[s.name + "-realtime"] = (Spec(s.name + "-realtime", s.anchor, s.allowed | PR | RT, s.rw, RT),)
    out["G2-item-process"] += (
        Spec("G2-item-process", WWP | RWP, WW | WR | RW | PR | WWP | RWP, ANY_RW, PR_ANY),
    )
    out["G2-item-realtime"] += (
        Spec(
            "G2-item-realtime",
            WWP | RWP | WWT | RWT,
            WW | WR | RW | PR | RT | WWP | RWP | WWT | RWT,
            ANY_RW,
            RT_ANY,
        ),
    )
    return out


SPECS = _specs()
_PREFERENCE = (WW, WR, PR, RT, WWP, WWT, RW, RWP, RWT)


def _pick(bits: int, prefer: int = 0) -> int:
    """The relation to show for an edge: one in `prefer` if any, else the most direct one."""
    for b in _PREFERENCE:
        if bits & b & prefer:
            return b
    for b in _PREFERENCE:
        if bits & b:
            return b
    return 0


class _Clock:
    """Counts search steps and raises SearchTimeout past the deadline (checked on the first step and
    every 512th)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.steps = 0

    def tick(self) -> None:
        self.steps += 1
        if (self.steps & 511) == 1 and time.monotonic() > self.deadline:
            raise SearchTimeout


def _back(
    adj: dict[int, dict[int, int]],
    spec: Spec,
    a: int,
    b: int,
    first: int,
    limit: int,
    clock: _Clock,
    rank: dict[int, int],
) -> list[tuple[int, int]] | None:
    """Shortest way b ~> a (at most `limit` edges) closing a cycle of `spec` whose anchor a -> b has
    relation `first`: [(node, relation of the edge into it)]."""
    track_last = spec.rw == NONADJACENT_RW
    start_flags = (_LAST_RW if (track_last and first & RW_ANY) else 0) | (
        _NEED if (not spec.need or first & spec.need) else 0
    )
    start = (b, start_flags)
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    frontier = [start]
    allowed, need, mode = spec.allowed, spec.need, spec.rw
    top = rank[a]
    for _depth in range(limit):
        nxt: list[tuple[int, int]] = []
        for state in frontier:
            clock.tick()
            u, fl = state
            for v, bits in adj[u].items():
                nb = bits & allowed
                if not nb or rank[v] > top:
                    continue
                non = nb & ~RW_ANY
                if non:
                    label = _pick(non, 0 if fl & _NEED else need)
                    nfl = (fl & ~_LAST_RW) | (_NEED if label & need else 0)
                    found = _step(parent, nxt, state, (v, nfl), label, a, spec)
                    if found is not None:
                        return found
                rws = nb & RW_ANY
                if rws and mode != NO_MORE_RW and not (mode == NONADJACENT_RW and fl & _LAST_RW):
                    label = _pick(rws, 0 if fl & _NEED else need)
                    nfl = fl | _RW2 | (_LAST_RW if track_last else 0) | (_NEED if label & need else 0)
                    found = _step(parent, nxt, state, (v, nfl), label, a, spec)
                    if found is not None:
                        return found
        if not nxt:
            return None
        frontier = nxt
    return None


def _step(
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None],
    nxt: list[tuple[int, int]],
    state: tuple[int, int],
    new: tuple[int, int],
    label: int,
    a: int,
    spec: Spec,
) -> list[tuple[int, int]] | None:
    """Records a BFS step; returns the path if `new` closes the cycle."""
    if new in parent:
        return None
    parent[new] = (state, label)
    v, fl = new
    if (
        v == a
        and fl & _NEED
        and (spec.rw in (NO_MORE_RW, ANY_RW) or fl & _RW2)
        and not (spec.rw == NONADJACENT_RW and fl & _LAST_RW)
    ):
        path: list[tuple[int, int]] = []
        cur: tuple[int, int] | None = new
        while cur is not None and parent[cur] is not None:
            prev, lab = parent[cur]  # type: ignore[misc]
            path.append((cur[0], lab))
            cur = prev
        path.reverse()
        return path
    if v != a:
        nxt.append(new)
    return None


def shortest(
    adj: dict[int, dict[int, int]], spec: Spec, deadline: float
) -> tuple[list[int], list[int]] | None:
    """The shortest cycle of `spec`: (its nodes from the anchor's source; the relation of each step)."""
    clock = _Clock(deadline)
    anchors, rank = plan(adj, spec)
    best: tuple[list[int], list[int]] | None = None
    for a, b, bits in anchors:
        limit = len(best[0]) - 2 if best is not None else len(adj)
        if limit <= 0:
            break
        first = _pick(bits & spec.anchor, spec.need)
        back = _back(adj, spec, a, b, first, limit, clock, rank)
        if back is None:
            continue
        nodes = [a, b] + [n for n, _ in back[:-1]]
        labels = [first] + [lab for _, lab in back]
        if best is None or len(nodes) < len(best[0]):
            best = (nodes, labels)
        if len(nodes) == 2:
            break
    return best


_SMALL = 64  # components this small are searched without ranks


def plan(adj: dict[int, dict[int, int]], spec: Spec) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
    """The anchors worth trying for `spec` and a rank per node that bounds every way back.

    Ranks order the strongly connected components of the relations allowed on the way back
    topologically, so a way back from b to a exists only if rank[b] <= rank[a] and only through nodes
    ranked in between: anchors outside that are dropped, the others tried nearest first."""
    if len(adj) <= _SMALL:
        return [
            (a, b, bits) for a, outs in adj.items() for b, bits in outs.items() if bits & spec.anchor
        ], dict.fromkeys(adj, 0)
    nodes = list(adj)
    index = {v: i for i, v in enumerate(nodes)}
    pairs = [
        (index[a], index[b]) for a, outs in adj.items() for b, bits in outs.items() if bits & spec.allowed
    ]
    arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    ranks = topo_ranks(len(nodes), arr[:, 0], arr[:, 1]).tolist()
    rank = {v: ranks[i] for v, i in index.items()}
    anchors = [
        (a, b, bits)
        for a, outs in adj.items()
        for b, bits in outs.items()
        if bits & spec.anchor and rank[b] <= rank[a]
    ]
    anchors.sort(key=lambda x: rank[x[0]] - rank[x[1]])
    return anchors, rank


def simple_parts(nodes: list[int], labels: list[int]) -> list[tuple[list[int], list[int]]]:
    """Splits a closed walk (labels[i] is the edge nodes[i] -> nodes[i+1]) into simple cycles."""
    out: list[tuple[list[int], list[int]]] = []
    stack: list[tuple[int, int]] = []
    where: dict[int, int] = {}
    n = len(nodes)
    for i in range(n + 1):
        v = nodes[i % n]
        if v in where:
            j = where[v]
            part = stack[j:]
            out.append(([p[0] for p in part], [p[1] for p in part]))
            for p in part:
                where.pop(p[0], None)
            del stack[j:]
        if i < n:
            where[v] = len(stack)
            stack.append((v, labels[i]))
    return out
