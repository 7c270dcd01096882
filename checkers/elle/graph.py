"""The dependency graph: edges labelled by a bit per relation, and strongly connected components.

Nodes are transaction ids. Realtime order is encoded in O(n) edges through extra *virtual* nodes, one
per completion, chained in history order: T -> V(T's completion) -> V(next completion) -> ... -> U for
every U invoked after that completion. A path T ~> U through virtual nodes exists exactly when T
completed before U was invoked, so cycles (and SCCs) are those of the full realtime order. Cycle search
works on real edges only (`realtime_pairs` gives the order among the members of one SCC).
SCCs are computed by the compiled Tarjan of `_scc.c` (scipy's `connected_components(connection="strong")`
when that is not built: scipy is imported only then, its import being a tenth of `faultline check`).
Components are listed by their smallest node, whichever computed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from faultline.checkers.elle.txns import INFO, OK, Txns
from faultline.core.native import extension

SCC_ABI = 1  # the calling convention of _scc.c this module speaks
_scc = extension("faultline.checkers.elle._scc", SCC_ABI)  # None: scipy's

WW, WR, RW, PR, RT = 1, 2, 4, 8, 16
# ww and rw edges from a register version order that only process (P) or realtime (T) order implies: they
# hold in every strong-session (resp. strict) serializable execution, so they count only against those
# models, and a cycle that needs one is named G2-item-process (-realtime), which only they forbid.
WWP, RWP, WWT, RWT = 32, 64, 128, 256
DATA = WW | WR | RW
WW_ANY, RW_ANY = WW | WWP | WWT, RW | RWP | RWT
PR_ANY, RT_ANY = PR | WWP | RWP, RT | WWT | RWT
DERIVED = WWP | RWP | WWT | RWT
LABELS = {
    WW: "ww",
    WR: "wr",
    RW: "rw",
    PR: "process",
    RT: "realtime",
    WWP: "ww-process",
    RWP: "rw-process",
    WWT: "ww-realtime",
    RWT: "rw-realtime",
}


class Edges:
    """Edges collected per relation as two parallel lists (fast to append, cheap to turn into arrays)."""

    def __init__(self) -> None:
        self.by_bit: dict[int, tuple[list[int], list[int]]] = {b: ([], []) for b in LABELS}

    def lists(self, bit: int) -> tuple[list[int], list[int]]:
        """The (sources, destinations) lists of one relation, for callers that append in a hot loop."""
        return self.by_bit[bit]

    def add(self, a: int, b: int, bit: int) -> None:
        """One edge a -> b; self-edges are dropped."""
        if a != b:
            s, d = self.by_bit[bit]
            s.append(a)
            d.append(b)

    def count(self, bit: int) -> int:
        return len(self.by_bit[bit][0])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All edges as (src, dst, bit) int64 arrays; self-edges removed."""
        srcs, dsts, bits = [], [], []
        for bit, (s, d) in self.by_bit.items():
            if s:
                srcs.append(np.asarray(s, dtype=np.int64))
                dsts.append(np.asarray(d, dtype=np.int64))
                bits.append(np.full(len(s), bit, dtype=np.int64))
        if not srcs:
            z = np.zeros(0, dtype=np.int64)
            return z, z.copy(), z.copy()
        src, dst, bit_of = np.concatenate(srcs), np.concatenate(dsts), np.concatenate(bits)
        keep = src != dst
        return src[keep], dst[keep], bit_of[keep]


def add_process_edges(tx: Txns, edges: Edges) -> None:
    """Each transaction follows the last transaction of its process that completed ok."""
    last_ok: dict[object, int] = {}
    src, dst = edges.lists(PR)
    for t, typ in enumerate(tx.type):
        if typ > INFO:
            continue
        p = tx.process[t]
        prev = last_ok.get(p)
        if prev is not None:
            src.append(prev)
            dst.append(t)
        if typ == OK and tx.cmp[t] >= 0:
            last_ok[p] = t


def add_realtime_chain(tx: Txns, edges: Edges) -> int:
    """Adds the virtual completion chain (module docstring); returns how many virtual nodes it made."""
    n = len(tx)
    typ = np.asarray(tx.type, dtype=np.int64)
    inv = np.asarray(tx.inv, dtype=np.int64)
    cmp_ = np.asarray(tx.cmp, dtype=np.int64)
    tids = np.arange(n, dtype=np.int64)
    inv_ok = (typ <= INFO) & (inv >= 0)
    cmp_ok = (typ == OK) & (cmp_ >= 0)
    pos = np.concatenate([inv[inv_ok], cmp_[cmp_ok]])
    is_cmp = np.concatenate(
        [np.zeros(int(inv_ok.sum()), dtype=np.int64), np.ones(int(cmp_ok.sum()), dtype=np.int64)]
    )
    who = np.concatenate([tids[inv_ok], tids[cmp_ok]])
    order = np.argsort(pos, kind="stable")
    is_cmp, who = is_cmp[order], who[order]
    done = np.cumsum(is_cmp)  # completions up to and including each event
    m = int(done[-1]) if len(done) else 0
    if m == 0:
        return 0
    s, d = edges.lists(RT)
    c_mask = is_cmp == 1
    vid = n + done[c_mask] - 1
    s.extend(who[c_mask].tolist())  # T -> V(T's completion)
    d.extend(vid.tolist())
    s.extend(range(n, n + m - 1))  # the chain
    d.extend(range(n + 1, n + m))
    i_mask = (~c_mask) & (done > 0)
    s.extend((n + done[i_mask] - 1).tolist())  # last completion before U's invocation -> U
    d.extend(who[i_mask].tolist())
    return m


def scc_labels(
    n: int, src: np.ndarray, dst: np.ndarray, compiled: bool | None = None
) -> tuple[int, np.ndarray]:
    """(k, labels): the strongly connected component of each of the `n` nodes, numbered 0..k-1 in no
    particular order. `compiled`: force (True) or refuse (False) the C core; by default it if built."""
    if compiled is None:
        compiled = _scc is not None
    if compiled:
        if _scc is None:
            raise RuntimeError(
                "the compiled strongly connected components (checkers/elle/_scc.c) are not built"
            )
        k, raw = _scc.labels(
            n, np.ascontiguousarray(src, dtype=np.int64), np.ascontiguousarray(dst, dtype=np.int64)
        )
        return int(k), np.frombuffer(raw, dtype=np.int64)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    g = csr_matrix((np.ones(len(src), dtype=np.int32), (src, dst)), shape=(n, n))
    k, labels = connected_components(g, directed=True, connection="strong")
    return int(k), labels.astype(np.int64, copy=False)


def components(n: int, src: np.ndarray, dst: np.ndarray, compiled: bool | None = None) -> list[np.ndarray]:
    """The strongly connected components with more than one node, each a sorted array of node ids, listed
    by their smallest node."""
    if len(src) == 0:
        return []
    k, labels = scc_labels(n, src, dst, compiled)
    if k == n:
        return []
    counts = np.bincount(labels, minlength=k)
    big = counts > 1
    nodes = np.nonzero(big[labels])[0]
    if len(nodes) == 0:
        return []
    lab = labels[nodes]
    order = np.argsort(lab, kind="stable")
    nodes, lab = nodes[order], lab[order]
    cuts = np.nonzero(np.diff(lab))[0] + 1
    parts = np.split(nodes, cuts)
    parts.sort(key=lambda c: int(c[0]))
    return parts


def topo_ranks(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Per node, the rank of its strongly connected component in a topological order of the components:
    every path from u to v passes only nodes ranked between rank[u] and rank[v]."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k, labels = scc_labels(n, src, dst)
    cs, cd = labels[src], labels[dst]
    keep = cs != cd
    pairs = (
        np.unique(np.stack([cs[keep], cd[keep]], axis=1), axis=0)
        if keep.any()
        else np.zeros((0, 2), np.int64)
    )
    indeg = np.bincount(pairs[:, 1], minlength=k) if len(pairs) else np.zeros(k, dtype=np.int64)
    order = np.argsort(pairs[:, 0], kind="stable") if len(pairs) else np.zeros(0, dtype=np.int64)
    heads, tails = pairs[order, 0], pairs[order, 1]
    starts = np.searchsorted(heads, np.arange(k + 1))
    indeg_l, tails_l, starts_l = indeg.tolist(), tails.tolist(), starts.tolist()
    todo = [c for c in range(k) if indeg_l[c] == 0]
    rank = [0] * k
    r = 0
    while todo:
        c = todo.pop()
        rank[c] = r
        r += 1
        for t in tails_l[starts_l[c] : starts_l[c + 1]]:
            indeg_l[t] -= 1
            if indeg_l[t] == 0:
                todo.append(t)
    return np.asarray(rank, dtype=np.int64)[labels]


def has_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """True if the graph has a cycle (a strongly connected component of two or more nodes)."""
    if len(src) == 0:
        return False
    k, _ = scc_labels(n, src, dst)
    return k < n


def nonadjacent_product(
    src: np.ndarray, dst: np.ndarray, bit: np.ndarray, base: int, rw: int
) -> tuple[np.ndarray, np.ndarray]:
    """A graph on (node, came-by-rw) pairs whose cycles are the cycles in which no rw edge follows another.

    Edges with a `base` bit go to flag 0 from either flag; edges with an `rw` bit go from flag 0 to flag 1.
    A cycle here is a closed walk of base and rw edges with no two rw edges adjacent (Elle's test for
    snapshot isolation's G-nonadjacent, and G1)."""
    b = (bit & base) != 0
    r = (bit & rw) != 0
    s2 = np.concatenate([src[b] * 2, src[b] * 2 + 1, src[r] * 2])
    d2 = np.concatenate([dst[b] * 2, dst[b] * 2, dst[r] * 2 + 1])
    return s2, d2


def adjacency(nodes: Iterable[int], pairs: Sequence[tuple[int, int, int]]) -> dict[int, dict[int, int]]:
    """node -> {successor: OR of the edge bits}, for the edges among `nodes`."""
    adj: dict[int, dict[int, int]] = {int(v): {} for v in nodes}
    for a, b, bit in pairs:
        out = adj.get(a)
        if out is not None and b in adj and a != b:
            out[b] = out.get(b, 0) | bit
    return adj


def realtime_pairs(tx: Txns, members: Iterable[int]) -> list[tuple[int, int]]:
    """The realtime order among `members` (T -> U when T completed before U was invoked), reduced.

    A frontier of completed transactions not yet known to precede a later completed one; each
    invocation is linked from the whole frontier (Elle's O(n * concurrency) construction)."""
    events: list[tuple[int, int, int]] = []
    for t in members:
        if tx.inv[t] >= 0:
            events.append((tx.inv[t], 0, t))
        if tx.type[t] == OK and tx.cmp[t] >= 0:
            events.append((tx.cmp[t], 1, t))
    events.sort()
    frontier: set[int] = set()
    seen_at_invoke: dict[int, frozenset[int]] = {}
    out: list[tuple[int, int]] = []
    for _pos, kind, t in events:
        if kind == 0:
            seen_at_invoke[t] = frozenset(frontier)
            out.extend((f, t) for f in frontier)
        else:
            frontier -= seen_at_invoke.get(t, frozenset())
            frontier.add(t)
    return out
