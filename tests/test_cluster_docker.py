"""The Docker backend end to end: 3 masters + 5 tablet servers in containers, faults, DNS moves, cleanup.

The nodes run the placeholder daemon (a TCP listener that answers with its node name), so these tests
exercise the backend itself; tests/test_cluster_node.py runs the real store on it.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_checks import brought_up

from faultline.cluster.api import PacketShape
from faultline.cluster.base import CHAIN, LABEL, ClusterError, RemoteTimeout
from faultline.dbs.store import StoreDB
from faultline.dbs.store.layout import MASTER_PORT, TSERVER_PORT

# light (placeholder daemons, mostly Docker's own time): `make test` runs these beside the real DBs' cells
pytestmark = [pytest.mark.docker, pytest.mark.paired]


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


@pytest.fixture(scope="module")
def image() -> str:
    from faultline.cluster.image import ensure_image_for

    return ensure_image_for(StoreDB().cluster_spec("image", {}))


@pytest.fixture(scope="module")
def cluster(image: str) -> Iterator:
    from faultline.cluster.docker_backend import DockerBackend

    b = DockerBackend(
        StoreDB().cluster_spec(_name("tdock"), {"masters": 3, "tservers": 5, "daemon": "placeholder"}),
        image=image,
    )
    with brought_up(b):
        yield b


def port_of(b, node: str) -> int:
    return MASTER_PORT if b.info[node].role == "master" else TSERVER_PORT


def reach(b, src: str, dst: str, timeout: float = 1.5) -> bool:
    return b.can_connect(src, dst, port_of(b, dst), timeout)


def reach_all(b, pairs: list[tuple[str, str]]) -> list[bool]:
    """reach() for many (src, dst) pairs at once (each blocked probe waits out its timeout)."""
    return b._parallel(lambda p: reach(b, *p), pairs)


def test_up_three_masters_five_tservers(cluster) -> None:
    assert cluster.nodes("master") == ["m1", "m2", "m3"]
    assert cluster.nodes("tserver") == ["t1", "t2", "t3", "t4", "t5"]
    assert cluster._parallel(cluster.daemon_status, cluster.nodes()) == ["running"] * 8
    assert cluster.addresses("master") == ["master-1:7051", "master-2:7051", "master-3:7051"]
    # NET_ADMIN only, never privileged; labelled; own network
    attrs = cluster.client.api.inspect_container(cluster.info["m1"].host)
    assert attrs["HostConfig"]["Privileged"] is False
    assert attrs["HostConfig"]["CapAdd"] == ["NET_ADMIN"]
    # the store's nodes are held to one CPU each, round-robin in node order
    ncpu = int(cluster.client.info()["NCPU"])
    cpusets = [
        cluster.client.api.inspect_container(cluster.info[n].host)["HostConfig"]["CpusetCpus"]
        for n in cluster.nodes()
    ]
    assert cpusets == [str(i % ncpu) for i in range(8)]
    assert attrs["Config"]["Labels"][f"{LABEL}.cluster"] == cluster.spec.name
    assert list(attrs["NetworkSettings"]["Networks"]) == [cluster.network]
    # every node reaches every master by its DNS name; the host reaches them through resolve()
    reached = cluster._parallel(lambda n: cluster.can_connect(n, "master-2", MASTER_PORT, 5), cluster.nodes())
    assert reached == [True] * 8
    with socket.create_connection((cluster.resolve("master-3"), MASTER_PORT), 5) as s:
        assert s.recv(16) == b"m3\n"
    hosts = cluster.hosts_file().read_text()
    assert f"{cluster.info['m1'].address} m1 master-1" in hosts


def test_cut_blocks_both_ways_rest_flows_heal_leaves_no_rule(cluster) -> None:
    try:
        cluster.cut("t1", "t2")
        assert reach_all(cluster, [("t1", "t2"), ("t2", "t1")]) == [False, False]
        rest = [(a, b) for o in ("t3", "m1") for a, b in (("t1", o), (o, "t2"), ("t2", o), (o, "t1"))]
        assert reach_all(cluster, rest) == [True] * len(rest)
        assert cluster._blocked("t1") == {"t2"}
    finally:
        cluster.heal_network()
    assert reach_all(cluster, [("t1", "t2"), ("t2", "t1")]) == [True, True]
    for n in ("t1", "t2"):
        ipt = cluster.iptables(n)
        rules = cluster.run(n, [ipt, "-w", "-S"])[1]
        assert CHAIN not in rules, rules
        # Docker's DNS rules in the nat table are untouched
        assert "DOCKER_OUTPUT" in cluster.run(n, [ipt, "-w", "-t", "nat", "-S"])[1]
    assert cluster.can_connect("t1", "master-1", MASTER_PORT)


def test_partition_grudge_majority_minority(cluster) -> None:
    minority, majority = ["m1", "t1"], ["m2", "m3", "t2"]
    grudge = {a: set(majority) for a in minority} | {b: set(minority) for b in majority}
    try:
        cluster.partition(grudge)
        got = reach_all(cluster, [("m1", "m2"), ("m3", "t1"), ("m1", "t1"), ("m2", "m3")])
        assert got == [False, False, True, True]
    finally:
        cluster.heal_network()
    assert reach_all(cluster, [("m1", "m2"), ("m3", "t1")]) == [True, True]


def test_route_fallback_when_iptables_is_unusable(cluster) -> None:
    cluster._ipt["t3"] = "route"  # as if this node had no working iptables
    try:
        cluster.partition({"t3": {"t4"}})
        assert not reach(cluster, "t3", "t4") and not reach(cluster, "t4", "t3")
        assert reach(cluster, "t3", "t5")
    finally:
        cluster.heal_network(["t3"])
        cluster._ipt.pop("t3", None)
    assert reach(cluster, "t3", "t4")
    assert cluster.run("t3", ["ip", "route", "show", "proto", "188"])[1].strip() == ""


def test_lossy_link_and_heal(cluster) -> None:
    try:
        cluster.netem("t5", loss_pct=100)
        assert not reach(cluster, "t4", "t5")
    finally:
        cluster.heal_network(["t5"])
    assert reach(cluster, "t4", "t5")


def test_packet_faults_apply_show_as_residue_and_clear_without_touching_partitions(cluster) -> None:
    kinds = cluster.packet_kinds("t5")
    assert {"loss", "duplicate", "rate"} <= set(kinds)
    try:
        cluster.partition({"t1": {"t2"}})
        cluster.packet("t5", PacketShape(loss_pct=100))
        assert not reach(cluster, "t4", "t5")
        cluster.packet("t5", PacketShape(duplicate_pct=50, rate_kbit=256))  # replaces the loss
        assert reach(cluster, "t4", "t5")
        left = " ".join(cluster.residue())
        assert "packet-duplication rules" in left and "tbf qdisc" in left and "packet-loss" not in left
        cluster.packet("t5")
        left = " ".join(cluster.residue())
        assert "t5" not in left and "t1: partition rules" in left  # a packet fault leaves partitions alone
        if "delay" not in kinds:
            with pytest.raises(ClusterError, match="needs tc netem"):
                cluster.packet("t5", PacketShape(delay_ms=10))
        cluster.packet("t5", PacketShape(duplicate_pct=50, rate_kbit=256))
    finally:
        cluster.heal_network()
    assert cluster.residue() == []


def test_lifecycle_pause_kill_start_stop(cluster) -> None:
    n = "t4"
    cluster.pause(n)
    assert cluster.daemon_status(n) == "paused"
    cluster.resume(n)
    assert cluster.daemon_status(n) == "running"
    cluster.kill(n)
    assert cluster.daemon_status(n) == "stopped"
    assert not reach(cluster, "t3", n)
    cluster.start(n)
    assert cluster.daemon_status(n) == "running"
    assert cluster.wait_port("t3", n, TSERVER_PORT, 10)
    cluster.stop(n)
    assert cluster.daemon_status(n) == "stopped"
    cluster.start(n)
    assert "start" in cluster.logs(n)


def test_exec_has_a_real_timeout(cluster) -> None:
    t0 = time.monotonic()
    with pytest.raises(RemoteTimeout):
        cluster.remote.exec("t1", ["sleep", "30"], 1.0)
    assert time.monotonic() - t0 < 20  # 1 s plus API round trips on a loaded machine
    rc, out, err = cluster.remote.exec("t1", ["sh", "-c", "echo out; echo err >&2; exit 3"], 10)
    assert (rc, out, err) == (3, "out\n", "err\n")
    cluster.remote.put("t1", "/var/lib/faultline/x/y.txt", b"payload")
    assert cluster.remote.get("t1", "/var/lib/faultline/x/y.txt") == b"payload"


def test_clock_offset_file(cluster) -> None:
    try:
        cluster.set_clock_offset("t2", -7.25)
        assert cluster.remote.get("t2", cluster.clock_file("t2")).decode().strip() == "-7.250000"
        env = cluster.run(
            "t2",
            [
                "sh",
                "-c",
                "tr '\\0' '\\n' < /proc/$(cut -d' ' -f1 /var/lib/faultline/run/tserver.pid)/environ",
            ],
        )[1]
        assert f"FAULTLINE_CLOCK_OFFSET_FILE={cluster.clock_file('t2')}" in env
    finally:
        cluster.set_clock_offset("t2", 0)


def test_move_master_name_to_a_fresh_container(cluster) -> None:
    new = cluster.add_node("m9")
    try:
        old_ip = cluster.resolve("master-3")
        cluster.set_dns("master-3", new)
        assert cluster.resolve("master-3") == cluster.info[new].address != old_ip
        assert cluster.dns_holder("master-3") == new
        for probe in ("t1", "m1", "m3"):
            out = cluster.run(probe, ["getent", "hosts", "master-3"])[1].split()
            assert out[0] == cluster.info[new].address, (probe, out)
            assert cluster.can_connect(probe, "master-3", MASTER_PORT)
        # the old holder keeps its address and node name
        assert cluster.run("t1", ["getent", "hosts", "m3"])[1].split()[0] == old_ip
        assert f"{cluster.info[new].address} m9 master-3" in cluster.hosts_file().read_text()
    finally:
        cluster.set_dns("master-3", "m3")
        cluster.destroy(new)
    assert cluster.resolve("master-3") == cluster.info["m3"].address


def test_destroy_and_add_node_and_collect(cluster, tmp_path: Path) -> None:
    cluster.remote.put("t5", "/var/lib/faultline/data/marker", b"x")
    got = cluster.collect(tmp_path / "nodes")
    assert (tmp_path / "nodes" / "t5" / "faultline" / "data" / "marker").read_bytes() == b"x"
    assert (tmp_path / "nodes" / "t5" / "faultline" / "logs" / "tserver.log").exists()
    assert len(got) == 8
    cluster.destroy("t5")
    assert "t5" not in cluster.nodes()
    cluster.add_node("t5")
    assert cluster.daemon_status("t5") == "running"
    rc, _, _ = cluster.run("t5", ["test", "-e", "/var/lib/faultline/data/marker"], check=False)
    assert rc != 0  # a fresh node has no old data
    with pytest.raises(ClusterError, match="already exists"):
        cluster.add_node("t5")


def test_up_refuses_an_existing_name_and_attach_finds_it(cluster) -> None:
    from faultline.cluster.docker_backend import DockerBackend

    with pytest.raises(ClusterError, match="already exists"):
        DockerBackend(StoreDB().cluster_spec(cluster.spec.name, {"daemon": "none"}), image=cluster.image).up()
    again = DockerBackend.attach(cluster.spec.name)
    assert again.nodes() == cluster.nodes()
    assert again.resolve("master-1") == cluster.resolve("master-1")
    assert again.info["m2"].dns == ["master-2"]


def test_cli_up_status_down_leaves_nothing(image: str, capsys: pytest.CaptureFixture[str]) -> None:
    from faultline.cluster.docker_backend import docker_client, labelled_containers, remove_cluster
    from faultline.controller.cli import main

    name = _name("tcli")
    client = docker_client()
    try:
        assert (
            main(
                [
                    "cluster",
                    "up",
                    "--name",
                    name,
                    "--masters",
                    "1",
                    "--tservers",
                    "1",
                    "--daemon",
                    "placeholder",
                ]
            )
            == 0
        )
        assert main(["cluster", "status", "--name", name]) == 0
        out = capsys.readouterr().out
        assert "master-1" in out and "running" in out
        assert main(["cluster", "logs", "--name", name, "t1"]) == 0
        assert "placeholder t1" in capsys.readouterr().out
        assert main(["cluster", "ssh", "--name", name, "t1", "--", "hostname"]) == 0
        assert capsys.readouterr().out == "t1\n"
        assert main(["cluster", "ssh", "--name", name, "t1", "--", "sh", "-c", "exit 3"]) == 3
        assert main(["cluster", "down", "--name", name]) == 0
    finally:
        remove_cluster(client, name)
    assert not labelled_containers(client, f"{LABEL}.cluster={name}")
    assert not client.networks.list(filters={"label": f"{LABEL}.cluster={name}"})


def test_residue_reports_what_faults_leave(cluster) -> None:
    assert cluster.residue() == []
    try:
        cluster.cut("t3", "t4")
        cluster.pause("t5")
        cluster.set_clock_offset("m2", 2.5)
        left = cluster.residue()
        assert "t3: partition rules against ['t4']" in left and "t5: node process paused" in left
        assert any(line.startswith("m2: clock offset +2.5") for line in left)
    finally:
        cluster.heal_network()
        cluster.resume("t5")
        cluster.set_clock_offset("m2", 0)
    assert cluster.residue() == []


def test_every_db_runs_on_the_one_image_make_image_builds(capsys: pytest.CaptureFixture[str]) -> None:
    """`make image` (`faultline cluster image --every-db`) builds one image with every DB's packages;
    each DB's runs then find it and build nothing of their own (a minute per DB on two cores)."""
    from faultline.cluster.image import build_image, covering_image
    from faultline.controller.cli import main
    from faultline.dbs import loadable

    assert main(["cluster", "image", "--every-db"]) == 0
    union = capsys.readouterr().out.split()[0]
    for db in loadable():
        spec = db.cluster_spec("image", {})
        assert covering_image(spec.packages, spec.python_packages) is not None, db.name
        assert build_image(spec.packages, spec.python_packages).built is False, db.name
    assert covering_image(["redis-server"]) is not None  # a user's DB whose packages are among them
    assert covering_image(["no-such-package-in-any-db"]) is None
    assert union.startswith("faultline-node:")
