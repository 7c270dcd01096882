"""What the tests of a real store cluster (dbs/store/minicluster.py, processes on loopback) share."""

from __future__ import annotations

from faultline.dbs.store.minicluster import MiniCluster
from faultline.node.client import KuduClient


def started_with_table(
    c: MiniCluster, table: str, tablets: int, replication: int, rows: int = 0
) -> KuduClient:
    """Start every process of `c`, create `table` and put i -> i for i < `rows`; the client (30 s calls)."""
    c.start_all()
    cl = c.client(timeout=30)
    cl.create_table(table, tablets, replication, timeout=40)
    for i in range(rows):
        cl.put(table, i, i)
    return cl


def ksck_ok(c: MiniCluster) -> bool:
    """Whether `tool cluster ksck` finds the cluster healthy."""
    return c.tool("cluster", "ksck", c.masters_arg()).returncode == 0


def wait_ksck_clean(c: MiniCluster, timeout: float, what: str = "ksck clean") -> None:
    c.wait_for(lambda: ksck_ok(c), timeout, what)
