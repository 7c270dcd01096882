"""The register workload keeps one read-only worker per key group: the client that still trusts a deposed
leader, without which a stale read from an isolated leader can never follow a write on the new one."""

from __future__ import annotations

import collections

from faultline import gen
from faultline.core import Run, TestSpec
from faultline.dbs.store import StoreDB
from faultline.workloads.common import KVClient
from faultline.workloads.register import workload


def _history(opts: dict, seed: int = 3) -> list[dict]:
    wl = workload(opts)
    return gen.simulate(
        gen.clients(gen.time_limit(3, wl.generator)),
        int(opts["concurrency"]),
        seed=seed,
        latency_s=0.01,
        complete=lambda o: "info" if o["f"] == "write" and o["value"] == 4 else "ok",
    )


def test_first_worker_of_each_group_only_reads() -> None:
    h = _history({"concurrency": 10})
    by_thread: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in h:
        if o["type"] == "invoke":
            by_thread[o["process"] % 10][o["f"]] += 1
    for t in (0, 5):
        assert set(by_thread[t]) == {"read"} and by_thread[t]["read"] > 50, by_thread[t]
    for t in (1, 2, 3, 4, 6, 7, 8, 9):
        assert {"read", "write", "cas"} <= set(by_thread[t]), by_thread[t]
    keys = {o["key"] for o in h}
    assert len(keys) > 2  # groups still move to fresh keys
    per_key = collections.Counter(o["key"] for o in h if o["type"] == "invoke")
    assert max(per_key.values()) <= 200


def test_readers_can_be_turned_off_and_small_groups_have_none() -> None:
    for opts in ({"concurrency": 10, "readers_per_group": 0}, {"concurrency": 4}):
        h = _history(opts)
        writers = {
            o["process"] % opts["concurrency"] for o in h if o["type"] == "invoke" and o["f"] != "read"
        }
        assert writers == set(range(opts["concurrency"])), writers


def test_ensure_table_records_the_table_for_the_nemeses() -> None:
    class Conn:
        def create_table(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            pass

    test = Run(TestSpec(name="t", workload="register", run_tag="abc"), StoreDB(), None, connect=Conn)
    KVClient().ensure_table(test)
    KVClient().ensure_table(test)
    assert test.state["tables"] == ["faultline-abc"]
