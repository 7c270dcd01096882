"""The real store on the Docker backend: status shows the leader, a table is created and written through
the client from the host, and a master's DNS name moved to a fresh container is followed.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator

import pytest

from faultline.dbs.store import StoreDB
from faultline.dbs.store.tools import leader_master

pytestmark = pytest.mark.docker


def wait_for(what: str, fn: Callable[[], object], timeout: float = 90, every: float = 1.0) -> object:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as exc:
            last = exc
        time.sleep(every)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")


@pytest.fixture(scope="module")
def cluster() -> Iterator:
    from faultline.cluster.docker_backend import DockerBackend
    from faultline.cluster.image import ensure_image_for

    spec = StoreDB().cluster_spec(f"tnode-{secrets.token_hex(3)}", {"masters": 3, "tservers": 5})
    b = DockerBackend(spec, image=ensure_image_for(spec))
    try:
        b.up()
        yield b
    finally:
        b.down()


def tool(b, node: str, *args: str, timeout: float = 60) -> str:
    return b.run(node, [b.python(node), "-m", "faultline.node", "tool", *args], timeout)[1]


def test_status_shows_the_leader(cluster, capsys: pytest.CaptureFixture[str]) -> None:
    from faultline.controller.cli import main

    leader = wait_for("a leader master", lambda: leader_master(cluster))
    assert leader in cluster.nodes("master")
    assert main(["cluster", "status", "--name", cluster.spec.name, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["leader"] in cluster.nodes("master")
    assert set(status["daemons"].values()) == {"running"}


def test_table_created_and_written_from_the_host(cluster) -> None:
    from faultline.node.client.client import KuduClient

    with KuduClient(cluster.addresses("master"), resolve=cluster.resolve) as c:
        wait_for(
            "create_table",
            lambda: c.create_table("tcl", num_tablets=2, replication=3, timeout=20) or True,
            timeout=90,
            every=2,
        )
        for i in range(10):
            c.put("tcl", i, i * i, timeout=20)
        assert [c.get("tcl", i, timeout=20) for i in range(10)] == [i * i for i in range(10)]


def test_moved_master_name_is_followed(cluster) -> None:
    from faultline.node.client.client import KuduClient

    wait_for("a leader master", lambda: leader_master(cluster))
    if leader_master(cluster) == "m3":  # replace a follower, not the leader
        cluster.stop("m3")
        wait_for("another leader", lambda: leader_master(cluster) not in (None, "m3"))
    client = KuduClient(cluster.addresses("master"), resolve=cluster.resolve)
    try:
        wait_for(
            "create_table",
            lambda: client.create_table("moved", num_tablets=1, replication=3, timeout=20) or True,
            timeout=90,
            every=2,
        )
        client.put("moved", "before", 1, timeout=20)
        d = cluster.node_dir("m3")
        uuid = tool(cluster, "m3", "fs", "dump", "uuid", "--fs-dir", f"{d}/data").strip()
        old_ip = cluster.resolve("master-3")
        cluster.destroy("m3")  # permanent failure: the container and its data are gone
        cluster.add_node("m9", role="master", start=False)
        tool(cluster, "m9", "fs", "format", "--fs-dir", f"{d}/data", "--uuid", uuid)
        source = cluster.info[wait_for("a leader master", lambda: leader_master(cluster))].dns[0]
        tool(
            cluster,
            "m9",
            "local_replica",
            "copy_from_remote",
            "--fs-dir",
            f"{d}/data",
            "sys",
            f"{source}:7051",
            timeout=120,
        )
        cluster.set_dns("master-3", "m9")
        cluster.start("m9")
        assert cluster.resolve("master-3") == cluster.info["m9"].address != old_ip

        def listed() -> bool:
            out = tool(cluster, "t1", "master", "list", ",".join(cluster.addresses("master")), timeout=30)
            line = next(ln for ln in out.splitlines() if "master-3:7051" in ln)
            return line.split()[0] == uuid and ("FOLLOWER" in line or "LEADER" in line)

        # the other nodes follow the name: the new container answers as master-3 with the old uuid
        wait_for("the new master-3 answering in the masters' config", listed, timeout=120, every=2)
        # the host-side client (created before the move) follows too, also when leadership moves: stop
        # the leader, so the next one is elected from {the other old master, the new master-3}
        leader = wait_for("a leader master", lambda: leader_master(cluster))
        cluster.stop(leader)
        try:
            wait_for(
                "a write after the leader stopped",
                lambda: client.put("moved", "after", 2, timeout=10) or True,
                timeout=90,
                every=1,
            )
            assert client.get("moved", "before", timeout=20) == 1
            assert client.get("moved", "after", timeout=20) == 2
        finally:
            cluster.start(leader)
    finally:
        client.close()
