"""The context a generator is asked with: the time, the threads and which are free, each thread's process,
and the run's seeded randomness; and `invocation`, which turns an op template into an operation."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from faultline.core.ops import Op, Process

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


def invocation(op: Mapping[str, Any], ctx: Context, thread: Thread) -> Op:
    """`op` as an invocation by `thread`'s current process, due now unless it names its own time. `op` is
    any mapping of an op's fields (a workload's template need not be typed as an `Op`)."""
    out = cast(Op, {"type": "invoke", **op})
    out["process"] = ctx.processes[thread]
    out.setdefault("time", ctx.time)
    return out
