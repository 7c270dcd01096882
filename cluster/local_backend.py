"""The local backend: each node in its own network namespace on this machine (needs root).

Layout for cluster C (id = 8 hex digits of its name): a hub namespace `fl-C-hub` holds a bridge; each node
namespace `fl-C-NODE` has `eth0` (10.77.K.N/24), a veth whose peer sits on the hub's bridge; one more
veth `fl-ID-h` (10.77.K.254) joins the host to the hub so the controller reaches the nodes. Nothing else
is created in the host's namespace, so the host's firewall (Docker's FORWARD policy included) never sees
node-to-node traffic. DNS names come from per-namespace hosts files (`/etc/netns/NS/hosts`, which
`ip netns exec` bind-mounts over /etc/hosts), rewritten in place so running daemons see moves.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faultline.cluster import disklayer, state
from faultline.cluster.base import (
    ClusterError,
    ClusterSpec,
    NodeBackend,
    NodeInfo,
    RemoteTimeout,
    disk_errors,
)
from faultline.cluster.collect import copy_tree_sparse
from faultline.cluster.source import host_pythonpath

PREFIX = "fl-"
DATA_ROOT = Path(os.environ.get("FAULTLINE_LOCAL_DATA", "/tmp/faultline-local"))
NETNS_ETC = Path("/etc/netns")


class LocalUnavailable(ClusterError):
    pass


def require_root() -> None:
    if os.geteuid() != 0:
        raise LocalUnavailable(
            "the local backend needs root (it creates network namespaces): run as root, "
            "or use --cluster docker"
        )
    if shutil.which("ip") is None:
        raise LocalUnavailable("the local backend needs iproute2 (`ip`): run scripts/system-deps.sh")


def _ip(*args: str, check: bool = True, timeout: float = 15) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise ClusterError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def cluster_id(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()[:8]


class LocalRemote:
    """`ip netns exec` with a deadline; files are on the shared host filesystem."""

    def __init__(self, backend: LocalBackend) -> None:
        self.b = backend

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        ns = self.b._node(node).host
        try:
            p = subprocess.run(
                ["ip", "netns", "exec", ns, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise RemoteTimeout(f"{node}: {' '.join(argv[:3])} timed out after {timeout:.1f} s") from exc
        return p.returncode, p.stdout, p.stderr

    def put(self, node: str, path: str, data: bytes) -> None:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def get(self, node: str, path: str) -> bytes:
        return Path(path).read_bytes()


class LocalBackend(NodeBackend):
    kind = "local"

    def __init__(self, spec: ClusterSpec) -> None:
        require_root()
        super().__init__(spec)
        self.remote = LocalRemote(self)
        self.cid = cluster_id(spec.name)
        self.subnet: ipaddress.IPv4Network | None = None

    # ------------------------------------------------------------------ hooks
    def ns(self, node: str) -> str:
        return f"{PREFIX}{self.spec.name}-{node}"

    @property
    def hub(self) -> str:
        return f"{PREFIX}{self.spec.name}-hub"

    @property
    def host_link(self) -> str:
        return f"{PREFIX}{self.cid}-h"

    def node_dir(self, node: str) -> str:
        return str(DATA_ROOT / self.spec.name / node)

    def python(self, node: str) -> str:
        return sys.executable

    def source_dir(self, node: str) -> str:
        return host_pythonpath()

    # ------------------------------------------------------------------ lifecycle
    def up(self, spec: Any = None, log=lambda s: None) -> None:
        if spec is not None:
            self.spec = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(spec)
            self.cid = cluster_id(self.spec.name)
        existing = set(_netns_list())
        if self.hub in existing or state.load("local", self.spec.name):
            raise ClusterError(
                f"a local cluster named {self.spec.name!r} already exists; "
                f"`faultline cluster down --cluster local --name {self.spec.name}` first"
            )
        try:
            self.subnet = _free_subnet()
            self._save()
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "set", "lo", "up")
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            _ip("link", "add", self.host_link, "type", "veth", "peer", "name", "host0", "netns", self.hub)
            _ip("addr", "add", f"{self.subnet.network_address + 254}/24", "dev", self.host_link)
            _ip("link", "set", self.host_link, "up")
            _ip("-n", self.hub, "link", "set", "host0", "master", "br0", "up")
            log(f"hub {self.hub}, host link {self.host_link} ({self.subnet})")
            for n, role, dns in self.spec.node_names():
                self._make_node(n, role, dns)
            self._write_hosts()
            self._save()
            log(f"{len(self.info)} namespaces ready")
            self._start_nodes(list(self.info), log)
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise

    def _alloc_ip(self) -> str:
        assert self.subnet is not None
        used = {i.address for i in self.info.values()}
        for k in range(2, 254):
            ip = str(self.subnet.network_address + k)
            if ip not in used:
                return ip
        raise ClusterError("no address left in the cluster's /24")

    def _make_node(self, node: str, role: str, dns: list[str]) -> None:
        if len(node) > 12:
            raise ClusterError(f"node name {node!r} is too long for the local backend (max 12)")
        ns = self.ns(node)
        info = NodeInfo(node, role, self._alloc_ip(), ns, dns)
        self.info[node] = info
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"v-{node}", "netns", self.hub)
        _ip("-n", ns, "addr", "add", f"{info.address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", self.hub, "link", "set", f"v-{node}", "master", "br0", "up")
        Path(self.node_dir(node)).mkdir(parents=True, exist_ok=True)
        # a disk layer (a run with a disk fault only) is mounted at the data directory itself
        with disk_errors():
            disklayer.mount_node(self.kind, self.spec.name, node, [Path(d) for d in self.disk_layers(node)])
        (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
        (NETNS_ETC / ns / "hosts").touch()

    def _hosts_text(self) -> str:
        lines = [
            "127.0.0.1\tlocalhost",
            f"{self.subnet.network_address + 254}\tcontroller" if self.subnet else "",
        ]
        for n, i in self.info.items():
            lines.append(f"{i.address}\t{n} {' '.join(i.dns)}".rstrip())
        return "\n".join(x for x in lines if x) + "\n"

    def _write_hosts(self) -> None:
        text = self._hosts_text()
        for i in self.info.values():
            path = NETNS_ETC / i.host / "hosts"
            # in place (same inode): running daemons see the bind-mounted file change
            with open(path, "r+" if path.exists() else "w") as f:
                f.seek(0)
                f.write(text)
                f.truncate()

    def _save(self) -> None:
        self._save_state(subnet=str(self.subnet) if self.subnet else None)

    @classmethod
    def attach(cls, name: str) -> LocalBackend:
        data = cls._saved_state(name)
        b = cls(ClusterSpec.from_mapping(data["spec"]))
        b.subnet = ipaddress.IPv4Network(data["subnet"]) if data.get("subnet") else None
        b._restore_nodes(data)
        return b

    def down(self) -> None:
        for n in list(self.info):
            with contextlib.suppress(Exception):
                self._teardown_node(n)
        _kill_ns(self.hub)
        _ip("netns", "del", self.hub, check=False)
        _ip("link", "del", self.host_link, check=False)
        with disk_errors():  # before the data goes: it is under them
            disklayer.unmount_cluster(self.kind, self.spec.name)
        shutil.rmtree(DATA_ROOT / self.spec.name, ignore_errors=True)
        state.remove("local", self.spec.name)
        self.remove_hosts_file()
        self.info.clear()

    def _teardown_node(self, node: str) -> None:
        ns = self.ns(node)
        _kill_ns(ns)
        _ip("netns", "del", ns, check=False)
        shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)

    def destroy(self, node: str) -> None:
        self._node(node)
        self._teardown_node(node)
        disklayer.unmount_node(self.kind, self.spec.name, node)
        shutil.rmtree(self.node_dir(node), ignore_errors=True)
        del self.info[node]
        self._ipt.pop(node, None)
        self._nodes_changed()

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str:
        if name in self.info:
            raise ClusterError(f"node {name!r} already exists")
        self._make_node(name, role or self.spec.role_of(name), [])
        self._nodes_changed()
        if start:
            self.start(name)
        return name

    def fetch_dir(self, node: str, remote_dir: str, local_dir: Path) -> None:
        copy_tree_sparse(remote_dir, local_dir)


def _netns_list() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_ns(ns: str) -> None:
    """SIGKILL every process in the namespace (a live process would keep a deleted namespace alive)."""
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for p in pids:
        with contextlib.suppress(ProcessLookupError, ValueError, PermissionError):
            os.kill(int(p), signal.SIGKILL)


def _free_subnet() -> ipaddress.IPv4Network:
    used: list[ipaddress.IPv4Network] = []
    with contextlib.suppress(Exception):
        for r in json.loads(_ip("-j", "route").stdout):
            if r.get("dst") and r["dst"] != "default":
                with contextlib.suppress(ValueError):
                    used.append(ipaddress.IPv4Network(r["dst"], strict=False))
        for link in json.loads(_ip("-j", "addr").stdout):
            for a in link.get("addr_info", []):
                if a.get("family") == "inet":
                    used.append(ipaddress.IPv4Network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for k in range(1, 255):
        cand = ipaddress.IPv4Network(f"10.77.{k}.0/24")
        if not any(cand.overlaps(u) for u in used):
            return cand
    raise ClusterError("no free /24 in 10.77.0.0/16; remove old clusters (`faultline cluster down --all`)")


def leftovers() -> dict[str, list[str]]:
    """Every Faultline namespace, host link and state file on this machine (for `down --all` and tests)."""
    links = []
    with contextlib.suppress(Exception):
        links = [
            ln["ifname"] for ln in json.loads(_ip("-j", "link").stdout) if ln["ifname"].startswith(PREFIX)
        ]
    return {
        "namespaces": [n for n in _netns_list() if n.startswith(PREFIX)],
        "links": links,
        "hosts_dirs": sorted(str(p) for p in NETNS_ETC.glob(f"{PREFIX}*")) if NETNS_ETC.is_dir() else [],
        "state": state.names("local"),
    }


def remove_all() -> int:
    """Removes every Faultline namespace, link, hosts directory, data directory and state record."""
    left = leftovers()
    for ns in left["namespaces"]:
        _kill_ns(ns)
        _ip("netns", "del", ns, check=False)
    for link in left["links"]:
        _ip("link", "del", link, check=False)
    for d in left["hosts_dirs"]:
        shutil.rmtree(d, ignore_errors=True)
    for name in left["state"]:
        state.remove("local", name)
    shutil.rmtree(DATA_ROOT, ignore_errors=True)
    return sum(len(v) for v in left.values())
