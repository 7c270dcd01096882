"""List-append inference (Elle §3-4): every read of a list reveals the order of all appends before it.

Appended values are unique per key, so each element names the transaction that appended it
(recoverability), and the longest read of a key gives a prefix of its version order (traceability).
From those: ww (the writer of the previous element precedes the writer of the next), wr (the writer of
a read's last element precedes the reader) and rw (a reader of a version precedes the writer of the
next element). An append no read ever saw comes after every element that was seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faultline.checkers.elle.graph import RW, WR, WW, Edges
from faultline.checkers.elle.inference import INIT, Inference, plain
from faultline.checkers.elle.txns import FAIL, INFO, OK, ElleInputError, Txns, compiled, validate


class _Index:
    """Writers, failed and intermediate appends, and the reads of committed transactions."""

    def __init__(self) -> None:
        self.writer: dict[tuple[Any, Any], int] = {}
        self.failed: dict[tuple[Any, Any], int] = {}
        self.inter: dict[tuple[Any, Any], int] = {}
        self.reads: list[tuple[int, Any, list[Any]]] = []
        self.longest: dict[Any, list[Any]] = {}
        self.order: dict[Any, list[Any]] = {}  # the longest read without duplicates: the version order
        self.pos: dict[Any, dict[Any, int]] = {}
        self.fmin: dict[Any, int] = {}  # per key, the first position of a failed append in the order
        self.updaters: dict[tuple[Any, int, Any], list[int]] = {}  # version read, then appended to -> txns


def _read_value(t: int, v: Any, tx: Txns) -> list[Any]:
    if v is None:
        return []
    if isinstance(v, list):
        return v
    if isinstance(v, tuple):
        return list(v)
    raise ElleInputError(f"op {tx.op[t].get('index')}: a list-append read returned {v!r}, not a list")


def _scan(tx: Txns, inf: Inference) -> _Index:
    """One pass over the transactions: the indexes, duplicate appends and internal inconsistencies.

    The compiled loop fills the indexes when it can (it leaves to Python the transactions that name a
    key twice, in order, and answers None for anything unusual: the Python loop then starts afresh)."""
    ix = _Index()
    dups: list[tuple[int, Any, Any]] = []
    internal: list[int] = []
    core = compiled()
    if (
        core is not None
        and core.scan(tx.mops, tx.type, ix.writer, ix.failed, ix.inter, ix.reads, ix.longest, dups, internal)
        is not None
    ):
        _internals(core, internal, ix, tx, inf)
    else:
        ix, dups = _Index(), []
        _scan_loop(tx, inf, ix, dups)
    dups.extend((ix.failed[kv], kv[0], kv[1]) for kv in ix.writer.keys() & ix.failed.keys())
    for t, k, v in dups:
        inf.add("duplicate-appends", {"op": tx.op[t], "key": k, "value": v})
    if dups:
        inf.unknown.append(
            {
                "reason": "duplicate-appends",
                "detail": "a value was appended to the same key twice, so its writer is unknown",
            }
        )
    return ix


def _internals(core: Any, ts: list[int], ix: _Index, tx: Txns, inf: Inference) -> None:
    """append._internal for each of `ts` in order: the compiled loop does the consistent ones and stops at
    each that has something to report, which `_internal` then reports."""
    i = 0
    while i < len(ts):
        i = core.internal(tx.mops, ts, i, INIT, ix.updaters)
        if i < len(ts):
            _internal(ts[i], tx.mops[ts[i]], ix, tx, inf)
            i += 1


def _scan_loop(tx: Txns, inf: Inference, ix: _Index, dups: list[tuple[int, Any, Any]]) -> None:
    """_scan's loop in Python (the compiled one's twin)."""
    writer, inter, longest = ix.writer, ix.inter, ix.longest
    add_read = ix.reads.append
    types = tx.type
    for t, mops in enumerate(tx.mops):
        typ = types[t]
        if typ == FAIL:
            _scan_failed(t, mops, ix, dups)
            continue
        appended: dict[Any, Any] | None = None
        for f, k, v in mops:
            if f == "append":
                kv = (k, v)
                n0 = len(writer)
                writer[kv] = t
                if len(writer) == n0:
                    dups.append((t, k, v))
                if appended is None:
                    appended = {k: v}
                else:
                    if k in appended:
                        inter[(k, appended[k])] = t
                    appended[k] = v
            elif f == "r":
                if typ == OK:
                    if type(v) is not list:
                        v = _read_value(t, v, tx)
                    add_read((t, k, v))
                    cur = longest.get(k)
                    if cur is None or len(v) > len(cur):
                        longest[k] = v
            elif f == "w":
                raise ElleInputError(
                    f"op {tx.op[t].get('index')}: list-append histories have no writes "
                    f"({[f, k, v]!r}); use elle-rw-register"
                )
            else:
                validate(tx)
        if typ == OK and len(mops) > 1 and len({m[1] for m in mops}) < len(mops):
            _internal(t, mops, ix, tx, inf)


def _scan_failed(t: int, mops: list[Any], ix: _Index, dups: list[tuple[int, Any, Any]]) -> None:
    """The appends of a failed transaction: never installed, so reading them is an aborted read."""
    for f, k, v in mops:
        if f == "append":
            n0 = len(ix.failed)
            ix.failed[(k, v)] = t
            if len(ix.failed) == n0:
                dups.append((t, k, v))
        elif f not in ("r", "w"):
            raise ValueError(f"unknown micro-op {f!r}")


def _internal(t: int, mops: list[Any], ix: _Index, tx: Txns, inf: Inference) -> None:
    """A committed transaction's reads must agree with its own earlier reads and appends.

    Also notes a read followed by an append to the same key, for lost updates."""
    state: dict[Any, tuple[bool, list[Any]]] = {}  # key -> (whole list known?, expected list or suffix)
    wrote: set[Any] = set()
    for i, (f, k, v) in enumerate(mops):
        if f == "append":
            s = state.get(k)
            if s is None:
                state[k] = (False, [v])
                wrote.add(k)
                continue
            known, exp = s
            if k not in wrote:  # the first append of k follows a read of k: an update of that version
                wrote.add(k)
                ix.updaters.setdefault((k, len(exp), exp[-1] if exp else INIT), []).append(t)
            state[k] = (known, [*exp, v])
            continue
        got = [] if v is None else list(v)
        s = state.get(k)
        if s is not None:
            known, exp = s
            n = len(exp)
            bad = got != exp if known else (len(got) < n or got[len(got) - n :] != exp)
            if bad:
                inf.add(
                    "internal",
                    {
                        "op": tx.op[t],
                        "mop": [f, k, v],
                        "mop_index": i,
                        "expected": exp if known else ["...", *exp],
                    },
                )
        elif any(m[0] == "append" and m[1] == k and m[2] in got for m in mops[i + 1 :]):
            inf.add("future-read", {"op": tx.op[t], "mop": [f, k, v], "mop_index": i})
        state[k] = (True, got)


def _orders(ix: _Index, tx: Txns, inf: Inference) -> None:
    """Per key, the version order from the longest read; duplicate elements and garbage are reported."""
    for k, longest in ix.longest.items():
        order = longest
        if len(set(longest)) != len(longest):
            seen: dict[Any, int] = {}
            for e in longest:
                seen[e] = seen.get(e, 0) + 1
            inf.add(
                "duplicate-elements",
                {"key": k, "read": longest, "duplicates": {str(e): c for e, c in seen.items() if c > 1}},
            )
            order = list(dict.fromkeys(longest))
        ix.order[k] = order
        ix.pos[k] = {e: i for i, e in enumerate(order)}


def _reads(ix: _Index, tx: Txns, inf: Inference) -> dict[tuple[Any, Any], list[int]]:
    """wr edges, G1a, G1b and incompatible orders; returns the readers of each version."""
    readers: dict[tuple[Any, Any], list[int]] = {}
    wr_s, wr_d = inf.edges.lists(WR)
    writer, inter, failed = ix.writer, ix.inter, ix.failed
    fmin = ix.fmin
    for k, e in failed:
        p = ix.pos.get(k, {}).get(e)
        if p is not None and p < fmin.get(k, 1 << 62):
            fmin[k] = p
    core = compiled()
    if core is not None:  # the compiled loop, when no read is out of order or aborted (else None)
        s: list[int] = []
        d: list[int] = []
        if core.reads(ix.reads, ix.longest, writer, inter, fmin, INIT, s, d, readers) is not None:
            wr_s.extend(s)
            wr_d.extend(d)
            return readers
        readers.clear()
    for t, k, v in ix.reads:
        n = len(v)
        if n == 0:
            readers.setdefault((k, INIT), []).append(t)
            continue
        full = ix.longest[k]
        compatible = v is full or (n <= len(full) and v[-1] == full[n - 1] and v == full[:n])
        if not compatible:
            inf.add("incompatible-order", {"key": k, "op": tx.op[t], "read": v, "longest": full})
            junk = [e for e in v if (k, e) not in writer and (k, e) not in failed]
            if junk:
                inf.add(
                    "garbage-read",
                    {
                        "key": k,
                        "elements": junk,
                        "op": tx.op[t],
                        "detail": "read elements that no transaction in the history appended",
                    },
                )
        last = v[-1]
        kv = (k, last)
        w = writer.get(kv)
        if w is not None and w != t:
            wr_s.append(w)
            wr_d.append(t)
        i = inter.get(kv)
        if i is not None and i != t:
            inf.add("G1b", {"op": tx.op[t], "mop": ["r", k, v], "writer": tx.op[i], "element": last})
        fm = fmin.get(k)
        if (fm is not None and n > fm) or (not compatible and failed):
            for e in v:
                f = failed.get((k, e))
                if f is not None:
                    inf.add("G1a", {"op": tx.op[t], "mop": ["r", k, v], "writer": tx.op[f], "element": e})
        readers.setdefault(kv, []).append(t)
    return readers


def _versions(ix: _Index, tx: Txns, inf: Inference, readers: dict[tuple[Any, Any], list[int]]) -> None:
    """ww and rw edges along each key's version order, then for the appends no read saw; garbage reads."""
    ww_s, ww_d = inf.edges.lists(WW)
    rw_s, rw_d = inf.edges.lists(RW)
    core = compiled()
    if core is not None:  # the compiled loops, when no read saw garbage (else None)
        edges: tuple[list[int], ...] = ([], [], [], [])
        if core.versions(ix.order, ix.pos, ix.writer, ix.failed, readers, INIT, *edges) is not None:
            for out, got in zip((ww_s, ww_d, rw_s, rw_d), edges, strict=True):
                out.extend(got)
            return
    writer, failed = ix.writer, ix.failed
    for k, order in ix.order.items():
        prev_w: int | None = None
        prev: tuple[Any, Any] = (k, INIT)
        garbage = []
        for e in order:
            kv = (k, e)
            w = writer.get(kv)
            if w is not None:
                version_edges(w, prev_w, readers.get(prev, ()), ww_s, ww_d, rw_s, rw_d)
            elif kv not in failed:
                garbage.append(e)
            prev_w, prev = w, kv
        if garbage:
            inf.add(
                "garbage-read",
                {
                    "key": k,
                    "elements": garbage,
                    "detail": "read elements that no transaction in the history appended",
                },
            )
    for (k, v), w in writer.items():
        pos = ix.pos.get(k)
        if pos is not None and v in pos:
            continue
        key_order = ix.order.get(k)
        prev = (k, key_order[-1]) if key_order else (k, INIT)
        version_edges(
            w, writer.get(prev) if key_order else None, readers.get(prev, ()), ww_s, ww_d, rw_s, rw_d
        )


def version_edges(
    w: int,
    prev_w: int | None,
    prev_readers: Iterable[int],
    ww_s: list[int],
    ww_d: list[int],
    rw_s: list[int],
    rw_d: list[int],
) -> None:
    """The edges into `w`, the writer of a version: ww from `prev_w`, the writer of the version before it,
    and rw from that version's readers (neither from `w` itself)."""
    if prev_w is not None and prev_w != w:
        ww_s.append(prev_w)
        ww_d.append(w)
    for r in prev_readers:
        if r != w:
            rw_s.append(r)
            rw_d.append(w)


def lost_updates(updaters: dict[tuple[Any, Any, Any], list[int]], tx: Txns, inf: Inference) -> None:
    """Two committed transactions that read the same version of a key and both then wrote it."""
    for (k, _n, last), ts in updaters.items():
        if len(ts) > 1:
            inf.add("lost-update", {"key": k, "value": plain(last), "txns": [tx.op[t] for t in ts]})


def _dirty_updates(ix: _Index, tx: Txns, inf: Inference) -> None:
    """A committed append right after (info appends aside) an append by a failed transaction."""
    for k, first in ix.fmin.items():
        order = ix.order[k]
        aborted: list[Any] = []
        for e in order[first:]:
            f = ix.failed.get((k, e))
            if f is not None:
                aborted.append(e)
                continue
            w = ix.writer.get((k, e))
            if w is None or not aborted:
                continue
            if tx.type[w] == INFO:
                aborted.append(e)
                continue
            inf.add(
                "dirty-update",
                {
                    "key": k,
                    "values": [*aborted, e],
                    "op": tx.op[w],
                    "aborted_writer": tx.op[ix.failed[(k, aborted[0])]],
                },
            )
            aborted = []


def _previous(ix: _Index, k: Any, v: Any) -> Any:
    """The element appended just before v to k (or after which v must come), INIT for the first."""
    pos, order = ix.pos.get(k), ix.order.get(k)
    if pos is None or order is None:
        return INIT
    p = pos.get(v)
    if p is None:
        return order[-1] if order else INIT
    return order[p - 1] if p > 0 else INIT


def _explainer(ix: _Index, tx: Txns):  # type: ignore[no-untyped-def]
    """Justifies one data edge a -> b from the micro-ops of b (and a)."""

    def explain(a: int, b: int, bit: int) -> dict[str, Any] | None:
        for f, k, v in tx.mops[b]:
            if bit == WR and f == "r" and v and tx.type[b] == OK and ix.writer.get((k, list(v)[-1])) == a:
                return {"type": "wr", "key": k, "value": list(v)[-1]}
            if f != "append" or bit not in (WW, RW):
                continue
            prev = _previous(ix, k, v)
            seen = v in ix.pos.get(k, ())
            if bit == WW and prev is not INIT and ix.writer.get((k, prev)) == a:
                return {"type": "ww", "key": k, "value": prev, "value'": v, "observed": seen}
            if bit == RW and tx.type[a] == OK:
                for fa, ka, va in tx.mops[a]:
                    if fa == "r" and ka == k and (list(va or [])[-1:] or [INIT])[0] == prev:
                        return {"type": "rw", "key": k, "value": plain(prev), "value'": v, "observed": seen}
        return None

    return explain


def infer(tx: Txns) -> Inference:
    """All list-append dependencies and non-cycle anomalies of the transactions `tx`."""
    inf = Inference(edges=Edges(), explain=lambda a, b, bit: None)
    try:
        ix = _scan(tx, inf)
        _orders(ix, tx, inf)
        readers = _reads(ix, tx, inf)
    except ElleInputError:
        raise
    except (TypeError, ValueError) as exc:
        validate(tx)
        raise ElleInputError(f"list-append keys and appended values must be scalars ({exc})") from None
    _versions(ix, tx, inf, readers)
    _dirty_updates(ix, tx, inf)
    lost_updates(ix.updaters, tx, inf)
    inf.explain = _explainer(ix, tx)
    inf.stats = {"keys": len(ix.order), "appends": len(ix.writer), "reads": len(ix.reads)}
    return inf
