"""Acceptance on loopback: 3 masters + 3 tablet servers, DDL, rows, ksck, failover, bad requests."""

from __future__ import annotations

import time

import grpc
import pytest
from store_cluster import wait_ksck_clean

from faultline.dbs.store.minicluster import MiniCluster
from faultline.node.client import (
    AlreadyExistsError,
    IndeterminateError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg

pytestmark = pytest.mark.integration  # a real store cluster of processes on loopback


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = MiniCluster(tmp_path_factory.mktemp("nodecluster"))
    try:
        c.start_all()
        yield c
    finally:
        c.stop_all()


@pytest.fixture(scope="module")
def client(cluster):
    """A client of the module's cluster, on which the table `kv` exists: the tests use it whichever of them
    runs first (pytest-xdist may hand a module's tests to several workers, each with its own cluster)."""
    cl = cluster.client(timeout=20)
    try:
        cl.create_table("kv", num_tablets=4, replication=3, timeout=40)
        yield cl
    finally:
        cl.close()


def _leader_of(cluster: MiniCluster, client, table: str, partition: int) -> str:
    """Name of the node hosting the tablet's leader (asks the replicas themselves)."""
    locs = client.table_locations(table)
    tab = next(t for t in locs.tablets if t.partition == partition)
    for name, n in cluster.nodes.items():
        if n.kind != "tserver" or not n.alive():
            continue
        ch = client.pool.get(n.advertise)
        resp = pbg.ConsensusStub(ch).ListReplicas(pb.ListTabletsRequest(tablet_id=tab.tablet_id), timeout=3)
        if any(r.role == "LEADER" for r in resp.replicas):
            return name
    raise AssertionError("no leader")


def test_create_write_read_ksck(cluster, client):
    assert "kv" in client.list_tables()
    for i in range(40):
        client.put("kv", f"k{i}", i)
        client.put("kv", i, f"v{i}")
    assert client.get("kv", "k7") == 7
    assert client.get("kv", 7) == "v7"
    assert client.get("kv", "missing") is None
    assert client.cas("kv", "k1", 1, 100) is True
    assert client.cas("kv", "k1", 1, 200) is False
    assert client.get("kv", "k1") == 100
    res = client.batch("kv", [("put", "b1", 1), ("cas", "b1", 1, 2), ("delete", "k2")])
    assert [r[0] for r in res] == [True, True, True]
    assert client.get("kv", "b1") == 2 and client.get("kv", "k2") is None
    # a batch on one tablet is all-or-nothing: a failed CAS cancels its puts
    t = client.table("kv")
    same = [
        k for k in (f"s{i}" for i in range(200)) if client._partition("kv", k, time.monotonic() + 5) == 0
    ][:2]
    res = t.batch([("put", same[0], 1), ("cas", same[1], 999, 1)])
    assert res[1][0] is False and t.get(same[0]) is None
    rows = client.scan("kv", "k", "l")
    assert [k for k, _ in rows] == sorted(k for k, _ in rows)
    assert len(rows) == 39
    assert [k for k, _ in client.scan("kv", 0, 5)] == [0, 1, 2, 3, 4]
    r = cluster.tool("cluster", "ksck", cluster.masters_arg())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout


def test_bad_requests(cluster, client):
    with pytest.raises(NotFoundError):
        client.get("no-such-table", "k")
    with pytest.raises(InvalidArgumentError):
        client.put("kv", 1.5, "x")
    with pytest.raises(InvalidArgumentError):
        client.put("kv", "k", [1])
    with pytest.raises(InvalidArgumentError):
        client.put("kv", 2**70, 1)
    with pytest.raises(InvalidArgumentError):
        client.create_table("bad", num_tablets=0)
    with pytest.raises(InvalidArgumentError):
        client.create_table("bad", replication=2)
    with pytest.raises(AlreadyExistsError):
        client.create_table("kv", 1, 3)
    with pytest.raises(NotFoundError):
        client.delete_table("no-such-table")
    # the raw gRPC status codes, with a message
    tserver = next(n for n in cluster.nodes.values() if n.kind == "tserver")
    stub = pbg.TabletServerStub(client.pool.get(tserver.advertise))
    with pytest.raises(grpc.RpcError) as ei:
        stub.Write(pb.WriteRequest(tablet_id="0" * 32, ops=[pb.RowOp(type=pb.RowOp.PUT)]), timeout=5)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "key" in ei.value.details()
    with pytest.raises(grpc.RpcError) as ei:
        stub.Read(pb.ReadRequest(tablet_id="f" * 32, key=pb.Value(s="k")), timeout=5)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND and "not found" in ei.value.details()
    leader_master = client._leader_master
    mstub = pbg.MasterStub(client.pool.get(leader_master))
    with pytest.raises(grpc.RpcError) as ei:
        mstub.GetTableLocations(pb.GetTableLocationsRequest(name="nope"), timeout=5)
    assert ei.value.code() == grpc.StatusCode.NOT_FOUND


def test_kill_tablet_leader_writes_resume(cluster, client):
    client.put("kv", "before", 1)
    part = client._partition("kv", "before", time.monotonic() + 5)
    victim = _leader_of(cluster, client, "kv", part)
    cluster.kill(victim)
    try:
        t0 = time.monotonic()
        acked = None
        for i in range(200):
            try:
                client.put("kv", "before", 2 + i, timeout=5)
                acked = time.monotonic() - t0
                break
            except (UnavailableError, IndeterminateError):
                continue
        assert acked is not None and acked < 20, acked
        print(f"kill tablet leader -> next acked write: {acked:.2f}s")
        assert client.get("kv", "before") >= 2
    finally:
        cluster.start(victim)
    wait_ksck_clean(cluster, 40, "ksck clean after the old leader returns")


def test_kill_leader_master_ddl_resumes(cluster, client):
    client.list_tables()
    leader_addr = client._leader_master
    victim = next(n for n, p in cluster.nodes.items() if p.advertise == leader_addr)
    cluster.kill(victim)
    try:
        t0 = time.monotonic()
        client.create_table("after-failover", 2, 3, timeout=40)
        took = time.monotonic() - t0
        print(f"kill leader master -> next CreateTable done: {took:.2f}s")
        assert took < 40
        assert "after-failover" in client.list_tables() and "kv" in client.list_tables()
        client.put("after-failover", "x", 1)
        assert client.get("after-failover", "x") == 1
        client.delete_table("after-failover")
        assert "after-failover" not in client.list_tables()
    finally:
        cluster.start(victim)
    wait_ksck_clean(cluster, 60, "ksck clean after the old leader master returns")


def test_ksck_clean_under_write_load(cluster, client):
    """Followers trail the leader's commit index by an append; ksck must not call that unhealthy."""
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            try:
                client.put("kv", f"load{i % 50}", i, timeout=10)
            except Exception as exc:  # collected and asserted below
                errors.append(exc)
            i += 1

    ths = [threading.Thread(target=writer) for _ in range(4)]
    for t in ths:
        t.start()
    try:
        time.sleep(0.5)
        r = cluster.tool("cluster", "ksck", cluster.masters_arg(), "--json")
    finally:
        stop.set()
        for t in ths:
            t.join(timeout=30)
    import json

    rep = json.loads(r.stdout)
    assert r.returncode == 0 and rep["healthy"], rep["problems"]
    assert not errors, errors[:3]


def test_outcome_unknown_vs_not_applied(cluster, client):
    """A write to a paused leader is IndeterminateError (it may still apply); a write no server could
    receive is UnavailableError (it did not apply)."""
    import os
    import signal

    client.put("kv", "pz", 0)
    part = client._partition("kv", "pz", time.monotonic() + 5)
    victim = _leader_of(cluster, client, "kv", part)
    pid = cluster.nodes[victim].proc.pid
    os.killpg(pid, signal.SIGSTOP)
    try:
        with pytest.raises(IndeterminateError):
            client.put("kv", "pz", 1, timeout=1.5)
    finally:
        os.killpg(pid, signal.SIGCONT)
    assert client.get("kv", "pz", timeout=30) in (0, 1)
    # every replica of every tablet down: nothing can receive the write
    tservers = [n for n, p in cluster.nodes.items() if p.kind == "tserver"]
    for n in tservers:
        cluster.kill(n)
    try:
        with pytest.raises(UnavailableError):
            client.put("kv", "pz", 2, timeout=2)
    finally:
        cluster.start_all()
    assert client.get("kv", "pz", timeout=30) in (0, 1)
    wait_ksck_clean(cluster, 40, "ksck")
