"""The file layer under the WAL and cmeta: fsync helpers that also record what reached the disk.

Every directory holding tracked files gets a sidecar `.fsynced`: one line per fsync, naming the file and
how many bytes of it were durable at that moment (for atomically replaced small files, the durable
content itself). `node.log.power_loss.cut_to_synced` replays it to simulate a power failure: every file
goes back to what was fsynced. The sidecar is only written, never synced: a simulated power loss keeps
the page cache of the sidecar itself, which is exactly what lets us know what a real one would lose.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

SIDECAR = ".fsynced"
_lock = threading.Lock()


class SyncLog:
    """An open handle on one directory's sidecar, for a writer that syncs often (the WAL appender):
    one write() per record instead of open/append/close, and the file is compacted to the last record
    per file name once it grows long, so a long-running node does not grow it without bound."""

    COMPACT_AFTER = 20_000

    def __init__(self, directory: str | os.PathLike) -> None:
        self._path = Path(directory) / SIDECAR
        self._last: dict[str, str] = {}
        if self._path.exists():
            for line in self._path.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3:
                    self._last[parts[2]] = line
        self._written = len(self._last)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _record(self, name: str, line: str) -> None:
        self._last[name] = line
        os.write(self._fd, (line + "\n").encode())
        self._written += 1
        if self._written > self.COMPACT_AFTER:
            tmp = self._path.with_name(SIDECAR + ".tmp")
            tmp.write_text("".join(v + "\n" for v in self._last.values()), encoding="utf-8")
            os.replace(tmp, self._path)
            os.close(self._fd)
            self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND)
            self._written = len(self._last)

    def synced(self, path: str | os.PathLike, length: int) -> None:
        name = Path(path).name
        self._record(name, f"len {length} {name}")

    def removed(self, path: str | os.PathLike) -> None:
        name = Path(path).name
        self._record(name, f"removed 0 {name}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def track_dir(path: str | os.PathLike) -> None:
    """Mark a directory as tracked (even if nothing in it is ever synced, e.g. with `no-fsync`)."""
    with _lock, open(Path(path) / SIDECAR, "a", encoding="utf-8"):
        pass


def note_synced(path: str | os.PathLike, length: int) -> None:
    """Record that the first `length` bytes of an append-only file are durable."""
    p = Path(path)
    with _lock, open(p.parent / SIDECAR, "a", encoding="utf-8") as f:
        f.write(f"len {length} {p.name}\n")


def note_synced_content(path: str | os.PathLike, data: bytes) -> None:
    """Record the durable content of a small file replaced atomically (cmeta)."""
    p = Path(path)
    with _lock, open(p.parent / SIDECAR, "a", encoding="utf-8") as f:
        f.write(f"content {data.hex()} {p.name}\n")


def note_removed(path: str | os.PathLike) -> None:
    """A file was deleted and the directory synced: power loss must not bring it back (nor keep it)."""
    p = Path(path)
    with _lock, open(p.parent / SIDECAR, "a", encoding="utf-8") as f:
        f.write(f"removed 0 {p.name}\n")


def fsync_dir(path: str | os.PathLike) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes, fsync: bool = True) -> None:
    """Replace a file atomically: write a temporary file, fsync it, rename, fsync the directory."""
    p = Path(path)
    track_dir(p.parent)
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, p)
    if fsync:
        fsync_dir(p.parent)
        note_synced_content(p, data)
