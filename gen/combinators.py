"""Combinators that shape, choose between and merge generators: cycles, limits, transforms, random mixes,
the soonest of several, alternation, retrying until ok."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from faultline.core.ops import Op
from faultline.gen.base import Answer, Gen, _earliest_pending, _inert, _update_all, lift
from faultline.gen.context import PENDING, Context, Pending

# ---------------------------------------------------------------- shaping


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


def cycle(gen: Any, times: int | None = None) -> Gen:
    return Cycle(lift(gen), None, times)


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


def limit(n: int, gen: Any) -> Gen:
    return Limit(n, lift(gen))


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


def map_ops(fn: Callable[[Op], Op], gen: Any) -> Gen:
    return Map(fn, lift(gen))


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


def mix(*gens: Any) -> Gen:
    return Mix(tuple(lift(g) for g in gens))


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


def any_of(*gens: Any) -> Gen:
    return Any_(tuple(lift(g) for g in gens))


# ---------------------------------------------------------------- alternation and retries


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


def flip_flop(a: Any, b: Any) -> Gen:
    """Alternates one op of `a` and one of `b` (start, stop, start, ...) until either is exhausted."""
    return FlipFlop(lift(a), lift(b))


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
