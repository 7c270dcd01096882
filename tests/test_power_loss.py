"""Power loss (issue 9's `no-fsync` cell): the cut tool, the nemesis, and the end-to-end proof that a
power cut of every replica loses acknowledged writes exactly when the store skips fsync.

- `tool fs cut_to_synced` refuses a directory whose server holds the lock;
- on a loopback MiniCluster: kill every replica's server, cut with the tool, restart: with `no-fsync`
  the acknowledged rows are gone, with fsync all are there;
- the `power-loss` nemesis against the fake backend (victims, records, heal);
- the same proof on a real Docker cluster through `backend.power_loss` and the nemesis (docker).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from faultline.core import Run, TestSpec
from faultline.dbs import get_db
from faultline.dbs.store import StoreDB
from faultline.dbs.store.fake import FakeBackend, fake_run, store_spec
from faultline.dbs.store.faults.power import PowerLossNemesis
from faultline.nemesis import registry
from faultline.node.server.fs import format_fs, lock_dir

pytestmark = pytest.mark.integration  # a real store cluster of processes on loopback


def _tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faultline.node", "tool", *args], capture_output=True, text=True, timeout=60
    )


def test_cut_tool_refuses_a_locked_directory(tmp_path: Path) -> None:
    import os

    d = tmp_path / "fs"
    format_fs(d)
    fd = lock_dir(d)  # as a running server holds it
    try:
        r = _tool("fs", "cut_to_synced", "--fs-dir", str(d))
        assert r.returncode == 1
        assert "in use by a running process" in r.stderr and r.stderr.count("\n") == 1
    finally:
        os.close(fd)
    r = _tool("fs", "cut_to_synced", "--fs-dir", str(d), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"deleted": [], "restored": [], "truncated": {}}


def test_cut_tool_on_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    r = _tool("fs", "cut_to_synced", "--fs-dir", str(tmp_path / "nope"))
    assert r.returncode == 1 and r.stderr.startswith("error:") and r.stderr.count("\n") == 1


@pytest.mark.parametrize("bugs", [(), ("no-fsync",)], ids=["fsync", "no-fsync"])
def test_power_cut_of_every_replica_on_loopback(tmp_path: Path, bugs: tuple[str, ...]) -> None:
    from faultline.dbs.store.minicluster import MiniCluster

    with MiniCluster(tmp_path / "c", num_masters=1, num_tservers=3, fsync="always", bugs=bugs) as c:
        c.start_all()
        cl = c.client(timeout=20)
        try:
            cl.create_table("pl", num_tablets=1, replication=3)
            for i in range(30):
                cl.put("pl", i, i)
            ts = ["t1", "t2", "t3"]
            for n in ts:  # all dark before any is cut
                c.kill(n)
            for n in ts:
                r = c.tool("fs", "cut_to_synced", "--fs-dir", str(c.nodes[n].fs_dir))
                assert r.returncode == 0, r.stderr
                assert "cut_to_synced:" in r.stdout
            for n in ts:
                c.start(n)
            rows = dict(cl.scan("pl", timeout=30))
        finally:
            cl.close()
    if bugs:
        assert len(rows) < 30  # acknowledged writes lost: nothing had reached fsync
    else:
        assert rows == {i: i for i in range(30)}


# ---------------------------------------------------------------------- the nemesis on the fake backend
@pytest.fixture()
def fake_test() -> dict[str, Any]:
    b = FakeBackend(seed=3)
    b.up(store_spec(3, 5))
    b.tables["set"] = {"rows": {}, "schema_version": 0, "columns": []}
    return fake_run(b, seed=3, masters=3, tservers=5)


def test_power_loss_nemesis_cuts_and_restarts(fake_test: dict) -> None:
    b: FakeBackend = fake_test.backend
    n = PowerLossNemesis().setup(fake_test)
    done = n.invoke(
        fake_test, {"f": "start-power-loss", "value": {"targets": "tservers", "subset": "majority"}}
    )
    assert done["type"] == "ok"
    victims = done["value"]["nodes"]
    assert len(victims) == 3 and all(v.startswith("t") for v in victims)
    assert set(done["value"]["cut"]) == set(victims)
    # every victim went dark before any came back (one power cut, not three in a row)
    seq = [(e, node) for e, node in b.events if node in victims]
    first_start = min(i for i, (e, _) in enumerate(seq) if e == "running")
    assert {node for e, node in seq[:first_start] if e == "killed"} == set(victims)
    assert all(b.state[v] == "running" for v in victims)
    stop = n.invoke(fake_test, {"f": "stop-power-loss"})
    assert stop["type"] == "ok" and stop["value"]["nodes"] == []
    assert b.residue() == []


def test_power_loss_tablet_subsets_hit_one_tablets_replicas(fake_test: dict) -> None:
    b: FakeBackend = fake_test.backend
    n = PowerLossNemesis().setup(fake_test)
    ((_, _, reps),) = b._placement()
    done = n.invoke(
        fake_test, {"f": "start-power-loss", "value": {"targets": "tservers", "subset": "tablet-majority"}}
    )
    assert len(done["value"]["nodes"]) == 2 and set(done["value"]["nodes"]) <= set(reps)
    done = n.invoke(
        fake_test, {"f": "start-power-loss", "value": {"targets": "tservers", "subset": "tablet-all"}}
    )
    assert sorted(done["value"]["nodes"]) == sorted(reps)


def test_power_loss_is_healed_when_a_restart_failed(fake_test: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    b: FakeBackend = fake_test.backend
    n = PowerLossNemesis().setup(fake_test)
    real_start = b.start
    monkeypatch.setattr(b, "start", lambda node: (_ for _ in ()).throw(RuntimeError("engine busy")))
    done = n.invoke(fake_test, {"f": "start-power-loss", "value": {"targets": "tservers", "subset": "one"}})
    (victim,) = done["value"]["nodes"]
    assert b.state[victim] == "killed"
    monkeypatch.setattr(b, "start", real_start)
    n.heal(fake_test)
    assert b.state[victim] == "running" and b.residue() == []


def test_power_loss_is_a_registered_package() -> None:
    assert "power-loss" in registry.entries_for(StoreDB())
    pkg = registry.compose(["power-loss", "kill"], get_db("store"), interval_s=1.0)
    assert {"start-power-loss", "stop-power-loss", "start-kill"} <= pkg.nemesis.fs
    with pytest.raises(Exception, match="valid"):
        PowerLossNemesis().setup(fake_run(seed=0)).victims(fake_run(FakeBackend()), "tservers", "half")


# ---------------------------------------------------------------------- a real Docker cluster
@pytest.mark.docker
@pytest.mark.parametrize("bugs", [[], ["no-fsync"]], ids=["fsync", "no-fsync"])
def test_power_loss_on_docker(bugs: list[str]) -> None:
    """1 master + 3 tablet servers; 30 acknowledged rows in a three-replica tablet; the nemesis cuts
    power to all three replicas' servers at once: with `no-fsync` rows are lost, with fsync none."""
    from faultline.cluster.docker_backend import DockerBackend
    from faultline.node.client.client import KuduClient

    t0 = time.monotonic()
    b = DockerBackend(
        StoreDB().cluster_spec(f"tpl-{secrets.token_hex(3)}", {"masters": 1, "tservers": 3, "bugs": bugs})
    )
    try:
        b.up()
        test = Run(TestSpec(name="power-loss", workload="set", seed=1), StoreDB(), b)
        with KuduClient(b.addresses("master"), resolve=b.resolve) as c:
            deadline = time.monotonic() + 60
            while True:  # the tablet servers register with the master after start
                try:
                    c.create_table("pl", num_tablets=1, replication=3, timeout=20)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(1)
            for i in range(30):
                c.put("pl", i, i, timeout=20)
            n = PowerLossNemesis().setup(test)
            done = n.invoke(
                test, {"f": "start-power-loss", "value": {"targets": "tservers", "subset": "tablet-all"}}
            )
            assert sorted(done["value"]["nodes"]) == ["t1", "t2", "t3"]
            assert {b.daemon_status(x) for x in ("t1", "t2", "t3")} == {"running"}
            rows = dict(c.scan("pl", timeout=40))
        cut = done["value"]["cut"]
        if bugs:
            assert len(rows) < 30, rows
            assert all(v["deleted"] + v["truncated_bytes"] > 0 for v in cut.values()), cut
        else:
            assert rows == {i: i for i in range(30)}
            assert all(v["deleted"] == 0 for v in cut.values()), cut
        assert time.monotonic() - t0 < 120
    finally:
        b.down()
