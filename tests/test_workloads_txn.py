"""The transactional workloads (list-append, rw-register): what their generators make, and what a run
refuses before anything starts."""

from __future__ import annotations

import random

import pytest
from spec_refusals import assert_refused

from faultline.controller import testspec
from faultline.workloads.txn import KeyPool, transaction, workload_for


@pytest.mark.parametrize(("kind", "write_f"), [("list-append", "append"), ("rw-register", "w")])
def test_transactions_are_short_with_unique_values_per_key_over_a_rotating_pool(
    kind: str, write_f: str
) -> None:
    rng = random.Random(3)
    pool = KeyPool(size=3, writes_per_key=4)
    written: dict[int, list[int]] = {}
    for _ in range(400):
        mops = transaction(pool, write_f, rng)
        assert 1 <= len(mops) <= 4
        for f, k, v in mops:
            assert f in ("r", write_f)
            if f == write_f:
                written.setdefault(k, []).append(v)
            else:
                assert v is None
    assert all(
        vs == list(range(1, len(vs) + 1)) and len(vs) <= 4 for vs in written.values()
    )  # unique, bounded
    assert len(written) > 3 and len(pool.writes) == 3  # keys retired and replaced; the pool stays small
    wl = workload_for(kind, {})
    assert wl.checker.name == f"elle-{kind}" and wl.final_generator is not None


def test_isolation_is_a_postgres_option_checked_before_anything_starts() -> None:
    spec = testspec.build_test({"db": "postgres", "workload": "list-append", "isolation": "repeatable-read"})
    assert spec.db_opts == {"isolation": "repeatable-read"}
    assert_refused("isolation must be one of", db="postgres", workload="list-append", isolation="snapshot")
    assert_refused("takes no option 'isolation'", db="etcd", workload="register", isolation="serializable")
    assert_refused("no client for workload 'list-append'", db="store", workload="list-append")
