"""The bundled store as a DB plug-in: its DB class (db.py), cluster layout (layout.py), its admin tools as a
protocol (admin.py) and the cluster queries built on it (tools.py), its own faults (faults/), its catalog workload (catalog.py), its in-memory fake cluster and
loopback mini-cluster for testing the harness (fake.py, minicluster.py), and `faultline sim` (sim_command.py).

Only this package imports the store's implementation, `faultline.node`. It sits above the generic nemesis
and workload layers, whose building blocks its faults and workload use, as a DB's own test project does in
Jepsen; the harness reaches it only through the DB registry (faultline.dbs) and the DB protocol.
"""

from faultline.cluster.api import ClusterBackend
from faultline.cluster.backends import BackendKind, register
from faultline.cluster.base import ClusterSpec
from faultline.dbs.store.db import StoreDB


def _make_fake(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend:
    from faultline.dbs.store.fake import FakeBackend

    return FakeBackend(seed=seed)


# `--cluster fake`: the store in memory, for testing the harness itself (hidden from --help)
register(BackendKind("fake", _make_fake, hidden=True, default_quiet_period_s=0.2, dbs=frozenset({"store"})))

__all__ = ["StoreDB"]
