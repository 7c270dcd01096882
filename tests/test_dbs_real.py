"""DBs through the seam, on Docker, as a user runs them: the example user DB (docs/examples/single_redis.py)
and a DB whose process cannot start. The real databases' verdicts (etcd, Redis with Sentinel, PostgreSQL)
are checked by the chaos suite's cells of campaigns/real.toml (tests/test_chaos_real.py).

Each test is one `faultline run`, with the exit code and results.json a user would see; every run tears
its cluster down, even on failure.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_runs import ROOT, remove_cluster, run_module

# one Redis or etcd process each: light enough to share the machine (tests/chaos_cells.py)
pytestmark = [pytest.mark.docker, pytest.mark.paired, pytest.mark.timeout(900)]


def faultline_run(
    tmp_path: Path,
    *args: str,
    env: dict[str, str] | None = None,
    name: str | None = None,
    cleanup: bool = True,
) -> tuple[int, str, dict[str, Any]]:
    """`faultline run ARGS` as a user runs it: (exit code, output, results.json of the run). The cluster
    is removed afterwards unless `cleanup` is False (the caller then removes it)."""
    name = name or f"fltest-{uuid.uuid4().hex[:6]}"
    store = tmp_path / "store"
    try:
        proc = run_module(
            "faultline",
            "run",
            "--cluster-name",
            name,
            "--store",
            str(store),
            "--quiet",
            *args,
            timeout=800,
            env=env,
        )
    finally:
        if cleanup:
            remove_cluster(name)
    out = proc.stdout + proc.stderr
    runs = sorted(store.glob("*/2*/results.json"))
    results = json.loads(runs[-1].read_text()) if runs else {}
    return proc.returncode, out, results


def run_example_db(tmp_path: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    """The example user DB (docs/examples/single_redis.py) under the register workload, seed 5."""
    return faultline_run(
        tmp_path,
        *("--db", "single_redis:SingleRedis", "--workload", "register", *args, "--seed", "5"),
        env={"PYTHONPATH": str(ROOT / "docs" / "examples")},
    )


def test_the_example_user_db_runs(tmp_path: Path) -> None:
    code, out, results = run_example_db(tmp_path, "--nemesis", "pause", "--time-limit", "20")
    assert code == 0, out
    assert results["valid"] is True and results["workload"], results


def test_the_example_user_db_runs_a_fault_of_its_own(tmp_path: Path) -> None:
    """The fault the example ships itself (CLIENT PAUSE), offered beside the generic ones."""
    code, out, results = run_example_db(
        tmp_path, "--nemesis", "client-pause", "--nemesis-interval", "3", "--time-limit", "12"
    )
    assert code == 0, out
    assert results["valid"] is True, results
    history = [json.loads(line) for line in next((tmp_path / "store").glob("*/2*/history.jsonl")).open()]
    pauses = [op for op in history if op["f"] == "start-client-pause" and op["type"] == "ok"]
    assert pauses and pauses[0]["value"] == {"node": "k1", "pause_ms": 5000}, pauses


def test_a_db_process_that_cannot_start_fails_with_its_log_and_leaves_nothing(tmp_path: Path) -> None:
    import docker

    from faultline.cluster.docker_backend import labelled_containers

    name = f"fltest-{uuid.uuid4().hex[:6]}"
    try:
        code, out, _ = faultline_run(
            tmp_path,
            "--db",
            "broken_db:BrokenEtcd",
            "--workload",
            "register",
            "--time-limit",
            "10",
            name=name,
            cleanup=False,
            env={"PYTHONPATH": str(Path(__file__).parent / "dbs")},
        )
        left = labelled_containers(docker.from_env(), f"org.faultline.cluster={name}")
    finally:
        remove_cluster(name)
    assert code == 2, out
    assert "no-such-flag-for-this-test" in out, out  # the tail of etcd's own log names the bad flag
    assert "Traceback" not in out
    assert left == []
