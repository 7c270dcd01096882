"""Generators: pure, composable values that say which operation happens next, on which worker, and when.

A generator never performs I/O and never reads a clock. It is asked for its next operation with a
`Context` (the current time in nanoseconds since the run began, the workers that are free, the process
number of each worker, and the run's seeded random generator) and answers one of:

- `None`: it is exhausted;
- `(Pending(until), gen)`: nothing right now; ask again after `until` (ns) or after any completion;
- `(op, gen)`: the operation `op` (an `Op`, faultline.core.ops: `process`, `time`, `f`, ...) and the generator
  that follows it.

Because a generator is an immutable value, asking twice with the same context gives the same answer,
and the interpreter may drop an answer (e.g. when a completion arrives before a future op is due) and
ask the old generator again. That is what lets the same generator drive a live run and a simulated
clock in the tests (`simulate`). The ideas (a generator is a value asked with a context, ops carry
their due time, routing to client and nemesis threads, independent keys) follow Jepsen's generator
design; the code is Faultline's own.

Workers are called threads here: client threads are the ints `0..concurrency-1`, the nemesis thread is
`"nemesis"`. Client thread `t` first runs as process `t`; when an operation ends `info` its process is
retired and the thread continues as process `t + concurrency` (see `Context.with_retired`).
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from faultline.core.ops import Op, OpType, Process

Thread = int | str
NEMESIS: str = "nemesis"
NS = 1_000_000_000


@dataclass(frozen=True)
class Pending:
    """Nothing to do now; `until` is the time (ns) worth asking again at, or None for 'after a completion'."""

    until: int | None = None


PENDING = Pending()


@dataclass(frozen=True)
class Context:
    """What a generator may look at. `free` and `threads` are restricted by routing combinators.

    The interpreter derives a new context several times per operation, so the derivations below build
    it directly rather than through `dataclasses.replace` (several times slower), and `by_process`, the
    inverse of `processes` (with the mapping it was built from, so a replaced `processes` is never read
    through a stale inverse), is carried along so that `thread_of` is a lookup, not a scan."""

    time: int
    threads: frozenset[Thread]
    free: frozenset[Thread]
    processes: Mapping[Thread, Process]
    rng: random.Random = field(compare=False, hash=False)
    concurrency: int = 0
    by_process: tuple[Mapping[Thread, Process], Mapping[Any, Thread]] | None = field(
        default=None, compare=False, hash=False, repr=False
    )

    @staticmethod
    def initial(concurrency: int, rng: random.Random, nemesis: bool = True, time: int = 0) -> Context:
        threads: set[Thread] = set(range(concurrency))
        if nemesis:
            threads.add(NEMESIS)
        procs: dict[Thread, Process] = {t: t for t in threads}
        return Context(time, frozenset(threads), frozenset(threads), procs, rng, concurrency, _inverse(procs))

    def _derive(self, time: int, threads: frozenset[Thread], free: frozenset[Thread]) -> Context:
        """This context at `time` with `threads` and `free`; processes, randomness and the inverse carried."""
        return Context(time, threads, free, self.processes, self.rng, self.concurrency, self.by_process)

    def restrict(self, threads: Iterable[Thread]) -> Context:
        keep = frozenset(threads) & self.threads
        return self._derive(self.time, keep, self.free & keep)

    def at(self, time: int) -> Context:
        return self._derive(time, self.threads, self.free)

    def busy(self, thread: Thread) -> Context:
        return self._derive(self.time, self.threads, self.free - {thread})

    def freed(self, thread: Thread) -> Context:
        return self._derive(self.time, self.threads, self.free | {thread})

    def with_retired(self, thread: Thread) -> Context:
        """The thread's process ended `info`: it continues under a fresh process number."""
        procs = dict(self.processes)
        p = procs[thread]
        procs[thread] = p + self.concurrency if isinstance(thread, int) and isinstance(p, int) else thread
        return Context(self.time, self.threads, self.free, procs, self.rng, self.concurrency, _inverse(procs))

    def client_threads(self) -> list[int]:
        return sorted(t for t in self.threads if isinstance(t, int))

    def some_free_thread(self) -> Thread | None:
        """A free thread chosen with the run's randomness (the lowest one would starve the others)."""
        if not self.free:
            return None
        ordered = _ORDERED.get(self.free)
        if ordered is None:
            ordered = sorted(self.free, key=lambda t: (isinstance(t, str), t if isinstance(t, int) else 0))
            if sum(isinstance(t, str) for t in ordered) <= 1:  # the order of several names is the set's own
                if len(_ORDERED) >= 4096:
                    _ORDERED.clear()
                _ORDERED[self.free] = ordered
        return ordered[0] if len(ordered) == 1 else self.rng.choice(ordered)

    def thread_of(self, process: object) -> Thread | None:
        cache = self.by_process
        if cache is None or cache[0] is not self.processes:
            cache = _inverse(self.processes)
            object.__setattr__(self, "by_process", cache)
        try:
            return cache[1].get(process)
        except TypeError:  # an unhashable process names no thread
            return None


# A set of free threads -> its threads in the order `some_free_thread` draws from (a sort per op otherwise).
_ORDERED: dict[frozenset[Thread], list[Thread]] = {}


def _inverse(processes: Mapping[Thread, Process]) -> tuple[Mapping[Thread, Process], dict[Any, Thread]]:
    """`processes` and its inverse, process -> thread; the first thread wins if two share a process (as a
    scan in order would)."""
    inv: dict[Any, Thread] = {}
    for t, p in processes.items():
        inv.setdefault(p, t)
    return processes, inv


Answer = tuple[Op | Pending, "Gen"] | None


class Gen:
    """Base of every generator: `op(ctx)` answers, `update(ctx, event)` sees invocations and completions."""

    def op(self, ctx: Context) -> Answer:
        raise NotImplementedError

    def update(self, ctx: Context, event: Op) -> Gen:
        return self

    def _inert_now(self) -> bool:
        """Whether `update` hands back this generator itself whatever the event (as the base's does)."""
        return type(self).update is Gen.update


def _inert(g: Gen) -> bool:
    """`g._inert_now()`, remembered on `g` (a generator is an immutable value, so the answer holds).
    Combinators skip updating an inert part: that would only hand it back, after a walk down its tree
    on every invocation and completion."""
    d = getattr(g, "__dict__", None)
    if d is not None:
        known = d.get("_inert")
        if known is not None:
            return bool(known)
    inert = g._inert_now()
    if d is not None:
        d["_inert"] = inert  # not a field: equality, hashing and repr ignore it
    return inert


def invocation(op: Mapping[str, Any], ctx: Context, thread: Thread) -> Op:
    """`op` as an invocation by `thread`'s current process, due now unless it names its own time. `op` is
    any mapping of an op's fields (a workload's template need not be typed as an `Op`)."""
    out = cast(Op, {"type": "invoke", **op})
    out["process"] = ctx.processes[thread]
    out.setdefault("time", ctx.time)
    return out


def soonest(a: Answer, b: Answer) -> int:
    """Which of two answers comes first: 0 for a, 1 for b (ops before pendings, earlier before later)."""
    if a is None:
        return 1
    if b is None:
        return 0
    oa, ob = a[0], b[0]
    if isinstance(oa, Pending):
        return 1 if not isinstance(ob, Pending) else 0
    if isinstance(ob, Pending):
        return 0
    return 0 if oa["time"] <= ob["time"] else 1


def _earliest_pending(a: Pending, b: Pending) -> Pending:
    if a.until is None:
        return b
    if b.until is None:
        return a
    return Pending(min(a.until, b.until))


def _update_all(gens: tuple[Gen, ...], ctx: Context, event: Op) -> tuple[Gen, ...] | None:
    """Each of `gens` updated, or None when none changed: the caller then stays as it is rather than
    allocate an equal copy of itself (most updates change nothing)."""
    after = [g.update(ctx, event) for g in gens]
    return None if all(map(operator.is_, after, gens)) else tuple(after)


# ---------------------------------------------------------------- leaves


@dataclass(frozen=True)
class Once(Gen):
    """One operation, on any free thread, then exhausted."""

    template: Mapping[str, Any]

    def op(self, ctx: Context) -> Answer:
        thread = ctx.some_free_thread()
        if thread is None:
            return PENDING, self
        return invocation(self.template, ctx, thread), Void()


@dataclass(frozen=True)
class Void(Gen):
    """Exhausted from the start."""

    def op(self, ctx: Context) -> Answer:
        return None


@dataclass(frozen=True)
class Repeat(Gen):
    """The same op, or `fn(ctx)` (an op dict, or None to stop), for ever."""

    source: Mapping[str, Any] | Callable[[Context], Mapping[str, Any] | None]

    def op(self, ctx: Context) -> Answer:
        thread = ctx.some_free_thread()
        if thread is None:
            return PENDING, self
        template = self.source(ctx) if callable(self.source) else self.source
        if template is None:
            return None
        return invocation(template, ctx, thread), self


@dataclass(frozen=True)
class Seq(Gen):
    """Generators one after another, without waiting for outstanding ops (see `phases` for that)."""

    gens: tuple[Gen, ...]

    def op(self, ctx: Context) -> Answer:
        gens = self.gens
        while gens:
            ans = gens[0].op(ctx)
            if ans is not None:
                o, g = ans
                return o, Seq((g, *gens[1:]))
            gens = gens[1:]
        return None

    def update(self, ctx: Context, event: Op) -> Gen:
        if not self.gens:
            return self
        return Seq((self.gens[0].update(ctx, event), *self.gens[1:]))


@dataclass(frozen=True)
class Cycle(Gen):
    """Restarts `gen` from its original value each time it is exhausted (at most `times`, None = ever)."""

    gen: Gen
    current: Gen | None = None
    times: int | None = None

    def op(self, ctx: Context) -> Answer:
        cur = self.current if self.current is not None else self.gen
        times = self.times
        for _ in range(2):  # an exhausted restart that is immediately exhausted again ends the cycle
            ans = cur.op(ctx)
            if ans is not None:
                o, g = ans
                return o, Cycle(self.gen, g, times)
            if times is not None:
                times -= 1
                if times <= 0:
                    return None
            cur = self.gen
        return None

    def update(self, ctx: Context, event: Op) -> Gen:
        if self.current is None:
            return self
        return Cycle(self.gen, self.current.update(ctx, event), self.times)


@dataclass(frozen=True)
class Sleep(Gen):
    """Nothing for `seconds`, counted from the first time it is asked, then exhausted."""

    seconds: float
    deadline: int | None = None

    def op(self, ctx: Context) -> Answer:
        deadline = self.deadline if self.deadline is not None else ctx.time + int(self.seconds * NS)
        if ctx.time >= deadline:
            return None
        return Pending(deadline), Sleep(self.seconds, deadline)


# ---------------------------------------------------------------- shaping


@dataclass(frozen=True)
class Limit(Gen):
    """At most `n` operations."""

    n: int
    gen: Gen

    def op(self, ctx: Context) -> Answer:
        if self.n <= 0:
            return None
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        o, g = ans
        if isinstance(o, Pending):
            return o, Limit(self.n, g)
        return o, Limit(self.n - 1, g)

    def update(self, ctx: Context, event: Op) -> Gen:
        g = self.gen.update(ctx, event)
        return self if g is self.gen else Limit(self.n, g)

    def _inert_now(self) -> bool:
        return _inert(self.gen)


@dataclass(frozen=True)
class TimeLimit(Gen):
    """Operations due before `seconds` after the first time it is asked; then exhausted."""

    seconds: float
    gen: Gen
    deadline: int | None = None

    def op(self, ctx: Context) -> Answer:
        deadline = self.deadline if self.deadline is not None else ctx.time + int(self.seconds * NS)
        if ctx.time >= deadline:
            return None
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        o, g = ans
        if isinstance(o, Pending):
            until = deadline if o.until is None else min(o.until, deadline)
            return Pending(until), TimeLimit(self.seconds, g, deadline)
        if o["time"] >= deadline:
            return None
        return o, TimeLimit(self.seconds, g, deadline)

    def update(self, ctx: Context, event: Op) -> Gen:
        g = self.gen.update(ctx, event)
        return self if g is self.gen else TimeLimit(self.seconds, g, self.deadline)

    def _inert_now(self) -> bool:
        return _inert(self.gen)


@dataclass(frozen=True)
class _Spaced(Gen):
    """Operations no closer together than a gap `_gap_ns` chooses after each one (Stagger, Delay)."""

    dt: float
    gen: Gen
    next_time: int | None = None

    def _gap_ns(self, ctx: Context) -> int:
        raise NotImplementedError

    def op(self, ctx: Context) -> Answer:
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        o, g = ans
        if isinstance(o, Pending):
            return o, type(self)(self.dt, g, self.next_time)
        nt = self.next_time if self.next_time is not None else ctx.time
        o = {**o, "time": max(o["time"], nt)}
        return o, type(self)(self.dt, g, o["time"] + self._gap_ns(ctx))

    def update(self, ctx: Context, event: Op) -> Gen:
        return type(self)(self.dt, self.gen.update(ctx, event), self.next_time)


class Stagger(_Spaced):
    """Spaces operations by a uniformly random gap in [0, 2*dt): on average one every `dt` seconds."""

    def _gap_ns(self, ctx: Context) -> int:
        return int(ctx.rng.uniform(0, 2 * self.dt) * NS)


class Delay(_Spaced):
    """Exactly `dt` seconds between operations (a fixed rate, unlike `Stagger`)."""

    def _gap_ns(self, ctx: Context) -> int:
        return int(self.dt * NS)


@dataclass(frozen=True)
class Map(Gen):
    """Transforms each operation with `fn(op) -> op`."""

    fn: Callable[[Op], Op]
    gen: Gen

    def op(self, ctx: Context) -> Answer:
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        o, g = ans
        return (o if isinstance(o, Pending) else self.fn(o)), Map(self.fn, g)

    def update(self, ctx: Context, event: Op) -> Gen:
        return Map(self.fn, self.gen.update(ctx, event))


# ---------------------------------------------------------------- choice and merging


@dataclass(frozen=True)
class _Alongside(Gen):
    """A combinator whose parts run side by side: every event reaches each of them."""

    gens: tuple[Gen, ...]

    def update(self, ctx: Context, event: Op) -> Gen:
        if _inert(self):
            return self
        after = _update_all(self.gens, ctx, event)
        return self if after is None else type(self)(after)

    def _inert_now(self) -> bool:
        return all(_inert(g) for g in self.gens)


@dataclass(frozen=True)
class Mix(_Alongside):
    """A random choice among generators for each operation; exhausted ones drop out."""

    def op(self, ctx: Context) -> Answer:
        gens = list(self.gens)
        while gens:
            i = ctx.rng.randrange(len(gens)) if len(gens) > 1 else 0
            ans = gens[i].op(ctx)
            if ans is None:
                del gens[i]
                continue
            o, g = ans
            if g is gens[i] and len(gens) == len(self.gens):
                return o, self  # nothing changed (e.g. a mix of repeats)
            gens[i] = g
            return o, Mix(tuple(gens))
        return None


@dataclass(frozen=True)
class Any_(_Alongside):
    """Whichever generator has the soonest operation; exhausted when all are (e.g. clients + nemesis)."""

    def op(self, ctx: Context) -> Answer:
        best: Answer = None
        best_time = 0
        best_i = -1
        pending: Pending | None = None
        alive = False
        answers = [g.op(ctx) for g in self.gens]
        for i, ans in enumerate(answers):
            if ans is None:
                continue
            alive = True
            o = ans[0]
            if isinstance(o, Pending):
                pending = o if pending is None else _earliest_pending(pending, o)
                continue
            if best is None or o["time"] < best_time:  # `soonest`: the earlier op, the first on a tie
                best, best_i, best_time = ans, i, o["time"]
        if not alive:
            return None
        if best is None:
            # Only pendings: keep the original generators (a Pending answer may carry a started deadline).
            nxt = tuple(a[1] for a in answers if a is not None)
            return pending or PENDING, self._with(nxt)
        after: list[Gen] = []
        for i, ans in enumerate(answers):
            if ans is None:
                continue
            after.append(ans[1] if i == best_i or isinstance(ans[0], Pending) else self.gens[i])
        return best[0], self._with(tuple(after))

    def _with(self, gens: tuple[Gen, ...]) -> Any_:
        """`Any_(gens)`, or this very generator when `gens` are its own (nothing changed)."""
        if len(gens) == len(self.gens) and all(map(operator.is_, gens, self.gens)):
            return self
        return Any_(gens)


# ---------------------------------------------------------------- routing


@dataclass(frozen=True)
class OnThreads(Gen):
    """Restricts a generator to the threads for which `pred(thread)` is true.

    `pred` is a function of the thread alone, so which of a set of threads it keeps is worked out once
    per set and remembered in `kept`, which the successors of this generator share."""

    pred: Callable[[Thread], bool]
    gen: Gen
    kept: dict[frozenset[Thread], frozenset[Thread]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def _ctx(self, ctx: Context) -> Context:
        keep = self.kept.get(ctx.threads)
        if keep is None:
            pred = self.pred
            keep = frozenset(t for t in ctx.threads if pred(t))
            if len(self.kept) >= 64:  # contexts restricted in many ways: keep the memo small
                self.kept.clear()
            self.kept[ctx.threads] = keep
        return ctx._derive(ctx.time, keep, ctx.free & keep)

    def op(self, ctx: Context) -> Answer:
        sub = self._ctx(ctx)
        if not sub.threads:
            return None
        ans = self.gen.op(sub)
        if ans is None:
            return None
        o, g = ans
        return o, (self if g is self.gen else OnThreads(self.pred, g, self.kept))

    def update(self, ctx: Context, event: Op) -> Gen:
        if _inert(self.gen):
            return self
        thread = ctx.thread_of(event.get("process"))
        if thread is None or not self.pred(thread):
            return self
        g = self.gen.update(self._ctx(ctx), event)
        return self if g is self.gen else OnThreads(self.pred, g, self.kept)

    def _inert_now(self) -> bool:
        return _inert(self.gen)


def _is_client(t: Thread) -> bool:
    return isinstance(t, int)


def _is_nemesis(t: Thread) -> bool:
    return t == NEMESIS


def clients(gen: Any) -> Gen:
    """Only client threads run this generator."""
    return OnThreads(_is_client, lift(gen))


def nemesis(gen: Any) -> Gen:
    """Only the nemesis thread runs this generator."""
    return OnThreads(_is_nemesis, lift(gen))


@dataclass(frozen=True)
class EachThread(Gen):
    """An independent copy of `gen` on every thread (e.g. each worker does its own final read)."""

    gen: Gen
    per_thread: tuple[tuple[Thread, Gen | None], ...] | None = None

    def _states(self, ctx: Context) -> dict[Thread, Gen | None]:
        if self.per_thread is None:
            return dict.fromkeys(sorted(ctx.threads, key=str), self.gen)
        return dict(self.per_thread)

    def op(self, ctx: Context) -> Answer:
        states = self._states(ctx)
        best: Answer = None
        best_t: Thread | None = None
        pending: Pending | None = None
        for t, g in states.items():
            if g is None:
                continue
            if t not in ctx.free:
                pending = pending or PENDING
                continue
            ans = g.op(ctx.restrict([t]))
            if ans is None:
                states[t] = None
                continue
            if isinstance(ans[0], Pending):
                pending = ans[0] if pending is None else _earliest_pending(pending, ans[0])
                states[t] = ans[1]  # keeps the deadline a sleep started
                continue
            if best is None or soonest(best, ans) == 1:
                best, best_t = ans, t
        if best is None or best_t is None:  # (best_t is set whenever best is)
            if all(g is None for g in states.values()):
                return None
            return pending or PENDING, EachThread(self.gen, tuple(states.items()))
        states[best_t] = best[1]
        return best[0], EachThread(self.gen, tuple(states.items()))

    def update(self, ctx: Context, event: Op) -> Gen:
        t = ctx.thread_of(event.get("process"))
        states = self._states(ctx)
        g = states.get(t) if t is not None else None
        if t is None or g is None:
            return self
        states[t] = g.update(ctx.restrict([t]), event)
        return EachThread(self.gen, tuple(states.items()))


@dataclass(frozen=True)
class Synchronize(Gen):
    """Waits until every thread of the context is free, then behaves as `gen`."""

    gen: Gen
    started: bool = False

    def op(self, ctx: Context) -> Answer:
        if not self.started and ctx.free != ctx.threads:
            return PENDING, self
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        return ans[0], Synchronize(ans[1], True)

    def update(self, ctx: Context, event: Op) -> Gen:
        return Synchronize(self.gen.update(ctx, event), self.started)


@dataclass(frozen=True)
class Independent(Gen):
    """Groups of `group_size` client threads; each group works one key at a time with `gen_for_key(key)`,
    and when that generator is exhausted the group moves to a fresh key. Ops carry `key`.

    This is what keeps linearizability checking cheap: the history splits into short per-key histories.
    """

    group_size: int
    gen_for_key: Callable[[Any], Gen]
    key_of: Callable[[int], Any] = lambda i: f"k{i}"
    next_key: int = 0
    groups: tuple[tuple[tuple[Thread, ...], Any, Gen | None], ...] | None = None

    def _groups(self, ctx: Context) -> tuple[list[tuple[tuple[Thread, ...], Any, Gen | None]], int]:
        if self.groups is not None:
            return list(self.groups), self.next_key
        threads = [t for t in sorted(ctx.threads, key=str) if isinstance(t, int)]
        threads.sort()
        size = max(1, self.group_size)
        groups: list[tuple[tuple[Thread, ...], Any, Gen | None]] = []
        nk = self.next_key
        for i in range(0, len(threads), size):
            members: tuple[Thread, ...] = tuple(threads[i : i + size])
            if len(members) < size and groups:
                # Fold a short tail into the last group rather than leave a lonely worker per key.
                m, k, g = groups[-1]
                groups[-1] = (m + members, k, g)
                continue
            key = self.key_of(nk)
            groups.append((members, key, self.gen_for_key(key)))
            nk += 1
        return groups, nk

    def op(self, ctx: Context) -> Answer:
        groups, nk = self._groups(ctx)
        if not groups:
            return None
        best: Op | None = None  # the soonest op (the first on a tie, as `soonest` says), not yet keyed
        best_next: Gen | None = None
        best_i = -1
        pending: Pending | None = None
        for i, (members, key, g) in enumerate(groups):
            sub = ctx.restrict(members)
            for _ in range(2):  # at most one fresh key per group per ask
                ans = g.op(sub) if g is not None else None
                if ans is not None:
                    break
                key = self.key_of(nk)
                nk += 1
                g = self.gen_for_key(key)
            groups[i] = (members, key, g)
            if ans is None:
                continue
            o, ng = ans
            if isinstance(o, Pending):
                pending = o if pending is None else _earliest_pending(pending, o)
                groups[i] = (members, key, ng)
                continue
            if best is None or o["time"] < best["time"]:
                best, best_next, best_i = o, ng, i
        if best is None:
            return pending or PENDING, self._with(nk, tuple(groups))
        members, key, _ = groups[best_i]
        groups[best_i] = (members, key, best_next)
        return cast(Op, {**best, "key": key}), self._with(nk, tuple(groups))

    def _with(
        self, next_key: int, groups: tuple[tuple[tuple[Thread, ...], Any, Gen | None], ...]
    ) -> Independent:
        """`replace(self, next_key=..., groups=...)`, built directly (this is on every operation's path)."""
        return Independent(self.group_size, self.gen_for_key, self.key_of, next_key, groups)

    def update(self, ctx: Context, event: Op) -> Gen:
        if self.groups is None:
            return self
        t = ctx.thread_of(event.get("process"))
        groups = list(self.groups)
        changed = False
        for i, (members, key, g) in enumerate(groups):
            if t in members and g is not None and event.get("key") == key and not _inert(g):
                ng = g.update(ctx.restrict(members), event)
                if ng is not g:
                    groups[i] = (members, key, ng)
                    changed = True
        return self._with(self.next_key, tuple(groups)) if changed else self


# ---------------------------------------------------------------- constructors (the public vocabulary)


def lift(x: Gen | Mapping[str, Any] | Callable[[Context], Any] | Sequence[Any] | None) -> Gen:
    """A dict is one op; a function is an op per call, for ever; a list runs its items in order."""
    if x is None:
        return Void()
    if isinstance(x, Gen):
        return x
    if isinstance(x, Mapping):
        return Once(x)
    if callable(x):
        return Repeat(x)
    if isinstance(x, Sequence) and not isinstance(x, str):
        return Seq(tuple(lift(i) for i in x))
    raise TypeError(f"cannot make a generator from {x!r}")


def once(op: Mapping[str, Any]) -> Gen:
    return Once(op)


def repeat(source: Mapping[str, Any] | Callable[[Context], Any]) -> Gen:
    return Repeat(source)


def seq(*gens: Any) -> Gen:
    return Seq(tuple(lift(g) for g in gens))


def cycle(gen: Any, times: int | None = None) -> Gen:
    return Cycle(lift(gen), None, times)


def sleep(seconds: float) -> Gen:
    return Sleep(seconds)


def limit(n: int, gen: Any) -> Gen:
    return Limit(n, lift(gen))


def time_limit(seconds: float, gen: Any) -> Gen:
    return TimeLimit(seconds, lift(gen))


def stagger(dt: float, gen: Any) -> Gen:
    return Stagger(dt, lift(gen))


def delay(dt: float, gen: Any) -> Gen:
    return Delay(dt, lift(gen))


def mix(*gens: Any) -> Gen:
    return Mix(tuple(lift(g) for g in gens))


def any_of(*gens: Any) -> Gen:
    return Any_(tuple(lift(g) for g in gens))


def each_thread(gen: Any) -> Gen:
    return EachThread(lift(gen))


def synchronize(gen: Any) -> Gen:
    return Synchronize(lift(gen))


def phases(*gens: Any) -> Gen:
    """Each phase starts once every operation of the previous one has completed."""
    return Seq(tuple(Synchronize(lift(g)) for g in gens))


def map_ops(fn: Callable[[Op], Op], gen: Any) -> Gen:
    return Map(fn, lift(gen))


def independent(
    group_size: int, gen_for_key: Callable[[Any], Any], key_of: Callable[[int], Any] | None = None
) -> Gen:
    return Independent(group_size, lambda k: lift(gen_for_key(k)), key_of or (lambda i: f"k{i}"))


def flip_flop(a: Any, b: Any) -> Gen:
    """Alternates one op of `a` and one of `b` (start, stop, start, ...) until either is exhausted."""
    return FlipFlop(lift(a), lift(b))


@dataclass(frozen=True)
class FlipFlop(Gen):
    a: Gen
    b: Gen

    def op(self, ctx: Context) -> Answer:
        ans = self.a.op(ctx)
        if ans is None:
            return None
        o, g = ans
        if isinstance(o, Pending):
            return o, FlipFlop(g, self.b)
        return o, FlipFlop(self.b, g)


# ---------------------------------------------------------------- simulation


def simulate(
    gen: Any,
    concurrency: int,
    seed: int = 0,
    latency_s: float | Callable[[Op], float] = 0.0,
    complete: Callable[[Op], OpType] | None = None,
    nemesis_thread: bool = True,
    max_ops: int = 100_000,
    max_time_s: float = 3600.0,
) -> list[Op]:
    """Runs `gen` on a simulated clock and returns the history (invocations and completions).

    Each invocation completes after `latency_s` (a number or a function of the op) with the type
    `complete(op)` returns (default "ok"); `info` retires the process, as in a live run.
    """
    rng = random.Random(seed)
    ctx = Context.initial(concurrency, rng, nemesis=nemesis_thread)
    g: Gen = lift(gen)
    history: list[Op] = []
    inflight: list[tuple[int, int, Op, Thread]] = []  # (done_time, seq, op, thread)
    seqno = 0
    deadline = int(max_time_s * NS)
    while len(history) < max_ops:
        ans = g.op(ctx)
        next_done = min(inflight)[0] if inflight else None
        if ans is None:
            if not inflight:
                break
            o: Op | Pending = PENDING
        else:
            o, g2 = ans
            if isinstance(o, Pending):
                g = g2  # a pending answer only starts deadlines (sleeps, time limits): keep them
        if not isinstance(o, Pending) and (next_done is None or o["time"] <= next_done):
            t = max(ctx.time, o["time"])
            ctx = ctx.at(t)
            due: Op = {**o, "time": t}
            thread = ctx.thread_of(due["process"])
            assert thread is not None and thread in ctx.free, f"op on a busy or unknown thread: {due}"
            history.append(due)
            ctx = ctx.busy(thread)
            g = g2.update(ctx, due)
            lat = latency_s(due) if callable(latency_s) else latency_s
            seqno += 1
            inflight.append((t + int(lat * NS), seqno, due, thread))
            continue
        # Advance the clock: to the next completion, or to when the generator wants to be asked again.
        wake = o.until if isinstance(o, Pending) else o["time"]
        if next_done is not None and (wake is None or next_done <= wake):
            inflight.sort()
            done_t, _, inv, thread = inflight.pop(0)
            ctx = ctx.at(max(ctx.time, done_t))
            typ: OpType = complete(inv) if complete else "ok"
            comp: Op = {**inv, "type": typ, "time": ctx.time}
            history.append(comp)
            ctx = ctx.freed(thread)
            g = g.update(ctx, comp)
            if typ == "info":
                ctx = ctx.with_retired(thread)
        elif wake is not None:
            ctx = ctx.at(max(ctx.time, wake))
        else:
            break  # pending for ever with nothing in flight: the generator is stuck
        if ctx.time > deadline:
            break
    for i, op in enumerate(history):
        op["index"] = i
    return history


@dataclass(frozen=True)
class UntilOk(Gen):
    """Runs `gen` until one of its operations completes ok (e.g. a final read that must succeed once),
    at most `attempts` operations, one at a time."""

    gen: Gen
    attempts: int = 20
    done: bool = False
    waiting: Any = None  # the process of the op in flight

    def op(self, ctx: Context) -> Answer:
        if self.done or self.attempts <= 0:
            return None
        if self.waiting is not None:
            return PENDING, self
        ans = self.gen.op(ctx)
        if ans is None:
            return None
        o, g = ans
        if isinstance(o, Pending):
            return o, replace(self, gen=g)
        return o, replace(self, gen=g, attempts=self.attempts - 1)

    def update(self, ctx: Context, event: Op) -> Gen:
        if event["type"] == "invoke":
            return replace(self, waiting=event.get("process"))
        if event.get("process") != self.waiting:
            return self
        return replace(self, waiting=None, done=event["type"] == "ok", gen=self.gen.update(ctx, event))


def until_ok(gen: Any, attempts: int = 20) -> Gen:
    return UntilOk(lift(gen), attempts)
