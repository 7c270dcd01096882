"""Nemeses against the in-memory fake cluster: each fault applies, records what it did, and heals."""

from __future__ import annotations

import itertools
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from faultline import gen
from faultline.core import Run
from faultline.dbs import get_db
from faultline.dbs.store import StoreDB
from faultline.dbs.store.admin import ToolResult
from faultline.dbs.store.fake import FakeBackend, fake_run, store_spec
from faultline.dbs.store.faults.topology import (
    MasterLeaderReturnNemesis,
    MasterReplaceLaggingNemesis,
    MasterReplaceNemesis,
    MembershipNemesis,
    TserverReplaceNemesis,
)
from faultline.nemesis import registry
from faultline.nemesis.faults import ClockNemesis, PartitionNemesis, ProcessNemesis


def admin_calls(b: FakeBackend, action: str) -> list[tuple[str, dict[str, Any]]]:
    """(node, arguments) of each admin action of that name the fake answered, in order."""
    return [(node, args) for node, name, args in b.store_admin.calls if name == action]


@pytest.fixture()
def test() -> Run:
    b = FakeBackend(seed=1)
    b.up(store_spec(3, 5))
    b.tables["register"] = {"rows": {}, "schema_version": 0, "columns": []}
    return fake_run(b, seed=1, masters=3, tservers=5)


def test_partition_leader_isolates_the_master_leader(test: dict) -> None:
    n = PartitionNemesis().setup(test)
    done = n.invoke(test, {"f": "start-partition", "value": {"shape": "leader", "targets": "masters"}})
    assert done["type"] == "ok" and done["value"]["leader"] == "m1"  # the fake's leader is the first running
    assert done["value"]["groups"] == [["m1"], ["m2", "m3"]]
    assert test.backend.grudge == {"m1": {"m2", "m3"}, "m2": {"m1"}, "m3": {"m1"}}
    n.invoke(test, {"f": "stop-partition"})
    assert test.backend.grudge == {}


@pytest.mark.parametrize("shape", ["one", "halves", "majority", "ring", "bridge"])
def test_every_partition_shape_applies_and_heals(test: dict, shape: str) -> None:
    n = PartitionNemesis().setup(test)
    done = n.invoke(test, {"f": "start-partition", "value": {"shape": shape, "targets": "all"}})
    assert done["type"] == "ok" and test.backend.grudge
    n.heal(test)
    assert test.backend.residue() == []


@pytest.mark.parametrize("mode", ["kill", "pause"])
def test_kill_and_pause_then_revive(test: dict, mode: str) -> None:
    n = ProcessNemesis(mode).setup(test)
    done = n.invoke(test, {"f": f"start-{mode}", "value": {"targets": "tservers", "subset": "majority"}})
    victims = done["value"]["nodes"]
    assert len(victims) == 3 and all(v.startswith("t") for v in victims)
    state = "killed" if mode == "kill" else "paused"
    assert all(test.backend.state[v] == state for v in victims)
    leaders = n.invoke(test, {"f": f"start-{mode}", "value": {"targets": "masters", "subset": "leaders"}})
    assert leaders["value"]["nodes"] == ["m1"]
    stop = n.invoke(test, {"f": f"stop-{mode}"})
    assert sorted(stop["value"]["nodes"]) == sorted([*victims, "m1"])
    assert test.backend.residue() == []


def test_clock_bump_and_strobe_are_reset(test: dict) -> None:
    n = ClockNemesis(strobe_s=0.2, strobe_period_s=0.05).setup(test)
    for kind in ("bump", "strobe"):
        done = n.invoke(
            test, {"f": "start-clock", "value": {"kind": kind, "targets": "all", "subset": "minority"}}
        )
        assert done["value"]["offsets"] and all(abs(o) <= 5 for o in done["value"]["offsets"].values())
    assert any(test.backend.clock.values())
    n.invoke(test, {"f": "stop-clock"})
    assert test.backend.residue() == []


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_master_replace_follows_the_procedure(test: dict, seed: int) -> None:
    test.spec = test.spec.replace(seed=seed)  # different victims, the leader among them
    b = test.backend
    n = MasterReplaceNemesis(wait_s=5).setup(test)
    done = n.invoke(test, {"f": "replace-master"})
    v = done["value"]
    assert done["type"] == "ok" and v["healthy"] is True
    dead, new, name = v["dead"], v["replacement"], v["name"]
    assert new == "m4" and b.state[dead] == "destroyed" and b.dns[name] == new
    order = [e for e in b.events if e[1] in (dead, new) or e[0] == "dns"]
    assert order[:5] == [
        ("stopped", dead),
        ("destroyed", dead),
        ("add", new),
        ("dns", f"{name}->{new}"),
        ("running", new),
    ]
    copies = admin_calls(b, "copy_from_remote")
    leader_name = next(n for n, node in b.dns.items() if node == v["leader"])
    assert v["leader"] != dead and leader_name != name
    # the tool gets every survivor by its DNS name (it picks the leader itself), never the dead one's name
    source = copies[0][1]["source"].split(",")
    assert source[0] == f"{leader_name}:7051" and f"{name}:7051" not in source and len(source) == 2
    assert copies[0][1]["bugs"] == []  # the correct store's tool
    assert [node for node, _ in copies] == [new]
    # then the replacement is handed the leadership, under the dead master's name
    handover = admin_calls(b, "leader_step_down")[0][1]
    assert handover["new_leader"] == v["uuid"]
    assert v["replacement_leads"] is True
    assert any(m["addr"] == f"{name}:7051" and m["role"] == "LEADER" for m in b.master_rows())
    # after the handover it only watched: the fault's interval ends that long before the completion
    assert isinstance(v["watched_s"], float) and 0 <= v["watched_s"] < 5


def test_master_replace_lagging_copies_while_the_old_leader_is_cut_off_then_moves_the_cut(test: dict) -> None:
    test.spec = test.spec.replace(bugs=["copy-from-lagging-master"])
    b = test.backend
    cuts: list[tuple[dict, str]] = []  # each grudge, and the replacement's state when it was applied
    partition = b.partition
    b.partition = lambda g: (
        cuts.append(({k: set(v) for k, v in g.items()}, b.state.get("m4", "-"))),
        partition(g),
    )[1]
    n = MasterReplaceLaggingNemesis(wait_s=3, lag_s=0, hold_s=0).setup(test)
    done = n.invoke(test, {"f": "replace-master-lagging"})
    v = done["value"]
    assert done["type"] == "ok" and v["healthy"] is True, v
    old, x, c = v["old_leader"], v["new_leader"], v["replaced"]
    assert old == "master-1" and len({old, x, c}) == 3 and b.dns[c] == v["replacement"] == "m4"
    # the old leader alone first, while the replacement does not exist; then the new leader alone, the
    # replacement made but not started yet
    assert len(cuts) == 2
    assert cuts[0][0]["m1"] >= {b.dns[x]} and cuts[0][1] == "-"
    assert cuts[1][0][b.dns[x]] >= {"m1", "m4"} and not cuts[1][0]["m1"] & {"m4"} and cuts[1][1] != "running"
    copy = admin_calls(b, "copy_from_remote")[0][1]
    # handed the old leader first, then the new one; the store's bugs ride along
    assert copy["source"] == f"{old}:7051,{x}:7051"
    assert "copy-from-lagging-master" in copy["bugs"]
    assert b.residue() == [] and b.state["m1"] == "running"
    assert "master-replace-lagging" in registry.entries_for(StoreDB())
    # the cut moved in one step: no heal between the two cuts (X would catch L up at once)
    kinds = [e[0] for e in b.events if e[0] in ("partition", "heal")]
    assert kinds[:2] == ["partition", "partition"]


def test_a_master_that_stays_behind_is_named_then_rebuilt_by_its_own_repair_op(test: dict) -> None:
    """`rebuild-lagging-masters`, the operator's repair: a master still behind the leader after the settle
    time is named in `never_caught_up` with the reason (the evidence the catalog checker reports), then
    destroyed, and a fresh node under its name copies the catalog from the leader."""
    b = test.backend
    b.lagging_masters = {"m3"}
    n = MasterReplaceNemesis(wait_s=3, settle_s=0.5).setup(test)
    done = n.invoke(test, {"f": "rebuild-lagging-masters", "value": None})
    v = done["value"]
    assert done["type"] == "ok" and v["never_caught_up"] == ["master-3"] and v["rebuilt"] == ["master-3"], v
    assert (
        v["leader"] == "master-1"
        and v["waited_s"] == 0.5
        and "master-3 still behind the leader" in v["reason"]
    )
    assert b.state["m3"] == "destroyed" and b.dns["master-3"] == "m4" and b.state["m4"] == "running"
    copy = admin_calls(b, "copy_from_remote")[0][1]
    assert copy["source"] == "master-1:7051"  # from the leader only
    again = n.invoke(test, {"f": "rebuild-lagging-masters", "value": None})  # caught up now: nothing to do
    assert (
        again["type"] == "ok" and again["value"]["never_caught_up"] == [] and again["value"]["rebuilt"] == []
    )


def test_master_replace_that_finds_no_leader_completes_as_info_and_recopy_is_its_own_op(test: dict) -> None:
    """The survivors never elect a leader (a finding about the store): the op completes as info, the run
    goes on. `heal` copies nothing and leaves the empty replacement stopped (started, it would found a new
    catalog under the dead master's identity); the repair `recopy-master` copies, with its reason, and
    starts it."""
    b = test.backend
    n = MasterReplaceNemesis(wait_s=1).setup(test)
    real_stop = b.stop

    def stop_all_masters(node: str) -> None:  # the victim's stop takes the other masters down too
        for m in list(b.masters):
            real_stop(m)

    b.stop = stop_all_masters
    done = n.invoke(test, {"f": "replace-master"})
    b.stop = real_stop
    assert done["type"] == "info" and "no leader among the surviving masters" in done["value"]["error"]
    assert done["value"]["steps"][:2] == [
        f"stop {done['value']['steps'][0].split()[-1]}",
        f"destroy {done['value']['steps'][0].split()[-1]}",
    ]
    assert not admin_calls(b, "copy_from_remote") and b.state["m4"] != "running"
    for m in ("m1", "m2", "m3"):
        if b.state[m] == "stopped":
            b.start(m)
    n.heal(test)
    assert not admin_calls(b, "copy_from_remote") and b.state["m4"] != "running"
    rep = n.invoke(test, {"f": "recopy-master", "value": None})
    assert rep["type"] == "ok" and "no leader among the surviving masters" in rep["value"]["reason"], rep
    copy = admin_calls(b, "copy_from_remote")
    assert len(copy) == 1 and b.state["m4"] == "running"
    assert n.invoke(test, {"f": "recopy-master", "value": None})["type"] == "fail"  # once only
    n.heal(test)
    assert len(admin_calls(b, "copy_from_remote")) == 1


def test_master_replace_runs_the_tool_with_the_stores_bugs(test: dict) -> None:
    """The copy tool is part of the store under test: it carries the injected bugs, as the nodes do."""
    test.spec = test.spec.replace(bugs=["copy-from-lagging-master"])
    b = test.backend
    assert MasterReplaceNemesis(wait_s=5).setup(test).invoke(test, {"f": "replace-master"})["type"] == "ok"
    copy = admin_calls(b, "copy_from_remote")[0][1]
    assert copy["bugs"] == ["copy-from-lagging-master"]


def test_tserver_replace_and_membership(test: dict) -> None:
    b = test.backend
    done = TserverReplaceNemesis(wait_s=5).setup(test).invoke(test, {"f": "replace-tserver"})
    assert done["type"] == "ok" and done["value"]["added"] == "t6"
    assert b.state[done["value"]["destroyed"]] == "destroyed"
    m = MembershipNemesis().setup(test)
    out = m.invoke(test, {"f": "membership", "value": {"action": "leader-step-down"}})
    assert out["type"] == "ok"
    assert admin_calls(b, "leader_step_down")


def test_composite_routes_ops_and_heals_everything(test: dict) -> None:
    pkg = registry.compose(["partition", "kill", "clock"], get_db("store"), interval_s=1)
    nem = pkg.nemesis.setup(test)
    assert {"start-partition", "stop-kill", "start-clock"} <= nem.fs
    nem.invoke(test, {"f": "start-partition", "value": {"shape": "halves", "targets": "all"}})
    nem.invoke(test, {"f": "start-kill", "value": {"targets": "tservers", "subset": "one"}})
    nem.invoke(test, {"f": "start-clock", "value": {"kind": "bump", "targets": "all", "subset": "one"}})
    assert len(test.backend.residue()) == 3
    nem.heal(test)
    assert test.backend.residue() == []
    assert nem.invoke(test, {"f": "no-such"})["type"] == "fail"


def test_composed_schedule_interleaves_and_final_generator_stops_all() -> None:
    pkg = registry.compose(["partition", "kill"], get_db("store"), interval_s=1)
    h = gen.simulate(gen.nemesis(gen.time_limit(10, pkg.generator)), concurrency=0, seed=3)
    fs = [o["f"] for o in h if o["type"] == "invoke"]
    counts = Counter(fs)
    assert counts["start-partition"] >= 4 and counts["start-kill"] >= 4
    # each package alternates start and stop
    for f in ("partition", "kill"):
        seq = [x for x in fs if x.endswith(f)]
        assert all(a != b for a, b in itertools.pairwise(seq))
    # the faults overlap: a kill starts while a partition is active
    active = set()
    overlapped = False
    for x in fs:
        kind = x.split("-", 1)[1]
        if x.startswith("start-"):
            overlapped |= bool(active)
            active.add(kind)
        else:
            active.discard(kind)
    assert overlapped
    final = [o["f"] for o in gen.simulate(gen.nemesis(pkg.final_generator), 0) if o["type"] == "invoke"]
    assert final == ["stop-partition", "stop-kill"]


def test_single_shapes_are_selectable() -> None:
    pkg = registry.compose(["partition-ring"], get_db("store"), interval_s=0.5)
    h = gen.simulate(gen.nemesis(gen.time_limit(3, pkg.generator)), concurrency=0)
    shapes = {o["value"]["shape"] for o in h if o["f"] == "start-partition" and o["type"] == "invoke"}
    assert shapes == {"ring"}
    with pytest.raises(ValueError, match="valid: none, partition"):
        registry.validate(["partition-triangle"], get_db("store"))


def test_master_migrate_one_to_three_on_the_fake() -> None:
    from faultline.dbs.store.faults.topology import MasterMigrateNemesis

    b = FakeBackend(seed=2)
    b.up(store_spec(1, 3))
    test = fake_run(b, seed=2, masters=1, tservers=3)
    done = MasterMigrateNemesis(wait_s=5).setup(test).invoke(test, {"f": "migrate-masters"})
    assert done["type"] == "ok" and done["value"]["healthy"] is True
    assert sorted(b.dns) == ["master-1", "master-2", "master-3"]
    assert b.dns["master-2"] == "m2" and b.dns["master-3"] == "m3"
    rewrite = admin_calls(b, "rewrite_raft_config")[0][1]["peers"]
    assert sum(":master-" in a for a in rewrite) == 3  # uuid:dns:port for the three masters
    assert len(admin_calls(b, "copy_from_remote")) == 2
    assert MasterMigrateNemesis().setup(test).invoke(test, {"f": "migrate-masters"})["type"] == "fail"


def test_partition_leader_on_tservers_isolates_a_leader_of_this_runs_table(test: dict) -> None:
    b = test.backend
    b.tables = {
        "aaa-other": {"rows": {}, "schema_version": 0},
        "register-r1": {"rows": {}, "schema_version": 0},
    }
    test.spec = test.spec.replace(run_tag="r1")
    placement = {table: reps for table, _, reps in b._placement()}
    n = PartitionNemesis().setup(test)
    done = n.invoke(test, {"f": "start-partition", "value": {"shape": "leader", "targets": "tservers"}})
    assert done["value"]["leader"] == placement["register-r1"][0] != placement["aaa-other"][0]
    assert [done["value"]["leader"]] in done["value"]["groups"]


def test_learner_partition_adds_a_nonvoter_then_isolates_it_with_the_leader(test: dict) -> None:
    from faultline.dbs.store.faults.learner import LearnerPartitionNemesis

    b = test.backend
    n = LearnerPartitionNemesis().setup(test)
    done = n.invoke(test, {"f": "start-learner-partition", "value": {}})
    v = done["value"]
    assert done["type"] == "ok", done
    holders = ["t1", "t2", "t3"]  # the fake places the only table on the first three tablet servers
    assert v["leader"] == "t1" and v["learner"] in ("t4", "t5")
    changes = [a["change"] for _, a in admin_calls(b, "change_config")]
    adds = [c for c in changes if c.change == "add_replica"]
    assert len(adds) == 1 and adds[0].replica_type == "NON_VOTER" and adds[0].tablet == v["tablet"]
    assert adds[0].uuids == (b.uuid(v["learner"]),)  # the spare's uuid, not its name
    side = {"t1", v["learner"]}
    rest = {t for t in ["t1", "t2", "t3", "t4", "t5"] if t not in side}
    assert v["groups"] == sorted([sorted(side), sorted(rest)])
    assert all(b.grudge[a] == rest for a in side) and all(b.grudge[a] == side for a in rest)
    assert set(holders) - side <= rest
    stop = n.invoke(test, {"f": "stop-learner-partition"})
    assert stop["value"]["removed"] == {v["tablet"]: "removed"}
    removes = [
        a["change"] for _, a in admin_calls(b, "change_config") if a["change"].change == "remove_replica"
    ]
    assert len(removes) == 1 and removes[0].uuids == (b.uuid(v["learner"]),)
    assert b.residue() == [] and n.learners == {}


def test_learner_partition_is_in_the_registry_and_heals(test: dict) -> None:
    pkg = registry.compose(["learner-partition"], get_db("store"), interval_s=1)
    nem = pkg.nemesis.setup(test)
    assert {"start-learner-partition", "stop-learner-partition"} <= nem.fs
    nem.invoke(test, {"f": "start-learner-partition", "value": {}})
    assert test.backend.residue()
    nem.heal(test)
    assert test.backend.residue() == []


class _BlipClient:
    """table_locations and ListReplicas as the node client answers them: t1 leads in term 3 until the
    cut has lasted `elect_after` polls, then t2 leads in term 4."""

    def __init__(self, backend: FakeBackend, elect_after: int | None) -> None:
        from types import SimpleNamespace

        self.b, self.elect_after, self.polls = backend, elect_after, 0
        self.ns = SimpleNamespace
        self.pool = self
        self.closed = False

    def table_locations(self, name: str, timeout: float) -> Any:
        reps = [self.ns(uuid=self.b.uuid(n), addr=f"{n}:7050", role="") for n in ("t1", "t2", "t3")]
        return self.ns(tablets=[self.ns(tablet_id="tab1", replicas=reps)])

    def call(self, addr: str, stub: Any, method: str, req: Any, timeout: float) -> Any:
        assert method == "ListReplicas" and req.tablet_id == "tab1"
        node = addr.split(":")[0]
        elected = self.b.grudge and self.elect_after is not None and self.polls >= self.elect_after
        if self.b.grudge and node == "t2":
            self.polls += 1
        if node == "t1":
            st = self.ns(tablet_id="tab1", role="LEADER", term=3, leader_uuid=self.b.uuid("t1"))
        elif node == "t2" and elected:
            st = self.ns(tablet_id="tab1", role="LEADER", term=4, leader_uuid=self.b.uuid("t2"))
        else:
            st = self.ns(tablet_id="tab1", role="FOLLOWER", term=3, leader_uuid="")
        return self.ns(replicas=[st])

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("elect_after", [3, None])
def test_leader_blip_heals_once_a_new_leader_is_elected(test: dict, elect_after: int | None) -> None:
    from faultline.dbs.store.faults.blip import LeaderBlipNemesis

    b = test.backend
    client = _BlipClient(b, elect_after)
    grudges: list[dict] = []
    partition = b.partition
    b.partition = lambda g: (grudges.append({k: set(v) for k, v in g.items()}), partition(g))[1]
    test.connect, test.state = lambda: client, {"tables": ["set-x"]}
    n = LeaderBlipNemesis(max_s=0.5, poll_s=0.01).setup(test)
    out = n.invoke(test, {"f": "leader-blip", "value": None})
    v = out["value"]
    assert out["type"] == "ok" and v["leader"] == "t1" and v["term"] == 3
    assert grudges and grudges[0]["t1"] == {"t2", "t3", "t4", "t5"}  # the leader alone, every tablet server
    assert b.residue() == [] and client.closed
    if elect_after is None:
        assert v["new_leader"] is None and v["isolated_s"] >= 0.5  # gave up at max_s, healed anyway
    else:
        assert v["new_leader"] == "t2" and v["new_term"] == 4 and v["isolated_s"] < 0.5
        assert client.polls >= elect_after
    assert "leader-blip" in registry.entries_for(StoreDB())


class _StageClient:
    """The RPCs a staged election makes, as three tablet servers with equal logs and no leader answer
    them; RunLeaderElection fails the way a server that stopped answering does."""

    def __init__(self, backend: FakeBackend) -> None:
        from types import SimpleNamespace

        self.b, self.ns, self.pool = backend, SimpleNamespace, self
        self.flags: dict[str, dict[str, str]] = {}
        self.closed = False

    def table_locations(self, name: str, timeout: float) -> Any:
        reps = [self.ns(uuid=self.b.uuid(n), addr=f"{n}:7050", role="") for n in ("t1", "t2", "t3")]
        return self.ns(tablets=[self.ns(tablet_id="tab1", state="RUNNING", replicas=reps)])

    def call(self, addr: str, stub: Any, method: str, req: Any, timeout: float) -> Any:
        import grpc

        if method == "ListReplicas":
            st = self.ns(
                tablet_id="tab1", role="FOLLOWER", term=3, last_term=3, last_index=10, commit_index=10
            )
            return self.ns(replicas=[st])
        if method == "SetFlag":
            self.flags.setdefault(addr, {})[req.flag] = req.value
            return self.ns(old_value="")

        class Unavailable(grpc.RpcError):
            def code(self) -> grpc.StatusCode:
                return grpc.StatusCode.UNAVAILABLE

            def details(self) -> str:
                return "connection refused"

        raise Unavailable()

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("name", ["vote-crash", "figure-8"])
def test_staged_election_that_fails_midway_restores_every_flag_and_the_network(test: dict, name: str) -> None:
    from faultline.node.server.flags import RuntimeFlags

    client = _StageClient(test.backend)
    test.connect, test.state = lambda: client, {"tables": ["set-x"]}
    pkg = registry.compose([name], get_db("store"), interval_s=1)
    nem = pkg.nemesis.setup(test)
    assert name in nem.fs
    out = nem.invoke(test, {"f": name, "value": None})
    v = out["value"]
    assert out["type"] == "info" and "RunLeaderElection" in v["error"] and "UNAVAILABLE" in v["error"]
    assert v["steps"][0].startswith("leader failure detection off") and "network healed" in v["steps"][-1]
    defaults = {k: str(x).lower() if isinstance(x, bool) else str(x) for k, x in vars(RuntimeFlags()).items()}
    assert set(client.flags) == {"t1:7050", "t2:7050", "t3:7050"}
    assert all(flags == defaults for flags in client.flags.values())  # the last value set is the default
    assert test.backend.residue() == [] and client.closed


def test_staged_election_roles_follow_where_the_logs_end(test: dict) -> None:
    from faultline.dbs.store.faults.elections import Figure8Nemesis, VoteCrashNemesis

    vote = VoteCrashNemesis().setup(test)
    assert vote._roles({"a": (2, 5), "b": (2, 7), "c": (2, 6)}) is None  # candidates must end together
    voter, first, second = vote._roles({"a": (2, 5), "b": (2, 7), "c": (2, 7)})
    assert voter == "a" and {first, second} == {"b", "c"}
    f8 = Figure8Nemesis().setup(test)
    assert (
        f8._roles({"a": (2, 5), "b": (2, 6), "c": (2, 7)}) is None
    )  # old leader and voter must end together
    old, new, voter = f8._roles({"a": (2, 5), "b": (2, 9), "c": (2, 5)})
    assert new == "b" and {old, voter} == {"a", "c"}
    assert sorted(f8._roles({"a": (1, 4), "b": (1, 4), "c": (1, 4)})) == ["a", "b", "c"]
    # a longer log of an older term (a deposed leader's stale tail) is the least up to date, not the most:
    # no voter would grant it, so it cannot be the new leader, and a and c are not the shortest
    assert f8._roles({"a": (2, 5), "b": (1, 8), "c": (2, 5)}) is None
    voter, first, second = vote._roles({"a": (2, 5), "b": (1, 8), "c": (2, 5)})
    assert voter == "b" and {first, second} == {"a", "c"}


def test_majority_loss_forces_only_leaderless_tablets_without_a_live_majority(test: dict) -> None:
    """The re-check after the loss (a table created meanwhile may have lost its majority too): a tablet is
    forced onto its live replicas only when they are no majority and no live server leads it; a leader
    listed on a destroyed server is the masters' stale view; a tablet that cannot be forced is tried a
    bounded number of times."""
    from faultline.dbs.store.faults.topology import MajorityLossNemesis

    b = test.backend

    def tab(tid: str, nodes: list[str], leader: str | None) -> dict:
        return {
            "tablet": tid,
            "replicas": [f"u-{n}" for n in nodes],
            "replica_nodes": nodes,
            "leader_node": leader,
        }

    listed = [
        tab("stale-leader", ["t1", "t2", "t3"], "t1"),
        tab("no-leader", ["t2", "t4", "t1"], None),
        tab("live-leader", ["t1", "t4", "t5"], "t4"),
        tab("live-majority", ["t1", "t4", "t5"], None),
        tab("all-lost", ["t1", "t2"], None),
    ]
    n = MajorityLossNemesis().setup(test)
    tries: dict[str, int] = {}
    forced = n._force_orphans(test, listed, ["t1", "t2"], tries)
    assert forced == ["stale-leader", "no-leader"]
    calls = [a for _, a in admin_calls(b, "unsafe_change_config")]
    assert [(c["tablet"], *c["uuids"]) for c in calls] == [
        ("stale-leader", "u-t3"),
        ("no-leader", "u-t4"),
    ]
    assert n._force_orphans(test, listed, ["t1", "t2"], tries) == []  # forced once is enough
    b.store_admin.unsafe_change_config = lambda *a: ToolResult(1, "", "no such tablet")  # cannot be forced
    fresh = [tab("gone", ["t2", "t3", "t1"], None)]
    for _ in range(5):
        assert n._force_orphans(test, fresh, ["t1", "t2"], tries) == []
    assert tries["gone"] == 3


def test_recopy_copies_again_into_a_replacement_an_earlier_attempt_formatted(test: dict) -> None:
    """The copy failed after `fs format` ran (no leader then): recopy-master formats nothing twice, copies,
    starts; heal alone only starts a replacement that holds its copy."""
    b = test.backend
    n = MasterReplaceNemesis(wait_s=1).setup(test)
    n._destroy_and_rename(test, "master-2", "m2", "uuid-2", [])
    n.pending["copied"] = False
    b.store_admin.fs_format = lambda *a: ToolResult(
        1, "", "error: /data is already formatted (instance file exists)"
    )
    assert n.invoke(test, {"f": "recopy-master", "value": None})["type"] == "ok"
    assert b.state["m4"] == "running" and n.pending is None
    assert any(node == "m4" for node, _ in admin_calls(b, "copy_from_remote"))


def test_heal_starts_a_replacement_that_holds_its_copy(test: dict) -> None:
    b = test.backend
    n = MasterReplaceNemesis(wait_s=1).setup(test)
    n._destroy_and_rename(test, "master-2", "m2", "uuid-2", [])
    n.pending["copied"] = True
    n.heal(test)
    assert b.state["m4"] == "running" and n.pending is None
    assert not admin_calls(b, "copy_from_remote")


def test_laggards_are_judged_only_once_a_leader_is_back(test: dict) -> None:
    """Right after a heal the masters may have no leader: wait for one rather than judge nobody behind."""
    b = test.backend
    b.lagging_masters = {"m3"}
    real = type(b.client()).catalog_replica
    polls = {"n": 0}

    def no_leader_at_first(self: Any, addr: str, timeout: float = 2.0) -> Any:
        polls["n"] += 1
        st = real(self, addr, timeout)
        if polls["n"] <= 6:  # two rounds with no leader anywhere
            return SimpleNamespace(**{**vars(st), "role": "FOLLOWER"})
        return st

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(b.client()), "catalog_replica", no_leader_at_first)
        assert MasterReplaceNemesis(wait_s=3).setup(test)._laggards(test, 3) == ("master-1", ["master-3"])


def test_master_leader_return_hands_the_leadership_away_and_back(test: dict) -> None:
    b = test.backend
    first = next(m["addr"] for m in b.master_rows() if m["role"] == "LEADER").split(":")[0]
    done = (
        MasterLeaderReturnNemesis(hold_s=0, wait_s=2).setup(test).invoke(test, {"f": "master-leader-return"})
    )
    v = done["value"]
    assert done["type"] == "ok" and v["leader"] == first and v["via"] != first and v["returned"] is True, v
    # away to the other master, then back to the first: two handovers, in that order
    handed = [a["new_leader"] for _, a in admin_calls(b, "leader_step_down")]
    assert handed == [b.uuid(b.dns[v["via"]]), b.uuid(b.dns[first])]
    assert next(m["addr"] for m in b.master_rows() if m["role"] == "LEADER").startswith(first)
    assert v["transient"] is True  # nothing left behind: the catalog checker's timed rules start at once


def test_master_leader_return_waits_for_a_first_leader_instead_of_skipping(test: dict) -> None:
    """Early in a run on a loaded machine the masters may still be electing: the run's one leadership
    return waits (bounded) for a leader rather than skipping, which would leave the run with no fault."""
    from faultline.dbs.store.faults import topology

    real = topology.master_roles
    calls = {"n": 0}

    def electing_at_first(run: Any) -> Any:
        calls["n"] += 1
        roles = real(run)
        return [(u, a, "FOLLOWER", v) for u, a, _, v in roles] if calls["n"] <= 2 else roles

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(topology, "master_roles", electing_at_first)
        done = (
            MasterLeaderReturnNemesis(hold_s=0, wait_s=3)
            .setup(test)
            .invoke(test, {"f": "master-leader-return"})
        )
    assert done["type"] == "ok" and done["value"]["returned"] is True, done
    assert calls["n"] > 2
    # with no leader at all within the bound it still skips, as before
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(topology, "master_roles", lambda run: [(u, a, "FOLLOWER", v) for u, a, _, v in real(run)])
        skipped = (
            MasterLeaderReturnNemesis(hold_s=0, wait_s=1)
            .setup(test)
            .invoke(test, {"f": "master-leader-return"})
        )
    assert skipped["type"] == "fail" and "skipped" in skipped["value"]


def test_a_rebuild_waits_for_healthy_masters_as_long_as_a_replacement_not_as_a_fault(
    test: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Masters still unhealthy after a rebuild are the finding already (never_caught_up) and the final reads
    wait on for them: the repair bounds that wait by the replacement's catch-up time, not the fault's."""
    from faultline.dbs.store.faults import topology

    waits: dict[str, float] = {}

    def wait_until(cond: Any, timeout: float, interval: float, what: str) -> bool:
        waits[what] = timeout
        return bool(cond())

    monkeypatch.setattr(topology, "wait_until", wait_until)
    test.backend.lagging_masters = {"m3"}
    n = MasterReplaceNemesis(wait_s=40, settle_s=0.5, healthy_s=10).setup(test)
    done = n.invoke(test, {"f": "rebuild-lagging-masters", "value": None})
    assert done["value"]["rebuilt"] == ["master-3"] and waits["masters healthy"] == 20
