"""What the file-corrupt nemesis runs on a node: list the data files, and damage one as planned.

Standard library only and no Faultline import: nemesis/corruption.py sends this module's source to the
node as `python3 -c SOURCE REQUEST` (the node images have python3, Faultline need not be installed), with
REQUEST a JSON object; the answer is one JSON line on stdout. The damage itself is planned on the
controller from the run's seed (corruption.plan), so this side only carries it out.

Requests:
- {"op": "list", "globs": [...]}: for each glob, its regular files as [path, size, data_end], where
  data_end is one past the last byte that is not zero (a preallocated log is mostly zeros past its data);
- {"op": "damage", "path": P, "damage": {...}}: applies a damage (see `apply`) and fsyncs the file;
- {"op": "snapshot", "path": P, "to": Q} and {"op": "restore", "path": P, "from": Q}: copy a file aside,
  and back over it (a rollback).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys
from typing import Any

CHUNK = 1 << 16


def data_end(path: str) -> int:
    """One past the last byte of `path` that is not zero (0: empty or all zeros)."""
    with open(path, "rb") as f:
        pos = f.seek(0, os.SEEK_END)
        while pos > 0:
            start = max(0, pos - CHUNK)
            f.seek(start)
            block = f.read(pos - start).rstrip(b"\0")
            if block:
                return start + len(block)
            pos = start
    return 0


def list_files(globs: list[str]) -> list[list[list[Any]]]:
    """For each glob, its regular files (sorted) with their size and data end."""
    out = []
    for g in globs:
        found = sorted(p for p in glob.glob(g) if os.path.isfile(p) and not os.path.islink(p))
        out.append([[p, os.path.getsize(p), data_end(p)] for p in found])
    return out


def apply(path: str, damage: dict[str, Any]) -> dict[str, Any]:
    """Carries out one planned damage on `path` in place (its owner and mode stay): `flips` [[byte, bit],
    ...] XORs bits, `zero` [start, length] writes zeros, `truncate` N cuts the file to N bytes. Returns the
    file's size before and after."""
    before = os.path.getsize(path)
    with open(path, "r+b") as f:
        for off, bit in damage.get("flips", []):
            f.seek(off)
            byte = f.read(1)
            if byte:
                f.seek(off)
                f.write(bytes([byte[0] ^ (1 << bit)]))
        if "zero" in damage:
            start, length = damage["zero"]
            f.seek(start)
            f.write(b"\0" * length)
        if "truncate" in damage:
            f.truncate(int(damage["truncate"]))
        f.flush()
        os.fsync(f.fileno())
    return {"size_before": before, "size_after": os.path.getsize(path)}


def copy_over(src: str, dst: str) -> dict[str, Any]:
    """Copies `src`'s bytes over `dst` (kept as a file of its own: its owner and mode stay when it exists)."""
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    before = os.path.getsize(dst) if os.path.exists(dst) else None
    if os.path.exists(dst):
        with open(src, "rb") as s, open(dst, "r+b") as d:
            shutil.copyfileobj(s, d)
            d.truncate()
            d.flush()
            os.fsync(d.fileno())
    else:
        shutil.copy2(src, dst)
    return {"size_before": before, "size_after": os.path.getsize(dst)}


def handle(req: dict[str, Any]) -> Any:
    """One request (see the module docstring)."""
    op = req.get("op")
    if op == "list":
        return list_files(list(req["globs"]))
    if op == "damage":
        return apply(req["path"], req["damage"])
    if op == "snapshot":
        return copy_over(req["path"], req["to"])
    if op == "restore":
        return copy_over(req["from"], req["path"])
    raise ValueError(f"unknown request {op!r}")


if __name__ == "__main__":
    print(json.dumps(handle(json.loads(sys.argv[1]))))
