"""Combinators that look at threads: routing to clients or the nemesis, a copy per thread, waiting for
every thread (phases), and groups of threads that each work one key at a time (independent keys)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from faultline.core.ops import Op
from faultline.gen.base import Answer, Gen, Seq, _earliest_pending, _inert, lift, soonest
from faultline.gen.context import NEMESIS, PENDING, Context, Pending, Thread

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


# ---------------------------------------------------------------- per thread and all threads


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


def each_thread(gen: Any) -> Gen:
    return EachThread(lift(gen))


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


def synchronize(gen: Any) -> Gen:
    return Synchronize(lift(gen))


def phases(*gens: Any) -> Gen:
    """Each phase starts once every operation of the previous one has completed."""
    return Seq(tuple(Synchronize(lift(g)) for g in gens))


# ---------------------------------------------------------------- independent keys


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


def independent(
    group_size: int, gen_for_key: Callable[[Any], Any], key_of: Callable[[int], Any] | None = None
) -> Gen:
    return Independent(group_size, lambda k: lift(gen_for_key(k)), key_of or (lambda i: f"k{i}"))
