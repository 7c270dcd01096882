"""The on-disk layout of a node's data directory, and the checks that refuse a bad start.

    DIR/instance                 {"uuid": ..., "format_time": ...}  written once by `fs format`
    DIR/tablet-meta/<tablet>     superblock: table, state (RUNNING / TOMBSTONED / COPYING), schema
    DIR/cmeta/<tablet>           consensus metadata (term, vote, committed config)
    DIR/wals/<tablet>/           write-ahead log segments
    DIR/snapshots/<tablet>       state-machine snapshot written by tablet copy

Every file is written atomically (temp file, fsync, rename, fsync dir) so that a crash or a
failed tool never leaves half a file behind.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

from faultline.node.clock import wall

UUID_RE = re.compile(r"^[0-9a-f]{32}$")


class FsError(Exception):
    """A data directory that cannot be used: one line that says why."""


def atomic_write(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write `data` to `path` so readers see either the old file or the new one, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # one temporary name per writer: two threads writing the same file (a tablet copy and its tombstone)
    # must not rename each other's temporary file away (FileNotFoundError in the second replace)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def new_uuid() -> str:
    return uuidlib.uuid4().hex


@dataclass
class FsLayout:
    root: Path

    @property
    def instance(self) -> Path:
        return self.root / "instance"

    def superblock(self, tablet_id: str) -> Path:
        return self.root / "tablet-meta" / tablet_id

    def cmeta(self, tablet_id: str) -> Path:
        return self.root / "cmeta" / tablet_id

    def wal_dir(self, tablet_id: str) -> Path:
        return self.root / "wals" / tablet_id

    def snapshot(self, tablet_id: str) -> Path:
        return self.root / "snapshots" / tablet_id

    def tablet_ids(self) -> list[str]:
        d = self.root / "tablet-meta"
        if not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if not p.name.startswith("."))


def format_fs(root: str | Path, uuid: str | None = None) -> str:
    """Create an empty data directory with a permanent uuid; refuses one that is already formatted."""
    layout = FsLayout(Path(root))
    if uuid is not None and not UUID_RE.match(uuid):
        raise FsError(f"invalid uuid {uuid!r}: expected 32 lowercase hex digits")
    _refuse_non_directory(layout.root)
    if layout.instance.exists():
        raise FsError(f"{root} is already formatted (instance file exists)")
    try:
        if layout.root.exists() and any(layout.root.iterdir()):
            raise FsError(f"{root} is not empty; refusing to format over existing data")
        u = uuid or new_uuid()
        layout.root.mkdir(parents=True, exist_ok=True)
        for sub in ("tablet-meta", "cmeta", "wals", "snapshots"):
            (layout.root / sub).mkdir(exist_ok=True)
        atomic_write(layout.instance, json.dumps({"uuid": u, "format_time": wall()}).encode())
    except OSError as exc:
        raise FsError(
            f"cannot format {root}: {exc.strerror or exc}"
            + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(root) else "")
        ) from None
    return u


def _refuse_non_directory(root: Path) -> None:
    """A data directory path that names a file (or has a file on its way) is a mistake to say as such."""
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise FsError(
                    f"data directory {root} is not a directory (a file is there)"
                    if p == root
                    else f"data directory {root}: {p} is not a directory"
                )
            return


def read_uuid(root: str | Path) -> str:
    """The uuid of a formatted data directory, or FsError saying what is wrong with it."""
    layout = FsLayout(Path(root))
    _refuse_non_directory(layout.root)
    if not layout.root.is_dir():
        raise FsError(
            f"data directory {root} does not exist; run `python -m faultline.node tool fs format --fs-dir {root}`"
        )
    if not layout.instance.exists():
        raise FsError(
            f"data directory {root} is not formatted; run `python -m faultline.node tool fs format --fs-dir {root}`"
        )
    try:
        data = json.loads(layout.instance.read_bytes())
        u = data["uuid"]
    except (ValueError, KeyError, TypeError) as exc:
        raise FsError(f"corrupt instance file {layout.instance}: {exc}") from exc
    if not isinstance(u, str) or not UUID_RE.match(u):
        raise FsError(f"corrupt instance file {layout.instance}: bad uuid {u!r}")
    return u


def lock_dir(root: str | Path) -> int:
    """Take the data directory's exclusive lock (held for the life of the process).

    A second server on the same directory, or a tool that rewrites files under a running server,
    gets FsError instead of silently racing it."""
    import fcntl

    path = Path(root) / ".lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise FsError(f"data directory {root} is in use by a running process; stop it first") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
