"""WAL benchmark: appends/s and fsyncs/s with 1, 4 and 16 concurrent producers.

    .venv/bin/python benchmarks/bench_wal.py [--seconds 3] [--payload 256] [--dir /tmp]

Each producer appends one entry at a time and waits for its future (the shape of a replica acking a
write). Group commit lets concurrent producers share one fsync; the baseline "16 separate syncs" row
runs the same 16 producers against one log file where every append is its own write + fsync under the log's
lock, which is what a log without group commit costs. Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from faultline.node.consensus import Entry
from faultline.node.log import Wal


def _run_producers(producer: Callable[[], None], producers: int) -> float:
    """Run `producers` threads of `producer` to the end; the seconds they took."""
    t0 = time.monotonic()
    threads = [threading.Thread(target=producer) for _ in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - t0


def run_group_commit(root: Path, producers: int, seconds: float, payload: bytes, fsync: str) -> dict:
    d = Path(tempfile.mkdtemp(prefix=f"wal-{producers}-", dir=root))
    with Wal(d, fsync=fsync) as wal:
        lock = threading.Lock()
        next_index = [1]
        stop = time.monotonic() + seconds
        start_barrier = threading.Barrier(producers)

        def producer() -> None:
            start_barrier.wait()
            while time.monotonic() < stop:
                with lock:  # reserve the index and enqueue in order, as the consensus layer does
                    i = next_index[0]
                    next_index[0] += 1
                    fut = wal.append([Entry(1, i, payload=payload)])
                fut.result(60)

        elapsed = _run_producers(producer, producers)
        stats = wal.stats
    return {
        "mode": f"group commit, fsync={fsync}",
        "producers": producers,
        "appends_per_s": stats.appends / elapsed,
        "fsyncs_per_s": stats.syncs / elapsed,
        "entries_per_fsync": stats.appends / stats.syncs if stats.syncs else None,
    }


def run_separate_syncs(root: Path, producers: int, seconds: float, payload: bytes) -> dict:
    """Baseline without group commit: one log file, and every append is its own write + fsync under the
    log's lock, so 16 producers wait for 16 syncs one after another."""
    d = Path(tempfile.mkdtemp(prefix="sep-", dir=root))
    fd = os.open(d / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    count = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def producer() -> None:
        while time.monotonic() < stop:
            with lock:
                os.write(fd, payload)
                os.fsync(fd)
                count[0] += 1

    elapsed = _run_producers(producer, producers)
    os.close(fd)
    return {
        "mode": "no group commit: one fsync per append",
        "producers": producers,
        "appends_per_s": count[0] / elapsed,
        "fsyncs_per_s": count[0] / elapsed,
        "entries_per_fsync": 1.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--payload", type=int, default=256, help="bytes per entry")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    payload = os.urandom(args.payload)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        for n in (1, 4, 16):
            rows.append(run_group_commit(root, n, args.seconds, payload, "always"))
        rows.append(run_separate_syncs(root, 16, args.seconds, payload))
        rows.append(run_group_commit(root, 16, args.seconds, payload, "never"))
    print("| mode | producers | appends/s | fsyncs/s | entries per fsync |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        per = "-" if r["entries_per_fsync"] is None else f"{r['entries_per_fsync']:.1f}"
        print(
            f"| {r['mode']} | {r['producers']} | {r['appends_per_s']:,.0f} | {r['fsyncs_per_s']:,.0f} | {per} |"
        )
    print(json.dumps({"bench": "wal", "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
