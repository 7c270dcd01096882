"""Linearizability checking: Wing & Gong's search with Lowe's refinements.

The search (see docs/checkers.md for the full story and the papers):
- P-compositionality: ops carrying `key` are split per key and each key is
  checked alone, because a history is linearizable iff each key's is.
- Events (calls and returns) sit in a doubly linked list in history order; the
  search linearizes the first pending call it can, lifts it out of the list,
  and backtracks when it meets the return of a call it has not linearized.
- A memo of (linearized bitset, model state) prunes every configuration seen
  before; bitsets are Python ints, states are interned to small ints and the
  transition of (op, state) is computed once and cached.
- Ops that cannot constrain anything (a read whose result is unknown) are
  dropped up front; ops that may never have happened (`info`) are optional: the
  search succeeds once every completed op is linearized.
- A time limit turns into `valid: "unknown"`, never into a guess.

A C core (`checkers._wgl`) runs the same search on the same tables when it was
built; the pure-Python search is the reference and gives identical verdicts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.api import History, merge_valid
from checkers.models import ANY, ILLEGAL, Model, get_model

SEMANTICS = ("jepsen", "porcupine", "knossos")

try:  # the optional compiled core; the Python search below is the reference
    from checkers import _wgl  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _wgl = None


@dataclass
class Call:
    """One operation as the search sees it."""

    id: int
    f: str
    value: Any
    outcome: str  # ok | fail | info
    invoke_index: int
    complete_index: int | None  # None: never completed (open to the end)
    required: bool
    process: Any = None
    invoke: dict[str, Any] = field(default_factory=dict)
    completion: dict[str, Any] | None = None


@dataclass
class Partition:
    key: Any
    calls: list[Call]


def _is_readish(model: Model, f: str) -> bool:
    return f in model.read_only


def prepare(
    history: History, model: Model, semantics: str = "jepsen"
) -> tuple[list[Partition], dict[str, int]]:
    """Pairs invocations with completions and applies the semantics; groups by key."""
    if semantics not in SEMANTICS:
        raise ValueError(f"unknown semantics {semantics!r}; choose one of {', '.join(SEMANTICS)}")
    pending: dict[Any, dict[str, Any]] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    slot: dict[int, int] = {}
    for pos, op in enumerate(history):
        proc = op.get("process")
        if proc == "nemesis":
            continue
        typ = op.get("type")
        if typ == "invoke":
            if proc in pending:  # a second invoke without completion: the first stays open
                prev = pending.pop(proc)
                del slot[id(prev)]
            op = dict(op)
            op["_pos"] = pos
            pending[proc] = op
            slot[id(op)] = len(pairs)
            pairs.append((op, None))
        elif typ in ("ok", "fail", "info"):
            inv = pending.pop(proc, None)
            if inv is None:
                continue
            comp = dict(op)
            comp["_pos"] = pos
            pairs[slot.pop(id(inv))] = (inv, comp)
    stats = {"ops": 0, "dropped_fail": 0, "dropped_noop": 0, "open": 0}
    parts: dict[Any, list[Call]] = {}
    for inv, comp in pairs:
        f = inv.get("f")
        ctype = comp.get("type") if comp else "info"
        if ctype == "ok":
            cval = comp.get("value") if comp else None
            value = cval if (cval is not None or _is_readish(model, f)) else inv.get("value")
            outcome = "ok"
        else:
            value = inv.get("value")
            outcome = "info" if ctype == "info" else "fail"
        if outcome == "fail":
            if semantics != "porcupine" or _is_readish(model, f):
                stats["dropped_fail"] += 1
                continue
        if semantics == "knossos" and outcome == "ok" and value is None and _is_readish(model, f):
            value = ANY
        if model.is_noop(f, value, outcome):
            stats["dropped_noop"] += 1
            continue
        required = outcome != "info"
        if not required:
            stats["open"] += 1
        key = inv.get("key")
        calls = parts.setdefault(key, [])
        calls.append(
            Call(
                id=len(calls),
                f=f,
                value=value,
                outcome=outcome,
                invoke_index=inv["_pos"],
                complete_index=comp["_pos"] if comp and ctype != "info" else None,
                required=required,
                process=inv.get("process"),
                invoke={k: v for k, v in inv.items() if k != "_pos"},
                completion={k: v for k, v in comp.items() if k != "_pos"} if comp else None,
            )
        )
        stats["ops"] += 1
    return [Partition(k, c) for k, c in parts.items()], stats


@dataclass
class Tables:
    """Integer form of one partition: events, transition cache and interned states."""

    n: int
    ev_op: list[int]  # event -> op id
    ev_call: list[bool]  # event is a call
    required: list[bool]
    states: list[Any]  # state id -> state
    state_ids: dict[Any, int]
    trans: list[dict[int, int]]  # op -> {state id -> next state id or -1}


def build_tables(calls: list[Call], model: Model, init_state: Any) -> Tables:
    events: list[tuple[float, int, int]] = []  # (position, kind, op) kind: 0 return before 1 call at same pos
    inf = float("inf")
    for c in calls:
        events.append((c.invoke_index, 1, c.id))
        events.append((c.complete_index if c.complete_index is not None else inf, 0, c.id))
    events.sort()
    return Tables(
        n=len(calls),
        ev_op=[e[2] for e in events],
        ev_call=[e[1] == 1 for e in events],
        required=[c.required for c in calls],
        states=[init_state],
        state_ids={init_state: 0},
        trans=[{} for _ in calls],
    )


class _Stepper:
    """Lazily computes op x state transitions, interning new states."""

    def __init__(self, calls: list[Call], model: Model, t: Tables) -> None:
        self.calls, self.model, self.t = calls, model, t

    def __call__(self, op: int, sid: int) -> int:
        c = self.calls[op]
        ns = self.model.step(self.t.states[sid], c.f, c.value, c.outcome)
        if ns is ILLEGAL:
            r = -1
        else:
            r = self.t.state_ids.get(ns, -1)
            if r < 0:
                r = len(self.t.states)
                self.t.states.append(ns)
                self.t.state_ids[ns] = r
        self.t.trans[op][sid] = r
        return r


class _Timeout(Exception):
    pass


@dataclass
class SearchResult:
    valid: bool | str
    steps: int
    memo: int
    best: list[int]  # the longest partial linearization (op ids)
    best_block: int  # the op whose return blocked it (-1 if none)
    best_states: list[int]  # state ids seen when blocked at the best depth


def search_py(t: Tables, step: _Stepper, deadline: float | None) -> SearchResult:
    """Lowe's variant of Wing & Gong with a (bitset, state) memo; the reference implementation."""
    nev = len(t.ev_op)
    head = nev  # sentinel
    nxt = [*list(range(1, nev)), -1, 0]
    prv = [head, *list(range(0, nev - 1)), -1]
    if nev == 0:
        return SearchResult(True, 0, 0, [], -1, [])
    # Map call event -> return event.
    ret_of = [0] * nev
    call_ev = [0] * t.n
    for e in range(nev):
        if t.ev_call[e]:
            call_ev[t.ev_op[e]] = e
    for e in range(nev):
        if not t.ev_call[e]:
            ret_of[call_ev[t.ev_op[e]]] = e
    ev_op, ev_call, trans = t.ev_op, t.ev_call, t.trans
    remaining = sum(t.required)
    req = t.required
    seen: set[int] = set()
    stack: list[tuple[int, int]] = []  # (call event, state before)
    bits = 0
    state = 0
    steps = 0
    best_len = -1
    best: list[int] = []
    best_block = -1
    best_states: set[int] = set()
    SHIFT = 24  # state ids < 2**24 (checked on intern)
    cur = nxt[head]
    while True:
        if remaining == 0:
            return SearchResult(True, steps, len(seen), [ev_op[e] for e, _ in stack], -1, [state])
        steps += 1
        if deadline is not None and not steps & 0x3FFF and time.monotonic() > deadline:
            raise _Timeout
        if cur != -1 and ev_call[cur]:
            op = ev_op[cur]
            ns = trans[op].get(state)
            if ns is None:
                ns = step(op, state)
            if ns >= 0:
                nb = bits | (1 << op)
                key = (nb << SHIFT) | ns
                if key not in seen:
                    seen.add(key)
                    stack.append((cur, state))
                    bits = nb
                    state = ns
                    # lift the call and its return out of the list
                    r = ret_of[cur]
                    p, q = prv[cur], nxt[cur]
                    nxt[p] = q
                    if q != -1:
                        prv[q] = p
                    p, q = prv[r], nxt[r]
                    nxt[p] = q
                    if q != -1:
                        prv[q] = p
                    if req[op]:
                        remaining -= 1
                    cur = nxt[head]
                    continue
            cur = nxt[cur]
            continue
        # A return of an op not yet linearized (or the end): backtrack.
        if len(stack) >= best_len:
            if len(stack) > best_len:
                best_len = len(stack)
                best = [ev_op[e] for e, _ in stack]
                best_block = ev_op[cur] if cur != -1 else -1
                best_states = set()
            best_states.add(state)
        if not stack:
            return SearchResult(False, steps, len(seen), best, best_block, sorted(best_states))
        cur, state = stack.pop()
        op = ev_op[cur]
        bits &= ~(1 << op)
        if req[op]:
            remaining += 1
        # unlift: reinsert return then call (reverse order of removal)
        r = ret_of[cur]
        p, q = prv[r], nxt[r]
        nxt[p] = r
        if q != -1:
            prv[q] = r
        p, q = prv[cur], nxt[cur]
        nxt[p] = cur
        if q != -1:
            prv[q] = cur
        cur = nxt[cur]


def _call_json(c: Call) -> dict[str, Any]:
    out = {
        "process": c.process,
        "f": c.f,
        "value": None if c.value is ANY else c.value,
        "outcome": c.outcome,
        "invoke_index": c.invoke.get("index", c.invoke_index),
    }
    if c.completion is not None:
        out["complete_index"] = c.completion.get("index", c.complete_index)
    if "key" in c.invoke:
        out["key"] = c.invoke["key"]
    return out


def check_partition(
    part: Partition, model: Model, init_state: Any, deadline: float | None, use_c: bool | None = None
) -> dict[str, Any]:
    """Checks one key's calls; returns valid plus evidence."""
    t = build_tables(part.calls, model, init_state)
    stepper = _Stepper(part.calls, model, t)
    engine = "python"
    try:
        if (use_c is None or use_c) and _wgl is not None:
            engine = "c"
            raw = _wgl.search(t.ev_op, t.ev_call, t.required, t.n, t.trans, stepper, deadline)
            res = SearchResult(*raw)
        else:
            if use_c:
                raise RuntimeError("the C core checkers._wgl is not built")
            res = search_py(t, stepper, deadline)
    except _Timeout:
        return {"valid": "unknown", "key": part.key, "ops": len(part.calls), "engine": engine, "error": "time limit"}
    out: dict[str, Any] = {
        "valid": res.valid,
        "key": part.key,
        "ops": len(part.calls),
        "steps": res.steps,
        "configs": res.memo,
        "engine": engine,
    }
    if res.valid is False:
        calls = part.calls
        lin = [calls[i] for i in res.best]
        out["op"] = _call_json(calls[res.best_block]) if res.best_block >= 0 else None
        out["linearized"] = [_call_json(c) for c in lin]
        out["final_states"] = [model.describe_state(t.states[s]) for s in res.best_states]
        out["previous_ok"] = _call_json(lin[-1]) if lin else None
    return out


def check(
    history: History,
    model: str | Model = "cas-register",
    time_limit: float | None = None,
    semantics: str = "jepsen",
    init: Any = None,
    use_c: bool | None = None,
) -> dict[str, Any]:
    """Is `history` linearizable with respect to `model`?

    Returns `{"valid": True|False|"unknown", ...evidence}`; per-key partitions are
    checked independently when ops carry `key`. `time_limit` (seconds) bounds the
    whole check; running out yields "unknown". `use_c`: None picks the C core if
    built, False forces the Python search, True requires the C core.
    """
    m = get_model(model)
    start = time.monotonic()
    deadline = start + time_limit if time_limit is not None else None
    parts, stats = prepare(history, m, semantics)
    init_state = m.init(init)
    results = []
    failures = []
    for part in parts:
        r = check_partition(part, m, init_state, deadline, use_c)
        results.append(r)
        if r["valid"] is False:
            failures.append(r)
            break  # one bad key is enough: the history is not linearizable
    valid = merge_valid(r["valid"] for r in results)
    out: dict[str, Any] = {
        "valid": valid,
        "model": m.name,
        "semantics": semantics,
        "ops": stats["ops"],
        "partitions": len(parts),
        "dropped": {"fail": stats["dropped_fail"], "unconstrained": stats["dropped_noop"]},
        "open_ops": stats["open"],
        "steps": sum(r.get("steps", 0) for r in results),
        "configs": sum(r.get("configs", 0) for r in results),
        "engine": results[0]["engine"] if results else ("c" if _wgl is not None and use_c is not False else "python"),
        "elapsed_s": round(time.monotonic() - start, 6),
    }
    if failures:
        f = failures[0]
        out["failure"] = {k: v for k, v in f.items() if k not in ("valid", "engine", "steps", "configs")}
    if valid == "unknown":
        out["error"] = "time limit reached before a verdict"
    return out


class Linearizable:
    """Checker-protocol wrapper: `Linearizable(model="cas-register").check(test, history, opts)`.

    `opts` (or the test dict) may override `model`, `time_limit`, `semantics`, `init`.
    """

    def __init__(
        self,
        model: str | Model = "cas-register",
        time_limit: float | None = None,
        semantics: str = "jepsen",
        init: Any = None,
    ) -> None:
        self.model, self.time_limit, self.semantics, self.init = model, time_limit, semantics, init

    def check(self, test: Mapping[str, Any], history: History, opts: Mapping[str, Any]) -> dict[str, Any]:
        o = {**(opts or {})}
        return check(
            history,
            model=o.get("model", self.model),
            time_limit=o.get("time_limit", self.time_limit),
            semantics=o.get("semantics", self.semantics),
            init=o.get("init", self.init),
        )
