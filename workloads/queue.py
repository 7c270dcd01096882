"""queue: enqueues of unique elements and dequeues while the faults run, then a drain after healing;
checked by total-queue (checkers/queue.py): nothing acknowledged lost, nothing dequeued twice or never
enqueued.

Ops: `{"f": "enqueue", "value": n}`; `{"f": "dequeue"}`, whose ok completion carries the element (a
`fail` found the queue empty); `{"f": "drain"}`, whose completion carries every element it took. The DB
supplies the client (`DB.client("queue")`): a Redis list through Sentinel, a PostgreSQL table, a NATS
JetStream consumer. Option `allow_duplicates`: the queue promises at-least-once delivery, so an element
dequeued twice is no anomaly (a DB sets it for its runs through `workload_opts`, as NATS does).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op
from faultline.workloads.api import Workload
from faultline.workloads.common import DBClientOnly, LazyChecker, at_rate

DEQUEUE = {"f": "dequeue", "value": None}
DRAIN = {"f": "drain", "value": None}


def workload(opts: Mapping[str, Any]) -> Workload:
    values = itertools.count()  # the interpreter calls op functions from one thread

    def enqueue(ctx: gen.Context) -> Op:
        return {"f": "enqueue", "value": next(values)}

    g: gen.Gen = gen.mix(gen.repeat(enqueue), gen.repeat(DEQUEUE))
    return Workload(
        client=DBClientOnly("queues"),
        generator=at_rate(g, opts),
        final_generator=gen.until_ok(gen.delay(1.0, gen.repeat(DRAIN)), attempts=30),
        checker=LazyChecker("total-queue", allow_duplicates=bool(opts.get("allow_duplicates", False))),
    )
