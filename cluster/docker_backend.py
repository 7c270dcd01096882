"""The Docker backend (the default): one labelled user-defined network and one container per node.

Containers get NET_ADMIN only (iptables and tc inside their own network namespace), an init process that
reaps daemons, and the `faultline` package (the checkout, in an editable install) bind-mounted read-only
at /opt/faultline/faultline, so code changes reach the nodes without an image rebuild. A role's DNS names
(the store's `master-1`...) are network aliases, separate from the container hostnames, so `set_dns` can
move a name to another container; Docker's embedded DNS serves them inside the network, and `resolve`
answers for the host (which cannot query that DNS).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import tarfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faultline.cluster import disklayer
from faultline.cluster.base import (
    LABEL,
    ClusterError,
    ClusterSpec,
    NodeBackend,
    NodeInfo,
    RemoteTimeout,
    disk_errors,
)
from faultline.cluster.collect import ChunkStream, extract_tar
from faultline.cluster.source import PACKAGE, PACKAGE_DIR, node_tarball

# Nodes import the package from SRC_MOUNT/faultline, bind-mounted from the host's package folder.
SRC_MOUNT = "/opt/faultline"
NODE_DIR = "/var/lib/faultline"
BOOT_DIR = "/opt/faultline-boot"
PYTHON = "/opt/venv/bin/python3"


class DockerUnavailable(ClusterError):
    pass


def docker_client(timeout: int = 60):
    """A docker SDK client, or DockerUnavailable with one line that suggests the local backend."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception as exc:
        raise DockerUnavailable(
            f"cannot reach the Docker engine ({type(exc).__name__}); start Docker, or use "
            "--cluster local (network namespaces, needs root)"
        ) from exc


def container_name(cluster: str, node: str) -> str:
    return f"fl-{cluster}-{node}"


def network_name(cluster: str) -> str:
    return f"fl-{cluster}"


class DockerRemote:
    """`exec` over the docker API with a real deadline: `timeout` inside the container kills the command,
    and a thread-side deadline catches a hung API call."""

    def __init__(self, backend: DockerBackend) -> None:
        self.b = backend

    def exec(self, node: str, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        api = self.b.client.api
        cid = self.b.container_id(node)
        cmd = ["timeout", "-k", "2", f"{max(timeout, 0.1):.1f}", *argv]
        result: dict[str, Any] = {}

        def work() -> None:
            try:
                ex = api.exec_create(cid, cmd, stdout=True, stderr=True)
                out, err = api.exec_start(ex["Id"], demux=True)
                result["out"], result["err"] = out or b"", err or b""
                result["rc"] = api.exec_inspect(ex["Id"])["ExitCode"]
            except Exception as exc:
                result["exc"] = exc

        t = threading.Thread(target=work, daemon=True, name=f"exec-{node}")
        t0 = time.monotonic()
        t.start()
        t.join(timeout + 10)
        if t.is_alive():
            raise RemoteTimeout(
                f"{node}: {argv[0]} did not return within {timeout + 10:.0f} s (docker API hung)"
            )
        if "exc" in result:
            raise ClusterError(f"{node}: exec {argv[0]} failed: {result['exc']}")
        rc = result["rc"]
        if rc == 124 or (rc == 137 and time.monotonic() - t0 >= timeout):
            raise RemoteTimeout(f"{node}: {' '.join(argv[:3])} timed out after {timeout:.1f} s")
        return rc, result["out"].decode(errors="replace"), result["err"].decode(errors="replace")

    def put(self, node: str, path: str, data: bytes) -> None:
        p = Path(path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            ti = tarfile.TarInfo(p.name)
            ti.size = len(data)
            ti.mtime = int(time.time())
            ti.mode = 0o644
            tar.addfile(ti, io.BytesIO(data))
        self.b.run(node, ["mkdir", "-p", str(p.parent)], 10)
        if not self.b.client.api.put_archive(self.b.container_id(node), str(p.parent), buf.getvalue()):
            raise ClusterError(f"{node}: put {path} failed")

    def get(self, node: str, path: str) -> bytes:
        stream, _ = self.b.client.api.get_archive(self.b.container_id(node), path)
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tar:
            member = tar.next()
            f = tar.extractfile(member) if member else None
            if f is None:
                raise ClusterError(f"{node}: {path} is not a regular file")
            return f.read()


class DockerBackend(NodeBackend):
    kind = "docker"

    def __init__(self, spec: ClusterSpec, client=None, image: str | None = None) -> None:
        super().__init__(spec)
        self.client = client or docker_client()
        self.image = image
        self.remote = DockerRemote(self)
        self.network = network_name(spec.name)
        self.subnet: ipaddress.IPv4Network | None = None
        self._next_ip = 2
        self._lock = threading.Lock()
        self._ncpu: int | None = None  # the Docker host's CPUs, asked once (_cpu_of)

    # ------------------------------------------------------------------ hooks
    def node_dir(self, node: str) -> str:
        return NODE_DIR

    def python(self, node: str) -> str:
        return PYTHON

    def source_dir(self, node: str) -> str:
        return BOOT_DIR if self._node(node).role == "sshd" else SRC_MOUNT

    def container_id(self, node: str) -> str:
        return self._node(node).host

    def labels(self, node: str, role: str) -> dict[str, str]:
        return {
            f"{LABEL}.managed": "1",
            f"{LABEL}.cluster": self.spec.name,
            f"{LABEL}.node": node,
            f"{LABEL}.role": role,
            f"{LABEL}.spec": json.dumps(self.spec.to_mapping()),
        }

    # ------------------------------------------------------------------ lifecycle
    def up(self, spec: Any = None, log=lambda s: None) -> None:
        """Network, containers (in parallel), then the node processes. Undoes itself if anything fails."""
        if spec is not None:
            self.spec = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(spec)
            self.network = network_name(self.spec.name)
        if labelled_containers(self.client, f"{LABEL}.cluster={self.spec.name}") or self.client.networks.list(
            names=[self.network]
        ):
            raise ClusterError(
                f"a cluster named {self.spec.name!r} already exists on Docker; "
                f"`faultline cluster down --name {self.spec.name}` first, or pick another --name"
            )
        if self.image is None:
            from faultline.cluster.image import ensure_image_for

            self.image = ensure_image_for(self.spec, log)
        try:
            self._create_network()
            log(f"network {self.network} ({self.subnet})")
            names = self.spec.node_names()
            for n, role, dns in names:
                self.info[n] = NodeInfo(n, role, self._alloc_ip(), "", dns)
            self._parallel(lambda nr: self._create_container(nr[0]), names)
            log(f"{len(names)} containers running")
            self._start_nodes([n for n, _, _ in names], log)
        except BaseException:
            with contextlib.suppress(Exception):
                self.down()
            raise

    def add_sshd_node(self, name: str, authorized_key: str, fuse: bool = False) -> NodeInfo:
        """A container running sshd (for the SSH backend's tests): root login with this public key only.
        With `fuse` it plays a host that has FUSE (/dev/fuse and SYS_ADMIN, so the SSH backend can mount
        its disk layer there): only such a test fixture gets them, never a node container."""
        self.info[name] = NodeInfo(name, "sshd", self._alloc_ip(), "", [])
        self._create_container(name, mount_source=False, fuse_host=fuse)
        self.remote.put(name, "/root/.ssh/authorized_keys", authorized_key.encode())
        # no checkout in an sshd container (it plays a bare host): just the daemon manager
        self.remote.put(
            name,
            f"{BOOT_DIR}/boot.tgz",
            node_tarball(("cluster",), {"cluster": ("__init__.py", "daemon.py")}),
        )
        self.run(
            name, ["tar", "-xzf", f"{BOOT_DIR}/boot.tgz", "-C", BOOT_DIR], 30, step="unpack daemon manager"
        )
        self.run(name, ["chmod", "-R", "go-rwx", "/root/.ssh"], 10)
        self.run(name, ["sh", "-c", "mkdir -p /run/sshd && ssh-keygen -A"], 30, step="ssh-keygen -A")
        self._daemon(name, "start", ["--name", "sshd", "--", "/usr/sbin/sshd", "-D", "-e"])
        return self.info[name]

    def _create_network(self) -> None:
        """A bridge network on a free /24. Two clusters coming up at once may both pick the same free
        subnet; Docker refuses the second ("overlaps"), which then takes the next one."""
        import docker.errors
        import docker.types

        taken: list[ipaddress.IPv4Network] = []
        while True:
            self.subnet = _free_subnet(self.client, taken)
            ipam = docker.types.IPAMConfig(
                pool_configs=[
                    docker.types.IPAMPool(
                        subnet=str(self.subnet), gateway=str(self.subnet.network_address + 1)
                    )
                ]
            )
            try:
                self.client.networks.create(
                    self.network,
                    driver="bridge",
                    ipam=ipam,
                    check_duplicate=True,
                    labels={f"{LABEL}.managed": "1", f"{LABEL}.cluster": self.spec.name},
                )
                return
            except docker.errors.APIError as exc:
                if "overlap" not in str(exc).lower() or len(taken) >= 16:
                    raise
                taken.append(self.subnet)

    def _alloc_ip(self) -> str:
        """A fresh address, never one a destroyed node had: a replacement reachable at its predecessor's
        address would hide a node that never re-resolves a moved name (KUDU-1620)."""
        with self._lock:
            assert self.subnet is not None
            used = {i.address for i in self.info.values()}
            while True:
                ip = str(self.subnet.network_address + self._next_ip)
                self._next_ip += 1
                if ip not in used:
                    return ip

    def _create_container(self, node: str, mount_source: bool = True, fuse_host: bool = False) -> None:
        info = self.info[node]
        api = self.client.api
        binds = {str(PACKAGE_DIR): {"bind": f"{SRC_MOUNT}/{PACKAGE}", "mode": "ro"}} if mount_source else {}
        binds.update(self._disk_binds(node))
        fuse: dict[str, Any] = {"devices": ["/dev/fuse"]} if fuse_host else {}
        pin: dict[str, Any] = {"cpuset_cpus": self._cpu_of(node)} if self.spec.one_cpu_per_node else {}
        host_config = api.create_host_config(
            cap_add=["NET_ADMIN", *(["SYS_ADMIN"] if fuse_host else [])],
            init=True,
            network_mode=self.network,
            binds=binds or None,
            **fuse,
            **pin,
        )
        net_config = api.create_networking_config(
            {self.network: api.create_endpoint_config(aliases=[node, *info.dns], ipv4_address=info.address)}
        )
        # NODE_DIR is an anonymous volume: the host's own file system, not the container's storage driver
        # (fuse-overlayfs here, where a 4 KiB write+fsync took 5.9 ms against 1.1 ms on a volume); it goes
        # with the container (removed with v=True), and a disk layer's bind mount nests inside it
        c = api.create_container(
            self.image,
            name=container_name(self.spec.name, node),
            hostname=node,
            labels=self.labels(node, info.role),
            host_config=host_config,
            networking_config=net_config,
            environment={"PYTHONPATH": SRC_MOUNT},
            volumes=[NODE_DIR],
            detach=True,
        )
        info.host = c["Id"]
        api.start(c["Id"])

    def _cpu_of(self, node: str) -> str:
        """The one CPU a node is held to (ClusterSpec.one_cpu_per_node): round-robin in node order, so the
        nodes of each role spread over the Docker host's CPUs."""
        if self._ncpu is None:
            self._ncpu = max(1, int(self.client.info().get("NCPU") or 1))
        return str(list(self.info).index(node) % self._ncpu)

    def _disk_binds(self, node: str) -> dict[str, dict[str, str]]:
        """Mounts the node's disk layers on the host (a run with a disk fault only) and returns their bind
        mounts over its data directories: the container needs no FUSE device and no capability for them."""
        dirs = self.disk_layers(node)
        if not dirs:
            return {}
        with disk_errors():
            layers = disklayer.mount_node(self.kind, self.spec.name, node, count=len(dirs))
        return {
            str(layer.mountpoint): {"bind": d, "mode": "rw"} for layer, d in zip(layers, dirs, strict=True)
        }

    def down(self) -> None:
        """Removes the cluster's containers and network (also ones this object did not create), then
        unmounts its disk layers."""
        remove_cluster(self.client, self.spec.name)
        with disk_errors():
            disklayer.unmount_cluster(self.kind, self.spec.name)
        self.remove_hosts_file()
        self.info.clear()

    def destroy(self, node: str) -> None:
        """The container and its data are gone for good; the name can be reused by add_node."""
        info = self._node(node)
        with contextlib.suppress(Exception):
            self.client.api.remove_container(info.host, force=True, v=True)
        disklayer.unmount_node(self.kind, self.spec.name, node)
        del self.info[node]
        self._ipt.pop(node, None)
        self.sync_hosts_file()

    def add_node(self, name: str, role: str | None = None, start: bool = True) -> str:
        """A fresh node (new container, empty data), of the role its name's prefix says unless `role` is
        given. It carries no DNS name until `set_dns`."""
        if name in self.info:
            raise ClusterError(f"node {name!r} already exists")
        role = role or self.spec.role_of(name)
        self.info[name] = NodeInfo(name, role, self._alloc_ip(), "", [])
        try:
            self._create_container(name)
        except BaseException:
            del self.info[name]
            raise
        self.sync_hosts_file()
        if start:
            self.start(name)
        return name

    # ------------------------------------------------------------------ DNS
    def _publish_dns(self, name: str, old: str | None, new: str) -> None:
        """Docker DNS is the network's aliases: disconnect and reconnect both containers with their new
        alias lists and unchanged addresses, then check that another node resolves the moved name."""
        if old is not None:
            self._reconnect(old)
        self._reconnect(new)
        self._verify_dns(name, self.info[new].address)

    def _reconnect(self, node: str) -> None:
        info = self.info[node]
        net = self.client.networks.get(self.network)
        with contextlib.suppress(Exception):
            net.disconnect(info.host, force=True)
        net.connect(info.host, aliases=[node, *info.dns], ipv4_address=info.address)

    def _verify_dns(self, name: str, ip: str, timeout: float = 10) -> None:
        probes = [n for n in self.info if n not in ("",) and self.dns_holder(name) != n] or list(self.info)
        deadline = time.monotonic() + timeout
        got = ""
        while time.monotonic() < deadline:
            rc, out, _ = self.run(probes[0], ["getent", "hosts", name], 10, check=False)
            got = " ".join(line.split()[0] for line in out.splitlines() if line.strip())
            if rc == 0 and got.split() == [ip]:
                return
            time.sleep(0.2)
        raise ClusterError(
            f"{name} should resolve to {ip} only, but {probes[0]} resolves it to {got or 'nothing'}"
        )

    # ------------------------------------------------------------------ files
    def fetch_dir(self, node: str, remote_dir: str, local_dir: Path) -> None:
        stream, _ = self.client.api.get_archive(self.container_id(node), remote_dir)
        extract_tar(io.BufferedReader(ChunkStream(stream)), local_dir)

    # ------------------------------------------------------------------ reattach (CLI)
    @classmethod
    def attach(cls, name: str, client=None) -> DockerBackend:
        """Rebuilds a backend object for an existing cluster from its labels and network settings."""
        client = client or docker_client()
        cs = labelled_containers(client, f"{LABEL}.cluster={name}")
        if not cs:
            raise ClusterError(f"no Docker cluster named {name!r}")
        try:
            spec = ClusterSpec.from_mapping(json.loads(cs[0].labels.get(f"{LABEL}.spec", "{}")))
        except (ValueError, TypeError) as exc:
            raise ClusterError(
                f"Docker cluster {name!r} was made by another version of Faultline ({exc}); "
                f"remove it with `faultline cluster down --name {name}`"
            ) from None
        b = cls(spec, client, image=cs[0].image.tags[0] if cs[0].image.tags else None)
        dns_names = set(spec.dns_names())
        for c in sorted(cs, key=lambda c: c.labels.get(f"{LABEL}.node", "")):
            node = c.labels.get(f"{LABEL}.node", c.name)
            ns = c.attrs.get("NetworkSettings", {}).get("Networks", {}).get(b.network, {})
            aliases = ns.get("Aliases") or []
            b.info[node] = NodeInfo(
                node,
                c.labels.get(f"{LABEL}.role", "") or spec.role_of(node),
                ns.get("IPAddress", ""),
                c.id,
                sorted(a for a in aliases if a in dns_names),
            )
        with contextlib.suppress(Exception):
            cfg = client.networks.get(b.network).attrs["IPAM"]["Config"][0]
            b.subnet = ipaddress.IPv4Network(cfg["Subnet"])
            hosts = [
                int(ipaddress.IPv4Address(i.address)) - int(b.subnet.network_address)
                for i in b.info.values()
                if i.address
            ]
            b._next_ip = max([1, *hosts]) + 1  # past every address in use (see _alloc_ip)
        return b

    def container_states(self) -> dict[str, str]:
        out = {}
        for n, i in self.info.items():
            try:
                out[n] = self.client.api.inspect_container(i.host)["State"]["Status"]
            except Exception:
                out[n] = "missing"
        return out


def _free_subnet(client, taken: Sequence[ipaddress.IPv4Network] = ()) -> ipaddress.IPv4Network:
    """A /24 in 10.210.0.0/16 that no Docker network, no host route and nothing in `taken` uses (checked,
    not assumed)."""
    import subprocess

    used: list[ipaddress.IPv4Network] = list(taken)
    for net in client.api.networks():
        for cfg in (net.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(Exception):
                used.append(ipaddress.IPv4Network(cfg["Subnet"], strict=False))
    with contextlib.suppress(Exception):
        routes = json.loads(
            subprocess.run(["ip", "-j", "route"], capture_output=True, text=True, timeout=5).stdout
        )
        for r in routes:
            if r.get("dst") and r["dst"] != "default":
                with contextlib.suppress(Exception):
                    used.append(ipaddress.IPv4Network(r["dst"], strict=False))
    for k in range(0, 256):
        cand = ipaddress.IPv4Network(f"10.210.{k}.0/24")
        if not any(cand.overlaps(u) for u in used):
            return cand
    raise ClusterError(
        "no free /24 left in 10.210.0.0/16 for a cluster network; remove old clusters "
        "(`faultline cluster down --all`)"
    )


def labelled_containers(client, label: str) -> list:
    """Every container, running or not, carrying `label`. One removed between the engine's listing and its
    inspection (another run's teardown, or a removal the engine finishes after the client gave up on it) is
    left out: the SDK would otherwise raise NotFound for a container that is simply gone."""
    return client.containers.list(all=True, filters={"label": label}, ignore_removed=True)


def list_clusters(client=None) -> list[str]:
    client = client or docker_client()
    names = set()
    for c in labelled_containers(client, f"{LABEL}.managed=1"):
        names.add(c.labels.get(f"{LABEL}.cluster", "?"))
    for n in client.networks.list(filters={"label": f"{LABEL}.managed=1"}):
        names.add(n.attrs.get("Labels", {}).get(f"{LABEL}.cluster", "?"))
    return sorted(names)


def remove_cluster(client, name: str | None, attempts: int = 4) -> int:
    """Removes the containers and networks of cluster `name` (every Faultline cluster when None).

    A removal the engine refuses or times out on (seen under load) is tried again; what is still there
    after the last attempt is named in a ClusterError rather than left behind in silence."""
    label = f"{LABEL}.cluster={name}" if name else f"{LABEL}.managed=1"
    removed = 0
    for attempt in range(attempts):
        removed += _remove_labelled(client, label)
        left = _labelled_names(client, label)
        if not left:
            return removed
        time.sleep(1 + attempt)
    raise ClusterError(f"Docker did not remove {', '.join(left)}; `docker rm -f` them by hand")


def _labelled_names(client, label: str) -> list[str]:
    names = [c.name for c in labelled_containers(client, label)]
    return names + [n.name for n in client.networks.list(filters={"label": label})]


def _remove_labelled(client, label: str) -> int:
    """One pass: containers in parallel, then the networks (which refuse while a container is attached)."""
    from concurrent.futures import ThreadPoolExecutor

    def attempt(remove) -> int:
        try:
            remove()
            return 1
        except Exception:  # what is left is listed and tried again by the caller
            return 0

    cs = labelled_containers(client, label)
    with ThreadPoolExecutor(max_workers=8) as pool:
        removed = sum(pool.map(lambda c: attempt(lambda: c.remove(force=True, v=True)), cs))
    return removed + sum(attempt(n.remove) for n in client.networks.list(filters={"label": label}))
