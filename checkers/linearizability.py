"""Linearizability checking: Wing & Gong's search with Lowe's refinements.

The search (see docs/checkers.md for the full story and the papers):
- P-compositionality: ops carrying `key` are split per key and each key is
  checked alone, because a history is linearizable iff each key's is.
- Events (calls and returns) sit in a doubly linked list in history order; the
  search linearizes the first pending call it can, lifts it out of the list,
  and backtracks when it meets the return of a call it has not linearized.
- A memo of configurations prunes every one seen before; bitsets are Python
  ints, states are interned to small ints and the transition of (op, state) is
  computed once and cached.
- Ops that cannot constrain anything (a read whose result is unknown) are
  dropped up front; ops that may never have happened (`info`) are optional (the
  search succeeds once every completed op is linearized), and identical ones are
  pooled into classes used in invocation order, with a dominance memo over how
  many of each class a configuration used.
- Observers (reads) are linearized as soon as they are legal, without branching.
- A time or memory limit turns into `valid: "unknown"`, never into a guess.

A C core (`faultline.checkers._wgl`) runs the same search on the same tables when it was
built; the pure-Python search is the reference and gives identical verdicts.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.api import History
from faultline.checkers.models import ANY, ILLEGAL, KV, CasRegister, Model, Register, freeze, get_model, thaw
from faultline.checkers.ops import BadOp
from faultline.core.native import extension

SEMANTICS = ("jepsen", "porcupine", "knossos")

C_ABI = 3  # the calling convention of checkers/_wgl.c this module speaks

# the optional compiled core; the Python search below is the reference
_wgl = extension("faultline.checkers._wgl", C_ABI)


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


def _client_pairs(history: History) -> list[list[Any]]:
    """Each client invocation with its completion, in invocation order, as [invoke position, invoke op,
    completion position, completion op] (the last two None for an op that never completed)."""
    pending: dict[Any, int] = {}  # process -> slot in pairs
    pairs: list[list[Any]] = []
    for pos, op in enumerate(history):
        proc = op.get("process")
        if proc == "nemesis":
            continue
        typ = op.get("type")
        if typ == "invoke":
            if proc in pending:
                raise BadOp(pos, f"process {proc!r} invokes again before its previous operation completed")
            pending[proc] = len(pairs)
            pairs.append([pos, op, None, None])
        elif typ in ("ok", "fail", "info"):
            i = pending.pop(proc, None)
            if i is None:
                raise BadOp(pos, f"a completion of process {proc!r} without an invocation")
            pairs[i][2] = pos
            pairs[i][3] = op
    return pairs


def prepare(
    history: History, model: Model, semantics: str = "jepsen"
) -> tuple[list[Partition], dict[str, int]]:
    """Pairs invocations with completions and applies the semantics; groups by key."""
    if semantics not in SEMANTICS:
        raise ValueError(f"unknown semantics {semantics!r}; choose one of {', '.join(SEMANTICS)}")
    stats = {"ops": 0, "dropped_fail": 0, "dropped_noop": 0, "open": 0}
    parts: dict[Any, list[Call]] = {}
    for inv_pos, inv, comp_pos, comp in _client_pairs(history):
        f = inv.get("f")
        ctype = comp.get("type") if comp else "info"
        if ctype == "ok":
            cval = comp.get("value") if comp else None
            value = cval if (cval is not None or _is_readish(model, f)) else inv.get("value")
            outcome = "ok"
        else:
            value = inv.get("value")
            outcome = "info" if ctype == "info" else "fail"
        problem = model.problem(f, value, outcome == "ok")
        if problem is not None:
            raise BadOp(comp_pos if outcome == "ok" else inv_pos, problem)
        if outcome == "fail" and (semantics != "porcupine" or _is_readish(model, f)):
            stats["dropped_fail"] += 1
            continue
        if semantics == "knossos" and outcome == "ok" and value is None and _is_readish(model, f):
            value = ANY
        else:
            value = freeze(value)
        if model.is_noop(f, value, outcome):
            stats["dropped_noop"] += 1
            continue
        required = outcome != "info"
        if not required:
            stats["open"] += 1
        key = freeze(inv.get("key"))
        calls = parts.setdefault(key, [])
        calls.append(
            Call(
                id=len(calls),
                f=f,
                value=value,
                outcome=outcome,
                invoke_index=inv_pos,
                complete_index=comp_pos if comp is not None and ctype != "info" else None,
                required=required,
                process=inv.get("process"),
                invoke=inv,
                completion=comp,
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
    required: list[int]  # bit 0: must be linearized; bit 1: an observer (identity wherever legal)
    states: list[Any]  # state id -> state
    state_ids: dict[Any, int]
    trans: list[dict[int, int]]  # op -> {state id -> next state id or -1}
    pool: list[int]  # open op -> its class of identical open ops, or -1
    rank: list[int]  # open op -> its position in its class (by invocation)
    pool_pos: list[int]  # pooled op -> how many listed events precede its invocation
    kv_put: list[bool | None] | None = None  # kv model: op is a put (True), append (False), else None
    kv_get: list[str | None] | None = None  # kv model: a completed get's value, else None


def build_tables(calls: list[Call], model: Model, init_state: Any) -> Tables:
    pools = _pools(calls)
    pool = pools["pool"]
    events: list[tuple[float, int, int]] = []  # (position, kind, op) kind: 0 return before 1 call at same pos
    inf = float("inf")
    for c in calls:
        if pool[c.id] >= 0:
            continue  # pooled ops live in their classes, not in the event list
        events.append((c.invoke_index, 1, c.id))
        events.append((c.complete_index if c.complete_index is not None else inf, 0, c.id))
    events.sort()
    positions = [e[0] for e in events]
    # A pooled op is callable while the first pending return's event number is >= its pool_pos.
    pool_pos = [bisect.bisect_left(positions, c.invoke_index) if pool[c.id] >= 0 else 0 for c in calls]
    return Tables(
        n=len(calls),
        ev_op=[e[2] for e in events],
        ev_call=[e[1] == 1 for e in events],
        required=[int(c.required) | (2 if model.is_observer(c.f, c.value, c.outcome) else 0) for c in calls],
        states=[init_state],
        state_ids={init_state: 0},
        trans=[{} for _ in calls],
        pool=pool,
        rank=pools["rank"],
        pool_pos=pool_pos,
        kv_put=[{"put": True, "write": True, "append": False}.get(c.f) for c in calls]
        if isinstance(model, KV)
        else None,
        kv_get=[
            c.value if c.f in ("get", "read") and c.outcome == "ok" and isinstance(c.value, str) else None
            for c in calls
        ]
        if isinstance(model, KV)
        else None,
    )


def _kv_dead(
    t: Tables, ns: int, curop: int, nxt: list[int], head: int, call_ev: list[int], min_put_pos: int
) -> int:
    """kv pruning (the same rule as the C core): after a put/append makes state `ns`, a completed get
    with no put able to precede it must read an extension of `ns`. Returns the get that rules the
    configuration out, or -1. Events are numbered in time order, so a call numbered below the first
    return is callable now; `min_put_pos` is the pool position of the earliest unused pooled put."""
    state = t.states[ns]
    kv_put, kv_get = t.kv_put, t.kv_get
    assert kv_put is not None and kv_get is not None
    pending = 0
    put_seen = False
    first_ret = -1
    e = nxt[head]
    while e >= 0:
        op = t.ev_op[e]
        if op != curop:
            g = kv_get[op]
            if t.ev_call[e]:
                if kv_put[op] is True:
                    put_seen = True
                elif first_ret < 0 and g is not None:
                    pending += 1
            else:
                if first_ret < 0:
                    first_ret = e
                if g is not None:
                    if not put_seen and min_put_pos > e and not g.startswith(state):
                        return op
                    if call_ev[op] < first_ret:
                        pending -= 1
                if pending <= 0:
                    return -1
        e = nxt[e]
    return -1


MAX_RANK = 60_000  # class sizes fit the C core's 16-bit counters; later ops stay unpooled


def _pools(calls: list[Call]) -> dict[str, list[int]]:
    """Groups never-completed ops into classes of identical ones (same f, value, outcome).

    Identical ops that never return are interchangeable: any linearization can be
    rewritten to use the first k of a class, in invocation order. So the search
    linearizes the k-th only after the (k-1)-th, a configuration records how many
    of each class it used instead of which, and a configuration that used no
    more of any class than another with the same other ops and state dominates it.
    This turns the 2**k subsets of k identical timed-out writes into k + 1 counts.
    """
    classes: dict[Any, int] = {}
    sizes: list[int] = []
    pool = [-1] * len(calls)
    rank = [0] * len(calls)
    for c in sorted(calls, key=lambda c: c.invoke_index):
        if c.required:
            continue
        try:
            k = (c.f, c.value, c.outcome)
            hash(k)
        except TypeError:
            continue
        cls = classes.setdefault(k, len(classes))
        if cls == len(sizes):
            sizes.append(0)
        if sizes[cls] >= MAX_RANK:
            continue
        pool[c.id], rank[c.id] = cls, sizes[cls]
        sizes[cls] += 1
    return {"pool": pool, "rank": rank}


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
                if r >= 1 << 24:
                    raise MemoryError("more than 2**24 distinct model states in one partition")
                self.t.states.append(ns)
                self.t.state_ids[ns] = r
        self.t.trans[op][sid] = r
        return r


class _Timeout(Exception):
    """The time or memory budget ran out; the message says which."""


@dataclass
class SearchResult:
    valid: bool | str
    steps: int
    memo: int
    best: list[int]  # the longest partial linearization (op ids)
    best_block: int  # the op whose return blocked it (-1 if none)
    best_states: list[int]  # state ids seen when blocked at the best depth


SHIFT = 24  # state ids < 2**24 (checked on intern): a memo key is (listed-op bits << SHIFT) | state


def search_py(
    t: Tables,
    step: _Stepper,
    deadline: float | None,
    slice_steps: int = 0,
    progress: list[int] | None = None,
) -> Iterator[SearchResult | None]:
    """Lowe's variant of Wing & Gong with a dominance memo; the reference implementation.

    Listed ops (calls and returns in a linked list, time order) are tried first; when the scan
    reaches the first pending return R (or the end), each class of pooled ops offers its next
    member if it was invoked before R; when none fits, the search backtracks. `cur` is a listed
    event (>= 0), -1 the end of the list, -2 "backtrack at once" (a dominated configuration),
    or -3 - c: "try pooled class c next".

    A generator: it yields None after every `slice_steps` steps (0: never) so that a
    driver can interleave partitions, and finally yields the result.
    """
    yield from _PySearch(t, step).run(deadline, slice_steps, progress)


def _link_events(t: Tables) -> tuple[list[int], list[int], list[int], list[int]]:
    """The event list as next/previous links (the sentinel head is event number len(ev_op)), the
    return event of each call event, and the call event of each op."""
    nev = len(t.ev_op)
    nxt = [*range(1, nev), -1, 0] if nev else [-1]
    prv = [nev, *range(0, nev - 1), -1] if nev else [-1]
    ret_of = [0] * nev
    call_ev = [0] * t.n
    for e in range(nev):
        if t.ev_call[e]:
            call_ev[t.ev_op[e]] = e
    for e in range(nev):
        if not t.ev_call[e]:
            ret_of[call_ev[t.ev_op[e]]] = e
    return nxt, prv, ret_of, call_ev


def _class_members(t: Tables) -> list[list[int]]:
    """The ops of each pooled class, in rank (invocation) order."""
    members: list[list[int]] = [[] for _ in range(max(t.pool, default=-1) + 1)]
    for op in sorted((op for op in range(t.n) if t.pool[op] >= 0), key=lambda op: t.rank[op]):
        members[t.pool[op]].append(op)
    return members


def _unlink(nxt: list[int], prv: list[int], e: int) -> None:
    """Takes event `e` out of the linked list; it keeps its own links, for `_relink`."""
    p, q = prv[e], nxt[e]
    nxt[p] = q
    if q != -1:
        prv[q] = p


def _relink(nxt: list[int], prv: list[int], e: int) -> None:
    """Puts event `e` back where `_unlink` took it from (undone in the reverse order)."""
    p, q = prv[e], nxt[e]
    nxt[p] = e
    if q != -1:
        prv[q] = e


def _undominated(doms: dict[int, list[int]], key: int, counts: int, guard: int) -> bool:
    """Whether no configuration seen with the same listed ops and state used at most `counts` of every
    pooled class; if so, `counts` joins the antichain kept for `key`."""
    vecs = doms.get(key)
    if vecs is None:
        doms[key] = [counts]
        return True
    cg = counts | guard
    for v in vecs:
        if (cg - v) & guard == guard:
            return False
    # Keep an antichain: drop the vectors the new one dominates.
    vecs[:] = [v for v in vecs if ((v | guard) - counts) & guard != guard]
    vecs.append(counts)
    return True


class _PySearch:
    """The state of one pure-Python search: the event list, the pooled classes, the memo, and the path
    so far, a stack of (event or -3 - class, state before, lim, blk, op)."""

    def __init__(self, t: Tables, step: _Stepper) -> None:
        self.t, self.step = t, step
        self.nev = len(t.ev_op)
        self.nxt, self.prv, self.ret_of, self.call_ev = _link_events(t)
        self.members = _class_members(t)
        nclasses = len(self.members)
        # Counts per class packed in one int, 17 bits a class (16 for the count, a guard bit above), so
        # "v <= counts in every class" is one subtraction: ((v | GUARD) - counts) & GUARD == GUARD.
        self.counts = 0
        self.cnt = [0] * nclasses  # the same counts, unpacked
        self.unit = [1 << (17 * c) for c in range(nclasses)]
        self.guard = sum(1 << (17 * c + 16) for c in range(nclasses))
        kv_put = t.kv_put
        self.put_classes = [
            c for c in range(nclasses) if kv_put is not None and kv_put[self.members[c][0]] is True
        ]
        self.seen: set[int] = set()
        self.doms: dict[int, list[int]] = {}  # (listed bits, state) -> antichain of count vectors
        self.stack: list[tuple[int, int, int, int, int]] = []
        self.bits = self.state = self.nconfigs = 0
        self.remaining = sum(r & 1 for r in t.required)
        # the longest partial linearization, the op whose return blocked it, and the states seen there
        self.best_len, self.best_block = -1, -1
        self.best: list[int] = []
        self.best_states: set[int] = set()

    def run(
        self, deadline: float | None, slice_steps: int, progress: list[int] | None
    ) -> Iterator[SearchResult | None]:
        t, nxt, members, cnt = self.t, self.nxt, self.members, self.cnt
        ev_op, ev_call, trans, pool_pos = t.ev_op, t.ev_call, t.trans, t.pool_pos
        kv_put, req, nclasses, nev = t.kv_put, t.required, len(members), self.nev
        state = self.state
        steps = 0
        cur = nxt[nev]
        lim = nev  # the first pending return's event number while trying pooled classes
        blk = -1  # the op of that return (the evidence's blocking op)
        while self.remaining:
            steps += 1
            if not steps & 0xFFF:
                if deadline is not None and time.monotonic() > deadline:
                    raise _Timeout("time")
                if slice_steps and not steps % slice_steps:
                    if progress is not None:
                        progress[0] = self.nconfigs
                    yield None
            if cur >= 0 and ev_call[cur]:
                op = ev_op[cur]
            elif cur >= -1:
                # The scan reached the first pending return (or the end): pooled classes next.
                lim, blk, cur = (cur, ev_op[cur], -3) if cur >= 0 else (nev, -1, -3)
                continue
            elif cur <= -3 and -3 - cur < nclasses:
                c = -3 - cur
                k = cnt[c]
                if k >= len(members[c]) or pool_pos[members[c][k]] > lim:
                    cur -= 1
                    continue
                op = members[c][k]
            else:
                # All candidates tried (or a dominated configuration): backtrack.
                if cur != -2 and len(self.stack) >= self.best_len:
                    self._note_best(len(self.stack), blk, state)
                if not self.stack:
                    best = self.best, self.best_block, sorted(self.best_states)
                    yield SearchResult(False, steps, self.nconfigs, *best)
                    return
                cur, lim, blk, state = self._pop()
                continue
            # Try to linearize `op` (listed event `cur`, or pooled class -3 - cur).
            ns = trans[op].get(state)
            if ns is None:
                ns = self.step(op, state)
            if ns >= 0 and kv_put is not None and kv_put[op] is not None and ns != state:
                ns = self._kv_check(op, ns)
            if ns >= 0:
                if self._push(cur, op, ns, lim, blk):
                    state, cur = ns, nxt[nev]
                    continue
                if req[op] & 2:
                    # A legal observer dominates its siblings: linearizing it here already failed.
                    cur = -2
                    continue
            cur = nxt[cur] if cur >= 0 else cur - 1
        yield SearchResult(True, steps, self.nconfigs, [entry[4] for entry in self.stack], -1, [state])

    def _push(self, cur: int, op: int, ns: int, lim: int, blk: int) -> bool:
        """Linearizes `op` (listed event `cur`, or the next of pooled class -3 - cur) into state `ns`,
        unless the memo holds the configuration or one that dominates it; says whether it did."""
        pooled = cur < 0
        counts = self.counts + self.unit[-3 - cur] if pooled else self.counts
        nb = self.bits if pooled else self.bits | (1 << op)
        key = (nb << SHIFT) | ns
        if not self.cnt:
            if key in self.seen:
                return False
            self.seen.add(key)
        elif not _undominated(self.doms, key, counts, self.guard):
            return False
        self.nconfigs += 1
        self.stack.append((cur, self.state, lim, blk, op))
        if pooled:
            self.cnt[-3 - cur] += 1
            self.counts = counts
        else:
            self.bits = nb
            # lift the call and its return out of the list
            _unlink(self.nxt, self.prv, cur)
            _unlink(self.nxt, self.prv, self.ret_of[cur])
        self.state = ns
        if self.t.required[op] & 1:
            self.remaining -= 1
        return True

    def _pop(self) -> tuple[int, int, int, int]:
        """Undoes the last linearization; returns where the scan resumes and the lim, blk and state
        restored."""
        e, self.state, lim, blk, op = self.stack.pop()
        if e >= 0:
            self.bits &= ~(1 << op)
            # put back the return, then the call (the reverse order of removal)
            _relink(self.nxt, self.prv, self.ret_of[e])
            _relink(self.nxt, self.prv, e)
            nextcur = self.nxt[e]
        else:
            self.cnt[-3 - e] -= 1
            self.counts -= self.unit[-3 - e]
            nextcur = e - 1
        req = self.t.required[op]
        if req & 1:
            self.remaining += 1
        # Popping an observer: its siblings are dominated, keep backtracking.
        return (-2 if req & 2 else nextcur), lim, blk, self.state

    def _note_best(self, depth: int, block: int, state: int, extra_op: int = -1) -> None:
        """Keeps the longest partial linearization (the stack, and `extra_op` if given), the op whose
        return blocked it, and every state seen at that depth."""
        if depth > self.best_len:
            self.best_len, self.best_block, self.best_states = depth, block, set()
            self.best = [entry[4] for entry in self.stack] + ([extra_op] if extra_op >= 0 else [])
        if depth == self.best_len:
            self.best_states.add(state)

    def _kv_check(self, op: int, ns: int) -> int:
        """`ns`, or -1 when the kv pruning rules it out; then the get that does is the evidence, as if
        the search had got that far."""
        members, cnt = self.members, self.cnt
        min_put = self.nev + 1  # no pooled put left
        if self.put_classes:
            pool_pos = self.t.pool_pos
            min_put = min(
                (pool_pos[members[c][cnt[c]]] for c in self.put_classes if cnt[c] < len(members[c])),
                default=min_put,
            )
        culprit = _kv_dead(self.t, ns, op, self.nxt, self.nev, self.call_ev, min_put)
        if culprit < 0:
            return ns
        self._note_best(len(self.stack) + 1, culprit, ns, op)
        return -1


def _call_json(c: Call) -> dict[str, Any]:
    out = {
        "process": c.process,
        "f": c.f,
        "value": None if c.value is ANY else thaw(c.value),
        "outcome": c.outcome,
        "invoke_index": c.invoke.get("index", c.invoke_index),
    }
    if c.completion is not None:
        out["complete_index"] = c.completion.get("index", c.complete_index)
    if "key" in c.invoke:
        out["key"] = c.invoke["key"]
    return out


class _Runner:
    """One partition's search, advanced in slices so partitions can be interleaved."""

    def __init__(
        self, part: Partition, model: Model, init_state: Any, deadline: float | None, use_c: bool | None
    ):
        if use_c and _wgl is None:
            raise RuntimeError("the C core faultline.checkers._wgl is not built")
        self.part, self.model = part, model
        self.t = build_tables(part.calls, model, init_state)
        self.stepper = _Stepper(part.calls, model, self.t)
        self.engine = "c" if (use_c is None or use_c) and _wgl is not None else "python"
        self.deadline = deadline
        self.decode = lambda sid: model.describe_state(self.t.states[sid])
        if self.engine == "c":
            t = self.t
            native = native_spec(model, part.calls, init_state)
            if native is not None:
                spec, values = native
                if spec[0] == 1:
                    self.decode = lambda sid: model.describe_state(values[sid])
                else:
                    self.decode = lambda sid: self._c.kv_string(sid).decode("utf-8")
            self._c = _wgl.Search(
                t.ev_op,
                t.ev_call,
                t.required,
                t.pool,
                t.rank,
                t.pool_pos,
                self.stepper,
                spec if native else None,
            )
        else:
            self._progress = [0]
            self._gen = search_py(self.t, self.stepper, deadline, slice_steps=SLICE, progress=self._progress)

    def memory(self) -> int:
        """Bytes the search holds (exact for the C core, an estimate for the Python memo)."""
        if self.engine == "c":
            return int(self._c.memory())
        return self._progress[0] * (64 + self.t.n // 8)

    def advance(self) -> SearchResult | None:
        """Runs a slice of steps; the result when the search finished, else None."""
        if self.engine == "c":
            raw = self._c.run(C_SLICE)
            if raw is None:
                if self.deadline is not None and time.monotonic() > self.deadline:
                    raise _Timeout("time")
                return None
            return SearchResult(*raw)
        return next(self._gen)

    def report(self, res: SearchResult) -> dict[str, Any]:
        part = self.part
        out: dict[str, Any] = {
            "valid": res.valid,
            "key": thaw(part.key),
            "ops": len(part.calls),
            "steps": res.steps,
            "configs": res.memo,
            "engine": self.engine,
        }
        if res.valid is False:
            calls = part.calls
            lin = [calls[i] for i in res.best]
            out["op"] = _call_json(calls[res.best_block]) if res.best_block >= 0 else None
            out["linearized"] = [_call_json(c) for c in lin]
            out["final_states"] = sorted((thaw(self.decode(s)) for s in res.best_states), key=repr)
            out["previous_ok"] = _call_json(lin[-1]) if lin else None
        return out


_OUTCOME = {"ok": 0, "fail": 1, "info": 2}


def native_spec(model: Model, calls: list[Call], init_state: Any) -> tuple[tuple[Any, ...], list[Any]] | None:
    """Integer tables for the C core's built-in models, or None if the model or a value doesn't fit.

    Register family: states are value ids (values interned by equality, as Python compares them).
    kv: strings are interned as UTF-8 bytes and states are a trie of appends inside the C core.
    """
    okind: list[int] = []
    oa: list[int] = []
    ob: list[int] = []
    oout = [_OUTCOME[c.outcome] for c in calls]
    values: list[Any] = []
    ids: dict[Any, int] = {}

    def vid(v: Any) -> int:
        if v is ANY:
            return -1
        i = ids.get(v)
        if i is None:
            i = ids[v] = len(values)
            values.append(v)
        return i

    try:
        if isinstance(model, Register | CasRegister):
            init = vid(init_state)
            for c in calls:
                if c.f == "read":
                    okind.append(1)
                    oa.append(vid(c.value))
                    ob.append(0)
                elif c.f == "write":
                    okind.append(2)
                    oa.append(vid(c.value))
                    ob.append(0)
                elif c.f == "cas" and isinstance(model, CasRegister):
                    old, new = c.value
                    okind.append(3)
                    oa.append(vid(old))
                    ob.append(vid(new))
                else:
                    return None
            return (1, init, okind, oa, ob, oout, []), values
        if isinstance(model, KV):
            if not isinstance(init_state, str):
                return None
            init = vid(init_state)
            for c in calls:
                kind = {"get": 4, "read": 4, "put": 5, "write": 5, "append": 6}.get(c.f)
                if kind is None or not (c.value is ANY or isinstance(c.value, str)):
                    return None
                okind.append(kind)
                oa.append(vid(c.value))
                ob.append(0)
            return (2, init, okind, oa, ob, oout, [v.encode("utf-8") for v in values]), values
    except (TypeError, ValueError):  # unhashable or malformed values: let the generic path report them
        return None
    return None


SLICE = 1 << 12  # steps per partition per turn when interleaving (Python search)
C_SLICE = 1 << 11  # the same for the C core: cheap turns find a fast-failing key sooner


def _interleave(runners: list[_Runner], limit: float | None, results: list[dict[str, Any]]) -> dict | None:
    """Advances the partitions' searches a slice each in turn, appending each finished one's report to
    `results`; returns the first failing report (None if every one passed). Raises _Timeout("memory")
    when the searches together hold more than `limit` bytes."""
    active = list(runners)
    while active:
        still = []
        for r in active:
            res = r.advance()
            if res is None:
                if limit is not None and sum(x.memory() for x in active) > limit:
                    raise _Timeout("memory")
                still.append(r)
                continue
            rep = r.report(res)
            results.append(rep)
            if res.valid is False:
                return rep
        active = still
    return None


def check(
    history: History,
    model: str | Model = "cas-register",
    time_limit: float | None = None,
    semantics: str = "jepsen",
    init: Any = None,
    use_c: bool | None = None,
    max_memory_mb: float | None = 2048,
) -> dict[str, Any]:
    """Is `history` linearizable with respect to `model`?

    Returns `{"valid": True|False|"unknown", ...evidence}`. Per-key partitions are
    searched interleaved, a slice of steps each in turn, so one cheap bad key ends
    the check without waiting for an expensive good one. `time_limit` (seconds)
    bounds the whole check; running out yields "unknown", and so does a search whose
    memo outgrows `max_memory_mb` (None: no limit). `use_c`: None picks the C core
    if built, False forces the Python search, True requires the C core.
    """
    m = get_model(model)
    start = time.monotonic()
    deadline = start + time_limit if time_limit is not None else None
    parts, stats = prepare(history, m, semantics)
    init_state = m.init(init)
    runners = [_Runner(p, m, init_state, deadline, use_c) for p in parts]
    results: list[dict[str, Any]] = []
    gave_up: str | None = None
    try:
        failure = _interleave(runners, max_memory_mb * 2**20 if max_memory_mb is not None else None, results)
    except _Timeout as exc:
        failure, gave_up = None, str(exc)
    valid = False if failure is not None else ("unknown" if gave_up else True)
    engine = runners[0].engine if runners else ("c" if _wgl is not None and use_c is not False else "python")
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
        "engine": engine,
        "elapsed_s": round(time.monotonic() - start, 6),
    }
    if failure is not None:
        out["failure"] = {
            k: v for k, v in failure.items() if k not in ("valid", "engine", "steps", "configs")
        }
    if valid == "unknown":
        out["error"] = (
            f"time limit of {time_limit} s reached before a verdict"
            if gave_up == "time"
            else f"memory limit of {max_memory_mb} MiB reached before a verdict"
        )
    return out


def prefix_states(result: Mapping[str, Any], init: Any = None) -> list[Any] | None:
    """The model state after each op of the longest linearized prefix a failing `check` found.

    The result keeps only the prefix (`failure.linearized`); replaying it through the model gives the
    states a reader steps through on the counterexample page. None when the result has no prefix, or
    a step is illegal (the prefix was checked against another `init`), or the model is unknown.
    """
    failure = result.get("failure")
    if not isinstance(failure, Mapping) or not isinstance(failure.get("linearized"), list):
        return None
    try:
        model = get_model(str(result.get("model", "cas-register")))
    except ValueError:  # a model this version does not know
        return None
    state = model.init(init)
    out: list[Any] = []
    for c in failure["linearized"]:
        f, outcome = c.get("f"), c.get("outcome", "ok")
        value = freeze(c.get("value"))
        nxt = model.step(state, f, value, outcome)
        if nxt is ILLEGAL and c.get("value") is None and f in model.read_only:
            nxt = model.step(state, f, ANY, outcome)  # a read recorded as unknown (knossos semantics)
        if nxt is ILLEGAL:
            return None
        state = nxt
        out.append(model.describe_state(state))
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
        try:
            return check(
                history,
                model=o.get("model", self.model),
                time_limit=o.get("time_limit", self.time_limit),
                semantics=o.get("semantics", self.semantics),
                init=o.get("init", self.init),
            )
        except BadOp as exc:  # a history the model cannot judge: no verdict either way
            return {"valid": "unknown", "error": f"op {exc.position}: {exc}"}
