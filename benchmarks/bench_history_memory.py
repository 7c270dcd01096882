"""Memory of reading a large history: the streaming reader vs reading the whole text first.

    python benchmarks/bench_history_memory.py [--mb 200] [--format jsonl|json|edn] [--dir DIR]

Writes a register history of about --mb MB (keys rotate every 200 ops, 10 % of ops indeterminate), then
in a fresh process each: `faultline.history.load` (the stream), and the reader of before (the whole file
read into one string, split into lines, each line parsed), and finally `load` on a file of as many NUL
bytes. Each child reports its RSS before reading, after, and its peak (ru_maxrss), and the seconds
taken. The figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, resource, sys, time
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
mode, path = sys.argv[1], sys.argv[2]
from faultline import history
before = rss()
t = time.monotonic()
try:
    if mode == "stream":
        n = len(history.load(path).ops)
    else:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        n = len([json.loads(line) for line in text.split("\n") if line.strip()])
    outcome = f"{n} ops"
except history.HistoryFormatError as exc:
    outcome = f"refused: {str(exc).split(': ', 1)[1]}"
took = time.monotonic() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"mode": mode, "outcome": outcome, "rss_before_mb": round(before), "rss_after_mb": round(rss()),
                  "peak_mb": round(peak), "seconds": round(took, 1)}))
"""


def write_history(path: Path, mb: float, fmt: str, seed: int = 1) -> int:
    """A register history of about `mb` MB in `fmt`; returns the op count."""
    rng = random.Random(seed)
    limit = int(mb * 2**20)
    n = size = 0
    key = 0
    with open(path, "w", encoding="utf-8") as fh:
        if fmt != "jsonl":
            fh.write("[")
        while size < limit:
            if n % 400 == 0:
                key += 1
            proc = n // 2 % 10
            f = rng.choice(["read", "write", "cas"])
            value = (
                None
                if f == "read"
                else (rng.randrange(5) if f == "write" else [rng.randrange(5), rng.randrange(5)])
            )
            inv = {
                "index": n,
                "time": n * 1000,
                "type": "invoke",
                "process": proc,
                "f": f,
                "key": key,
                "value": value,
            }
            typ = "info" if rng.random() < 0.1 else "ok"
            done = {
                **inv,
                "index": n + 1,
                "time": n * 1000 + 500,
                "type": typ,
                "value": rng.randrange(5) if f == "read" else value,
            }
            for op in (inv, done):
                if fmt == "edn":
                    from faultline.history import to_edn

                    line = to_edn([op])[1:-2] + "\n"
                else:
                    line = json.dumps(op) + ("\n" if fmt == "jsonl" else ",\n")
                fh.write(line)
                size += len(line)
            n += 2
        if fmt == "json":
            fh.seek(fh.tell() - 2)
            fh.write("]\n")
        elif fmt == "edn":
            fh.write("]\n")
    return n


def _child(mode: str, path: Path) -> dict:
    # The child imports faultline as this process does (PYTHONPATH, or an installed package).
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=1800,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--format", choices=["jsonl", "json", "edn"], default="jsonl")
    ap.add_argument(
        "--dir", default=None, help="where to write the histories (default: a temporary directory)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        hist = Path(tmp) / f"history.{args.format}"
        ops = write_history(hist, args.mb, args.format)
        print(f"{hist.name}: {hist.stat().st_size / 2**20:.0f} MB, {ops} ops", flush=True)
        modes = ["stream", "whole"] if args.format == "jsonl" else ["stream"]
        for mode in modes:
            print(json.dumps(_child(mode, hist)), flush=True)
        nul = Path(tmp) / "nul.jsonl"
        with open(nul, "wb") as fh:
            for _ in range(int(args.mb)):
                fh.write(b"\0" * 2**20)
        print(json.dumps({"file": "NUL bytes", **_child("stream", nul)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
