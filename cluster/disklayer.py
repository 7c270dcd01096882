"""The disk layer: a FUSE file system under a node's data directories that holds written data until fsync.

The layer is a small Rust program (cluster/disklayer-rs, on the `fuser` crate; built by `make install`) that
runs on the host, one process per data directory, over a backing directory in the cluster's host-side
state. Its mount point is bind-mounted into the node (Docker) or mounted at the data directory itself
(local backend) before the node's process first starts, so the node needs no capability beyond NET_ADMIN.
A control socket takes `lose` (drop every write not yet fsynced), `checkpoint` (write it all through) and
`stats`. Only runs that use a disk fault mount it (ClusterSpec.disk_dirs). docs/disk.md has the semantics.

Every mount lives under `layer_root(kind, cluster)`, one folder per node and data directory, with the
layer's pid: teardown (and `faultline cluster down` after the runner was SIGKILLed) unmounts and stops
everything found there, whoever started it. The layer control itself (mount, command, unmount, residue)
is cluster/layerctl.py, which the SSH backend also runs on its hosts: this module adds where a cluster's
layers live on this machine, and what `down --all` sweeps.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.cluster import layerctl, state
from faultline.cluster.layerctl import FUSERMOUNT, PROGRAM, DiskLayerError, is_mounted, mounts

__all__ = ["FUSERMOUNT", "PROGRAM", "DiskLayerError", "Layer", "is_mounted", "mounts"]

_REPO = Path(__file__).resolve().parent.parent
# where `make install` builds the layer (cargo's target directory); FAULTLINE_DISK_LAYER overrides it
BUILT = _REPO / "build" / "disklayer" / "release" / PROGRAM


def binary() -> Path:
    """The layer's executable, or DiskLayerError saying how to build it."""
    path = Path(os.environ.get("FAULTLINE_DISK_LAYER") or BUILT)
    if not os.access(path, os.X_OK):
        raise DiskLayerError(f"the disk layer is not built ({path}); run `make install` (it needs cargo)")
    return path


def unavailable(mounts_here: bool = True) -> str | None:
    """Why the layer cannot be had (None: it can): not built, or, when it would mount on this machine
    (Docker, local; not SSH, whose hosts are asked by SSHBackend.check_fuse), no FUSE here."""
    if not mounts_here:
        try:
            binary()
        except DiskLayerError as exc:
            return str(exc)
        return None
    if not Path("/dev/fuse").exists():
        return "this machine has no /dev/fuse (the disk layer is a FUSE file system)"
    if not any(shutil.which(f) for f in FUSERMOUNT):
        return "this machine has no fusermount3 (Debian package fuse3)"
    try:
        binary()
    except DiskLayerError as exc:
        return str(exc)
    return None


def layer_root(kind: str, cluster: str) -> Path:
    """The host folder holding every disk layer of one cluster."""
    return state.state_dir(kind).parent / "disk" / f"{kind}-{cluster}"


@dataclass(frozen=True)
class Layer:
    """One mounted layer: its folder on the host holds `backing/` (what reached the disk), `mnt/` (the
    mount point, unless `mountpoint` is elsewhere), the control socket, the pid and the layer's log."""

    root: Path
    mountpoint: Path

    @property
    def backing(self) -> Path:
        return self.root / "backing"

    @property
    def control(self) -> Path:
        return self.root / "ctl.sock"

    @property
    def pidfile(self) -> Path:
        return self.root / "pid"

    def command(self, cmd: str, timeout: float = 60) -> dict[str, Any]:
        """Sends `lose`, `checkpoint` or `stats`; returns the layer's answer (files, bytes)."""
        return layerctl.command(self.root, cmd, timeout)


def node_layers(kind: str, cluster: str, node: str) -> list[Layer]:
    """The layers mounted for one node, in the order of its data directories."""
    return [Layer(r, m) for r, m in layerctl.node_layers(layer_root(kind, cluster) / node)]


def mount(root: Path, mountpoint: Path | None = None, timeout: float = 15) -> Layer:
    """Starts a layer over `root/backing` at `mountpoint` (default `root/mnt`) and waits until it serves."""
    return Layer(root, layerctl.mount(str(binary()), root, mountpoint, timeout))


def unmount(layer: Layer) -> None:
    """Unmounts the layer (lazily: a node may still hold a file open) and stops its process."""
    layerctl.unmount(layer.root)


def _layer_pid(layer: Layer) -> int | None:
    return layerctl.layer_pid(layer.root)


def _node_dirs(kind: str, cluster: str) -> list[Path]:
    root = layer_root(kind, cluster)
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def unmount_cluster(kind: str, cluster: str) -> None:
    """Unmounts every layer of a cluster, stops their processes and removes their folders."""
    for node_dir in _node_dirs(kind, cluster):
        layerctl.unmount_node(node_dir)
    left = residue(kind, cluster)
    if left:
        raise DiskLayerError(f"disk layers of cluster {cluster} left behind: {'; '.join(left)}")
    shutil.rmtree(layer_root(kind, cluster), ignore_errors=True)


def unmount_node(kind: str, cluster: str, node: str) -> None:
    """Unmounts a node's layers and removes their folders (the node is destroyed for good)."""
    layerctl.unmount_node(layer_root(kind, cluster) / node)
    shutil.rmtree(layer_root(kind, cluster) / node, ignore_errors=True)


def residue(kind: str, cluster: str) -> list[str]:
    """What a cluster's disk layers left behind: mounts and live layer processes, one line each."""
    return [line for d in _node_dirs(kind, cluster) for line in layerctl.residue_node(d)]


def mount_node(
    kind: str, cluster: str, node: str, mountpoints: list[Path] | None = None, count: int = 0
) -> list[Layer]:
    """Mounts a layer per data directory of `node`: at `mountpoints` (the local backend mounts at the
    data directories themselves), or `count` of them at their own folders (Docker bind-mounts those)."""
    base = layer_root(kind, cluster) / node
    targets = layerctl.mount_node(str(binary()), base, mountpoints, count)
    return [Layer(base / str(i), m) for i, m in enumerate(targets)]


def lose(kind: str, cluster: str, node: str) -> dict[str, Any]:
    """Drops what `node`'s process never fsynced, in every data directory; returns the files and bytes."""
    return layerctl.command_node(layer_root(kind, cluster) / node, "lose")


def checkpoint(kind: str, cluster: str, node: str) -> dict[str, Any]:
    """Writes everything held for `node` through to the disk (a durable starting point)."""
    return layerctl.command_node(layer_root(kind, cluster) / node, "checkpoint")


def leftovers() -> list[str]:
    """Every disk layer still mounted on this machine (by its source name), whichever cluster made it."""
    return [m for src, m, t in mounts() if src == PROGRAM and t.startswith("fuse")]


def clusters_with_layers() -> list[tuple[str, str]]:
    """(kind, cluster) of every cluster whose disk layer folder is on this machine."""
    out = []
    for kind in ("docker", "local"):  # the SSH backend's layers live on its hosts (SSHBackend.down)
        base = layer_root(kind, "x").parent
        out += (
            [(kind, d.name[len(kind) + 1 :]) for d in sorted(base.glob(f"{kind}-*"))] if base.is_dir() else []
        )
    return out


def unmount_everything() -> int:
    """`down --all`: every cluster's disk layers, then any layer mount still left; returns how many."""
    count = 0
    for kind, cluster in clusters_with_layers():
        with contextlib.suppress(DiskLayerError):
            unmount_cluster(kind, cluster)
            count += 1
    for m in leftovers():
        layerctl.detach(m)
        count += 1
    return count
