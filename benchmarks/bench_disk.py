"""Disk layer benchmark: a write + fsync loop and a write-only loop, on the plain disk and through the layer.

    .venv/bin/python benchmarks/bench_disk.py [--count 2000] [--size 4096] [--rounds 3] [--dir /tmp]

Needs root and /dev/fuse (the layer mounts on the host, as a run with a disk fault does). Each round
appends `count` blocks of `size` bytes to a fresh file, each followed by fsync, then appends `count` more
without fsync (what the layer holds in memory). Prints a Markdown table (the median of the rounds) and a
JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from faultline.cluster import disklayer


def loop(d: Path, count: int, size: int) -> tuple[float, float]:
    """(write+fsync per second, write-only per second) for one fresh file in `d`."""
    buf = os.urandom(size)
    path = d / f"bench-{time.monotonic_ns()}"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        t = time.perf_counter()
        for _ in range(count):
            os.write(fd, buf)
            os.fsync(fd)
        synced = count / (time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(count):
            os.write(fd, buf)
        held = count / (time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return synced, held


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    why = disklayer.unavailable() or (None if os.geteuid() == 0 else "not root")
    if why:
        print(f"bench_disk: skipped ({why})")
        return
    root = Path(tempfile.mkdtemp(prefix="bench-disk-", dir=a.dir))
    plain = root / "plain"
    plain.mkdir()
    layer = disklayer.mount(root / "layer")
    rows = {}
    try:
        for name, d in (("plain disk", plain), ("disk layer", layer.mountpoint)):
            results = [loop(d, a.count, a.size) for _ in range(a.rounds)]
            rows[name] = (statistics.median(r[0] for r in results), statistics.median(r[1] for r in results))
    finally:
        disklayer.unmount(layer)
    print(f"| where | write+fsync/s ({a.size} B) | write/s ({a.size} B, not fsynced) |")
    print("|---|---|---|")
    for name, (synced, held) in rows.items():
        print(f"| {name} | {synced:,.0f} | {held:,.0f} |")
    print(
        json.dumps(
            {
                "count": a.count,
                "size": a.size,
                "load": os.getloadavg()[0],
                **{k: {"fsync_per_s": round(v[0]), "write_per_s": round(v[1])} for k, v in rows.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
