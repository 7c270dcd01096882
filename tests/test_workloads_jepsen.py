"""Jepsen's workload library on the real DBs (queue, lock, counter, unique-ids, bank): what the generators
make, which DB runs which, options refused before anything starts, the key-value clients on the fake store,
and `faultline check` choosing each workload's checker for Jepsen's own histories."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from faultline import gen
from faultline.controller import testspec
from faultline.controller.cli import main
from faultline.controller.errors import UsageError
from faultline.dbs import get_db
from faultline.dbs.store.fake import FakeBackend, fake_run, store_spec
from faultline.workloads.counter import CounterClient
from faultline.workloads.registry import get as get_workload
from faultline.workloads.registry import supported


def _invocations(workload: str, seconds: float, concurrency: int = 10) -> list[dict[str, Any]]:
    wl = get_workload(workload, get_db("store"), {"concurrency": concurrency})
    h = gen.simulate(gen.clients(gen.time_limit(seconds, wl.generator)), concurrency, latency_s=0.01)
    return [o for o in h if o["type"] == "invoke"]


def test_which_db_runs_which_workload() -> None:
    runs = {name: set(supported(get_db(name))) for name in ("etcd", "redis-sentinel", "postgres")}
    assert {"lock", "bank", "counter", "unique-ids"} <= runs["etcd"] and "queue" not in runs["etcd"]
    assert {"queue", "lock", "counter", "unique-ids"} <= runs["redis-sentinel"]
    assert {"queue", "bank", "counter", "unique-ids"} <= runs["postgres"] and "lock" not in runs["postgres"]
    with pytest.raises(UsageError, match="no client for workload 'queue'"):
        testspec.build_test({"db": "etcd", "workload": "queue"})


@pytest.mark.parametrize("db", ["etcd", "redis-sentinel"])
def test_lock_ttl_is_checked_before_anything_starts(db: str) -> None:
    spec = testspec.build_test({"db": db, "workload": "lock", "db_opt": ["lock_ttl=2"]})
    assert spec.db_opts == {"lock_ttl": 2}
    with pytest.raises(UsageError, match="lock_ttl must be"):
        testspec.build_test({"db": db, "workload": "lock", "db_opt": ["lock_ttl=-1"]})
    with pytest.raises(UsageError, match="lock_ttl must be"):
        testspec.build_test({"db": db, "workload": "lock", "db_opt": ["lock_ttl=soon"]})


def test_queue_enqueues_each_value_once() -> None:
    ops = _invocations("queue", 1.0)
    values = [o["value"] for o in ops if o["f"] == "enqueue"]
    assert values and len(values) == len(set(values))
    assert {o["f"] for o in ops} == {"enqueue", "dequeue"}


def test_each_lock_worker_retries_until_it_holds_then_holds_and_releases() -> None:
    """Per worker: a failed acquire is tried again 0.2 s later; an ok one is released 6 s later; groups of
    five contend for one lock."""
    wl = get_workload("lock", get_db("store"), {"concurrency": 10})
    refused = iter([True, True] + [False] * 100_000)
    h = gen.simulate(
        gen.clients(gen.time_limit(20, wl.generator)),
        10,
        latency_s=0.01,
        complete=lambda o: "fail" if o["process"] == 0 and o["f"] == "acquire" and next(refused) else "ok",
    )
    mine = [o for o in h if o["process"] == 0 and o["type"] != "invoke"]
    assert [(o["f"], o["type"]) for o in mine[:5]] == [
        ("acquire", "fail"),
        ("acquire", "fail"),
        ("acquire", "ok"),
        ("release", "ok"),
        ("acquire", "ok"),
    ]
    assert 0.2e9 <= mine[1]["time"] - mine[0]["time"] < 0.3e9
    assert 6e9 <= mine[3]["time"] - mine[2]["time"] < 6.1e9
    keys_at_start = {o["process"]: o["key"] for o in h if o["type"] == "invoke" and o["time"] == 0}
    assert len(keys_at_start) == 10 and len(set(keys_at_start.values())) == 2


def test_counter_client_on_the_fake_store() -> None:
    b = FakeBackend(seed=1, latency_s=0)
    b.up(store_spec(3, 5))
    test = fake_run(b, seed=1)
    client = CounterClient()
    client.setup(test)
    c = client.open(test, "t1")
    assert c.invoke(test, {"f": "read", "value": None})["value"] == 0
    assert c.invoke(test, {"f": "add", "value": 3})["type"] == "ok"
    assert c.invoke(test, {"f": "add", "value": 2})["type"] == "ok"
    assert c.invoke(test, {"f": "read", "value": None})["value"] == 5
    c.close()


def _verdicts(shared: Path) -> dict[str, bool]:
    with open(shared / "anchors" / "elle-cli" / "VERDICTS.tsv", encoding="utf-8") as fh:
        return {r["file"]: r["expected_valid"] == "true" for r in csv.DictReader(fh, delimiter="\t")}


@pytest.mark.parametrize(
    ("rel", "checker"),
    [
        ("histories/jepsen/counter.edn", "counter"),
        ("histories/jepsen/counter.json", "counter"),
        ("histories/jepsen/bank.edn", "bank"),
        ("histories/jepsen/bank.json", "bank"),
        ("histories/jepsen/bank-negative-balances.json", "bank"),
        ("histories/knossos/mutex/bad/etcd.edn", "mutex"),
    ],
)
def test_faultline_check_infers_the_checker_of_jepsens_histories(
    shared_dir: Path,
    capsys,
    rel: str,  # type: ignore[no-untyped-def]
    checker: str,
) -> None:
    """No --checker or --model: the checker comes from the history's ops, and the verdict is Jepsen's."""
    expected = _verdicts(shared_dir)[rel]
    rc = main(["check", str(shared_dir / "anchors" / "elle-cli" / rel)])
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert out["model"] == checker and out["valid"] is expected and rc == (0 if expected else 1), out


def test_long_fork_writes_each_key_once_and_reads_whole_groups() -> None:
    ops = _invocations("long-fork", 1.0)
    written = [m[1] for o in ops for m in o["value"] if m[0] == "w"]
    assert written and len(written) == len(set(written))
    reads = [o["value"] for o in ops if o["value"][0][0] == "r"]
    assert reads and all(
        len(r) == 3 and r[0][1] % 3 == 0 and [m[1] for m in r] == list(range(r[0][1], r[0][1] + 3))
        for r in reads
    )
