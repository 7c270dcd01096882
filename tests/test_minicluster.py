"""The loopback MiniCluster's ports: never a setup error because another socket took a port."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from faultline.dbs.store.minicluster import MiniCluster, _ephemeral_low, free_port

pytestmark = pytest.mark.integration  # a real store cluster of processes on loopback


def test_free_ports_are_below_the_ephemeral_range() -> None:
    """bind(0) and outgoing connections take ports from the ephemeral range; ours never come from it."""
    low = _ephemeral_low()
    assert all(1024 <= free_port() < low for _ in range(20))


def test_a_port_taken_before_the_node_binds_it_starts_the_cluster_on_fresh_ports(tmp_path: Path) -> None:
    c = MiniCluster(tmp_path / "c", num_masters=1, num_tservers=1)
    taken = c.nodes["t1"].bind
    host, port = taken.rsplit(":", 1)
    with socket.socket() as squatter, c:
        squatter.bind((host, int(port)))
        squatter.listen()
        c.start_all()
        assert c.nodes["t1"].bind != taken and c.nodes["t1"].alive() and c.nodes["m1"].alive()
        assert "cannot bind" in (tmp_path / "c" / "t1.log").read_text()
        c.wait_for(lambda: len(c.client().list_tservers().servers) == 1, 30, "the tablet server to register")
