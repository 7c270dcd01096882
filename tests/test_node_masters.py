"""Masters: DNS re-resolution, permanent master failure (master-permanent-failure.txt), migration
from one master to three, and runtime master add/remove."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from store_cluster import started_with_table, wait_ksck_clean

from faultline.dbs.store.minicluster import MiniCluster, free_port
from faultline.node.client import NotFoundError
from faultline.node.protos import common_pb2 as cpb
from faultline.node.protos import common_pb2_grpc as cpbg
from faultline.node.server.rpc import HOSTS_ENV, ChannelPool, split_addr

pytestmark = pytest.mark.integration  # a real store cluster of processes on loopback


class _Ping(cpbg.GenericServicer):
    def __init__(self, uuid: str) -> None:
        self.uuid = uuid

    def Ping(self, request, context):
        return cpb.PingResponse(server=cpb.ServerIdentity(uuid=self.uuid), role="test")


def _serve(addr: str, uuid: str) -> grpc.Server:
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cpbg.add_GenericServicer_to_server(_Ping(uuid), s)
    assert s.add_insecure_port(addr) != 0
    s.start()
    return s


def _write_hosts(path: Path, mapping: dict[str, str]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{ip} {name}\n" for name, ip in mapping.items()))
    tmp.replace(path)


@pytest.mark.parametrize("reresolve", [True, False])
def test_name_moved_to_another_address_is_followed(tmp_path, monkeypatch, reresolve):
    """A channel to `svc:PORT` follows the name to a new address within about a second of a failure."""
    hosts = tmp_path / "hosts"
    port = free_port()
    _write_hosts(hosts, {"svc": "127.0.0.1"})
    monkeypatch.setenv(HOSTS_ENV, str(hosts))
    old = _serve(f"127.0.0.1:{port}", "old")
    new = None
    pool = ChannelPool(reresolve=reresolve)
    try:
        call = lambda: pool.call(f"svc:{port}", cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=0.5)  # noqa: E731
        assert call().server.uuid == "old"
        old.stop(0).wait()
        new = _serve(f"127.0.0.2:{port}", "new")
        _write_hosts(hosts, {"svc": "127.0.0.2"})
        moved_at = time.monotonic()
        seen = None
        while time.monotonic() - moved_at < 4.0:
            try:
                seen = call().server.uuid
                break
            except grpc.RpcError:
                time.sleep(0.05)
        if reresolve:
            assert seen == "new"
            assert time.monotonic() - moved_at < 1.5
        else:
            assert seen is None  # the no-dns-reresolve bug: stuck on the old address
    finally:
        pool.close()
        old.stop(0)
        if new is not None:
            new.stop(0)


def test_permanent_master_failure_replacement(tmp_path, monkeypatch):
    """Exactly the seed's procedure: the leader master dies for good; a replacement takes over its DNS
    name and uuid, copies the catalog from the new leader, starts, and the catalog is intact."""
    hosts = tmp_path / "hosts"
    names = ["master-1", "master-2", "master-3"]
    _write_hosts(hosts, dict.fromkeys(names, "127.0.0.1"))
    monkeypatch.setenv(HOSTS_ENV, str(hosts))  # this process's client resolves the names the same way
    c = MiniCluster(tmp_path / "c", master_names=names, env={HOSTS_ENV: str(hosts)})
    try:
        cl = started_with_table(c, "before", 2, 3)
        cl.put("before", "k", 1)
        leader_addr = cl._leader_master
        dead = next(n for n in c.nodes.values() if n.advertise == leader_addr)
        dead_uuid = dead.uuid
        # 2-3. the leader dies and its data is destroyed
        c.kill(dead.name)
        import shutil

        shutil.rmtree(dead.fs_dir)
        cl.create_table("during", 1, 3, timeout=40)  # the survivors elect a leader and keep serving DDL
        new_leader = cl._leader_master
        assert new_leader != leader_addr
        # 4. a replacement machine, formatted with the dead master's uuid
        host, port = split_addr(dead.advertise)
        repl = c.add_master("m-repl", f"127.0.0.2:{port}", dead.advertise, uuid=dead_uuid)
        r = c.tool("fs", "dump", "uuid", "--fs-dir", str(repl.fs_dir))
        assert r.stdout.strip() == dead_uuid
        # 5. the DNS name moves to the replacement
        _write_hosts(hosts, {**dict.fromkeys(names, "127.0.0.1"), host: "127.0.0.2"})
        # 6. copy the catalog from the leader (a follower is refused: KUDU-1556)
        follower = next(a for a in c.master_addrs if a not in (new_leader, dead.advertise))
        r = c.tool("local_replica", "copy_from_remote", "sys", follower, "--fs-dir", str(repl.fs_dir))
        assert r.returncode == 1 and "not the leader" in r.stderr, r.stderr
        r = c.tool("local_replica", "copy_from_remote", "sys", new_leader, "--fs-dir", str(repl.fs_dir))
        assert r.returncode == 0, r.stderr
        # 7. start it with the same master addresses
        c.start("m-repl")
        ms = c.wait_for(
            lambda: (
                lambda m: (
                    m if len(m.masters) == 3 and sum(x.role == "LEADER" for x in m.masters) == 1 else None
                )
            )(cl.list_masters()),
            30,
            "three masters with one leader",
        )
        assert {m.uuid for m in ms.masters} >= {dead_uuid}
        # the catalog is intact, and DDL keeps working
        assert {"before", "during"} <= set(cl.list_tables())
        assert cl.get("before", "k") == 1
        cl.create_table("after", 1, 3, timeout=40)
        wait_ksck_clean(c, 40)
        # the replacement holds the whole catalog: make it the only survivor's partner and read from it
        for n in list(c.nodes.values()):
            if n.kind == "master" and n.name != "m-repl" and n.advertise != cl._leader_master:
                c.kill(n.name)
                break
        assert {"before", "during", "after"} <= set(cl.list_tables())
        cl.close()
    finally:
        c.stop_all()


def test_migrate_one_master_to_three(tmp_path):
    """The seed's migration: stop A, format B and C, rewrite A's cmeta, copy_from_remote, start all."""
    c = MiniCluster(tmp_path / "c", num_masters=1)
    try:
        cl = started_with_table(c, "t", 2, 3)
        for i in range(20):
            cl.put("t", i, i * i)
        cl.close()
        a = c.nodes["m1"]
        c.kill("m1")
        b = c.add_master("m2", f"127.0.0.1:{free_port()}", "")
        b.advertise = b.bind
        cc = c.add_master("m3", f"127.0.0.1:{free_port()}", "")
        cc.advertise = cc.bind
        uuids = {
            n.name: c.tool("fs", "dump", "uuid", "--fs-dir", str(n.fs_dir)).stdout.strip() for n in (a, b, cc)
        }
        assert all(len(u) == 32 for u in uuids.values())
        # misuse: a bad peer spec changes nothing
        r = c.tool(
            "local_replica", "cmeta", "rewrite_raft_config", "sys", "nonsense", "--fs-dir", str(a.fs_dir)
        )
        assert r.returncode == 254 and "usage" in r.stderr
        peers = [f"{uuids[n.name]}:{n.advertise}" for n in (a, b, cc)]
        r = c.tool("local_replica", "cmeta", "rewrite_raft_config", "sys", *peers, "--fs-dir", str(a.fs_dir))
        assert r.returncode == 0, r.stderr
        r = c.tool("local_replica", "cmeta", "print_replica_uuids", "sys", "--fs-dir", str(a.fs_dir))
        assert r.stdout.split() == [uuids["m1"], uuids["m2"], uuids["m3"]]
        c.master_addrs = [a.advertise, b.advertise, cc.advertise]
        c.start("m1")
        for n in (b, cc):
            r = c.tool("local_replica", "copy_from_remote", "sys", a.advertise, "--fs-dir", str(n.fs_dir))
            assert r.returncode == 0, r.stderr
        c.start("m2")
        c.start("m3")
        # tablet servers (still configured with A only) learn the new masters from A's heartbeat
        # answers, and a client configured with A only follows the leader hints
        from faultline.node.client import KuduClient

        cl = KuduClient([a.advertise], default_timeout_s=30)
        ms = c.wait_for(
            lambda: (lambda m: m if sum(x.role == "LEADER" for x in m.masters) == 1 else None)(
                cl.list_masters()
            ),
            30,
            "a leader among three masters",
        )
        assert len(ms.masters) == 3
        assert cl.list_tables() == ["t"]
        assert [cl.get("t", i) for i in range(20)] == [i * i for i in range(20)]
        wait_ksck_clean(c, 40)
        # make a new master the leader: DDL still works, so tablet servers heartbeat to it
        lead = next(m for m in cl.list_masters().masters if m.role == "LEADER")
        if lead.addr == a.advertise:
            c.kill("m1")
        cl.create_table("t-after", 1, 3, timeout=40)
        c.start("m1")
        cl.close()
    finally:
        c.stop_all()


def test_master_add_and_remove_at_runtime(tmp_path):
    c = MiniCluster(tmp_path / "c", num_masters=3, num_tservers=1)
    try:
        cl = started_with_table(c, "t", 1, 1)
        port = free_port()
        new = c.add_master("m4", f"127.0.0.1:{port}", f"127.0.0.1:{port}")
        c.start("m4", masters=[*c.master_addrs, new.advertise])
        r = c.tool("master", "add", c.masters_arg(), new.advertise, "--timeout", "40")
        assert r.returncode == 0, r.stderr + c.logs("m4")
        ms = cl.list_masters()
        assert any(m.addr == new.advertise and m.voter for m in ms.masters)
        # remove one of the old followers again
        victim = next(m.addr for m in ms.masters if m.role != "LEADER" and m.addr != new.advertise)
        r = c.tool("master", "remove", c.masters_arg(), victim)
        assert r.returncode == 0, r.stderr
        assert victim not in [m.addr for m in cl.list_masters().masters]
        cl.create_table("t2", 1, 1, timeout=40)
        r = c.tool("master", "list", c.masters_arg())
        assert r.returncode == 0 and "LEADER" in r.stdout
        cl.close()
    finally:
        c.stop_all()


def test_threads_are_not_leaked_by_pool():
    # a smoke guard for ChannelPool.close(): closing twice is harmless
    pool = ChannelPool()
    pool.get("127.0.0.1:1")
    pool.close()
    pool.close()
    assert threading.active_count() >= 1


@pytest.mark.parametrize("bug", [False, True])
def test_new_leader_master_rebuilds_caches_from_catalog(tmp_path, bug):
    """KUDU-1353/1358: a new leader master serves what the catalog holds; with `cold-tserver-cache`
    it serves from caches never rebuilt, and loses tables created under the previous leader."""
    c = MiniCluster(
        tmp_path / "c", num_masters=3, num_tservers=1, bugs=("cold-tserver-cache",) if bug else ()
    )
    try:
        cl = started_with_table(c, "t", 1, 1)
        old = cl._leader_master
        c.kill(next(n.name for n in c.nodes.values() if n.advertise == old))
        tables = cl.list_tables()  # retried by the client until a new leader master answers
        assert cl._leader_master != old
        if bug:
            assert tables == []
            with pytest.raises(NotFoundError):
                cl.put("t", "k", 1)
        else:
            cl.put("t", "k", 1)
            assert tables == ["t"] and cl.get("t", "k") == 1
        cl.close()
    finally:
        c.stop_all()


@pytest.mark.parametrize("bug", [False, True])
def test_full_report_to_a_master_leading_again(tmp_path, bug):
    """KUDU-1374: a master that becomes leader for the second time must get full tablet reports; with
    `edge-triggered-reports` it never learns of unchanged tablets, and ksck says so."""
    c = MiniCluster(
        tmp_path / "c", num_masters=3, num_tservers=1, bugs=("edge-triggered-reports",) if bug else ()
    )
    try:
        cl = started_with_table(c, "t", 2, 1)
        first = next(m for m in cl.list_masters().masters if m.role == "LEADER")
        wait_ksck_clean(c, 30)
        for target in [next(m.uuid for m in cl.list_masters().masters if m.uuid != first.uuid), first.uuid]:
            r = c.tool("tablet", "leader_step_down", c.masters_arg(), "sys", "--new-leader", target)
            assert r.returncode == 0, r.stderr
            c.wait_for(
                lambda target=target: any(
                    m.uuid == target and m.role == "LEADER" for m in cl.list_masters().masters
                ),
                20,
                "the new leader",
            )
            time.sleep(1.0)
        assert next(m for m in cl.list_masters().masters if m.role == "LEADER").uuid == first.uuid
        r = c.tool("cluster", "ksck", c.masters_arg())
        if bug:
            assert r.returncode == 1 and "does not know its leader" in r.stdout
        else:
            assert r.returncode == 0, r.stdout
        cl.close()
    finally:
        c.stop_all()


def test_a_cut_off_leader_master_does_not_answer_catalog_reads(tmp_path: Path) -> None:
    """A leader master that cannot reach a majority may have been deposed without knowing it: it must not
    list tables from its own (possibly stale) catalog, but say the read was not confirmed."""
    import os
    import signal

    from faultline.node.protos import node_pb2 as pb
    from faultline.node.protos import node_pb2_grpc as pbg

    c = MiniCluster(tmp_path / "c", num_masters=3, num_tservers=1)
    try:
        cl = started_with_table(c, "a", 1, 1)
        leader = cl._leader_master
        others = [n for n in c.nodes.values() if n.kind == "master" and n.advertise != leader]
        assert len(others) == 2
        for n in others:
            os.killpg(n.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(grpc.RpcError) as err:
                pbg.MasterStub(cl.pool.get(leader)).ListTables(pb.ListTablesRequest(), timeout=10)
            assert (
                err.value.code() == grpc.StatusCode.UNAVAILABLE
                and "read not confirmed" in err.value.details()
            )
        finally:
            for n in others:
                os.killpg(n.proc.pid, signal.SIGCONT)
        assert "a" in c.wait_for(lambda: cl.list_tables(), 30, "tables listed again")
        cl.close()
    finally:
        c.stop_all()


def test_a_master_left_behind_catches_up_by_the_leaders_snapshot(tmp_path: Path) -> None:
    """The leader master holds its log only from a copy (as a replaced master does), and the master it must
    catch up lacks entries older than that log: the leader sends its snapshot of the catalog, the follower
    installs it and follows, so the two form a majority again. Kudu 1.x's masters cannot: an operator
    rebuilds such a master."""
    import shutil

    c = MiniCluster(tmp_path / "c", num_masters=3, num_tservers=1)
    try:
        c.start_all()
        cl = c.client(timeout=30)
        cl.create_table("t0", 1, 1, timeout=40, wait=False)
        leader_addr = cl._leader_master
        masters = [n for n in c.nodes.values() if n.kind == "master"]
        leader = next(n for n in masters if n.advertise == leader_addr)
        lag, copied = [n for n in masters if n is not leader]
        c.kill(lag.name)  # left behind: it never sees what follows
        for i in range(1, 6):
            cl.create_table(f"t{i}", 1, 1, timeout=40, wait=False)
        # `copied` is replaced by a copy of the leader's catalog: its log starts after the copy's snapshot
        c.kill(copied.name)
        shutil.rmtree(copied.fs_dir)
        repl = c.add_master("m-copy", copied.bind, copied.advertise, uuid=copied.uuid)
        r = c.tool("local_replica", "copy_from_remote", "sys", leader.advertise, "--fs-dir", str(repl.fs_dir))
        assert r.returncode == 0, r.stderr
        c.start("m-copy")
        c.wait_for(
            lambda: (lambda st: st is not None and st.commit_index >= 7)(cl.catalog_replica(repl.advertise)),
            30,
            "the copy following the leader",
        )
        c.kill(leader.name)  # only the copy, whose log starts late, can catch the laggard up now
        c.start(lag.name)

        def caught_up() -> bool:
            new, late = cl.catalog_replica(repl.advertise), cl.catalog_replica(lag.advertise)
            return (
                new is not None
                and late is not None
                and new.role == "LEADER"
                and late.term == new.term
                and late.applied_index >= new.commit_index
            )

        c.wait_for(caught_up, 40, "the laggard caught up by snapshot")
        assert "installed the leader's snapshot" in c.logs(lag.name, 400)
        assert "sending a snapshot" in c.logs("m-copy", 400)
        cl.create_table(
            "after", 1, 1, timeout=40, wait=False
        )  # committed by the copy and the laggard together
        assert {f"t{i}" for i in range(6)} | {"after"} <= set(cl.list_tables())
        cl.close()
    finally:
        c.stop_all()
