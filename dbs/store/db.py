"""The bundled store as a DB: masters whose catalog is a Raft group, and tablet servers whose tablets are
Raft groups (node/). Its cluster is 3 masters `m1..` carrying the movable DNS names `master-1..`, and 5
tablet servers `t1..`; clients talk to the tablet servers, and find tablets through the masters."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from faultline.cluster.api import Hosts
from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Run
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import ProcessDB
from faultline.dbs.store.layout import DAEMONS, DATA, MASTER, MASTER_PORT, TSERVER, TSERVER_PORT, tool_argv
from faultline.dbs.store.tools import leader_master, master_leader, run_tablets, tablet_leaders
from faultline.node.bugs import BUGS


def _node_argv(role: str, opts: Mapping[str, Any]) -> list[str]:
    argv = [
        "{python}",
        "-m",
        "faultline.node",
        role,
        "--fs-dir",
        DATA,
        "--rpc-bind",
        "0.0.0.0:{port}",
        "--rpc-advertise",
        "{advertise}",
        "--master-addresses",
        f"{{addresses:{MASTER}}}",
        *map(str, opts.get("node_args") or []),
    ]
    for bug in opts.get("bugs") or []:
        argv += ["--inject-bug", str(bug)]
    return argv


# The daemons log "<date> <time>,<ms> <role> <LEVEL> <logger>: <message>" (node/__main__.py). Python
# writes "Traceback (most recent call last):" for an exception nobody caught, and `log.exception` for one
# a daemon caught but did not expect; the Raft core raises ConsensusInvariantError when driven into a
# state Raft forbids; a replica whose core or storage failed logs that it stops; a daemon whose metadata
# or WAL is damaged refuses to start (node/server/process.py), and a running one refuses to serve a
# tablet copy from a WAL it finds damaged (node/server/host.py); a tablet that is handed a log entry that
# is no valid write (damage that got past the WAL's checksum) says so (node/tablet/state.py).
LOG_PATTERNS = [
    LogPattern("traceback", r"^Traceback \(most recent call last\):", "a Python exception in a store daemon"),
    LogPattern(
        "consensus-invariant", r"ConsensusInvariantError", "the Raft core broke one of Raft's invariants"
    ),
    LogPattern(
        "replica-stopped",
        r"(?:consensus core failed|handling a ready batch failed); stopping this replica",
        "a replica stopped after its consensus core or its storage failed",
    ),
    LogPattern(
        "corrupt-metadata",
        r"refusing to start: corrupt or foreign metadata",
        "a daemon found its metadata or WAL damaged",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "damaged-wal-read",
        r"refusing to be a tablet copy source, its WAL is damaged",
        "a running replica found its WAL damaged when reading it back",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "damaged-entry",
        r"damaged log entry \d+ .* is not a valid write",
        "damaged data got past the WAL's checksum into a tablet (never expected: the WAL must catch it)",
    ),
]


# the cluster's default size, by DB option
SIZES: Mapping[str, int] = {"masters": 3, "tservers": 5}


def _size(opts: Mapping[str, Any], key: str) -> int:
    """The number of masters or tablet servers `opts` ask for (a DB option), or the default."""
    value = opts.get(key, SIZES[key])
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be a whole number, not {value!r}")
    return value


class StoreDB(ProcessDB):
    """Faultline's own Kudu-like store (the default DB). Besides the DB core it has every capability of
    db/api.py (its leaders are the leader master and each tablet's leader; its bugs are node/bugs.py's),
    and offers its own faults (dbs/store/faults/) and its catalog workload (dbs/store/catalog.py)."""

    name = "store"
    # the generic workloads, whose key-value clients speak the node client's API through `connector`
    workloads = frozenset({"register", "set", "bank"})
    nemeses: frozenset[str] | None = None  # every generic fault
    packages: tuple[str, ...] = ()
    # the node's gRPC runtime, pinned to the host's versions so the stubs generated here match
    python_packages = ("grpcio", "protobuf")
    target_roles: Mapping[str, str] = {"masters": MASTER, "tservers": TSERVER}
    bugs: Mapping[str, str] = BUGS
    # the cluster's size, its DB options (--db-opt masters=N, a campaign's db_opt = {masters = N})
    options: Mapping[str, str] = {
        "masters": f"how many masters (default {SIZES['masters']}; master-migrate needs 1)",
        "tservers": f"how many tablet servers, at least 3 (default {SIZES['tservers']})",
    }
    data_dirs: Mapping[str, tuple[str, ...]] = {MASTER: (DATA,), TSERVER: (DATA,)}
    data_files: Mapping[str, tuple[str, ...]] = {
        MASTER: (f"{DATA}/wals/*/wal-*.seg", f"{DATA}/cmeta/*"),
        TSERVER: (f"{DATA}/wals/*/wal-*.seg", f"{DATA}/cmeta/*", f"{DATA}/tablet-meta/*"),
    }

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    # ------------------------------------------------------------------ the cluster
    def validate(self, opts: Mapping[str, Any]) -> None:
        """A test's options: its cluster's (below), at least 3 tablet servers, since tablets are replicated
        three ways, and one master to start from for master-migrate."""
        self._check_layout(opts)
        if _size(opts, "tservers") < 3:
            raise ValueError("tservers must be at least 3 (tablets are replicated three ways)")
        if "master-migrate" in (opts.get("nemesis") or ()) and _size(opts, "masters") != 1:
            raise ValueError("--nemesis master-migrate starts from one master: use --db-opt masters=1")

    def _check_layout(self, opts: Mapping[str, Any]) -> None:
        """A cluster's options (the cluster layer and the fake may build smaller ones than a test needs)."""
        if _size(opts, "masters") < 1:
            raise ValueError("the store needs at least one master")
        if _size(opts, "tservers") < 0:
            raise ValueError("the number of tablet servers cannot be negative")
        daemon = str(opts.get("daemon") or "node")
        if daemon not in DAEMONS:
            raise ValueError(f"daemon must be one of {', '.join(DAEMONS)}, not {daemon!r}")

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        """Options: masters and tservers (its DB options), bugs, node_args, faketime, and daemon: `node`
        (the store), `placeholder` (a TCP stand-in on the same ports, for testing the cluster layer) or
        `none`."""
        self._check_layout(opts)
        daemon = str(opts.get("daemon") or "node")
        roles = []
        for role, prefix, port, count, dns in (
            (MASTER, "m", MASTER_PORT, _size(opts, "masters"), "master-{i}"),
            (TSERVER, "t", TSERVER_PORT, _size(opts, "tservers"), ""),
        ):
            r = RoleSpec(role, count, prefix, port, dns)
            if daemon == "node":
                r.argv = _node_argv(role, opts)
                r.prepare = tool_argv(["fs", "format", "--fs-dir", DATA])
                # the instance file, not the folder: a disk layer's mount point is there before the format
                r.prepare_unless = f"{DATA}/instance"
                r.power_cut = tool_argv(["fs", "cut_to_synced", "--json", "--fs-dir", DATA])
            elif daemon == "placeholder":
                r.argv = [
                    "{python}",
                    "-m",
                    "faultline.testing.placeholder",
                    "--name",
                    "{name}",
                    "--port",
                    "{port}",
                ]
            roles.append(r)
        return ClusterSpec.from_mapping(
            {
                "name": name,
                "roles": roles,
                "packages": list(self.packages),
                "python_packages": list(self.python_packages) if daemon == "node" else [],
                "db": self.name if daemon == "node" else f"{self.name} ({daemon})",
                "db_opts": {"bugs": sorted(map(str, opts.get("bugs") or []))},
                "faketime": bool(opts.get("faketime", False)),
                # its servers are Python with one interpreter lock each: on one CPU apiece, a register run did
                # 14-23 % more ok ops/s than floating (docs/cluster.md, "One CPU per node"; docs/benchmarks.md)
                "one_cpu_per_node": True,
            }
        )

    # ------------------------------------------------------------------ the Jepsen db protocol
    # (teardown, start, kill, pause, resume and log files are ProcessDB's: the cluster's process primitives)
    def setup(self, test: Run, node: str) -> None:
        """Nothing beyond the role's process, which the cluster starts (formatting its data first); the
        workloads wait for the masters themselves."""

    def primaries(self, test: Run) -> list[str]:
        """The node whose master leads the catalog, as the masters report it."""
        leader = leader_master(test.backend)
        return [leader] if leader else []

    def leaders(self, test: Run, targets: str) -> list[str]:
        """The leader master (masters, all) and the first tablet leader the admin tools list (tservers,
        all): a `leaders` kill or pause hits one leader of each kind."""
        out = []
        if targets in ("masters", "all"):
            m = master_leader(test)
            if m:
                out.append(m)
        if targets in ("tservers", "all"):
            out += tablet_leaders(test)[:1]
        return out

    def leader_to_isolate(self, test: Run, targets: str, rng: random.Random) -> str | None:
        """The leader master (masters), else the leader of a random tablet of the workload's tables, asked
        of the masters directly, or through the admin tools of a random tablet of this run's tables:
        isolating a tablet leader is what exposes stale reads from a deposed leader."""
        if targets == "masters":
            return master_leader(test)
        pool = run_tablets(test, lambda t: bool(t.get("leader_node")))
        return rng.choice(pool)["leader_node"] if pool else master_leader(test)

    def nemesis_entries(self) -> Sequence[Any]:
        """The store's own faults (nemesis.registry.Entry each): dbs/store/faults/."""
        from faultline.dbs.store.faults.packages import entries

        return entries()

    def workload_entries(self) -> Sequence[Any]:
        """The store's own workloads (workloads.registry.Entry each): the catalog under master failover."""
        from faultline.dbs.store.catalog import ENTRY

        return [ENTRY]

    def client_nodes(self, test: Run) -> list[str]:
        """Clients are spread over the tablet servers (all nodes when there are none)."""
        b = test.backend
        return b.nodes(TSERVER) or b.nodes()

    def connector(self, test: Run) -> Callable[[], Any]:
        """A KuduClient on the master DNS names, resolved through the backend so that the client follows a
        name moved by master-replace; on the store's in-memory fake cluster, the fake's own client."""
        backend = test.backend
        # the in-memory fake (dbs/store/fake.py) carries a store
        own: Callable[[], Any] | None = getattr(backend, "store_client", None)
        if own is not None:
            return own
        timeout = float(test.spec.op_timeout_s)
        resolve = host_resolver(backend)

        def connect() -> Any:
            from faultline.node.client import KuduClient

            return KuduClient(backend.addresses(MASTER), resolve=resolve, default_timeout_s=timeout)

        return connect


def host_resolver(backend: Hosts) -> Callable[[str], str]:
    """How the host reaches a name the cluster hands out: node and DNS names through the backend;
    addresses (tablet servers advertise theirs) and unknown names pass through unchanged."""
    import ipaddress

    def resolve(name: str) -> str:
        try:
            ipaddress.ip_address(name)
            return name
        except ValueError:
            pass
        try:
            return backend.resolve(name)
        except Exception:
            return name

    return resolve
