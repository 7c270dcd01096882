"""Benchmark `faultline score`: Spark local[1] and local[2] against the single-process pandas baseline.

    .venv/bin/python benchmarks/bench_score.py [--store DIR] [--runs 200] [--ops 10000] [--masters local[1],local[2]]
        [--plans runs,groups]

Synthesizes the store if it is not there yet (200 runs x 10,000 operations = 2 M operations, 4 M history
events), scores it with each engine in a fresh process (so each Spark master starts its own JVM), checks
that every engine reached the same verdict for every run, and prints a Markdown table for
docs/benchmarks.md. "scoring s" excludes the JVM start; "wall s" is the whole command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent


def faultline(*args: str) -> tuple[int, float, str]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "faultline", *args], capture_output=True, text=True, timeout=7200
    )
    return proc.returncode, time.monotonic() - started, proc.stderr


def _parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="/tmp/faultline-bench-store")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--plans", default="runs", help="comma-separated: runs, groups (see docs/results.md)")
    ap.add_argument("--skip-pandas", action="store_true")
    return ap.parse_args()


def _synth_store(store: Path, runs: int, ops: int) -> bool:
    """Synthesize the store unless it is there already; False (after printing why) if that failed."""
    if (store / "index.jsonl").exists():
        return True
    code, took, err = faultline(
        "synth", str(store), "--runs", str(runs), "--ops", str(ops), "--anomaly-rate", "0.2", "--seed", "0"
    )
    if code != 0:
        print(err, file=sys.stderr)
        return False
    print(f"synth: {runs} runs x {ops} ops in {took:.1f} s", file=sys.stderr)
    return True


def _score_with(store: Path, name: str, extra: list[str]) -> tuple[dict, pd.Series] | None:
    """Score the store with one engine in a fresh process: (table row, verdict per run), or None on failure."""
    out = store.parent / (
        f"{store.name}-score-" + "-".join(name.split()[1:]).strip("()").replace("[", "").replace("]", "")
        or "pandas"
    )
    load_before = os.getloadavg()[0]
    code, wall, err = faultline("score", str(store), "--out", str(out), "--quiet", *extra)
    load_after = os.getloadavg()[0]
    if code not in (0, 1, 2):
        print(err, file=sys.stderr)
        return None
    card = json.loads((out / "scorecard.json").read_text())
    scores = pd.read_parquet(out / "scores.parquet").set_index("run_id")["verdict"]
    row = {
        "engine": name,
        "runs": card["runs"],
        "events": card["events"],
        "scoring_s": card["seconds"],
        "wall_s": wall,
        "load": f"{load_before:.1f} / {load_after:.1f}",
        "invalid": int((scores == "false").sum()),
    }
    print(f"{name}: {card['seconds']:.1f} s scoring, {wall:.1f} s wall", file=sys.stderr)
    return row, scores


def _print_table(args: argparse.Namespace, rows: list[dict], same: bool) -> None:
    ops = args.runs * args.ops
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"store: {args.runs} runs x {args.ops:,} operations ({rows[0]['events']:,} history events)\n"
    )
    print(
        "| engine | scoring s | wall s (incl. JVM) | operations/s (scoring) | events/s (scoring) | speed-up vs first "
        "| invalid runs | load avg before / after |"
    )
    print("|---|---|---|---|---|---|---|---|")
    base = rows[0]["scoring_s"]
    for r in rows:
        print(
            f"| {r['engine']} | {r['scoring_s']:.1f} | {r['wall_s']:.1f} | {ops / r['scoring_s']:,.0f} | "
            f"{r['events'] / r['scoring_s']:,.0f} | {base / r['scoring_s']:.2f}x | {r['invalid']} | {r['load']} |"
        )
    print(f"\nVerdicts identical across engines: {same}")


def main() -> int:
    args = _parse_args()
    store = Path(args.store)
    if not _synth_store(store, args.runs, args.ops):
        return 1
    engines = [] if args.skip_pandas else [("pandas (1 process)", ["--engine", "pandas"])]
    engines += [
        (f"spark {m} {p}", ["--master", m, "--plan", p])
        for p in args.plans.split(",")
        if p
        for m in args.masters.split(",")
        if m
    ]
    rows = []
    verdicts: dict[str, pd.Series] = {}
    for name, extra in engines:
        scored = _score_with(store, name, extra)
        if scored is None:
            return 1
        rows.append(scored[0])
        verdicts[name] = scored[1]
    names = list(verdicts)
    same = all(verdicts[n].sort_index().equals(verdicts[names[0]].sort_index()) for n in names[1:])
    _print_table(args, rows, same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
