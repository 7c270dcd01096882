"""The local backend (network namespaces, needs root): up, partition, heal, DNS move, down leaves nothing."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator

import pytest
from cluster_checks import assert_pause_kill_start, brought_up

from faultline.cluster.base import ClusterError
from faultline.dbs.store import StoreDB
from faultline.dbs.store.layout import MASTER_PORT, TSERVER_PORT

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def cluster() -> Iterator:
    from faultline.cluster.local_backend import LocalBackend

    b = LocalBackend(
        StoreDB().cluster_spec(
            f"tloc-{secrets.token_hex(3)}", {"masters": 3, "tservers": 2, "daemon": "placeholder"}
        )
    )
    with brought_up(b):
        yield b


def reach(b, src: str, dst: str) -> bool:
    port = MASTER_PORT if b.info[dst].role == "master" else TSERVER_PORT
    return b.can_connect(src, dst, port, 1.0)


def test_up_names_and_host_reachability(cluster) -> None:
    assert cluster.nodes() == ["m1", "m2", "m3", "t1", "t2"]
    assert all(cluster.daemon_status(n) == "running" for n in cluster.nodes())
    assert cluster.info["m1"].address.startswith("10.77.")
    for n in cluster.nodes():
        assert cluster.can_connect(n, "master-1", MASTER_PORT), n
    with socket.create_connection((cluster.resolve("master-2"), MASTER_PORT), 5) as s:
        assert s.recv(16) == b"m2\n"


def test_cut_and_heal(cluster) -> None:
    try:
        cluster.cut("m1", "t1")
        assert not reach(cluster, "m1", "t1") and not reach(cluster, "t1", "m1")
        assert reach(cluster, "m1", "m2") and reach(cluster, "t2", "t1") and reach(cluster, "t1", "m3")
    finally:
        cluster.heal_network()
    assert reach(cluster, "m1", "t1") and reach(cluster, "t1", "m1")
    for n in ("m1", "t1"):
        assert "FL-PART" not in cluster.run(n, [cluster.iptables(n), "-w", "-S"])[1]


def test_move_master_name(cluster) -> None:
    cluster.add_node("m4")
    try:
        cluster.set_dns("master-1", "m4")
        # the running placeholder on t1 sees the namespace's hosts file change (rewritten in place)
        assert cluster.run("t1", ["getent", "hosts", "master-1"])[1].split()[0] == cluster.info["m4"].address
        with socket.create_connection((cluster.resolve("master-1"), MASTER_PORT), 5) as s:
            assert s.recv(16) == b"m4\n"
    finally:
        cluster.set_dns("master-1", "m1")
        cluster.destroy("m4")
    assert cluster.run("t1", ["getent", "hosts", "master-1"])[1].split()[0] == cluster.info["m1"].address


def test_lifecycle(cluster) -> None:
    assert_pause_kill_start(cluster, "t2", probe_from="t1", port=TSERVER_PORT)


def test_down_leaves_nothing_and_names_are_unique() -> None:
    from faultline.cluster.local_backend import LocalBackend, leftovers

    name = f"tloc-{secrets.token_hex(3)}"
    b = LocalBackend(StoreDB().cluster_spec(name, {"masters": 1, "tservers": 1, "daemon": "placeholder"}))
    try:
        b.up()
        with pytest.raises(ClusterError, match="already exists"):
            LocalBackend(StoreDB().cluster_spec(name, {"daemon": "placeholder"})).up()
        ns = [b.ns(n) for n in b.info]
    finally:
        b.down()
    left = leftovers()
    assert not set(ns) & set(left["namespaces"])
    assert b.host_link not in left["links"] and name not in left["state"]
