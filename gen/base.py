"""The generator base class, `lift` (plain values as generators) and the leaves it builds: one op, an op
for ever, nothing, and generators one after another; with the helpers every combinator shares."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline.core.ops import Op
from faultline.gen.context import PENDING, Context, Pending, invocation

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


def once(op: Mapping[str, Any]) -> Gen:
    return Once(op)


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


def repeat(source: Mapping[str, Any] | Callable[[Context], Any]) -> Gen:
    return Repeat(source)


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


def seq(*gens: Any) -> Gen:
    return Seq(tuple(lift(g) for g in gens))


# ---------------------------------------------------------------- plain values as generators


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
