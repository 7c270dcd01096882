"""The DB protocol: everything the harness needs to know about the system it tests.

After Jepsen's db protocol. The cluster layer brings hosts up and runs whatever `cluster_spec` says on
them (plain data: roles, their processes, the Debian and Python packages they need); everything else a
run asks of the system goes through these methods. `test` is the run's test (its plain fields and its
live handles: `test.backend` is the cluster backend); `node` is a node name of that cluster.

dbs/base.py's ProcessDB implements everything but `cluster_spec`, `ready` and `client` for a DB whose
nodes each run one process; docs/your-own-db.md walks through a DB written by a user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from faultline.cluster.base import ClusterSpec
from faultline.core import Run


class DB(Protocol):
    """A system under test. Kill, pause and resume default to the cluster's process primitives."""

    name: str
    # what the DB has a client for and which faults it can take (validated before anything starts)
    workloads: frozenset[str]
    nemeses: frozenset[str] | None  # None: every nemesis
    # why a nemesis is not supported, for the error a user sees ("clock": "etcd is a Go program ...")
    nemesis_notes: Mapping[str, str]

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        """The hosts by role, the process each runs and the packages they need, for the test options
        `opts` (plain data: sizes, injected bugs, ...)."""
        ...

    def validate(self, opts: Mapping[str, Any]) -> None:
        """Refuses options this DB cannot run (raise ValueError with one line)."""
        ...

    def setup(self, test: Run, node: str) -> None:
        """Once the cluster is up, on every node at once: anything beyond starting the role's process, then
        wait until the node serves. Raise dbs.base.DBStartError (with the tail of its log) when it never
        does: the run stops there, and the cluster is torn down."""
        ...

    def teardown(self, test: Run, node: str) -> None: ...

    def start(self, test: Run, node: str) -> None: ...

    def kill(self, test: Run, node: str) -> None: ...

    def pause(self, test: Run, node: str) -> None: ...

    def resume(self, test: Run, node: str) -> None: ...

    def primaries(self, test: Run) -> list[str]:
        """The nodes currently leading (empty when none answers)."""
        ...

    def log_files(self, test: Run, node: str) -> list[str]:
        """Paths on the node worth keeping with the run."""
        ...

    def client_nodes(self, test: Run) -> list[str]:
        """The nodes clients talk to, in the order workers are spread over them."""
        ...

    def connector(self, test: Run) -> Callable[[], Any]:
        """A zero-argument callable that returns a connected client library object."""
        ...

    def client(self, workload: str) -> Any:
        """The client (workloads.api.Client) for `workload`, or None for the workload's bundled client,
        which speaks the store's client API (get, put, cas, scan, create_table) through `connector`."""
        ...
