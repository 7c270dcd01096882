"""set: unique adds and, as Jepsen's set-full does, reads of the whole set while the faults run (one every
`read_interval` seconds, default 1), then a final read after healing.

Checked (checkers/set.py) for lost elements (acknowledged, then missing from every later read), stale ones
(missing from some read that began after they were known, then back), unexpected ones (never added),
duplicates, and adds of unknown outcome that turned up (recovered). Reading during the run times a loss
from the read that first proves it, not from the final read after the heal and the quiet period.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.workloads.api import Workload
from faultline.workloads.common import LazyChecker, TableClient, at_rate


class SetClient(TableClient):
    table = "set"

    def apply(self, test: Run, op: Op) -> Op:
        if op["f"] == "add":
            v = op["value"]
            self.conn.put(self.tbl(test), f"e{v:09d}", v)
            return {**op, "type": "ok"}
        if op["f"] == "read":
            rows = self.conn.scan(self.tbl(test))
            values = rows.values() if isinstance(rows, Mapping) else [r[1] for r in rows]
            return {**op, "type": "ok", "value": sorted(int(v) for v in values)}
        raise ValueError(f"set: unknown op {op['f']!r}")


@dataclass(frozen=True)
class UniqueAdds(gen.Gen):
    """add 0, add 1, ...: a pure generator whose state is the next element."""

    next: int = 0

    def op(self, ctx: gen.Context) -> gen.Answer:
        thread = ctx.some_free_thread()
        if thread is None:
            return gen.PENDING, self
        return gen.invocation({"f": "add", "value": self.next}, ctx, thread), replace(
            self, next=self.next + 1
        )


READ = {"f": "read", "value": None}


def workload(opts: Mapping[str, Any]) -> Workload:
    g = at_rate(UniqueAdds(), opts)
    interval = float(opts.get("read_interval", 1.0))
    if interval > 0:
        # reads first: on a tie any_of takes the first, and the adds are always ready
        g = gen.any_of(gen.delay(interval, gen.repeat(READ)), g)
    return Workload(
        client=SetClient(),
        generator=g,
        final_generator=gen.until_ok(gen.delay(1.0, gen.repeat(READ)), attempts=30),
        checker=LazyChecker("set"),
    )
