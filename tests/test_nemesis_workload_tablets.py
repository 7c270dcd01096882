"""partition-leader aims at the workload's own tablets, asking the masters through the host's client."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from faultline.core import Run, TestSpec
from faultline.dbs.store import StoreDB
from faultline.dbs.store.tools import workload_tablets
from faultline.nemesis import faults


class Backend:
    """Enough of a cluster backend for name lookups and recording partitions."""

    def __init__(self) -> None:
        self.grudges: list[Any] = []

    def nodes(self, role: str | None = None) -> list[str]:
        every = ["m1", "t1", "t2", "t3"]
        return every if role is None else [n for n in every if n[0] == role[0]]

    def resolve(self, name: str) -> str:
        return {"m1": "10.0.0.1", "t1": "10.0.0.11", "t2": "10.0.0.12", "t3": "10.0.0.13"}.get(name, name)

    def address(self, node: str) -> str:
        return self.resolve(node)

    def dns_holder(self, name: str) -> str | None:
        return None

    def addresses(self, role: str) -> list[str]:
        return ["m1:7051"]

    def partition(self, grudge: Any) -> None:
        self.grudges.append(grudge)

    def heal_network(self) -> None:
        self.grudges.append(None)


def _rep(uuid: str, addr: str, role: str) -> SimpleNamespace:
    return SimpleNamespace(uuid=uuid, addr=addr, role=role)


class Client:
    asked: list[str] = []

    def table_locations(self, name: str, timeout: float) -> SimpleNamespace:
        Client.asked.append(name)
        t = SimpleNamespace(
            tablet_id="tab1",
            state="RUNNING",
            replicas=[
                _rep("u1", "10.0.0.11:7050", "FOLLOWER"),
                _rep("u2", "t2:7050", "LEADER"),
                _rep("u3", "10.0.0.13:7050", "FOLLOWER"),
            ],
        )
        return SimpleNamespace(tablets=[t])

    def close(self) -> None:
        pass


def test_workload_tablets_maps_leader_to_node() -> None:
    Client.asked = []
    test = Run(
        TestSpec(name="t", workload="register"),
        StoreDB(),
        Backend(),
        connect=Client,
        state={"tables": ["register-x"]},
    )
    ts = workload_tablets(test)
    assert Client.asked == ["register-x"]
    assert ts[0]["leader_node"] == "t2" and ts[0]["replica_nodes"] == ["t1", "t2", "t3"]
    test.state = {}
    assert workload_tablets(test) == []  # no recorded table: nothing to ask


def test_partition_leader_isolates_the_workload_tablet_leader() -> None:
    b = Backend()
    test = Run(
        TestSpec(name="t", workload="register", seed=1, db_opts={"masters": 1, "tservers": 3}),
        StoreDB(),
        b,
        connect=Client,
        state={"tables": ["register-x"]},
    )
    nem = faults.PartitionNemesis().setup(test)
    done = nem.invoke(
        test,
        {
            "type": "invoke",
            "f": "start-partition",
            "process": "nemesis",
            "value": {"shape": "leader", "targets": "tservers"},
        },
    )
    assert done["value"]["leader"] == "t2"
    grudge = b.grudges[-1]
    assert set(grudge["t2"]) == {"t1", "t3"}
