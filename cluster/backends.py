"""Choosing, creating and re-finding backends by kind (`docker`, `local`, `ssh`) and cluster name.

Other packages call `make_backend(...)` then `.up()`, or `attach(kind, name)` for a cluster that is
already up; `remove_everything()` / `leftovers()` are the hygiene entry points (`down --all`, tests).
"""

from __future__ import annotations

from typing import Any

from faultline.cluster.base import ClusterError, ClusterSpec, NodeBackend

KINDS = ("docker", "local", "ssh")


def make_backend(kind: str = "docker", spec: ClusterSpec | dict[str, Any] | None = None,
                 hosts: str | None = None) -> NodeBackend:
    """A backend for `spec` (not yet up). `hosts` is the ssh hosts file (required for ssh)."""
    spec_obj = spec if isinstance(spec, ClusterSpec) else ClusterSpec.from_mapping(dict(spec or {}))
    if kind == "docker":
        from faultline.cluster.docker_backend import DockerBackend

        return DockerBackend(spec_obj)
    if kind == "local":
        from faultline.cluster.local_backend import LocalBackend

        return LocalBackend(spec_obj)
    if kind == "ssh":
        from faultline.cluster.ssh_backend import SSHBackend, fit_spec, load_hosts

        if not hosts:
            raise ClusterError("the ssh backend needs --hosts FILE (see docs/cluster.md for its format)")
        hs = load_hosts(hosts)
        fit_spec(spec_obj, hs)
        return SSHBackend(spec_obj, hs)
    raise ClusterError(f"unknown cluster backend {kind!r} (choose from {', '.join(KINDS)})")


def attach(kind: str, name: str) -> NodeBackend:
    """The backend object of a cluster that is already up (possibly started by another process)."""
    if kind == "docker":
        from faultline.cluster.docker_backend import DockerBackend

        return DockerBackend.attach(name)
    if kind == "local":
        from faultline.cluster.local_backend import LocalBackend

        return LocalBackend.attach(name)
    if kind == "ssh":
        from faultline.cluster.ssh_backend import SSHBackend

        return SSHBackend.attach(name)
    raise ClusterError(f"unknown cluster backend {kind!r}")


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
