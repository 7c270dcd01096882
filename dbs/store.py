"""The bundled store as a DB: masters whose catalog is a Raft group, and tablet servers whose tablets are
Raft groups (node/). Its cluster is 3 masters `m1..` carrying the movable DNS names `master-1..`, and 5
tablet servers `t1..`; clients talk to the tablet servers, and find tablets through the masters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Run
from faultline.dbs.base import ProcessDB
from faultline.node.tool.output import parse_master_list

MASTER = "master"
TSERVER = "tserver"
MASTER_PORT = 7051
TSERVER_PORT = 7050
DAEMONS = ("node", "placeholder", "none")
DATA = "{dir}/data"


def master_dns(i: int) -> str:
    """The DNS name of the i-th master (1-based): a name the permanent-master-failure procedure moves."""
    return f"master-{i}"


def _node_argv(role: str, opts: Mapping[str, Any]) -> list[str]:
    argv = ["{python}", "-m", "faultline.node", role, "--fs-dir", DATA,
            "--rpc-bind", "0.0.0.0:{port}", "--rpc-advertise", "{advertise}",
            "--master-addresses", f"{{addresses:{MASTER}}}", *map(str, opts.get("node_args") or [])]
    for bug in opts.get("bugs") or []:
        argv += ["--inject-bug", str(bug)]
    return argv


def tool_argv(args: Sequence[str]) -> list[str]:
    """`python -m faultline.node tool ARGS` as a role template (see RoleSpec)."""
    return ["{python}", "-m", "faultline.node", "tool", *args]


class StoreDB(ProcessDB):
    """Faultline's own Kudu-like store (the default DB)."""

    name = "store"
    workloads = frozenset({"register", "set", "bank", "catalog"})
    nemeses = None   # every nemesis; the workloads' bundled clients (client() is None) are the store's own
    packages: tuple[str, ...] = ()
    # the node's gRPC runtime, pinned to the host's versions so the stubs generated here match
    python_packages = ("grpcio", "protobuf")

    # ------------------------------------------------------------------ the cluster
    def validate(self, opts: Mapping[str, Any]) -> None:
        masters, tservers = int(opts.get("masters", 3)), int(opts.get("tservers", 5))
        if masters < 1:
            raise ValueError("the store needs at least one master")
        if tservers < 0:
            raise ValueError("the number of tablet servers cannot be negative")
        daemon = str(opts.get("daemon") or "node")
        if daemon not in DAEMONS:
            raise ValueError(f"daemon must be one of {', '.join(DAEMONS)}, not {daemon!r}")

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        """Options: masters, tservers, bugs, node_args, faketime, and daemon: `node` (the store),
        `placeholder` (a TCP stand-in on the same ports, for testing the cluster layer) or `none`."""
        self.validate(opts)
        daemon = str(opts.get("daemon") or "node")
        roles = []
        for role, prefix, port, count, dns in ((MASTER, "m", MASTER_PORT, int(opts.get("masters", 3)), "master-{i}"),
                                                (TSERVER, "t", TSERVER_PORT, int(opts.get("tservers", 5)), "")):
            r = RoleSpec(role, count, prefix, port, dns)
            if daemon == "node":
                r.argv = _node_argv(role, opts)
                r.prepare = tool_argv(["fs", "format", "--fs-dir", DATA])
                r.prepare_unless = DATA
                r.power_cut = tool_argv(["fs", "cut_to_synced", "--json", "--fs-dir", DATA])
            elif daemon == "placeholder":
                r.argv = ["{python}", "-m", "faultline.testing.placeholder", "--name", "{name}", "--port", "{port}"]
            roles.append(r)
        return ClusterSpec.from_mapping({
            "name": name, "roles": roles, "packages": list(self.packages),
            "python_packages": list(self.python_packages) if daemon == "node" else [],
            "db": self.name if daemon == "node" else f"{self.name} ({daemon})",
            "db_opts": {"bugs": sorted(map(str, opts.get("bugs") or []))},
            "faketime": bool(opts.get("faketime", False))})

    # ------------------------------------------------------------------ the Jepsen db protocol
    # (teardown, start, kill, pause, resume and log files are ProcessDB's: the cluster's process primitives)
    def setup(self, test: Run, node: str) -> None:
        """Nothing beyond the role's process, which the cluster starts (formatting its data first); the
        workloads wait for the masters themselves."""

    def primaries(self, test: Run) -> list[str]:
        """The node whose master leads the catalog, as the masters report it."""
        leader = leader_master(test.backend)
        return [leader] if leader else []

    def client_nodes(self, test: Run) -> list[str]:
        """Clients are spread over the tablet servers (all nodes when there are none)."""
        b = test.backend
        return b.nodes(TSERVER) or b.nodes()

    def connector(self, test: Run) -> Callable[[], Any]:
        """A KuduClient on the master DNS names, resolved through the backend so that the client follows a
        name moved by master-replace."""
        backend = test.backend
        timeout = float(test.spec.op_timeout_s)
        resolve = host_resolver(backend)

        def connect() -> Any:
            from faultline.node.client import KuduClient

            return KuduClient(backend.addresses(MASTER), resolve=resolve, default_timeout_s=timeout)

        return connect


def run_tool(backend: Any, node: str, args: Sequence[str], timeout: float = 60) -> tuple[int, str, str]:
    """`python -m faultline.node tool ARGS` on `node`, through the backend's Remote."""
    argv = [*backend.env_argv(node), *backend.expand(node, tool_argv(args))]
    return backend.remote.exec(node, argv, timeout)


def leader_master(backend: Any, timeout: float = 10) -> str | None:
    """The node whose master leads the catalog, asked of the masters themselves (`tool master list
    --json`); None when no master answers or none leads."""
    for m in backend.nodes(MASTER):
        rc, out, _ = run_tool(backend, m, ["master", "list", ",".join(backend.addresses(MASTER)), "--json"],
                              timeout)
        if rc != 0:
            continue
        try:
            rows = parse_master_list(out)
        except ValueError:
            continue
        for row in rows:
            if row["role"] == "LEADER":
                return node_of_host(backend, row["addr"].rsplit(":", 1)[0])
    return None


def node_of_host(backend: Any, host: str) -> str | None:
    """The node behind a node name, a (movable) DNS name or an address; None when none is."""
    nodes = backend.nodes()
    if host in nodes:
        return host
    holder = backend.dns_holder(host)
    if holder:
        return holder
    for n in nodes:
        try:
            if backend.resolve(n) == host or backend.address(n) == host:
                return n
        except Exception:
            continue
    return None


def host_resolver(backend: Any) -> Callable[[str], str]:
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
