"""`partition-leader` on a real Docker cluster: it must expose a deposed leader that serves reads from
local state (the `stale-leader-reads` bug, KUDU-1188's class), and must not flag the correct system.

Both cells of campaigns/ci.toml at the length a user runs them (`--time-limit 30`, the default 10 s
between faults). Each run brings up its own cluster under a unique name and removes it in `finally`.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from faultline.controller import testspec
from faultline.controller.runner import run_once

ROOT = Path(__file__).resolve().parent.parent
# slow: the CI chaos suite (campaigns/ci.toml) runs the same two cells on every CI run
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(900)]


def _run(tmp_path: Path, bugs: list[str], seed: int) -> Any:
    name = f"fltest-{uuid.uuid4().hex[:6]}"
    test = testspec.build_test(
        {
            "cluster": "docker",
            "cluster_name": name,
            "time_limit": 30,
            "nemesis_interval": 10,
            "concurrency": 10,
            "seed": seed,
            "workload": "register",
            "nemesis": "partition-tablet-leader",
            "inject_bug": bugs,
            "leave_cluster_running": False,
        }
    )
    try:
        return run_once(test, tmp_path / "store", install_signals=False)
    finally:
        subprocess.run(
            [sys.executable, "-m", "faultline", "cluster", "down", "--name", name],
            cwd=ROOT,
            capture_output=True,
            timeout=300,
        )


def test_stale_leader_reads_invalid_and_correct_cluster_valid(tmp_path: Path) -> None:
    bad = _run(tmp_path / "bug", ["stale-leader-reads"], seed=21)
    assert bad.cut_short is None, bad.cut_short
    assert bad.valid is False, bad.results.get("workload")
    failure = bad.results["workload"].get("failure") or {}
    assert (failure.get("op") or {}).get("f") == "read", failure
    good = _run(tmp_path / "ok", [], seed=21)
    assert good.cut_short is None, good.cut_short
    assert good.valid is True, good.results.get("workload")
