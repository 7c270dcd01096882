"""unique-ids: `generate` ops, each returning an id from the DB; checked by `unique-ids`
(checkers/unique_ids.py): no two acknowledged generates returned the same id.

The bundled client calls `generate(table)` of the DB's connection (etcd: the revision of a put;
PostgreSQL: a sequence's next value); a DB may supply its own client instead (Redis: INCR).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.workloads.api import Workload
from faultline.workloads.common import LazyChecker, TableClient, at_rate

GENERATE = {"f": "generate", "value": None}


class UniqueIdsClient(TableClient):
    table = "ids"

    def apply(self, test: Run, op: Op) -> Op:
        if op["f"] == "generate":
            return {**op, "type": "ok", "value": int(self.conn.generate(self.tbl(test)))}
        raise ValueError(f"unique-ids: unknown op {op['f']!r}")


def workload(opts: Mapping[str, Any]) -> Workload:
    g = at_rate(gen.repeat(GENERATE), opts)
    return Workload(
        client=UniqueIdsClient(), generator=g, final_generator=None, checker=LazyChecker("unique-ids")
    )
