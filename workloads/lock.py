"""lock: acquires and releases of a named lock, checked against the mutex model (linearizability): two
clients holding the lock at once is invalid.

Ops: `{"f": "acquire", "key": k}` is ok when the client took the lock and `fail` when someone holds it;
`{"f": "release", "key": k}` is ok when the client's hold ended (it released the lock, or found it
already gone: `lost`), `fail` when the client did not hold it.

Each worker acquires, holds for `hold` seconds (default 3) and releases, over and over. The hold is what
lets a lost lock show: a holder cut off from the DB (its member paused) cannot renew its lease, which
expires after its TTL; another worker takes the lock while the holder, still holding, has not yet tried
to release. A release that finds its hold already gone is `ok` with the value `"lost"`: the hold ended, and the
checker decides whether someone else's began too soon.

Groups of workers contend for one lock at a time (one key), moving to a fresh lock after `ops_per_key`
ops, so each lock's history is short and the search stays cheap, as with `register`. The DB supplies the
client (`DB.client("lock")`): Redis's `SET NX PX` with a Lua release, etcd's lease with a compare-and-set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.workloads.api import Workload
from faultline.workloads.common import DBClientOnly, LazyChecker

ACQUIRE = {"f": "acquire", "value": None}
RELEASE = {"f": "release", "value": None}


def workload(opts: Mapping[str, Any]) -> Workload:
    concurrency = int(opts.get("concurrency", 10))
    group = int(opts.get("key_group_size", max(2, min(5, concurrency))))
    per_key = int(opts.get("ops_per_key", 60))
    hold = float(opts.get("hold", 3.0))

    def for_key(key: str) -> gen.Gen:
        cycle = gen.cycle(gen.seq(gen.once(ACQUIRE), gen.sleep(hold), gen.once(RELEASE)))
        return gen.limit(per_key, gen.each_thread(cycle))

    g: gen.Gen = gen.independent(group, for_key, key_of=lambda i: f"lock{i}")
    if opts.get("rate"):
        g = gen.stagger(1.0 / float(opts["rate"]), g)
    return Workload(client=DBClientOnly("locks"), generator=g, final_generator=None,
                    checker=LazyChecker("linearizable", model="mutex"))
