"""Admin tools against a running cluster: tablet config changes, leadership, tables, alter, restart."""

from __future__ import annotations

import time

import pytest
from store_cluster import started_with_table, wait_ksck_clean

from faultline.dbs.store.minicluster import MiniCluster
from faultline.node.client import InvalidArgumentError
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.tool import output

pytestmark = pytest.mark.integration  # a real store cluster of processes on loopback


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = MiniCluster(tmp_path_factory.mktemp("nodetools"), num_masters=1, num_tservers=4)
    try:
        cl = started_with_table(c, "t", 2, 3, 20)
        c.cl = cl
        yield c
    finally:
        try:
            c.cl.close()
        except Exception:
            pass
        c.stop_all()


def _status(c: MiniCluster, tablet_id: str) -> dict[str, pb.ReplicaStatus]:
    out = {}
    for n in c.nodes.values():
        if n.kind == "tserver" and n.alive():
            resp = pbg.ConsensusStub(c.cl.pool.get(n.advertise)).ListReplicas(
                pb.ListTabletsRequest(tablet_id=tablet_id), timeout=5
            )
            for r in resp.replicas:
                out[n.uuid] = r
    return out


def _status_with_leader(c: MiniCluster, tablet_id: str) -> dict[str, pb.ReplicaStatus]:
    """`_status` once one of the replicas leads (waits up to 20 s)."""
    return c.wait_for(
        lambda: (lambda s: s if any(r.role == "LEADER" for r in s.values()) else None)(_status(c, tablet_id)),
        20,
        "a leader",
    )


def _tablet(c: MiniCluster) -> pb.TabletLocation:
    return c.cl.table_locations("t").tablets[0]


def test_leader_step_down_to_chosen_replica(cluster):
    tab = _tablet(cluster)
    st = _status_with_leader(cluster, tab.tablet_id)
    leader = next(u for u, r in st.items() if r.role == "LEADER")
    target = next(u for u, r in st.items() if r.role == "FOLLOWER" and r.state == "RUNNING")
    r = cluster.tool(
        "tablet", "leader_step_down", cluster.masters_arg(), tab.tablet_id, "--new-leader", target
    )
    assert r.returncode == 0, r.stderr
    cluster.wait_for(lambda: _status(cluster, tab.tablet_id)[target].role == "LEADER", 20, "the target leads")
    assert leader != target
    assert cluster.cl.get("t", 3) == 3


def test_runtime_flags_staged_election_and_the_vote_crash_point(cluster):
    """The controls the staged-election nemeses use (nemesis/elections.py), on real processes: set_flag,
    failure detection off, an abrupt step-down, an election by RPC, and a server that crashes right after
    granting its vote, then comes back with the defaults."""
    tab = _tablet(cluster)
    st = _status_with_leader(cluster, tab.tablet_id)
    by_uuid = {n.uuid: n for n in cluster.nodes.values() if n.kind == "tserver"}
    servers = [by_uuid[u] for u in st]
    bad = cluster.tool("tserver", "set_flag", servers[0].advertise, "no_such_flag", "1")
    assert (
        bad.returncode != 0
        and "enable_leader_failure_detection" in bad.stderr
        and "Traceback" not in bad.stderr
    )
    bad = cluster.tool(
        "tserver", "set_flag", servers[0].advertise, "enable_leader_failure_detection", "maybe"
    )
    assert bad.returncode != 0 and "true or false" in bad.stderr
    try:
        for n in servers:
            r = cluster.tool("tserver", "set_flag", n.advertise, "enable_leader_failure_detection", "false")
            assert r.returncode == 0 and "true -> false" in r.stdout, r.stderr
        r = cluster.tool("tablet", "leader_step_down", cluster.masters_arg(), tab.tablet_id, "--abrupt")
        assert r.returncode == 0, r.stderr
        time.sleep(4.0)  # more than two election timeouts: with detection off, nobody campaigns
        assert not any(s.role == "LEADER" for s in _status(cluster, tab.tablet_id).values())

        voter, candidate = servers[0], servers[1]
        r = cluster.tool("tserver", "set_flag", voter.advertise, "fault_crash_after_vote_fraction", "1")
        assert r.returncode == 0, r.stderr
        resp = pbg.ConsensusStub(cluster.cl.pool.get(candidate.advertise)).RunLeaderElection(
            pb.RunLeaderElectionRequest(tablet_id=tab.tablet_id), timeout=5
        )
        assert resp.term > st[candidate.uuid].term
        cluster.wait_for(lambda: not voter.alive(), 15, "the voter crashed after its vote")
        assert "crashing right after granting a vote" in cluster.logs(voter.name)
        cluster.wait_for(
            lambda: _status(cluster, tab.tablet_id)[candidate.uuid].role == "LEADER",
            15,
            "the candidate leads on the crashed voter's vote",
        )
        cluster.start(voter.name)
        r = cluster.tool("tserver", "set_flag", voter.advertise, "fault_crash_after_vote_fraction", "0")
        assert r.returncode == 0 and "0.0 -> 0" in r.stdout, r.stdout  # a restart disarmed it
    finally:
        for n in servers:
            if not n.alive():
                cluster.start(n.name)
            cluster.tool("tserver", "set_flag", n.advertise, "enable_leader_failure_detection", "true")
    assert cluster.cl.get("t", 3) == 3


def test_move_replica_and_add_remove(cluster):
    tab = _tablet(cluster)
    members = {r.uuid for r in tab.replicas}
    spare = next(n.uuid for n in cluster.nodes.values() if n.kind == "tserver" and n.uuid not in members)
    src = sorted(members)[0]
    r = cluster.tool(
        "tablet", "change_config", "move_replica", cluster.masters_arg(), tab.tablet_id, src, spare
    )
    assert r.returncode == 0, r.stderr
    cluster.wait_for(
        lambda: {x.uuid for x in _tablet(cluster).replicas} == (members - {src}) | {spare},
        30,
        "the master's view of the moved replica",
    )
    # the evicted replica gets tombstoned by the master
    cluster.wait_for(lambda: _status(cluster, tab.tablet_id)[src].state == "TOMBSTONED", 30, "tombstone")
    assert [cluster.cl.get("t", i) for i in range(20)] == list(range(20))
    # add the old server back as a non-voter, then remove it
    r = cluster.tool(
        "tablet",
        "change_config",
        "add_replica",
        cluster.masters_arg(),
        tab.tablet_id,
        src,
        "--replica-type",
        "NON_VOTER",
    )
    assert r.returncode == 0, r.stderr
    cluster.wait_for(lambda: _status(cluster, tab.tablet_id)[src].state == "RUNNING", 30, "copied back")
    r = cluster.tool("tablet", "change_config", "remove_replica", cluster.masters_arg(), tab.tablet_id, src)
    assert r.returncode == 0, r.stderr
    r = cluster.tool(
        "tablet", "change_config", "remove_replica", cluster.masters_arg(), tab.tablet_id, "e" * 32
    )
    assert r.returncode == 1 and "not a member" in r.stderr
    wait_ksck_clean(cluster, 30, "ksck")


def test_listing_tools_print_json_that_the_one_parser_reads(cluster):
    """`--json` is the tools' machine-readable form: what nemeses and the fake rely on, read back only
    through node/tool/output.py; the text form stays for people."""
    ms = cluster.tool("master", "list", cluster.masters_arg(), "--json")
    assert ms.returncode == 0, ms.stderr
    masters = output.parse_master_list(ms.stdout)
    assert [m["role"] for m in masters] == ["LEADER"] and masters[0]["voter"] is True
    assert masters[0]["addr"] == cluster.masters_arg()
    text = cluster.tool("master", "list", cluster.masters_arg()).stdout
    assert text == output.format_master_list(masters) and "LEADER" in text
    tl = cluster.tool("table", "list", cluster.masters_arg(), "--tablets", "--json")
    assert tl.returncode == 0, tl.stderr
    tables = {t["name"]: t for t in output.parse_table_list(tl.stdout)}
    locs = cluster.cl.table_locations("t").tablets
    assert [tab["tablet_id"] for tab in tables["t"]["tablets"]] == [t.tablet_id for t in locs]
    for tab in tables["t"]["tablets"]:
        assert tab["state"] == "RUNNING" and sum(r["role"] == "LEADER" for r in tab["replicas"]) <= 1
        assert all(r["addr"] and len(r["uuid"]) == 32 for r in tab["replicas"])
    names = output.parse_table_list(cluster.tool("table", "list", cluster.masters_arg(), "--json").stdout)
    assert "t" in {t["name"] for t in names} and all("tablets" not in t for t in names)
    server = next(n for n in cluster.nodes.values() if n.kind == "tserver" and n.alive())
    rr = cluster.tool("remote_replica", "list", server.advertise, "--json")
    assert rr.returncode == 0, rr.stderr
    for rep in output.parse_remote_replicas(rr.stdout):
        assert rep["term"] >= 0 and (rep["state"] != "RUNNING" or rep["voters"] or rep["non_voters"])


def test_table_tools_and_alter(cluster):
    r = cluster.tool(
        "table", "create", cluster.masters_arg(), "viatool", "--num-tablets", "2", "--replication", "1"
    )
    assert r.returncode == 0, r.stderr
    r = cluster.tool("table", "list", cluster.masters_arg(), "--tablets")
    assert r.returncode == 0 and "viatool" in r.stdout and "LEADER" in r.stdout
    r = cluster.tool("table", "create", cluster.masters_arg(), "viatool")
    assert r.returncode == 1 and "ALREADY_EXISTS" in r.stderr
    assert cluster.cl.alter_table("t", 2) == 2
    with pytest.raises(InvalidArgumentError):
        cluster.cl.alter_table("t", 1)
    tids = [t.tablet_id for t in cluster.cl.table_locations("t").tablets]
    cluster.wait_for(
        lambda: all(
            all(r.schema_version == 2 for r in _status(cluster, tid).values() if r.state == "RUNNING")
            for tid in tids
        ),
        30,
        "schema version 2 everywhere",
    )
    doomed = [t.tablet_id for t in cluster.cl.table_locations("viatool").tablets]
    r = cluster.tool("table", "delete", cluster.masters_arg(), "viatool")
    assert r.returncode == 0, r.stderr
    cluster.wait_for(
        lambda: all(all(r.state == "TOMBSTONED" for r in _status(cluster, tid).values()) for tid in doomed),
        30,
        "the deleted table's replicas tombstoned",
    )
    r = cluster.tool("table", "delete", cluster.masters_arg(), "viatool")
    assert r.returncode == 1 and "NOT_FOUND" in r.stderr


def test_full_restart_keeps_data(cluster):
    cluster.cl.put("t", "durable", 42)
    cluster.stop_all()
    time.sleep(0.2)
    cluster.start_all()
    assert cluster.cl.get("t", "durable", timeout=40) == 42
    assert [cluster.cl.get("t", i) for i in range(20)] == list(range(20))
    wait_ksck_clean(cluster, 40, "ksck")


class _Masters:
    """A stand-in channel pool: each address answers Ping and ListReplicas for the catalog with a fixed
    (uuid, role, term, last index), or is down (None)."""

    def __init__(self, states: dict[str, tuple[str, str, int, int] | None]) -> None:
        self.states = states

    def call(self, addr: str, stub, method: str, req, timeout: float):
        import grpc

        from faultline.node.master.catalog import SYS_TABLET
        from faultline.node.protos import common_pb2 as cpb

        st = self.states[addr]
        if st is None:
            err = grpc.RpcError()
            err.code = lambda: grpc.StatusCode.UNAVAILABLE  # type: ignore[method-assign]
            raise err
        uuid, role, term, last = st
        if method == "Ping":
            return cpb.PingResponse(server=cpb.ServerIdentity(uuid=uuid))
        assert method == "ListReplicas"
        return pb.ListTabletsResponse(
            replicas=[pb.ReplicaStatus(tablet_id=SYS_TABLET, role=role, term=term, last_index=last)]
        )


def test_catalog_copy_source_is_the_current_leader_unless_careless() -> None:
    from faultline.node.tool.ops import ToolFailure, _catalog_source

    lagging = ("u1", "LEADER", 3, 40)  # an old leader, cut off: still believes it leads term 3
    current = ("u2", "LEADER", 4, 90)
    follower = ("u3", "FOLLOWER", 4, 90)
    pool = _Masters({"a:1": lagging, "b:1": current, "c:1": follower, "d:1": None})
    assert _catalog_source(pool, ["a:1", "b:1", "c:1"], careless=False) == "b:1"
    assert _catalog_source(pool, ["d:1", "c:1", "b:1"], careless=False) == "b:1"
    # KUDU-1556: the careless tool copies from the first master that answers, lagging or not
    assert _catalog_source(pool, ["d:1", "a:1", "b:1"], careless=True) == "a:1"
    # the only leader in sight is of an older term than a follower knows: refuse, retry later
    with pytest.raises(ToolFailure, match="no leader of the current term"):
        _catalog_source(pool, ["a:1", "c:1"], careless=False)
    # no leader anywhere (e.g. an election under way): the most advanced replica
    pool.states["e:1"] = ("u5", "FOLLOWER", 4, 95)
    assert _catalog_source(pool, ["c:1", "e:1"], careless=False) == "e:1"
    # a source that does not answer may know a newer term: an old leader no follower confirms is refused
    # (the other master and the dead one elected a newer leader while it was cut off), and so is the most
    # advanced of those that answered
    with pytest.raises(ToolFailure, match="d:1 did not answer, and no other master confirms the leader a:1"):
        _catalog_source(pool, ["a:1", "d:1"], careless=False)
    with pytest.raises(ToolFailure, match="d:1 did not answer"):
        _catalog_source(pool, ["c:1", "e:1", "d:1"], careless=False)
