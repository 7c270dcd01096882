"""Runner benchmark: ok ops/s of the register workload (3 masters + 5 tablet servers, 10 workers), and the
time to full availability after each nemesis heals. Real `faultline run`s on Docker.

    .venv/bin/python benchmarks/bench_run.py [--time-limit 30] [--nemeses none,partition,kill,pause]
                                             [--concurrency 10] [--cluster docker] [--fake]

One cluster is brought up and reused by every run, then removed. "Time to full availability" after a heal
is measured from the completion of the op that ended a fault (a `stop-*` op of the nemesis) to the first
1-second window, starting after it, in which the ok rate is at least half of the rate measured without
faults. `--fake` runs against the in-memory fake instead (measures the harness alone).

Prints a Markdown table (paste it into docs/benchmarks.md, "Runner" section) and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NS = 1_000_000_000


def ok_rate(history: list[dict[str, Any]]) -> float:
    oks = [o["time"] for o in history if o["type"] == "ok" and o["process"] != "nemesis"]
    inv = [o["time"] for o in history if o["type"] == "invoke" and o["process"] != "nemesis"]
    if not oks or not inv:
        return 0.0
    span = (max(oks) - min(inv)) / NS
    return len(oks) / span if span > 0 else 0.0


def recoveries(history: list[dict[str, Any]], baseline: float) -> list[tuple[str, float | None]]:
    """(fault, seconds from its stop until the ok rate is back to half the baseline) per healed fault."""
    oks = sorted(o["time"] for o in history if o["type"] == "ok" and o["process"] != "nemesis")
    end = max((o["time"] for o in history if o["type"] == "invoke" and o["process"] != "nemesis"), default=0)
    out = []
    for op in history:
        if op["process"] != "nemesis" or op["type"] != "ok" or not str(op["f"]).startswith("stop-"):
            continue
        healed = op["time"]
        if healed + NS > end:
            continue  # the final heal, after the clients stopped: nothing to measure
        t = healed
        found = None
        while t + NS <= end:
            n = sum(1 for x in oks if t <= x < t + NS)
            if n >= max(1.0, baseline / 2):
                found = (t - healed) / NS
                break
            t += NS // 10
        out.append((op["f"][len("stop-"):], found))
    return out


def run(args: argparse.Namespace, nemesis: str, store: Path, name: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "controller", "run", "--workload", "register", "--nemesis", nemesis,
           "--time-limit", str(args.time_limit), "--concurrency", str(args.concurrency), "--seed", "1",
           "--nemesis-interval", str(args.interval), "--store", str(store), "--quiet",
           "--cluster", "fake" if args.fake else args.cluster]
    if not args.fake:
        cmd += ["--cluster-name", name, "--reuse-cluster"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time_limit * 6 + 600)
    wall = time.monotonic() - t0
    latest = store / "latest"
    history = [json.loads(x) for x in (latest / "history.jsonl").read_text().splitlines()]
    results = json.loads((latest / "results.json").read_text())
    return {"nemesis": nemesis, "exit": p.returncode, "valid": results.get("valid"), "wall_s": round(wall, 1),
            "ok_per_s": round(ok_rate(history), 1), "history": history,
            "ops": sum(1 for o in history if o["type"] == "ok" and o["process"] != "nemesis")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30)
    ap.add_argument("--interval", type=float, default=8)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--nemeses", default="none,partition,kill,pause")
    ap.add_argument("--cluster", default="docker")
    ap.add_argument("--fake", action="store_true", help="the in-memory fake cluster (the harness alone)")
    args = ap.parse_args()
    name = "flbench"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        try:
            if not args.fake:
                subprocess.run([sys.executable, "-m", "controller", "cluster", "up", "--cluster", args.cluster,
                                "--name", name], check=True, timeout=600, capture_output=True)
            for nemesis in args.nemeses.split(","):
                rows.append(run(args, nemesis, store, name))
        finally:
            if not args.fake:
                subprocess.run([sys.executable, "-m", "controller", "cluster", "down", "--name", name],
                               timeout=600, capture_output=True)
    baseline = next((r["ok_per_s"] for r in rows if r["nemesis"] == "none"), rows[0]["ok_per_s"] if rows else 0)
    print("| nemesis | verdict | ok ops | ok ops/s | time to full availability after each heal (s) |")
    print("|---|---|---|---|---|")
    summary = []
    for r in rows:
        rec = recoveries(r.pop("history"), baseline)
        times = [t for _, t in rec if t is not None]
        shown = ", ".join(f"{f} {t:.1f}" if t is not None else f"{f} not within the run" for f, t in rec) or "-"
        print(f"| {r['nemesis']} | {r['valid']} | {r['ops']} | {r['ok_per_s']} | {shown} |")
        r["recovery_s"] = rec
        r["recovery_median_s"] = statistics.median(times) if times else None
        summary.append(r)
    print(json.dumps({"bench": "run", "concurrency": args.concurrency, "time_limit": args.time_limit,
                      "fake": args.fake, "runs": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
