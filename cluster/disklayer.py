"""The disk layer: a FUSE file system under a node's data directories that holds written data until fsync.

The layer is a small Rust program (cluster/disklayer-rs, on the `fuser` crate; built by `make install`) that
runs on the host, one process per data directory, over a backing directory in the cluster's host-side
state. Its mount point is bind-mounted into the node (Docker) or mounted at the data directory itself
(local backend) before the node's process first starts, so the node needs no capability beyond NET_ADMIN.
A control socket takes `lose` (drop every write not yet fsynced), `checkpoint` (write it all through) and
`stats`. Only runs that use a disk fault mount it (ClusterSpec.disk_dirs). docs/disk.md has the semantics.

Every mount lives under `layer_root(kind, cluster)`, one folder per node and data directory, with the
layer's pid: teardown (and `faultline cluster down` after the runner was SIGKILLed) unmounts and stops
everything found there, whoever started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faultline.cluster import state

PROGRAM = "faultline-disk"
_REPO = Path(__file__).resolve().parent.parent
# where `make install` builds the layer (cargo's target directory); FAULTLINE_DISK_LAYER overrides it
BUILT = _REPO / "build" / "disklayer" / "release" / PROGRAM
FUSERMOUNT = ("fusermount3", "fusermount")


class DiskLayerError(RuntimeError):
    """A layer could not be mounted, commanded or unmounted; the message names the mount point. (The
    backends raise it on as their ClusterError: this module sits below cluster/base.py.)"""


def binary() -> Path:
    """The layer's executable, or DiskLayerError saying how to build it."""
    path = Path(os.environ.get("FAULTLINE_DISK_LAYER") or BUILT)
    if not os.access(path, os.X_OK):
        raise DiskLayerError(f"the disk layer is not built ({path}); run `make install` (it needs cargo)")
    return path


def unavailable() -> str | None:
    """Why this machine cannot mount the layer (None: it can)."""
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
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(str(self.control))
                s.sendall(cmd.encode() + b"\n")
                line = s.makefile("rb").readline()
            except OSError as exc:
                raise DiskLayerError(f"disk layer at {self.mountpoint}: {cmd} failed: {exc}") from None
        answer = json.loads(line or b"{}")
        if not answer.get("ok"):
            raise DiskLayerError(f"disk layer at {self.mountpoint}: {cmd}: {answer.get('error', 'no answer')}")
        return {"files": answer.get("files", []), "bytes": answer.get("bytes", 0)}


def node_layers(kind: str, cluster: str, node: str) -> list[Layer]:
    """The layers mounted for one node, in the order of its data directories."""
    out = []
    for d in sorted((layer_root(kind, cluster) / node).glob("[0-9]*"), key=lambda p: int(p.name)):
        target = d / "mountpoint"
        out.append(Layer(d, Path(target.read_text()) if target.exists() else d / "mnt"))
    return out


def mount(root: Path, mountpoint: Path | None = None, timeout: float = 15) -> Layer:
    """Starts a layer over `root/backing` at `mountpoint` (default `root/mnt`) and waits until it serves.
    The layer runs in a session of its own, so it outlives neither a clean teardown nor `cluster down`,
    but does outlive a runner killed by a signal (whose teardown then finds it by its pid file)."""
    layer = Layer(root, mountpoint or root / "mnt")
    layer.backing.mkdir(parents=True, exist_ok=True)
    layer.mountpoint.mkdir(parents=True, exist_ok=True)
    (root / "mountpoint").write_text(str(layer.mountpoint))
    with open(root / "layer.log", "ab") as log:
        proc = subprocess.Popen([str(binary()), str(layer.backing), str(layer.mountpoint), str(layer.control)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    layer.pidfile.write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while not (is_mounted(layer.mountpoint) and layer.control.exists()):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (root / "layer.log").read_text(errors="replace").strip()[-300:]
            unmount(layer)
            raise DiskLayerError(f"the disk layer did not mount at {layer.mountpoint}: {tail or 'no output'}")
        time.sleep(0.05)
    return layer


def mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, file system type) of every mount on this machine."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    return [(p[0], p[1].replace("\\040", " "), p[2]) for p in (ln.split() for ln in lines) if len(p) >= 3]


def is_mounted(path: Path) -> bool:
    return any(m == str(path) and t.startswith("fuse") for _, m, t in mounts())


def _layer_pid(layer: Layer) -> int | None:
    """The layer's pid, if that process still runs the layer (a pid can be reused)."""
    try:
        pid = int(layer.pidfile.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if PROGRAM.encode() in cmdline and str(layer.backing).encode() in cmdline else None


def unmount(layer: Layer) -> None:
    """Unmounts the layer (lazily: a node may still hold a file open) and stops its process."""
    fm = next((f for f in FUSERMOUNT if shutil.which(f)), None)
    for _ in range(3):
        if not is_mounted(layer.mountpoint):
            break
        if fm:
            subprocess.run([fm, "-u", "-z", str(layer.mountpoint)], capture_output=True, timeout=30)
        else:
            subprocess.run(["umount", "-l", str(layer.mountpoint)], capture_output=True, timeout=30)
    pid = _layer_pid(layer)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if _layer_pid(layer) is None or _reaped(pid):
                break
            time.sleep(0.1)
        if _layer_pid(layer) is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _reaped(pid)


def _reaped(pid: int) -> bool:
    """Reaps `pid` when it is our exited child (so it leaves no zombie); True when it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return not Path(f"/proc/{pid}").exists() or b"Z" in _state(pid)


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1][:3]
    except (OSError, IndexError):
        return b""


def unmount_cluster(kind: str, cluster: str) -> None:
    """Unmounts every layer of a cluster, stops their processes and removes their folders."""
    root = layer_root(kind, cluster)
    if not root.is_dir():
        return
    for node_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for layer in node_layers(kind, cluster, node_dir.name):
            unmount(layer)
    left = residue(kind, cluster)
    if left:
        raise DiskLayerError(f"disk layers of cluster {cluster} left behind: {'; '.join(left)}")
    shutil.rmtree(root, ignore_errors=True)


def unmount_node(kind: str, cluster: str, node: str) -> None:
    """Unmounts a node's layers and removes their folders (the node is destroyed for good)."""
    for layer in node_layers(kind, cluster, node):
        unmount(layer)
    shutil.rmtree(layer_root(kind, cluster) / node, ignore_errors=True)


def residue(kind: str, cluster: str) -> list[str]:
    """What a cluster's disk layers left behind: mounts and live layer processes, one line each."""
    root = layer_root(kind, cluster)
    if not root.is_dir():
        return []
    out = []
    for node_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for layer in node_layers(kind, cluster, node_dir.name):
            if is_mounted(layer.mountpoint):
                out.append(f"disk layer still mounted at {layer.mountpoint}")
            if _layer_pid(layer) is not None:
                out.append(f"disk layer process {layer.pidfile.read_text()} still runs")
    return out


def mount_node(kind: str, cluster: str, node: str, mountpoints: list[Path] | None = None,
               count: int = 0) -> list[Layer]:
    """Mounts a layer per data directory of `node`: at `mountpoints` (the local backend mounts at the
    data directories themselves), or `count` of them at their own folders (Docker bind-mounts those)."""
    targets: list[Path | None] = list(mountpoints) if mountpoints is not None else [None] * count
    base = layer_root(kind, cluster) / node
    layers = []
    try:
        for i, target in enumerate(targets):
            layers.append(mount(base / str(i), target))
    except BaseException:
        for layer in layers:
            unmount(layer)
        raise
    return layers


def lose(kind: str, cluster: str, node: str) -> dict[str, Any]:
    """Drops what `node`'s process never fsynced, in every data directory; returns the files and bytes."""
    return _sum(layer.command("lose") for layer in node_layers(kind, cluster, node))


def checkpoint(kind: str, cluster: str, node: str) -> dict[str, Any]:
    """Writes everything held for `node` through to the disk (a durable starting point)."""
    return _sum(layer.command("checkpoint") for layer in node_layers(kind, cluster, node))


def _sum(answers: Any) -> dict[str, Any]:
    files: list[str] = []
    total = 0
    for a in answers:
        files += a["files"]
        total += int(a["bytes"])
    return {"files": sorted(files), "bytes": total}


def leftovers() -> list[str]:
    """Every disk layer still mounted on this machine (by its source name), whichever cluster made it."""
    return [m for src, m, t in mounts() if src == PROGRAM and t.startswith("fuse")]


def clusters_with_layers() -> list[tuple[str, str]]:
    """(kind, cluster) of every cluster whose disk layer folder is on this machine."""
    out = []
    for kind in ("docker", "local", "ssh"):
        base = layer_root(kind, "x").parent
        out += [(kind, d.name[len(kind) + 1:]) for d in sorted(base.glob(f"{kind}-*"))] if base.is_dir() else []
    return out


def unmount_everything() -> int:
    """`down --all`: every cluster's disk layers, then any layer mount still left; returns how many."""
    count = 0
    for kind, cluster in clusters_with_layers():
        with contextlib.suppress(DiskLayerError):
            unmount_cluster(kind, cluster)
            count += 1
    fm = next((f for f in FUSERMOUNT if shutil.which(f)), "umount")
    for m in leftovers():
        subprocess.run([fm, "-u", "-z", m] if fm != "umount" else [fm, "-l", m], capture_output=True, timeout=30)
        count += 1
    return count
