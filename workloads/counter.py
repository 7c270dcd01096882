"""counter: increments (`add` of 1 to 5) and reads of one counter; checked by `counter` (checkers/counter.py):
every read lies between the acknowledged increments that completed before it began and every increment
attempted before it ended.

The bundled client speaks the key-value API (workloads/common.py): an increment reads the counter and
compare-and-sets it, again while another client's write wins the race, until the op's deadline; every
failed compare-and-set wrote nothing, so an increment that never won is `fail`. A DB may supply its own
client (Redis: INCRBY).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.workloads.api import Workload
from faultline.workloads.common import KVClient, LazyChecker, at_rate

KEY = "counter"
READ = {"f": "read", "value": None}


class CounterClient(KVClient):
    table = "counter"

    def setup(self, test: Run) -> None:
        self.ensure_table(test)
        self.setup_write(test, lambda conn: conn.put(self.tbl(test), KEY, 0))

    def apply(self, test: Run, op: Op) -> Op:
        if op["f"] == "read":
            return {**op, "type": "ok", "value": int(self.conn.get(self.tbl(test), KEY))}
        if op["f"] == "add":
            deadline = time.monotonic() + float(test.spec.op_timeout_s)
            while time.monotonic() < deadline:
                current = int(self.conn.get(self.tbl(test), KEY))
                if self.conn.cas(self.tbl(test), KEY, current, current + int(op["value"])):
                    return {**op, "type": "ok"}
            return {**op, "type": "fail", "error": "every compare-and-set lost the race"}
        raise ValueError(f"counter: unknown op {op['f']!r}")


def _add(ctx: gen.Context) -> Op:
    return {"f": "add", "value": ctx.rng.randint(1, 5)}


def workload(opts: Mapping[str, Any]) -> Workload:
    g: gen.Gen = gen.mix(gen.repeat(_add), gen.repeat(READ))
    return Workload(
        client=CounterClient(),
        generator=at_rate(g, opts),
        final_generator=gen.until_ok(gen.delay(1.0, gen.repeat(READ)), attempts=30),
        checker=LazyChecker("counter"),
    )
