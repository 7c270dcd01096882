"""list-append and rw-register: transactions of 1 to 4 micro-ops, checked for isolation anomalies by the
Elle-class checkers (checkers/elle).

A transaction is `{"f": "txn", "value": [[f, k, v], ...]}` with micro-ops `append` (list-append) or `w`
(rw-register), and `r` reads everywhere. Keys come from a small pool of active keys; a key that has taken
`writes_per_key` writes is retired and a fresh one joins, so lists stay short and the version orders the
reads reveal stay cheap to infer. Every value written to a key is unique to it (1, 2, 3, ... per key).
After healing, one transaction reads every key ever used.

The DB supplies the client (`DB.client("list-append")`): it runs each transaction at its isolation level
and fills in the reads; a transaction the DB aborted is `fail`, one whose commit is in doubt is `info`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from faultline import gen
from faultline.core import Op
from faultline.workloads.api import Workload
from faultline.workloads.common import DBClientOnly, LazyChecker, at_rate

KINDS = {"list-append": "append", "rw-register": "w"}


@dataclass
class KeyPool:
    """The active keys and how many values each has taken. Used only by the generator's op functions,
    which the interpreter calls from one thread; `used` is every key a transaction has named."""

    size: int = 5
    writes_per_key: int = 32
    next_key: int = 0
    writes: dict[int, int] = field(default_factory=dict)
    used: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        while len(self.writes) < self.size:
            self._add()

    def _add(self) -> None:
        self.writes[self.next_key] = 0
        self.next_key += 1

    def pick(self, rng: Any) -> int:
        key = rng.choice(sorted(self.writes))
        if key not in self.used:
            self.used.append(key)
        return key

    def next_value(self, key: int) -> int:
        """A value never written to `key` before; the key retires once it has taken enough."""
        self.writes[key] += 1
        value = self.writes[key]
        if value >= self.writes_per_key:
            del self.writes[key]
            self._add()
        return value


def transaction(pool: KeyPool, write_f: str, rng: Any, max_mops: int = 4) -> list[list[Any]]:
    """1 to `max_mops` micro-ops on the pool's active keys: reads and writes (or appends), at random."""
    mops: list[list[Any]] = []
    for _ in range(rng.randint(1, max_mops)):
        key = pool.pick(rng)
        if key in pool.writes and rng.random() < 0.5:
            mops.append([write_f, key, pool.next_value(key)])
        else:
            mops.append(["r", key, None])
    return mops


def workload_for(kind: str, opts: Mapping[str, Any]) -> Workload:
    write_f = KINDS[kind]
    pool = KeyPool(size=int(opts.get("key_count", 5)), writes_per_key=int(opts.get("writes_per_key", 32)))

    def txn(ctx: gen.Context) -> Op:
        return {"f": "txn", "value": transaction(pool, write_f, ctx.rng, int(opts.get("max_txn_length", 4)))}

    def final_read(ctx: gen.Context) -> Op:
        return {"f": "txn", "value": [["r", k, None] for k in sorted(pool.used)]}

    g = at_rate(gen.repeat(txn), opts)
    models = opts.get("consistency_models") or ["serializable"]
    return Workload(
        client=DBClientOnly(f"{kind} transactions"),
        generator=g,
        final_generator=gen.until_ok(gen.delay(1.0, gen.repeat(final_read)), attempts=30),
        checker=LazyChecker(f"elle-{kind}", consistency_models=list(models)),
    )
