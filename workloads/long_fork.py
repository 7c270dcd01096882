"""long-fork: write-once keys, and reads of a group of keys in one transaction; checked by `long-fork`
(checkers/long_fork.py): under snapshot isolation or stronger, every read of a group sees a prefix of one
order of its writes, so two reads that each saw a write the other missed are a long fork.

Keys come in groups of `group_size` (default 3): key k belongs to group k // group_size. A write is
`{"f": "txn", "value": [["w", k, 1]]}` of the next key never written; a read is `{"f": "txn", "value":
[["r", k, None], ...]}` of every key of a group being written now or just before. The DB supplies the
client (`DB.client("long-fork")`): PostgreSQL and MariaDB run each as a transaction at the run's isolation level.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op
from faultline.workloads.api import Workload
from faultline.workloads.common import DBClientOnly, LazyChecker, at_rate


def workload(opts: Mapping[str, Any]) -> Workload:
    size = int(opts.get("group_size", 3))
    keys = itertools.count()  # the interpreter calls op functions from one thread
    last = [0]

    def write(ctx: gen.Context) -> Op:
        last[0] = next(keys)
        return {"f": "txn", "value": [["w", last[0], 1]]}

    def read(ctx: gen.Context) -> Op:
        group = max(0, last[0] // size - ctx.rng.randrange(2))
        return {"f": "txn", "value": [["r", k, None] for k in range(group * size, (group + 1) * size)]}

    g: gen.Gen = gen.mix(gen.repeat(write), gen.repeat(read))
    return Workload(
        client=DBClientOnly("long-fork transactions"),
        generator=at_rate(g, opts),
        final_generator=None,
        checker=LazyChecker("long-fork"),
    )
