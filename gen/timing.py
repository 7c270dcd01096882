"""Combinators that act on time: a pause, a deadline, and spacing between operations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faultline.core.ops import Op
from faultline.gen.base import Answer, Gen, _inert, lift
from faultline.gen.context import NS, Context, Pending


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


def sleep(seconds: float) -> Gen:
    return Sleep(seconds)


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


def time_limit(seconds: float, gen: Any) -> Gen:
    return TimeLimit(seconds, lift(gen))


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


def stagger(dt: float, gen: Any) -> Gen:
    return Stagger(dt, lift(gen))


class Delay(_Spaced):
    """Exactly `dt` seconds between operations (a fixed rate, unlike `Stagger`)."""

    def _gap_ns(self, ctx: Context) -> int:
        return int(self.dt * NS)


def delay(dt: float, gen: Any) -> Gen:
    return Delay(dt, lift(gen))
