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

The package's modules: `gen/context.py` the context and `invocation`; `gen/base.py` the `Gen` base, `lift`
and the leaves (`once`, `repeat`, `seq`); `gen/timing.py` the combinators of time (`sleep`, `time_limit`,
`stagger`, `delay`); `gen/combinators.py` shaping, choice and merging (`cycle`, `limit`, `map_ops`, `mix`,
`any_of`, `flip_flop`, `until_ok`); `gen/threads.py` the combinators of threads (`clients`, `nemesis`,
`each_thread`, `synchronize`, `phases`, `independent`); `gen/simulation.py` `simulate`. This module only
re-exports them.
"""

from faultline.gen.base import Answer, Gen, Once, Repeat, Seq, Void, lift, once, repeat, seq, soonest
from faultline.gen.combinators import (
    Any_,
    Cycle,
    FlipFlop,
    Limit,
    Map,
    Mix,
    UntilOk,
    any_of,
    cycle,
    flip_flop,
    limit,
    map_ops,
    mix,
    until_ok,
)
from faultline.gen.context import NEMESIS, NS, PENDING, Context, Pending, Thread, invocation
from faultline.gen.simulation import simulate
from faultline.gen.threads import (
    EachThread,
    Independent,
    OnThreads,
    Synchronize,
    clients,
    each_thread,
    independent,
    nemesis,
    phases,
    synchronize,
)
from faultline.gen.timing import Delay, Sleep, Stagger, TimeLimit, delay, sleep, stagger, time_limit

__all__ = [
    "NEMESIS",
    "NS",
    "PENDING",
    "Answer",
    "Any_",
    "Context",
    "Cycle",
    "Delay",
    "EachThread",
    "FlipFlop",
    "Gen",
    "Independent",
    "Limit",
    "Map",
    "Mix",
    "OnThreads",
    "Once",
    "Pending",
    "Repeat",
    "Seq",
    "Sleep",
    "Stagger",
    "Synchronize",
    "Thread",
    "TimeLimit",
    "UntilOk",
    "Void",
    "any_of",
    "clients",
    "cycle",
    "delay",
    "each_thread",
    "flip_flop",
    "independent",
    "invocation",
    "lift",
    "limit",
    "map_ops",
    "mix",
    "nemesis",
    "once",
    "phases",
    "repeat",
    "seq",
    "simulate",
    "sleep",
    "soonest",
    "stagger",
    "synchronize",
    "time_limit",
    "until_ok",
]
