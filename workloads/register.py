"""register: independent keys, each a read / write / cas register; linearizability checked per key.

Groups of workers work one key at a time for a bounded number of operations, then move to a fresh key,
so each key's history is short and the checker's search stays cheap (P-compositionality).

The first worker of each group of three or more only reads. A worker that writes follows the tablet's
leader as soon as a write stalls, so with every worker mixing reads and writes no client is left talking
to a deposed leader when the new leader acknowledges a write; a reader keeps the client's cached leader
as long as its reads are answered, which is how a stale read from an isolated leader becomes visible
(KUDU-1188's class). A correct cluster refuses those reads, so the reader moves on like the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.workloads.api import Workload
from faultline.workloads.common import KVClient, LazyChecker, at_rate


class RegisterClient(KVClient):
    table = "register"

    def setup(self, test: Run) -> None:
        self.ensure_table(test)

    def apply(self, test: Run, op: Op) -> Op:
        key, f = op["key"], op["f"]
        if f == "read":
            return {**op, "type": "ok", "value": self.conn.get(self.tbl(test), key)}
        if f == "write":
            self.conn.put(self.tbl(test), key, op["value"])
            return {**op, "type": "ok"}
        if f == "cas":
            old, new = op["value"]
            return {**op, "type": "ok" if self.conn.cas(self.tbl(test), key, old, new) else "fail"}
        raise ValueError(f"register: unknown op {f!r}")


def _read(ctx: gen.Context) -> Op:
    return {"f": "read", "value": None}


def _write(ctx: gen.Context) -> Op:
    return {"f": "write", "value": ctx.rng.randrange(5)}


def _cas(ctx: gen.Context) -> Op:
    return {"f": "cas", "value": [ctx.rng.randrange(5), ctx.rng.randrange(5)]}


def workload(opts: Mapping[str, Any]) -> Workload:
    concurrency = int(opts.get("concurrency", 10))
    group = int(opts.get("key_group_size", max(1, min(5, concurrency // 2 or 1))))
    per_key = int(opts.get("ops_per_key", 200))
    readers = int(opts.get("readers_per_group", 1 if group >= 3 else 0))

    def reader(t: gen.Thread) -> bool:
        return isinstance(t, int) and t % group < readers

    def for_key(key: str) -> gen.Gen:
        mixed = gen.mix(gen.repeat(_read), gen.repeat(_write), gen.repeat(_cas))
        if readers <= 0:
            return gen.limit(per_key, mixed)
        return gen.limit(
            per_key,
            gen.any_of(
                gen.OnThreads(reader, gen.repeat(_read)), gen.OnThreads(lambda t: not reader(t), mixed)
            ),
        )

    return Workload(
        client=RegisterClient(),
        generator=at_rate(gen.independent(group, for_key), opts),
        final_generator=None,
        checker=LazyChecker("linearizable", model="cas-register"),
    )
