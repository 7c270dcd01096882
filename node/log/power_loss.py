"""Simulated power loss: put every tracked file back to what had reached fsync.

Used by the harness after killing a node (issue: power-loss nemesis) and by tests. Only directories with
a `.fsynced` sidecar (see node.log.durable) are touched; in them, a file never synced is deleted, an
append-only file is cut to its last synced length, and an atomically replaced file gets its last synced
content back. With the `no-fsync` bug nothing was ever synced, so acknowledged writes disappear.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from faultline.node.log.durable import SIDECAR


@dataclass
class CutReport:
    truncated: dict[str, int] = field(default_factory=dict)  # path -> bytes removed
    deleted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)


def _read_sidecar(path: Path) -> dict[str, tuple[str, str]]:
    last: dict[str, tuple[str, str]] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            kind, value, name = parts
            last[name] = (kind, value)
    return last


def cut_to_synced(data_dir: str | os.PathLike) -> CutReport:
    """Truncate/delete/restore every tracked file under data_dir to its last fsynced state."""
    report = CutReport()
    for sidecar in sorted(Path(data_dir).rglob(SIDECAR)):
        d = sidecar.parent
        synced = _read_sidecar(sidecar)
        for f in sorted(d.iterdir()):
            if f.name == SIDECAR or not f.is_file():
                continue
            rec = synced.get(f.name)
            if rec is None or rec[0] == "removed":
                f.unlink()
                report.deleted.append(str(f))
            elif rec[0] == "len":
                keep = int(rec[1])
                size = f.stat().st_size
                if size > keep:
                    os.truncate(f, keep)
                    report.truncated[str(f)] = size - keep
            elif rec[0] == "content":
                want = bytes.fromhex(rec[1])
                if f.read_bytes() != want:
                    f.write_bytes(want)
                    report.restored.append(str(f))
        for name, (kind, value) in synced.items():
            # a synced file that was deleted afterwards without a synced directory comes back
            if kind == "content" and not (d / name).exists():
                (d / name).write_bytes(bytes.fromhex(value))
                report.restored.append(str(d / name))
    return report
