"""`faultline run` against a real Docker cluster: verdicts, healing, Ctrl-C, analyze.

Each test brings up its own cluster under a unique name and removes it in `finally`. They take one to
two minutes each on a loaded 2-core machine; the wider matrix (every workload with every nemesis) is
marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_runs import ROOT, remove_cluster, run_module

from faultline.controller import testspec
from faultline.controller.runner import run_once
from faultline.core import Run, TestSpec
from faultline.dbs.store import StoreDB
from faultline.history import read_jsonl

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def cluster_name() -> str:
    return f"fltest-{uuid.uuid4().hex[:6]}"


def verify_healthy(name: str) -> list[str]:
    """Problems on a running cluster after a run: residue of faults, and ksck."""
    from faultline.cluster.docker_backend import DockerBackend
    from faultline.controller.runner import _residue
    from faultline.dbs.store.tools import ksck
    from faultline.nemesis.base import wait_until

    b = DockerBackend.attach(name)
    problems = _residue(b)
    problems = list(problems) if isinstance(problems, list) else [problems]
    test = Run(TestSpec(name="t", workload="register"), StoreDB(), b)
    if not wait_until(lambda: ksck(test)[0], 120, 3.0, "ksck"):
        problems.append(f"ksck unhealthy: {ksck(test)[1].get('problems')}")
    return problems


def run_docker(tmp_path: Path, name: str, **opts: Any) -> Any:
    test = testspec.build_test(
        {
            "cluster": "docker",
            "cluster_name": name,
            "time_limit": 20,
            "nemesis_interval": 5,
            "concurrency": 6,
            "seed": 11,
            "leave_cluster_running": True,
            **opts,
        }
    )
    return run_once(test, tmp_path / "store", install_signals=False)


def test_register_partition_kill_is_valid_and_heals(tmp_path: Path) -> None:
    name = cluster_name()
    try:
        out = run_docker(tmp_path, name, workload="register", nemesis="partition,kill")
        assert out.cut_short is None, out.cut_short
        assert out.valid is True, out.results.get("workload")
        h = [json.loads(x) for x in (Path(out.run_dir) / "history.jsonl").read_text().splitlines()]
        assert any(o["type"] == "ok" and o["process"] != "nemesis" for o in h)
        assert any(o["f"].startswith("start-") and o["type"] == "ok" for o in h if o["process"] == "nemesis")
        assert out.results["residue"] == []
        assert verify_healthy(name) == []
        assert (Path(out.run_dir) / "nodes" / "m1").is_dir()
    finally:
        remove_cluster(name)


def test_ctrl_c_on_docker_heals_keeps_history_and_analyze_works(tmp_path: Path) -> None:
    name = cluster_name()
    store = tmp_path / "store"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faultline",
            "run",
            "--workload",
            "register",
            "--nemesis",
            "partition,pause",
            "--nemesis-interval",
            "3",
            "--time-limit",
            "120",
            "--cluster-name",
            name,
            "--store",
            str(store),
            "--quiet",
            "--leave-cluster-running",
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 300
        run_dir = None
        while time.monotonic() < deadline and run_dir is None:
            for h in store.glob("*/*/history.jsonl"):
                text = h.read_text()
                if '"start-' in text and text.count("\n") > 20:
                    run_dir = h.parent
            time.sleep(1)
        assert run_dir is not None, "no fault started within 300 s"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (out, err[-2000:])
        assert "cut short: interrupted" in out
        results = json.loads((run_dir / "results.json").read_text())
        assert results["residue"] == []
        assert verify_healthy(name) == []
        ana = run_module("faultline", "analyze", "--json", str(run_dir), timeout=300)
        assert ana.returncode == 2, ana.stderr  # cut short
        assert json.loads(ana.stdout)["workload"]["valid"] is not False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        remove_cluster(name)


@pytest.mark.slow
def test_stale_leader_reads_are_caught(tmp_path: Path) -> None:
    name = cluster_name()
    try:
        out = run_docker(
            tmp_path,
            name,
            workload="register",
            nemesis="partition-leader",
            time_limit=45,
            inject_bug=["stale-leader-reads"],
            nemesis_interval=10,
        )
        assert out.valid is False, out.results.get("workload")
        assert out.results["workload"]["failure"]["op"]["f"] == "read"
    finally:
        remove_cluster(name)


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["register", "set", "bank", "catalog"])
@pytest.mark.parametrize(
    "nemesis",
    [
        "partition",
        "kill",
        "pause",
        "clock",
        "membership",
        "tserver-replace",
        "master-replace",
        "master-migrate",
        "majority-loss",
        "power-loss",
    ],
)
def test_matrix_runs_to_completion_and_leaves_the_cluster_healthy(
    tmp_path: Path, workload: str, nemesis: str
) -> None:
    """Every workload with every nemesis: the run completes and heals, and the cluster is healthy after.
    The verdict must be valid, except under majority-loss, which loses acknowledged writes by design: the
    run must still complete, and with the set workload the checker must report the loss."""
    name = cluster_name()
    sizes = {"tservers": 6 if nemesis in ("tserver-replace", "majority-loss") else 5}
    if nemesis == "master-migrate":
        sizes["masters"] = 1  # the nemesis migrates one master to three
    extra: dict[str, Any] = {"db_opt": sizes}
    if workload == "catalog":
        extra["rate"] = 6  # a few hundred tables keep 2 cores re-replicating for minutes after a loss
    try:
        out = run_docker(
            tmp_path, name, workload=workload, nemesis=nemesis, time_limit=30, nemesis_interval=8, **extra
        )
        assert out.cut_short is None, out.cut_short
        if nemesis != "majority-loss":
            assert out.valid is not False, out.results.get("workload")
        elif workload == "set":
            # the survivor lagged when the majority died: acknowledged adds are gone, and said so
            assert out.valid is False and out.results["workload"]["lost_count"] > 0, out.results.get(
                "workload"
            )
        acted = [
            o
            for o in read_jsonl(Path(out.run_dir) / "history.jsonl")
            if o["process"] == "nemesis" and o["type"] in ("ok", "info") and not o["f"].startswith("stop")
        ]
        assert acted, "the nemesis never acted"
        assert verify_healthy(name) == []
    finally:
        remove_cluster(name)


def test_master_replace_during_catalog(tmp_path: Path) -> None:
    """The replacement ends as a voter under the dead master's DNS name and can lead, every master holds
    what the leader committed after healing (the workload's final check), and with another master killed
    afterwards the catalog is still available."""
    from faultline.cluster.docker_backend import DockerBackend
    from faultline.dbs.store.db import host_resolver
    from faultline.dbs.store.tools import master_roles
    from faultline.nemesis.base import wait_until
    from faultline.node.client import KuduClient

    name = cluster_name()
    try:
        out = run_docker(
            tmp_path, name, workload="catalog", nemesis="master-replace", time_limit=40, nemesis_interval=10
        )
        assert out.cut_short is None, out.cut_short
        assert out.valid is not False, out.results.get("workload")
        h = [json.loads(x) for x in (Path(out.run_dir) / "history.jsonl").read_text().splitlines()]
        done = [o for o in h if o["f"] == "replace-master" and o["type"] == "ok"]
        assert done, [o for o in h if o["f"] == "replace-master"]
        v = done[0]["value"]
        assert v["healthy"] is True and v["replacement"] not in ("m1", "m2", "m3")
        assert v["replacement_leads"] is True, v["steps"]  # handed the leadership, it took it
        b = DockerBackend.attach(name)
        test = Run(TestSpec(name="t", workload="register"), StoreDB(), b)
        assert b.dns_holder(v["name"]) == v["replacement"]
        roles = master_roles(test)
        assert any(addr.startswith(v["name"] + ":") and voter for _, addr, _, voter in roles), roles
        other = next(n for n in b.nodes("master") if n != v["replacement"])
        b.kill(other)
        client = KuduClient(b.addresses("master"), resolve=host_resolver(b), default_timeout_s=10)
        try:
            assert wait_until(lambda: client.list_tables() is not None, 90, 2.0, "catalog after a kill")
            client.create_table("after-kill", num_tablets=1, wait=False)
            assert "after-kill" in client.list_tables()
        finally:
            client.close()
            b.start(other)
    finally:
        remove_cluster(name)
