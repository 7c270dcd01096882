"""Control of the disk layers of one node, where the layers run: mount, command, unmount, residue.

The one implementation of layer control. Standard library only and no Faultline import, so it runs in two
places: imported on this machine (cluster/disklayer.py: the Docker and local backends mount their layers
here), and on a remote host as `python3 -c SOURCE REQUEST` (cluster/ssh_backend.py), the way
nemesis/filedamage.py reaches a node, with REQUEST a JSON object and the answer one JSON line on stdout.

A node's layers live in one folder, `base`: `base/I/` for its I-th data directory holds `backing/` (what
reached the disk), `mnt/` (the mount point, unless `mountpoint` names another), `ctl.sock` (the control
socket: one command line in, one JSON line out), `pid` and `layer.log`. Everything is found again from
that folder, so a teardown after the runner was killed finds what it must stop.

Requests (`main`): {"op": "mount", "binary": B, "base": D, "mountpoints": [...] or "count": N},
{"op": "command", "base": D, "cmd": "lose" | "checkpoint" | "stats"}, {"op": "unmount", "base": D} and
{"op": "residue", "base": D}; a failure answers {"error": "..."} and exits 1.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROGRAM = "faultline-disk"
FUSERMOUNT = ("fusermount3", "fusermount")


class DiskLayerError(RuntimeError):
    """A layer could not be mounted, commanded or unmounted; the message names the mount point. (The
    backends raise it on as their ClusterError: this module sits below cluster/base.py.)"""


def mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, file system type) of every mount on this machine."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    return [(p[0], p[1].replace("\\040", " "), p[2]) for p in (ln.split() for ln in lines) if len(p) >= 3]


def is_mounted(path: Path | str) -> bool:
    return any(m == str(path) and t.startswith("fuse") for _, m, t in mounts())


def layer_pid(root: Path) -> int | None:
    """The pid of the layer over `root/backing`, if that process still runs the layer (a pid can be reused)."""
    try:
        pid = int((root / "pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if PROGRAM.encode() in cmdline and str(root / "backing").encode() in cmdline else None


def mountpoint_of(root: Path) -> Path:
    """Where the layer of folder `root` is mounted (recorded at mount time; `root/mnt` by default)."""
    target = root / "mountpoint"
    return Path(target.read_text()) if target.exists() else root / "mnt"


def node_layers(base: Path) -> list[tuple[Path, Path]]:
    """(folder, mount point) of a node's layers, in the order of its data directories."""
    if not base.is_dir():
        return []
    roots = sorted(
        (p for p in base.glob("[0-9]*") if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )
    return [(r, mountpoint_of(r)) for r in roots]


def mount(binary: str, root: Path, mountpoint: Path | None = None, timeout: float = 15) -> Path:
    """Starts a layer over `root/backing` at `mountpoint` (default `root/mnt`) and waits until it serves;
    returns the mount point. The layer runs in a session of its own: it outlives the process that started
    it (a runner killed by a signal, or the one-shot command on a remote host), and teardown finds it by
    its pid file."""
    target = mountpoint or root / "mnt"
    (root / "backing").mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    (root / "mountpoint").write_text(str(target))
    with open(root / "layer.log", "ab") as log:
        proc = subprocess.Popen(
            [binary, str(root / "backing"), str(target), str(root / "ctl.sock")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    (root / "pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while not (is_mounted(target) and (root / "ctl.sock").exists()):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (root / "layer.log").read_text(errors="replace").strip()[-300:]
            unmount(root)
            raise DiskLayerError(f"the disk layer did not mount at {target}: {tail or 'no output'}")
        time.sleep(0.05)
    return target


def command(root: Path, cmd: str, timeout: float = 60) -> dict[str, Any]:
    """Sends `lose`, `checkpoint` or `stats` to the layer of folder `root`; its answer (files, bytes)."""
    where = mountpoint_of(root)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(root / "ctl.sock"))
            s.sendall(cmd.encode() + b"\n")
            line = s.makefile("rb").readline()
        except OSError as exc:
            raise DiskLayerError(f"disk layer at {where}: {cmd} failed: {exc}") from None
    answer = json.loads(line or b"{}")
    if not answer.get("ok"):
        raise DiskLayerError(f"disk layer at {where}: {cmd}: {answer.get('error', 'no answer')}")
    return {"files": answer.get("files", []), "bytes": answer.get("bytes", 0)}


def detach(where: Path | str) -> None:
    """A lazy unmount of `where` (a node may still hold a file open): fusermount3 where it is, else
    umount, else the umount2 call itself (a bare host, such as a container, may have neither program)."""
    fm = next((f for f in FUSERMOUNT if shutil.which(f)), None)
    if fm or shutil.which("umount"):
        argv = [fm, "-u", "-z", str(where)] if fm else ["umount", "-l", str(where)]
        subprocess.run(argv, capture_output=True, timeout=30)
        return
    mnt_detach = 2
    ctypes.CDLL(None, use_errno=True).umount2(str(where).encode(), mnt_detach)


def unmount(root: Path) -> None:
    """Unmounts the layer of folder `root` (lazily) and stops its process."""
    where = mountpoint_of(root)
    for _ in range(3):
        if not is_mounted(where):
            break
        detach(where)
    pid = layer_pid(root)
    if pid is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            if layer_pid(root) is None or _reaped(pid):
                break
            time.sleep(0.1)
        if layer_pid(root) is not None:
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


def mount_node(binary: str, base: Path, mountpoints: list[Path] | None = None, count: int = 0) -> list[Path]:
    """A layer per data directory of a node: at `mountpoints` (the local and SSH backends mount at the
    data directories themselves), or `count` of them at their own folders (Docker bind-mounts those).
    All or none: a failure unmounts those already mounted."""
    targets: list[Path | None] = list(mountpoints) if mountpoints is not None else [None] * count
    done: list[Path] = []
    try:
        for i, target in enumerate(targets):
            mount(binary, base / str(i), target)
            done.append(base / str(i))
    except BaseException:
        for root in done:
            unmount(root)
        raise
    return [mountpoint_of(base / str(i)) for i in range(len(targets))]


def unmount_node(base: Path) -> None:
    """Unmounts every layer of a node and stops their processes (their folders stay: see `residue_node`)."""
    for root, _ in node_layers(base):
        unmount(root)


def command_node(base: Path, cmd: str) -> dict[str, Any]:
    """`cmd` to every layer of a node: the files (sorted) and bytes of all their answers together."""
    files: list[str] = []
    total = 0
    for root, _ in node_layers(base):
        answer = command(root, cmd)
        files += answer["files"]
        total += int(answer["bytes"])
    return {"files": sorted(files), "bytes": total}


def residue_node(base: Path) -> list[str]:
    """What a node's layers left behind: mounts and live layer processes, one line each."""
    out = []
    for root, where in node_layers(base):
        if is_mounted(where):
            out.append(f"disk layer still mounted at {where}")
        pid = layer_pid(root)
        if pid is not None:
            out.append(f"disk layer process {pid} still runs")
    return out


def serve(req: dict[str, Any]) -> Any:
    """One request (see the module docstring), as the remote side carries it out."""
    base, op = Path(req["base"]), req["op"]
    if op == "mount":
        targets = [Path(m) for m in req["mountpoints"]] if "mountpoints" in req else None
        return [str(m) for m in mount_node(req["binary"], base, targets, int(req.get("count", 0)))]
    if op == "command":
        return command_node(base, str(req["cmd"]))
    if op == "unmount":
        unmount_node(base)
        return residue_node(base)
    if op == "residue":
        return residue_node(base)
    raise DiskLayerError(f"unknown disk layer request {op!r}")


def main(argv: list[str]) -> int:
    try:
        print(json.dumps({"ok": serve(json.loads(argv[1]))}))
        return 0
    except Exception as exc:  # one line back to the controller, which raises it there
        print(
            json.dumps(
                {"error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, DiskLayerError) else str(exc)}
            )
        )
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
