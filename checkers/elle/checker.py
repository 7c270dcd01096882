"""The Elle-class checkers: infer dependencies, find cycles, classify them, and give the verdict.

Steps: parse transactions; infer data dependencies and non-cycle anomalies (list-append or rw-register);
add process and realtime order when the claimed models need them; strongly connected components of
the whole graph (scipy); for each model with a cycle test, whether its subgraph has a cycle (exact,
linear time); inside each component, the shortest cycle of each kind within a time budget. A model is
violated when an anomaly it forbids is proven; the verdict is `unknown` only when the evidence it
needs is missing (a search ran out of time, or appends/writes were not unique).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from faultline.checkers.elle import append, register
from faultline.checkers.elle.anomalies import CYCLE_TYPES, INFORMATIONAL, UNKNOWN, classify, implied
from faultline.checkers.elle.consistency import (
    DEFAULT,
    boundary,
    canonical,
    cycle_anomaly,
    cycle_tests,
    forbidden,
    impossible,
    needs,
)
from faultline.checkers.elle.cycles import SPECS, SearchTimeout, shortest, simple_parts
from faultline.checkers.elle.explain import cycle_text, direct_text
from faultline.checkers.elle.graph import (
    DATA,
    LABELS,
    PR,
    RT,
    RW_ANY,
    WR,
    WW_ANY,
    add_process_edges,
    add_realtime_chain,
    adjacency,
    components,
    nonadjacent_product,
    realtime_pairs,
)
from faultline.checkers.elle.inference import Inference
from faultline.checkers.elle.svg import draw
from faultline.checkers.elle.txns import FAIL, INFO, OK, ElleInputError, Txns, parse
from faultline.core import Op

MAX_CASES = 100  # cases kept per anomaly type in the result; `counts` has the totals
_GATES = {"G0": 0, "G1c": 1, "G-single-item": 2, "G-nonadjacent-item": 2, "G2-item": 3}
_GATE_MODELS = {
    "": ("read-uncommitted", "read-committed", "snapshot-isolation", "repeatable-read"),
    "-process": (
        "strong-session-read-uncommitted",
        "strong-session-read-committed",
        "strong-session-snapshot-isolation",
        "strong-session-serializable",
    ),
    "-realtime": (
        "strong-read-uncommitted",
        "strong-read-committed",
        "strong-snapshot-isolation",
        "strict-serializable",
    ),
}


def _gate(cycle_type: str) -> str:
    """The model whose cycle test must fail for a cycle of this type to exist."""
    for suffix in ("-process", "-realtime"):
        if cycle_type.endswith(suffix):
            return _GATE_MODELS[suffix][_GATES[cycle_type[: -len(suffix)]]]
    return _GATE_MODELS[""][_GATES[cycle_type]]


@dataclass
class _Run:
    """Everything one check accumulates."""

    kind: str
    tx: Txns
    inf: Inference
    claimed: list[str]
    timeout: float
    n: int = 0
    src: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dst: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    bit: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    total: int = 0
    pr: bool = False  # process edges were built
    rt: bool = False  # realtime edges were built
    cycles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    timeouts: list[dict[str, Any]] = field(default_factory=list)
    positive: dict[str, np.ndarray] = field(default_factory=dict)


def _build_graph(run: _Run) -> list[np.ndarray]:
    """Adds process/realtime order as the claimed models need; returns the nontrivial components."""
    pr, rt = needs(run.claimed)
    run.n = len(run.tx)
    if pr:
        add_process_edges(run.tx, run.inf.edges)
    m = add_realtime_chain(run.tx, run.inf.edges) if rt else 0
    run.pr, run.rt = pr, rt
    run.total = run.n + m
    run.src, run.dst, run.bit = run.inf.edges.arrays()
    return components(run.total, run.src, run.dst)


def _cycle_tests(run: _Run, comps: list[np.ndarray]) -> None:
    """For each model with a cycle test, the nodes that lie on a cycle of its subgraph."""
    inside = np.zeros(run.total, dtype=bool)
    for c in comps:
        inside[c] = True
    keep = inside[run.src] & inside[run.dst]
    s, d, b = run.src[keep], run.dst[keep], run.bit[keep]
    present = DATA | (PR if run.pr else 0) | (RT if run.rt else 0)
    for model in cycle_tests(present):
        if model.nonadjacent:
            s2, d2 = nonadjacent_product(s, d, b, model.cycle, model.rw)
            parts = components(2 * run.total, s2, d2)
            nodes = np.unique(np.concatenate(parts) // 2) if parts else None
        else:
            sel = (b & model.cycle) != 0
            parts = components(run.total, s[sel], d[sel])
            nodes = np.concatenate(parts) if parts else None
        if nodes is not None:
            mask = np.zeros(run.total, dtype=bool)
            mask[nodes] = True
            run.positive[model.name] = mask


def _scc_edges(run: _Run, comps: list[np.ndarray]) -> list[list[tuple[int, int, int]]]:
    """The real edges (no virtual realtime chain) inside each component."""
    cid = np.full(run.total, -1, dtype=np.int64)
    for i, c in enumerate(comps):
        cid[c] = i
    cs, cd = cid[run.src], cid[run.dst]
    sel = (cs >= 0) & (cs == cd) & (run.bit != RT)
    es, ed, eb, ec = run.src[sel], run.dst[sel], run.bit[sel], cs[sel]
    order = np.argsort(ec, kind="stable")
    es, ed, eb, ec = es[order], ed[order], eb[order], ec[order]
    out: list[list[tuple[int, int, int]]] = [[] for _ in comps]
    if len(ec):
        starts = np.concatenate([[0], np.nonzero(np.diff(ec))[0] + 1, [len(ec)]])
        for lo, hi in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
            out[int(ec[lo])] = list(
                zip(es[lo:hi].tolist(), ed[lo:hi].tolist(), eb[lo:hi].tolist(), strict=True)
            )
    return out


def _step(run: _Run, a: int, b: int, label: int) -> dict[str, Any]:
    """The evidence for one step a -> b of a cycle."""
    if label & (WW_ANY | WR | RW_ANY):
        return run.inf.explain(a, b, label) or {"type": LABELS[label]}
    if label == PR:
        return {"type": "process", "process": run.tx.process[a]}
    return {"type": "realtime", "completed": run.tx.op[a].get("index"), "invoked": run.tx.inv_index[b]}


def _record(run: _Run, nodes: list[int], labels: list[int]) -> str:
    """Explains, draws and stores one simple cycle; returns its type."""
    start = nodes.index(min(nodes))
    nodes, labels = nodes[start:] + nodes[:start], labels[start:] + labels[:start]
    kind = classify(labels)
    names = [f"T{i + 1}" for i in range(len(nodes))]
    steps = [_step(run, nodes[i], nodes[(i + 1) % len(nodes)], labels[i]) for i in range(len(nodes))]
    ops = [run.tx.op[t] for t in nodes]
    case = {
        "type": kind,
        "cycle": ops,
        "steps": steps,
        "explanation": cycle_text(names, steps, run.kind),
        "svg": draw(names, ops, steps, kind),
    }
    run.cycles.setdefault(kind, []).append(case)
    return kind


def _search_component(run: _Run, members: list[int], edges: list[tuple[int, int, int]]) -> None:
    """The shortest cycle of each kind not yet implied, until the component's budget runs out."""
    pairs = list(edges)
    if run.rt:
        pairs.extend((a, b, RT) for a, b in realtime_pairs(run.tx, members))
    adj = adjacency(members, pairs)
    idx = np.asarray(members, dtype=np.int64)
    possible = [t for t in CYCLE_TYPES if _gate(t) in run.positive and run.positive[_gate(t)][idx].any()]
    deadline = time.monotonic() + run.timeout
    found: set[str] = set()
    skipped: list[str] = []
    for name in possible:
        if name in implied(found):
            continue
        if skipped:
            skipped.append(name)
            continue
        try:
            best = None
            for spec in SPECS[name]:
                best = best or shortest(adj, spec, deadline)
        except SearchTimeout:
            skipped.append(name)
            continue
        if best is not None:
            for nodes, labels in simple_parts(*best):
                found.add(_record(run, nodes, labels))
    if skipped:
        run.timeouts.append(
            {"scc_size": len(members), "unsearched": skipped, "found": sorted(found), "budget_s": run.timeout}
        )


def _cycle_exists(run: _Run, specific: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Cycle tests that failed for models no specific anomaly already rules out."""
    ruled_out = impossible(specific)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, mask in run.positive.items():
        if name in ruled_out:
            continue
        nodes = np.nonzero(mask[: run.n])[0].tolist()
        out[cycle_anomaly(name)] = [
            {
                "model": name,
                "txns": len(nodes),
                "indices": [run.tx.op[t].get("index") for t in nodes[:50]],
                "explanation": f"the dependencies that {name} requires to be acyclic form a cycle among these "
                f"{len(nodes)} transactions (no simple cycle of a specific kind was named for it)",
            }
        ]
    return out


def _direct(run: _Run) -> dict[str, list[dict[str, Any]]]:
    """The non-cycle anomalies, each case with a sentence."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, cases in run.inf.anomalies.items():
        out[name] = [{**c, "explanation": direct_text(name, c)} for c in cases]
    return out


def _verdict(run: _Run, names: set[str], empty: bool) -> Any:
    """False if a forbidden anomaly is proven; unknown if evidence is missing; else True."""
    forb = forbidden(run.claimed)
    if names & forb:
        return False
    timed_out = {t for r in run.timeouts for t in r["unsearched"]}
    if empty or run.inf.unknown or timed_out & forb:
        return "unknown"
    return True


def _counts(tx: Txns) -> dict[str, int]:
    return {"ok": tx.type.count(OK), "info": tx.type.count(INFO), "fail": tx.type.count(FAIL)}


def check(
    history: Sequence[Mapping[str, Any]],
    kind: str,
    consistency_models: Sequence[str] | None = None,
    cycle_search_timeout: float = 1.0,
    wfr_keys: bool = False,
) -> dict[str, Any]:
    """Checks a transactional history; `kind` is "list-append" or "rw-register".

    The cyclic garbage collector is paused meanwhile: the check makes millions of small containers and
    no reference cycles, and collections would rescan the whole history each time (30 % of the time)."""
    if kind not in ("list-append", "rw-register"):
        raise ValueError(f"unknown transactional checker kind {kind!r}")
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check(history, kind, consistency_models, cycle_search_timeout, wfr_keys)
    finally:
        if paused:
            gc.enable()


def _check(
    history: Sequence[Mapping[str, Any]],
    kind: str,
    consistency_models: Sequence[str] | None,
    cycle_search_timeout: float,
    wfr_keys: bool,
) -> dict[str, Any]:
    t0 = time.monotonic()
    claimed = canonical(consistency_models or DEFAULT)
    tx = parse(history)
    if not len(tx) and tx.skipped:
        raise ElleInputError(
            "no transactions in the history (ops with f txn whose value is [f k v] micro-ops)"
        )
    pr, rt = needs(claimed)
    inf = append.infer(tx) if kind == "list-append" else register.infer(tx, wfr_keys, pr, rt)
    run = _Run(kind=kind, tx=tx, inf=inf, claimed=claimed, timeout=cycle_search_timeout)
    comps = _build_graph(run)
    if comps:
        _cycle_tests(run, comps)
        for c, edges in zip(comps, _scc_edges(run, comps), strict=True):
            _search_component(run, [int(x) for x in c if x < run.n], edges)
    anomalies = _direct(run)
    anomalies.update(run.cycles)
    anomalies.update(_cycle_exists(run, set(anomalies)))
    if run.timeouts:
        anomalies["cycle-search-timeout"] = run.timeouts
    empty = _counts(tx)["ok"] == 0
    if empty:
        anomalies["empty-transaction-graph"] = [{"explanation": "no transaction completed ok"}]
    names = set(anomalies) - INFORMATIONAL - UNKNOWN
    no, also_not = boundary(names)
    out: dict[str, Any] = {
        "valid": _verdict(run, names, empty),
        "checker": f"elle-{kind}",
        "consistency_models": claimed,
        "anomaly_types": sorted(anomalies),
        "not": no,
        "also_not": also_not,
        "anomalies": {k: v[:MAX_CASES] for k, v in sorted(anomalies.items())},
        "counts": {k: len(v) for k, v in sorted(anomalies.items())},
        "informational": sorted(set(anomalies) & INFORMATIONAL),
        "unknown": inf.unknown,
        "txns": _counts(tx),
        "skipped_ops": tx.skipped,
        "graph": {
            "edges": {LABELS[b]: inf.edges.count(b) for b in LABELS},
            "sccs": len(comps),
            "largest_scc": max((len(c) for c in comps), default=0),
        },
        "stats": inf.stats,
        "elapsed_s": round(time.monotonic() - t0, 6),
    }
    blind = sum(1 for i in tx.inv if i < 0)
    if blind:
        out["without_invocation"] = blind
        if run.rt:
            out["notes"] = [_blind_note(blind, len(tx))]
    return out


def _blind_note(blind: int, n: int) -> str:
    """Says what a history of completions alone leaves unchecked: the realtime order into them."""
    return (
        f"{blind} of {n} transactions have no invocation in the history (completions alone): each may "
        "have begun at any time before it completed, so no realtime order leads into it; the realtime part "
        "of the claimed models is checked with the orders that remain"
    )


def _opts(defaults: Mapping[str, Any], test: Mapping[str, Any], opts: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor defaults, then the test map, then `opts` (dashes or underscores in the names)."""
    out = dict(defaults)
    for src in (test, opts):
        for key in ("consistency_models", "cycle_search_timeout", "wfr_keys"):
            for spelled in (key, key.replace("_", "-")):
                if spelled in src and src[spelled] is not None:
                    out[key] = src[spelled]
    if isinstance(out.get("consistency_models"), str):
        out["consistency_models"] = out["consistency_models"].split(",")
    return out


class _Elle:
    kind = ""

    def __init__(
        self,
        consistency_models: Sequence[str] | str | None = None,
        cycle_search_timeout: float = 1.0,
        wfr_keys: bool = False,
    ) -> None:
        models = consistency_models.split(",") if isinstance(consistency_models, str) else consistency_models
        canonical(models or DEFAULT)  # fail early on a bad name
        self.defaults = {
            "consistency_models": list(models) if models else None,
            "cycle_search_timeout": cycle_search_timeout,
            "wfr_keys": wfr_keys,
        }

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        o = _opts(self.defaults, test or {}, opts or {})
        return check(
            history, self.kind, o["consistency_models"], float(o["cycle_search_timeout"]), bool(o["wfr_keys"])
        )


class ElleListAppend(_Elle):
    """Elle's list-append checker as a Checker (`check(test, history, opts)`)."""

    kind = "list-append"


class ElleRwRegister(_Elle):
    """Elle's rw-register checker as a Checker; `wfr_keys` assumes writes follow reads in a transaction."""

    kind = "rw-register"


__all__ = ["ElleListAppend", "ElleRwRegister", "check"]
