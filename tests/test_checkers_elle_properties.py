"""Property tests: histories of a strict-serializable store are valid; one planted anomaly is found and named.

The simulated store applies each transaction atomically at a random moment between its invocation and its
completion, so every history it records is strict-serializable; indeterminate (info) transactions are
applied or not at random, failed ones never. A planted anomaly is a short block of transactions on fresh
keys and processes, inserted between two events of such a history; realtime order cannot connect it to
the rest into a cycle (a path through the store's transactions would run backwards in time).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultline.checkers.elle import checker

Event = tuple[str, str, Any, Any]  # ("inv", name, process, micro-ops) or ("done", name, type, None)


def simulate(rng: random.Random, kind: str, n: int, keys: int, concurrency: int) -> list[dict[str, Any]]:
    """A strict-serializable history of `n` transactions (module docstring)."""
    state: dict[int, Any] = {}
    hist: list[dict[str, Any]] = []
    active: dict[int, dict[str, Any]] = {}
    idle, fresh, started, counter = list(range(concurrency)), concurrency, 0, 0

    def op(typ: str, p: int, value: list[Any]) -> None:
        hist.append({"index": len(hist), "type": typ, "process": p, "f": "txn", "value": value})

    while started < n or active:
        if idle and started < n and (not active or rng.random() < 0.5):
            p = idle.pop(rng.randrange(len(idle)))
            mops = []
            for _ in range(rng.randint(1, 4)):
                counter += 1
                write = "append" if kind == "list-append" else "w"
                mops.append(
                    ["r", rng.randrange(keys), None]
                    if rng.random() < 0.5
                    else [write, rng.randrange(keys), counter]
                )
            r = rng.random()
            active[p] = {
                "mops": mops,
                "out": None,
                "fate": "info" if r < 0.1 else "fail" if r < 0.2 else "ok",
            }
            op("invoke", p, mops)
            started += 1
            continue
        p = rng.choice(list(active))
        a = active[p]
        if a["out"] is None and (a["fate"] == "ok" or (a["fate"] == "info" and rng.random() < 0.5)):
            a["out"] = [_apply(state, kind, m) for m in a["mops"]]
            continue
        del active[p]
        op(a["fate"], p, a["out"] if a["fate"] == "ok" else a["mops"])
        idle.append(fresh if a["fate"] == "info" else p)
        fresh += a["fate"] == "info"
    return hist


def _apply(state: dict[int, Any], kind: str, mop: list[Any]) -> list[Any]:
    f, k, v = mop
    if f == "r":
        cur = state.get(k)
        return [f, k, list(cur or []) if kind == "list-append" else cur]
    if kind == "list-append":
        state.setdefault(k, []).append(v)
    else:
        state[k] = v
    return mop


def _c(*txns: tuple[Any, ...]) -> list[Event]:
    """Concurrent transactions: all invoked, then all completed."""
    evs: list[Event] = [("inv", f"t{i}", t[0], t[1]) for i, t in enumerate(txns)]
    return evs + [("done", f"t{i}", t[2] if len(t) > 2 else "ok", None) for i, t in enumerate(txns)]


def _s(*txns: tuple[Any, ...]) -> list[Event]:
    """Sequential transactions: each completes before the next is invoked."""
    out: list[Event] = []
    for i, t in enumerate(txns):
        out += [("inv", f"s{i}", t[0], t[1]), ("done", f"s{i}", t[2] if len(t) > 2 else "ok", None)]
    return out


A, R, W = "append", "r", "w"
LIST_PLANTS: dict[str, list[Event]] = {
    "G0": _c(
        (0, [[A, "x", 1], [A, "y", 2]]),
        (1, [[A, "x", 2], [A, "y", 1]]),
        (2, [[R, "x", [1, 2]], [R, "y", [1, 2]]]),
    ),
    "G1a": _c((0, [[A, "x", 1]], "fail"), (1, [[R, "x", [1]]])),
    "G1b": _c((0, [[A, "x", 1], [A, "x", 2]]), (1, [[R, "x", [1]]])),
    "G1c": _c((0, [[A, "x", 1], [R, "y", [1]]]), (1, [[A, "y", 1], [R, "x", [1]]])),
    "G-single-item": _c(
        (0, [[A, "x", 1], [A, "y", 1]]),
        (1, [[R, "x", [1]], [A, "x", 2], [R, "y", [1]], [A, "y", 2]]),
        (2, [[R, "x", [1, 2]], [R, "y", [1]]]),
    ),
    "G2-item": _c((0, [[A, "x", 1], [R, "y", []]]), (1, [[A, "y", 1], [R, "x", []]])),
    "G-nonadjacent-item": _c(
        (0, [[R, "a", []], [R, "d", [1]]]),
        (1, [[A, "a", 1], [A, "b", 1]]),
        (2, [[R, "b", [1]], [R, "c", []]]),
        (3, [[A, "c", 1], [A, "d", 1]]),
    ),
    "internal": _c((0, [[A, "x", 1], [R, "x", []]])),
    "future-read": _c((0, [[R, "x", [1]], [A, "x", 1]])),
    "dirty-update": _c((0, [[A, "x", 1]], "fail"), (1, [[A, "x", 2]]), (2, [[R, "x", [1, 2]]])),
    "incompatible-order": _c(
        (0, [[A, "x", 1]]), (1, [[A, "x", 2]]), (2, [[R, "x", [1, 2]]]), (3, [[R, "x", [2, 1]]])
    ),
    "duplicate-elements": _c((0, [[A, "x", 1]]), (1, [[R, "x", [1, 1]]])),
    "lost-update": _s((0, [[A, "x", 0]]))
    + _c((1, [[R, "x", [0]], [A, "x", 1]]), (2, [[R, "x", [0]], [A, "x", 2]])),
    "G0-realtime": _s((0, [[A, "x", 1]]), (1, [[A, "x", 2]]), (2, [[R, "x", [2, 1]]])),
    "G1c-realtime": _s((0, [[R, "y", [1]]]), (1, [[A, "y", 1]])),
    "G1c-process": _s((0, [[R, "y", [1]]]), (0, [[A, "y", 1]])),
    "G-single-item-realtime": _s((0, [[A, "x", 1]]), (1, [[R, "x", []]])),
    "G-single-item-process": _s((0, [[A, "x", 1]]), (0, [[R, "x", []]])),
    "G2-item-realtime": [
        ("inv", "t1", 1, [[A, "a", 1], [R, "b", []]]),
        ("inv", "tb", 2, [[A, "b", 1]]),
        ("done", "tb", "ok", None),
        ("inv", "t0", 0, [[R, "a", []]]),
        ("done", "t0", "ok", None),
        ("done", "t1", "ok", None),
    ],
    "G-nonadjacent-item-realtime": [
        ("inv", "t2", 1, [[A, "a", 1], [A, "b", 1]]),
        ("inv", "t3", 2, [[R, "b", [1]], [R, "c", []]]),
        ("inv", "t4", 3, [[A, "c", 1]]),
        ("done", "t4", "ok", None),
        ("inv", "t1", 0, [[R, "a", []]]),
        ("done", "t2", "ok", None),
        ("done", "t3", "ok", None),
        ("done", "t1", "ok", None),
    ],
}
REGISTER_PLANTS: dict[str, list[Event]] = {
    "G1a": _c((0, [[W, "x", 1]], "fail"), (1, [[R, "x", 1]])),
    "G1b": _c((0, [[W, "x", 1], [W, "x", 2]]), (1, [[R, "x", 1]])),
    "G1c": _c((0, [[W, "x", 1], [R, "y", 1]]), (1, [[W, "y", 1], [R, "x", 1]])),
    "internal": _c((0, [[W, "x", 2], [R, "x", 1]])),
    "G-single-item": _c(
        (0, [[R, "a", 10], [R, "b", None]]), (1, [[W, "b", 10]]), (2, [[W, "a", 10], [R, "b", 10]])
    ),
    "G2-item": _c((0, [[R, "x", None], [W, "y", 1]]), (1, [[R, "y", None], [W, "x", 1]])),
    "lost-update": _c((0, [[R, "x", None], [W, "x", 1]]), (1, [[R, "x", None], [W, "x", 2]])),
    "G-single-item-realtime": _s((0, [[R, "z", None], [W, "x", 2]]), (1, [[R, "x", None], [W, "y", 1]])),
    "G-single-item-process": _s((0, [[W, "x", 2]]), (0, [[R, "x", None]])),
}


def plant(hist: list[dict[str, Any]], events: list[Event], at: int, tag: int) -> list[dict[str, Any]]:
    """Inserts the events at position `at`, on keys and processes no other transaction uses."""
    block: list[dict[str, Any]] = []
    open_: dict[str, tuple[Any, list[Any]]] = {}
    for kind, name, p, mops in events:
        if kind == "inv":
            fresh = [[f, f"planted{tag}-{k}", v] for f, k, v in mops]
            open_[name] = (f"planted-{p}", fresh)
            block.append(
                {
                    "type": "invoke",
                    "process": f"planted-{p}",
                    "f": "txn",
                    "value": [[f, k, None if f == R else v] for f, k, v in fresh],
                }
            )
        else:
            proc, fresh = open_.pop(name)
            block.append({"type": p, "process": proc, "f": "txn", "value": fresh})
    out = hist[:at] + block + hist[at:]
    return [{**op, "index": i} for i, op in enumerate(out)]


def _valid_or_empty(r: dict[str, Any]) -> bool:
    return r["valid"] is True or (r["valid"] == "unknown" and r["txns"]["ok"] == 0)


histories = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(1, 4), st.integers(1, 5))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(histories)
def test_list_append_serializable_histories_are_valid(params: tuple[int, int, int, int]) -> None:
    seed, n, keys, conc = params
    hist = simulate(random.Random(seed), "list-append", n, keys, conc)
    r = checker.check(hist, "list-append")
    assert _valid_or_empty(r), r["anomaly_types"]


@SETTINGS
@given(histories)
def test_rw_register_serializable_histories_are_valid(params: tuple[int, int, int, int]) -> None:
    seed, n, keys, conc = params
    hist = simulate(random.Random(seed), "rw-register", n, keys, conc)
    for wfr in (False, True):
        r = checker.check(hist, "rw-register", wfr_keys=wfr)
        assert _valid_or_empty(r), r["anomaly_types"]


PLANT_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PLANTS = {"list-append": LIST_PLANTS, "rw-register": REGISTER_PLANTS}


@pytest.mark.parametrize("kind,name", [(kind, name) for kind in PLANTS for name in sorted(PLANTS[kind])])
@PLANT_SETTINGS
@given(histories, st.floats(0, 1))
def test_planted_anomaly_is_found(
    kind: str, name: str, params: tuple[int, int, int, int], where: float
) -> None:
    seed, n, keys, conc = params
    base = simulate(random.Random(seed), kind, n, keys, conc)
    hist = plant(base, PLANTS[kind][name], int(where * len(base)), seed)
    r = checker.check(hist, kind)
    assert r["valid"] is False and name in r["anomaly_types"], (name, r["anomaly_types"])
    assert r["anomalies"][name][0]["explanation"]


# ------------------------------------------------------------------ against brute force, on tiny histories


def chaotic(
    rng: random.Random, kind: str, n: int, keys: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A store that often reads an old snapshot: histories both valid and not. Returns (history, txns)."""
    txns = []
    for i in range(n):
        s = rng.uniform(0, 10)
        mops = [
            [R, rng.randrange(keys), None]
            if rng.random() < 0.5
            else [A if kind == "list-append" else W, rng.randrange(keys), 100 * i + j]
            for j in range(rng.randint(1, 3))
        ]
        r = rng.random()
        txns.append(
            {
                "s": s,
                "e": s + rng.uniform(0.1, 4),
                "p": i,
                "mops": mops,
                "fate": "fail" if r < 0.1 else "info" if r < 0.2 else "ok",
                "applied": rng.random() < 0.5,
            }
        )
    state: dict[int, Any] = {}
    snaps: list[dict[int, Any]] = []
    for t in sorted(txns, key=lambda t: rng.uniform(t["s"], t["e"])):
        snaps.append(_copy(state))
        view = _copy(rng.choice(snaps)) if rng.random() < 0.3 else _copy(state)
        real = t["fate"] == "ok" or (t["fate"] == "info" and t["applied"])
        t["out"] = []
        for m in t["mops"]:
            t["out"].append(_apply(view, kind, m))
            if m[0] != R and real:
                _apply(state, kind, m)
    events = sorted(
        [(t["s"], 0, t) for t in txns] + [(t["e"], 1, t) for t in txns if t["fate"] != "info"],
        key=lambda e: (e[0], e[1]),
    )
    hist = [
        {
            "index": i,
            "type": "invoke" if kind_ == 0 else t["fate"],
            "process": t["p"],
            "f": "txn",
            "value": t["out"] if kind_ == 1 and t["fate"] == "ok" else t["mops"],
        }
        for i, (_, kind_, t) in enumerate(events)
    ]
    return hist, txns


def _copy(state: dict[int, Any]) -> dict[int, Any]:
    return {k: list(v) if isinstance(v, list) else v for k, v in state.items()}


def strict_serializable(kind: str, txns: list[dict[str, Any]], realtime: bool = True) -> bool:
    """Brute force: some choice of the info transactions and some order (respecting real time unless
    `realtime` is False: plain serializability) replays every ok transaction's reads."""
    infos = [t for t in txns if t["fate"] == "info"]
    oks = [t for t in txns if t["fate"] == "ok"]
    for mask in range(1 << len(infos)):
        chosen = oks + [t for i, t in enumerate(infos) if mask >> i & 1]
        for perm in itertools.permutations(chosen):
            if (not realtime or _respects_realtime(perm)) and _replays(kind, perm):
                return True
    return False


def _check_boundary(kind: str, r: dict[str, Any], txns: list[dict[str, Any]]) -> None:
    """Every model the result rules out is really violated (checked for serializable and strict)."""
    ruled = set(r["not"]) | set(r["also_not"])
    if "serializable" in ruled:
        assert not strict_serializable(kind, txns, realtime=False), r["anomaly_types"]
    if "strict-serializable" in ruled:
        assert not strict_serializable(kind, txns), r["anomaly_types"]


def _respects_realtime(perm: tuple[dict[str, Any], ...]) -> bool:
    ends = [t["e"] if t["fate"] == "ok" else float("inf") for t in perm]
    return all(not ends[j] < perm[i]["s"] for i in range(len(perm)) for j in range(i + 1, len(perm)))


def _replays(kind: str, perm: tuple[dict[str, Any], ...]) -> bool:
    state: dict[int, Any] = {}
    for t in perm:
        for m in t["out"] if t["fate"] == "ok" else t["mops"]:
            if m[0] == R:
                if t["fate"] == "ok" and _apply(state, kind, m) != m:
                    return False
            else:
                _apply(state, kind, m)
    return True


tiny = st.tuples(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(1, 3))


@settings(max_examples=150, deadline=None)
@given(tiny)
def test_list_append_verdict_matches_brute_force(params: tuple[int, int, int]) -> None:
    """On tiny list-append histories the verdict is exactly strict serializability (valid or invalid), and
    each model the result rules out is really violated."""
    seed, n, keys = params
    hist, txns = chaotic(random.Random(seed), "list-append", n, keys)
    r = checker.check(hist, "list-append")
    if r["valid"] == "unknown":
        assert r["txns"]["ok"] == 0
    else:
        assert r["valid"] is strict_serializable("list-append", txns), r["anomaly_types"]
    _check_boundary("list-append", r, txns)


@settings(max_examples=150, deadline=None)
@given(tiny)
def test_rw_register_invalid_verdicts_are_right(params: tuple[int, int, int]) -> None:
    """Registers hide the order of blind writes, so `true` may miss a violation (as in Elle); `false`, and
    each model the result rules out, is never wrong."""
    seed, n, keys = params
    hist, txns = chaotic(random.Random(seed), "rw-register", n, keys)
    r = checker.check(hist, "rw-register")
    if r["valid"] is False:
        assert not strict_serializable("rw-register", txns), r["anomaly_types"]
    _check_boundary("rw-register", r, txns)
