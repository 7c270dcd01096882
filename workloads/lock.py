"""lock: acquires and releases of a named lock, checked against the mutex model (linearizability): two
clients holding the lock at once is invalid.

Ops: `{"f": "acquire", "key": k}` is ok when the client took the lock and `fail` when someone holds it;
`{"f": "release", "key": k}` is ok when the client's hold ended (it released the lock, or found it
already gone: `lost`), `fail` when the client did not hold it.

Each worker tries to acquire every `retry` seconds (default 0.2) until it gets the lock, holds it for
`hold` seconds (default 6) and releases it. The hold is what lets a lost lock show: a holder cut off
from the DB (its member paused) cannot renew its lease, which expires after its TTL; another worker,
trying all along, takes the lock while the holder, still holding, has not yet tried to release. A release that finds its hold already gone is `ok` with the value `"lost"`: the hold ended, and the
checker decides whether someone else's began too soon.

Groups of workers contend for one lock at a time (one key), moving to a fresh lock after `ops_per_key`
ops, so each lock's history is short and the search stays cheap, as with `register`. The DB supplies the
client (`DB.client("lock")`): Redis's `SET NX PX` with a Lua release, etcd's lease with a compare-and-set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from faultline import gen
from faultline.core import Op
from faultline.workloads.api import Workload
from faultline.workloads.common import DBClientOnly, LazyChecker, at_rate


@dataclass(frozen=True)
class Holder(gen.Gen):
    """One worker's cycle: acquire until ok (or in doubt), hold, release. Pure: its state is the next op
    and the time (ns) it is due at."""

    hold_s: float
    retry_s: float
    next_f: str = "acquire"
    due: int = 0
    busy: bool = False

    def op(self, ctx: gen.Context) -> gen.Answer:
        thread = ctx.some_free_thread()
        if self.busy or thread is None:
            return gen.PENDING, self
        if ctx.time < self.due:
            return gen.Pending(self.due), self
        return gen.invocation({"f": self.next_f, "value": None}, ctx, thread), replace(self, busy=True)

    def update(self, ctx: gen.Context, event: Op) -> gen.Gen:
        if event.get("type") == "invoke":
            return self
        held = event.get("f") == "acquire" and event.get("type") in ("ok", "info")  # in doubt: release it too
        wait = self.hold_s if held else self.retry_s
        return replace(
            self, next_f="release" if held else "acquire", due=ctx.time + int(wait * 1e9), busy=False
        )


def workload(opts: Mapping[str, Any]) -> Workload:
    concurrency = int(opts.get("concurrency", 10))
    group = int(opts.get("key_group_size", max(2, min(5, concurrency))))
    per_key = int(opts.get("ops_per_key", 300))
    holder = Holder(hold_s=float(opts.get("hold", 6.0)), retry_s=float(opts.get("retry", 0.2)))

    def for_key(key: str) -> gen.Gen:
        return gen.limit(per_key, gen.each_thread(holder))

    g: gen.Gen = gen.independent(group, for_key, key_of=lambda i: f"lock{i}")
    return Workload(
        client=DBClientOnly("locks"),
        generator=at_rate(g, opts),
        final_generator=None,
        checker=LazyChecker("linearizable", model="mutex"),
    )
