"""Harness cost per operation: whole runs (`run_once`: generator, workers, recorder, nemesis, checker,
report) against the store's in-memory fake cluster, so the figure is the harness's own work, not a DB's.

    .venv/bin/python benchmarks/bench_harness.py [--runs 3] [--time-limit 8] [--workload register]
                                                 [--nemesis none] [--concurrency 10]

Prints, per run, the ok operations, ok ops/s and the process's CPU time (user + system) per ok operation
in milliseconds, then a JSON line. It uses only the public entry points (controller.testspec.build_test,
controller.runner.run_once), so the same file measures an older checkout side by side:
`PYTHONPATH=<dir holding a faultline link to the checkout> python benchmarks/bench_harness.py`.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path


def cpu_seconds() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def one_run(args: argparse.Namespace, seed: int, store: Path) -> dict[str, float]:
    from faultline.controller import testspec
    from faultline.controller.runner import run_once

    spec = testspec.build_test(
        {
            "workload": args.workload,
            "nemesis": args.nemesis,
            "cluster": "fake",
            "time_limit": args.time_limit,
            "concurrency": args.concurrency,
            "seed": seed,
            "name": f"bench-harness-{seed}",
        }
    )
    cpu0, wall0 = cpu_seconds(), time.monotonic()
    outcome = run_once(spec, store, quiet=True, install_signals=False)
    cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
    oks = 0
    history = Path(outcome.run_dir) / "history.jsonl" if outcome.run_dir is not None else None
    if history is not None and history.exists():
        with history.open() as f:
            ops = (json.loads(line) for line in f if line.strip())
            oks = sum(1 for op in ops if op.get("type") == "ok" and op.get("process") != "nemesis")
    return {
        "ok": oks,
        "ok_per_s": oks / args.time_limit,
        "cpu_ms_per_ok": 1000 * cpu / max(oks, 1),
        "wall_s": wall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=8)
    ap.add_argument("--workload", default="register")
    ap.add_argument("--nemesis", default="none")
    ap.add_argument("--concurrency", type=int, default=10)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            row = one_run(args, seed=i + 1, store=Path(tmp) / "store")
            rows.append(row)
            print(
                f"run {i + 1}: {row['ok']} ok, {row['ok_per_s']:.0f} ok ops/s, "
                f"{row['cpu_ms_per_ok']:.3f} ms CPU per ok op, {row['wall_s']:.1f} s wall",
                flush=True,
            )
    print(
        json.dumps(
            {
                "bench": "harness",
                "workload": args.workload,
                "nemesis": args.nemesis,
                "median_cpu_ms_per_ok": statistics.median(r["cpu_ms_per_ok"] for r in rows),
                "median_ok_per_s": statistics.median(r["ok_per_s"] for r in rows),
                "runs": rows,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
