"""Choosing, creating and re-finding backends by kind (`docker`, `local`, `ssh`) and cluster name.

Other packages call `make_backend(...)` then `.up()`, or `attach(kind, name)` for a cluster that is
already up; `remove_everything()` / `leftovers()` are the hygiene entry points (`down --all`, tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultline.cluster.base import ClusterError, ClusterSpec, NodeBackend

KINDS = ("docker", "local", "ssh")


@dataclass(frozen=True)
class BackendKind:
    """A cluster backend by name: how to make one for a spec (`make(spec, hosts, seed)`), how to re-find a
    running one (`attach(name)`, None: it cannot be re-found), whether `--help` lists it (a test double
    does not), how long a run waits for the cluster to settle after healing, and which DBs it can run (None:
    any)."""

    name: str
    make: Callable[[ClusterSpec, str | None, int], Any]
    attach: Callable[[str], Any] | None = None
    hidden: bool = False
    default_quiet_period_s: float = 5.0
    dbs: frozenset[str] | None = None


_REGISTRY: dict[str, BackendKind] = {}


def register(kind: BackendKind) -> None:
    """Adds a backend kind; registering the same object again is a no-op, another under a taken name is
    refused."""
    old = _REGISTRY.get(kind.name)
    if old is not None and old != kind:
        raise ClusterError(f"a cluster backend named {kind.name!r} is already registered")
    _REGISTRY[kind.name] = kind


def kinds(include_hidden: bool = False) -> list[str]:
    return [k.name for k in _REGISTRY.values() if include_hidden or not k.hidden]


def kind(name: str) -> BackendKind:
    found = _REGISTRY.get(name)
    if found is None:
        raise ClusterError(f"unknown cluster {name!r}; valid: {', '.join(kinds())}")
    return found


def _make_docker(spec: ClusterSpec, hosts: str | None, seed: int) -> NodeBackend:
    from faultline.cluster.docker_backend import DockerBackend

    return DockerBackend(spec)


def _make_local(spec: ClusterSpec, hosts: str | None, seed: int) -> NodeBackend:
    from faultline.cluster.local_backend import LocalBackend

    return LocalBackend(spec)


def _make_ssh(spec: ClusterSpec, hosts: str | None, seed: int) -> NodeBackend:
    from faultline.cluster.ssh_backend import SSHBackend, fit_spec, load_hosts

    if not hosts:
        raise ClusterError("the ssh backend needs --hosts FILE (see docs/cluster.md for its format)")
    hs = load_hosts(hosts)
    fit_spec(spec, hs)
    return SSHBackend(spec, hs)


def _attach(module: str, cls: str) -> Callable[[str], Any]:
    def attach_to(name: str) -> Any:
        import importlib

        return getattr(importlib.import_module(module), cls).attach(name)

    return attach_to


register(BackendKind("docker", _make_docker, _attach("faultline.cluster.docker_backend", "DockerBackend")))
register(BackendKind("local", _make_local, _attach("faultline.cluster.local_backend", "LocalBackend")))
register(BackendKind("ssh", _make_ssh, _attach("faultline.cluster.ssh_backend", "SSHBackend")))


def make_backend(kind_name: str = "docker", spec: ClusterSpec | dict[str, Any] | None = None,
                 hosts: str | None = None, seed: int = 0) -> Any:
    """A backend for `spec` (not yet up). `hosts` is the ssh hosts file (required for ssh)."""
    spec_obj = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(dict(spec or {}))
    return kind(kind_name).make(spec_obj, hosts, seed)


def attach(kind_name: str, name: str) -> Any:
    """The backend object of a cluster that is already up (possibly started by another process)."""
    k = kind(kind_name)
    if k.attach is None:
        raise ClusterError(f"a {kind_name} cluster cannot be re-found once its process is gone")
    return k.attach(name)


def list_clusters(kinds: tuple[str, ...] = KINDS, unreachable: list[str] | None = None) -> list[tuple[str, str]]:
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
    return out


def leftovers(docker: bool = True) -> dict[str, list[str]]:
    """Everything Faultline-labelled still on this machine: containers, networks, namespaces, links."""
    import os

    out: dict[str, list[str]] = {}
    if docker:
        from faultline.cluster.base import LABEL
        from faultline.cluster.docker_backend import docker_client

        client = docker_client()
        out["containers"] = [c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL}.managed=1"})]
        out["networks"] = [n.name for n in client.networks.list(filters={"label": f"{LABEL}.managed=1"})]
    if os.geteuid() == 0:
        from faultline.cluster.local_backend import leftovers as local_leftovers

        out.update(local_leftovers())
    return {k: v for k, v in out.items() if v}


def remove_everything(log=print) -> int:
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
    for name in state.names("ssh"):
        try:
            attach("ssh", name).down()
            removed += 1
        except Exception as exc:
            log(f"ssh cluster {name}: {exc}")
    for kind in KINDS:
        d = state.state_dir(kind)
        for p in d.glob(f"{kind}-*.hosts") if d.is_dir() else []:
            p.unlink(missing_ok=True)
    return removed
