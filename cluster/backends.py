"""The registry of cluster backends, and choosing, creating and re-finding a backend by kind and cluster name.

A backend kind registers itself (`register(BackendKind(...))`) and is then chosen by name like any other
(`--cluster NAME`): the built-ins `docker` (the default), `local` (network namespaces) and `ssh` register
below and import their modules only when used; a test double registers `hidden`, so `--help` does not offer
it. What the controller must know of a kind is data on it (`BackendKind`): whether it needs a hosts file,
where it mounts a disk layer, how a user gets a shell on one of its nodes. Other packages call
`make_backend(...)` then `.up()`, or `attach(kind, name)` for a cluster that is already up; `remove_everything()` / `leftovers()` are the hygiene entry points (`down --all`, tests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from faultline.cluster.api import ClusterBackend
from faultline.cluster.base import ClusterError, ClusterSpec

KINDS = ("docker", "local", "ssh")  # the built-in kinds, which `cluster status` and `down --all` look for
DEFAULT = "docker"  # the kind a run or `cluster up` uses unless told otherwise
# where a kind mounts the disk layer of the disk faults: on this machine, on its hosts, or nowhere
DiskLayer = Literal["here", "hosts", "none"]
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class Factory(Protocol):
    """Makes a backend for a cluster spec (not yet up). `hosts` is a hosts file for kinds that take one
    (ssh); `seed` is the run's seed, for a backend that makes random choices itself (a test double)."""

    def __call__(self, spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend: ...


@dataclass(frozen=True)
class BackendKind:
    """One kind of cluster backend, as the user names it (`--cluster NAME`)."""

    name: str
    make: Factory
    # the backend of a cluster of this kind that is already up, by cluster name (possibly brought up by
    # another process: `--reuse-cluster`, `faultline cluster status`); None when a cluster lives in one
    # process only
    attach: Callable[[str], ClusterBackend] | None = None
    hidden: bool = False  # not offered in --help (an in-memory test double)
    default_quiet_period_s: float = 5.0  # settling time before the final reads, unless the test sets one
    dbs: frozenset[str] | None = None  # the DBs it can run (None: any)
    # a kind whose nodes are machines named in a hosts file (`run --nodes`, `cluster up --hosts`): reads
    # that file and raises ValueError when it is not one, so a bad file is refused before anything starts
    hosts_file: Callable[[str], object] | None = None
    disk_layer: DiskLayer = "none"
    # the argv of an interactive shell on a node of a cluster of this kind (`faultline cluster ssh NODE`)
    shell_argv: Callable[[Any, str], list[str]] | None = None

    def runs(self, db: str) -> bool:
        """Whether this kind can run the DB named `db`."""
        return self.dbs is None or db in self.dbs


_KINDS: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> BackendKind:
    """Adds a backend kind; a name already taken is refused (a plug-in never shadows another)."""
    if not _NAME.match(kind.name):
        raise ClusterError(f"cluster backend name {kind.name!r}: use lowercase letters, digits and '-'")
    if kind.name in _KINDS:
        raise ClusterError(f"a cluster backend named {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Removes a backend kind (a plug-in's tests); an unknown name is no error."""
    _KINDS.pop(name, None)


def kinds(include_hidden: bool = False) -> tuple[str, ...]:
    """The names of the registered kinds, in registration order (the default, DEFAULT, first)."""
    return tuple(n for n, k in _KINDS.items() if include_hidden or not k.hidden)


def kind(name: str) -> BackendKind:
    """The kind registered as `name`; an unknown name is a ClusterError that lists the valid ones."""
    found = _KINDS.get(name)
    if found is None:
        raise ClusterError(f"unknown cluster backend {name!r} (choose from {', '.join(kinds())})")
    return found


def make_backend(
    kind: str = DEFAULT,
    spec: ClusterSpec | Mapping[str, Any] | None = None,
    hosts: str | None = None,
    *,
    seed: int = 0,
) -> ClusterBackend:
    """A backend of `kind` for `spec` (not yet up). `hosts` is the ssh hosts file (required for ssh)."""
    k = _lookup(kind)
    spec_obj = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(dict(spec or {}))
    return k.make(spec_obj, hosts, seed=seed)


def attach(kind: str, name: str) -> ClusterBackend:
    """The backend object of a cluster that is already up (possibly started by another process)."""
    k = _lookup(kind)
    if k.attach is None:
        raise ClusterError(f"a {kind} cluster lives in the process that made it: there is none to attach to")
    return k.attach(name)


_lookup = kind  # for the functions above, whose parameter `kind` hides the function


# ---------------------------------------------------------------- the built-in kinds


def _make_docker(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend:
    from faultline.cluster.docker_backend import DockerBackend

    return DockerBackend(spec)


def _attach_docker(name: str) -> ClusterBackend:
    from faultline.cluster.docker_backend import DockerBackend

    return DockerBackend.attach(name)


def _make_local(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend:
    from faultline.cluster.local_backend import LocalBackend

    return LocalBackend(spec)


def _attach_local(name: str) -> ClusterBackend:
    from faultline.cluster.local_backend import LocalBackend

    return LocalBackend.attach(name)


def _make_ssh(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> ClusterBackend:
    from faultline.cluster.ssh_backend import SSHBackend, fit_spec, load_hosts

    if not hosts:
        raise ClusterError("the ssh backend needs --hosts FILE (see docs/cluster.md for its format)")
    hs = load_hosts(hosts)
    fit_spec(spec, hs)
    return SSHBackend(spec, hs)


def _attach_ssh(name: str) -> ClusterBackend:
    from faultline.cluster.ssh_backend import SSHBackend

    return SSHBackend.attach(name)


def _check_hosts(path: str) -> object:
    from faultline.cluster.ssh_backend import load_hosts

    return load_hosts(path)


def _docker_shell(backend: Any, node: str) -> list[str]:
    return ["docker", "exec", "-it", backend.info[node].host, "bash"]


def _local_shell(backend: Any, node: str) -> list[str]:
    return ["ip", "netns", "exec", backend.info[node].host, os.environ.get("SHELL", "/bin/bash")]


def _ssh_shell(backend: Any, node: str) -> list[str]:
    h = backend.hosts[node]
    return ["ssh", "-p", str(h.port), "-i", os.path.expanduser(h.key), f"{h.user}@{h.address}"]


# Docker and local mount a disk layer on this machine; ssh mounts it on its hosts, which it asks for FUSE
# itself before it uploads anything (SSHBackend.check_fuse).
register(BackendKind("docker", _make_docker, _attach_docker, disk_layer="here", shell_argv=_docker_shell))
register(BackendKind("local", _make_local, _attach_local, disk_layer="here", shell_argv=_local_shell))
register(
    BackendKind(
        "ssh", _make_ssh, _attach_ssh, hosts_file=_check_hosts, disk_layer="hosts", shell_argv=_ssh_shell
    )
)


# ---------------------------------------------------------------- clusters on this machine


def list_clusters(
    kinds: tuple[str, ...] = KINDS, unreachable: list[str] | None = None
) -> list[tuple[str, str]]:
    """(kind, name) of every cluster this machine knows of; an unreachable backend is skipped, and why
    is appended to `unreachable` (so "no cluster is up" is never said when Docker could not be asked)."""
    from faultline.cluster import state

    out: list[tuple[str, str]] = []
    if "docker" in kinds:
        try:
            from faultline.cluster.docker_backend import list_clusters as docker_list

            out += [("docker", n) for n in docker_list()]
        except ClusterError as exc:
            if unreachable is not None:
                unreachable.append(str(exc))
    for kind in ("local", "ssh"):
        if kind in kinds:
            out += [(kind, n) for n in state.names(kind)]
    from faultline.cluster.disklayer import clusters_with_layers

    # a run killed after it mounted a disk layer, before its nodes existed, leaves only the layer
    out += [kn for kn in clusters_with_layers() if kn[0] in kinds and kn not in out]
    return out


def leftovers(docker: bool = True) -> dict[str, list[str]]:
    """Everything Faultline-labelled still on this machine: containers, networks, namespaces, links."""
    import os

    out: dict[str, list[str]] = {}
    if docker:
        from faultline.cluster.base import LABEL
        from faultline.cluster.docker_backend import docker_client, labelled_containers

        client = docker_client()
        out["containers"] = [c.name for c in labelled_containers(client, f"{LABEL}.managed=1")]
        out["networks"] = [n.name for n in client.networks.list(filters={"label": f"{LABEL}.managed=1"})]
    if os.geteuid() == 0:
        from faultline.cluster.local_backend import leftovers as local_leftovers

        out.update(local_leftovers())
    from faultline.cluster.disklayer import leftovers as disk_leftovers

    out["disk layers"] = disk_leftovers()
    return {k: v for k, v in out.items() if v}


def remove_everything(log: Callable[[str], object] = print) -> int:
    """`down --all`: every Faultline container, network, namespace and link on this machine; ssh
    clusters recorded here are taken down too (their hosts are cleaned over ssh)."""
    import os

    from faultline.cluster import state

    removed = 0
    try:
        from faultline.cluster.docker_backend import docker_client, remove_cluster

        removed += remove_cluster(docker_client(), None)
    except ClusterError as exc:
        log(f"docker: skipped ({exc})")
    if os.geteuid() == 0:
        from faultline.cluster.local_backend import remove_all

        removed += remove_all()
    from faultline.cluster.disklayer import unmount_everything

    removed += unmount_everything()
    for name in state.names("ssh"):
        try:
            attach("ssh", name).down()
            removed += 1
        except Exception as exc:
            log(f"ssh cluster {name}: {exc}")
    for k in KINDS:
        d = state.state_dir(k)
        for p in d.glob(f"{k}-*.hosts") if d.is_dir() else []:
            p.unlink(missing_ok=True)
    return removed
