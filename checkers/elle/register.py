"""Read-write register inference (Elle §5.2): weaker than list-append, because a blind write hides history.

Written values are unique per key, so a read names its writer (wr). The version order is only partly
known: the initial nil precedes every written value; if `wfr` (writes follow reads) is assumed, a
transaction that read v and then wrote v' orders v before v'; and when the claimed model keeps process
or realtime order, so does the version order of each key (Elle's sequential- and linearizable-keys
inference, with its own edge labels). Each version edge v1 -> v2 gives ww (writer of v1 -> writer of
v2) and rw (a reader of v1 -> writer of v2). Only the *external* reads (before the transaction's own
write of the key) and the *final* write of each key count, as in Adya's definitions.
"""

from __future__ import annotations

from typing import Any

from faultline.checkers.elle.append import lost_updates, version_edges
from faultline.checkers.elle.graph import RW, RWP, RWT, WR, WW, WW_ANY, WWP, WWT, Edges, realtime_pairs
from faultline.checkers.elle.inference import INIT, Inference, plain
from faultline.checkers.elle.txns import FAIL, OK, ElleInputError, Txns, validate


class _Index:
    """Per transaction, its external reads and final writes; per (key, value), the writer."""

    def __init__(self, n: int) -> None:
        self.ext_reads: list[dict[Any, Any] | None] = [None] * n
        self.ext_writes: list[dict[Any, Any] | None] = [None] * n
        self.writer: dict[tuple[Any, Any], int] = {}
        self.ambiguous: set[tuple[Any, Any]] = set()
        self.failed: dict[tuple[Any, Any], int] = {}
        self.inter: dict[tuple[Any, Any], int] = {}
        # key -> v1 -> {v2: how we know v1 precedes v2}: DIRECT (init, writes follow reads), else the
        # process or realtime order of two transactions (see _ordered); `witness` names that pair.
        self.versions: dict[Any, dict[Any, dict[Any, int]]] = {}
        self.witness: dict[tuple[Any, Any, Any], tuple[int, int]] = {}
        self.updaters: dict[
            tuple[Any, int, Any], list[int]
        ] = {}  # (key, 0, value read) -> txns that wrote it


def _txn(t: int, tx: Txns, ix: _Index, inf: Inference) -> None:
    """Indexes one transaction and checks it against itself (internal consistency)."""
    typ = tx.type[t]
    reads: dict[Any, Any] = {}
    writes: dict[Any, Any] = {}
    state: dict[Any, Any] = {}
    for i, (f, k, v) in enumerate(tx.mops[t]):
        if f == "w":
            if v is None:
                raise ElleInputError(
                    f"op {tx.op[t].get('index')}: a register write of nil; nil is the "
                    "initial value and cannot be written"
                )
            if typ == FAIL:
                ix.failed[(k, v)] = t
                continue
            if k in writes:
                ix.inter[(k, writes[k])] = t
            writes[k] = v
            state[k] = v
        elif f == "r":
            if typ != OK:
                continue
            if k in state:
                if state[k] != v:
                    inf.add(
                        "internal", {"op": tx.op[t], "mop": [f, k, v], "mop_index": i, "expected": state[k]}
                    )
            elif k not in reads:
                reads[k] = v
            state[k] = v
        elif f == "append":
            raise ElleInputError(
                f"op {tx.op[t].get('index')}: rw-register histories have no appends "
                f"({[f, k, v]!r}); use elle-list-append"
            )
        else:
            validate(tx)
    if typ == FAIL:
        return
    ix.ext_writes[t] = writes
    if typ == OK:
        ix.ext_reads[t] = reads
        for k, v in reads.items():
            if k in writes:
                ix.updaters.setdefault((k, 0, INIT if v is None else v), []).append(t)
    for k, v in writes.items():
        kv = (k, v)
        if kv in ix.writer:
            ix.ambiguous.add(kv)
        ix.writer[kv] = t


def _reads(tx: Txns, ix: _Index, inf: Inference, wfr: bool) -> dict[tuple[Any, Any], list[int]]:
    """wr edges, G1a, G1b and garbage reads; returns the external readers of each version."""
    wr_s, wr_d = inf.edges.lists(WR)
    readers_of: dict[tuple[Any, Any], list[int]] = {}
    for t, reads in enumerate(ix.ext_reads):
        if not reads:
            continue
        writes = ix.ext_writes[t] or {}
        for k, v in reads.items():
            readers_of.setdefault((k, INIT if v is None else v), []).append(t)
            if v is None:
                continue
            kv = (k, v)
            if wfr and k in writes:
                _link(ix, k, v, writes[k], DIRECT)
            w = ix.writer.get(kv)
            if w is not None:
                if kv not in ix.ambiguous and w != t:
                    wr_s.append(w)
                    wr_d.append(t)
            elif kv in ix.failed:
                inf.add(
                    "G1a", {"op": tx.op[t], "mop": ["r", k, v], "writer": tx.op[ix.failed[kv]], "element": v}
                )
            elif kv in ix.inter:
                if ix.inter[kv] != t:
                    inf.add(
                        "G1b",
                        {"op": tx.op[t], "mop": ["r", k, v], "writer": tx.op[ix.inter[kv]], "element": v},
                    )
            else:
                inf.add(
                    "garbage-read",
                    {
                        "key": k,
                        "elements": [v],
                        "op": tx.op[t],
                        "detail": "read a value that no transaction in the history wrote",
                    },
                )
    return readers_of


DIRECT, BY_PROCESS, BY_REALTIME = 0, 1, 2
_WW_BY = (WW, WWP, WWT)
_RW_BY = (RW, RWP, RWT)
VIA = ("", "process", "realtime")


def _link(ix: _Index, k: Any, v1: Any, v2: Any, via: int, witness: tuple[int, int] | None = None) -> None:
    """Records v1 < v2 for key k, keeping the most direct reason known."""
    outs = ix.versions.setdefault(k, {}).setdefault(v1, {})
    if via < outs.get(v2, 3):
        outs[v2] = via
        if witness is not None:
            ix.witness[(k, v1, v2)] = witness


def _acyclic(graph: dict[Any, dict[Any, int]]) -> bool:
    """Kahn's algorithm on the direct edges of one key's version graph."""
    indeg: dict[Any, int] = {}
    for v, outs in graph.items():
        indeg.setdefault(v, 0)
        for w, via in outs.items():
            if via == DIRECT:
                indeg[w] = indeg.get(w, 0) + 1
    todo = [v for v, d in indeg.items() if d == 0]
    seen = 0
    while todo:
        v = todo.pop()
        seen += 1
        for w, via in graph.get(v, {}).items():
            if via == DIRECT:
                indeg[w] -= 1
                if indeg[w] == 0:
                    todo.append(w)
    return seen == len(indeg)


def _known(ix: _Index, k: Any, v: Any) -> Any:
    """v if it is a version with exactly one writer in the history (not nil, garbage or ambiguous), else None."""
    return v if v is not None and (k, v) in ix.writer and (k, v) not in ix.ambiguous else None


def _ends(ix: _Index, k: Any, members: list[int]) -> tuple[dict[int, Any], dict[int, Any]]:
    """Per member, the last and the first version of k it saw or wrote (None if not a known version)."""
    last: dict[int, Any] = {}
    first: dict[int, Any] = {}
    for t in members:
        w, r = ix.ext_writes[t] or {}, ix.ext_reads[t] or {}
        last[t] = _known(ix, k, w[k] if k in w else r.get(k))
        first[t] = _known(ix, k, r[k] if k in r else w.get(k))
    return last, first


def _ordered(tx: Txns, ix: _Index, process: bool, realtime: bool) -> None:
    """Version order from transaction order (Elle's sequential- and linearizable-keys inference).

    If A precedes B in process (realtime) order and both touch key k, then in every strong-session
    (strict) serializable execution the last version A saw or wrote precedes the first one B saw or
    wrote. Edges derived so are labelled with that order, so a cycle needing them is a process (realtime)
    anomaly, never a plain one."""
    touching: dict[Any, list[int]] = {}
    for t in range(len(tx)):
        for k in set(ix.ext_writes[t] or ()) | set(ix.ext_reads[t] or ()):
            touching.setdefault(k, []).append(t)
    for k, members in touching.items():
        if len(members) < 2:
            continue
        last, first = _ends(ix, k, members)
        pairs: list[tuple[int, int, int]] = []
        if process:
            prev: dict[Any, int] = {}
            for b in members:
                p = tx.process[b]
                if p in prev:
                    pairs.append((prev[p], b, BY_PROCESS))
                if tx.type[b] == OK:
                    prev[p] = b
        if realtime:
            pairs.extend((a, b, BY_REALTIME) for a, b in realtime_pairs(tx, members))
        graph = ix.versions.setdefault(k, {})
        for a, b, via in pairs:
            v1, v2 = last[a], first[b]
            if v1 is None or v2 is None or v1 == v2:
                continue
            outs = graph.setdefault(v1, {})
            if via < outs.get(v2, 3):
                outs[v2] = via
                ix.witness[(k, v1, v2)] = (a, b)


def _versions(
    tx: Txns, ix: _Index, inf: Inference, readers_of: dict[tuple[Any, Any], list[int]], wfr: bool
) -> None:
    """ww and rw edges from each key's version graph (init precedes every written value)."""
    for k, v in ix.writer:
        _link(ix, k, INIT, v, DIRECT)
    for k, graph in list(ix.versions.items()) if wfr else ():
        if not _acyclic(graph):
            inf.add("cyclic-versions", {"key": k, "versions": sorted(map(str, graph))})
            for outs in graph.values():  # keep init < v and the order-derived edges
                for v2 in [v2 for v2, via in outs.items() if via == DIRECT]:
                    del outs[v2]
            for kk, v in ix.writer:
                if kk == k:
                    _link(ix, k, INIT, v, DIRECT)
    lists = [(inf.edges.lists(ww), inf.edges.lists(rw)) for ww, rw in zip(_WW_BY, _RW_BY, strict=True)]
    for k, graph in ix.versions.items():
        _edges(k, graph, ix, lists, readers_of)


def _edges(
    k: Any,
    graph: dict[Any, dict[Any, int]],
    ix: _Index,
    lists: list[Any],
    readers_of: dict[tuple[Any, Any], list[int]],
) -> None:
    """For each v1 < v2: writer(v1) -ww-> writer(v2), and each reader of v1 -rw-> writer(v2).

    A reader that also wrote the key precedes writer(v2) all the same, though perhaps through its own
    write (ww) rather than an anti-dependency: as in Elle, the edge is labelled rw, which can only make
    the cycle's name weaker than the truth (every model forbidding the named anomaly forbids the real one).
    `lists[via]` are the ((ww sources, ww targets), (rw sources, rw targets)) to append to."""
    writer, ambiguous = ix.writer, ix.ambiguous
    for v1, outs in graph.items():
        src_w = writer.get((k, v1)) if v1 is not INIT and (k, v1) not in ambiguous else None
        readers = readers_of.get((k, v1), ())
        for v2, via in outs.items():
            kv2 = (k, v2)
            w2 = writer.get(kv2)
            if w2 is None or kv2 in ambiguous:
                continue
            (ww_s, ww_d), (rw_s, rw_d) = lists[via]
            version_edges(w2, src_w, readers, ww_s, ww_d, rw_s, rw_d)


def _explainer(ix: _Index, tx: Txns):  # type: ignore[no-untyped-def]
    """Justifies one data edge a -> b from the external reads and final writes of a and b."""

    def explain(a: int, b: int, bit: int) -> dict[str, Any] | None:
        bw = ix.ext_writes[b] or {}
        if bit == WR:
            aw = ix.ext_writes[a] or {}
            for k, v in (ix.ext_reads[b] or {}).items():
                if v is not None and aw.get(k) == v:
                    return {"type": "wr", "key": k, "value": v}
            return None
        ww = bool(bit & WW_ANY)
        via = (_WW_BY if ww else _RW_BY).index(bit)
        src = ix.ext_writes[a] if ww else ix.ext_reads[a]
        for k, v1 in (src or {}).items():
            if k not in bw:
                continue
            key1 = INIT if v1 is None else v1
            if ix.versions.get(k, {}).get(key1, {}).get(bw[k]) != via:
                continue
            step = {"type": "ww" if ww else "rw", "key": k, "value": plain(key1), "value'": bw[k]}
            if via:
                w0, w1 = ix.witness[(k, key1, bw[k])]
                step.update(via=VIA[via], witness=[tx.op[w0].get("index"), tx.op[w1].get("index")])
            return step
        return None

    return explain


def infer(tx: Txns, wfr: bool = False, process: bool = False, realtime: bool = False) -> Inference:
    """All rw-register dependencies and non-cycle anomalies of the transactions `tx`.

    `process` / `realtime`: also order versions by process / realtime order (valid evidence against the
    strong-session / strict models only; such edges carry their own labels)."""
    inf = Inference(edges=Edges(), explain=lambda a, b, bit: None)
    ix = _Index(len(tx))
    try:
        for t in range(len(tx)):
            _txn(t, tx, ix, inf)
        readers_of = _reads(tx, ix, inf, wfr)
        if process or realtime:
            _ordered(tx, ix, process, realtime)
        _versions(tx, ix, inf, readers_of, wfr)
        lost_updates(ix.updaters, tx, inf)
    except ElleInputError:
        raise
    except (TypeError, ValueError) as exc:
        validate(tx)
        raise ElleInputError(f"rw-register keys and values must be scalars ({exc})") from None
    if ix.ambiguous:
        inf.add(
            "duplicate-writes",
            {
                "cases": [{"key": k, "value": v} for k, v in sorted(ix.ambiguous, key=str)][:20],
                "count": len(ix.ambiguous),
            },
        )
        inf.unknown.append(
            {
                "reason": "duplicate-writes",
                "detail": "a value was written to the same key twice, so its writer is unknown",
            }
        )
    inf.explain = _explainer(ix, tx)
    inf.stats = {"keys": len(ix.versions), "writes": len(ix.writer)}
    return inf
