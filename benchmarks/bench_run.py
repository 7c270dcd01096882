"""Runner benchmark: ok ops/s of a workload (default: register on the store, 3 masters + 5 tablet servers;
10 workers), and the time to full availability after each nemesis heals. Real `faultline run`s on Docker.

    .venv/bin/python benchmarks/bench_run.py [--time-limit 30] [--nemeses none,partition,kill,pause]
                                             [--concurrency 10] [--cluster docker] [--fake]
                                             [--db store|etcd|redis-sentinel|postgres] [--workload register]
                                             [--inject-bug NAME ...] [--db-opt KEY=VALUE ...]

One cluster is brought up and reused by every run, then removed (put topology-changing nemeses such as
tserver-replace last). Recovery is measured from each heal (the completion of a `stop-*` op, or of a
one-shot fault such as replace-master) two ways: until the first 1-second window whose ok count is at
least half the no-fault rate, and until every worker has completed an ok op again (full availability:
a worker whose tablet is still unavailable holds it back). Each is given as median / max over the heals
of a run. `--fake` runs against the in-memory fake instead (measures the harness alone). `--inject-bug`
(the store's `no-fsync`, say: is the disk the limit?) and `--db-opt` go to every run.

Prints a Markdown table (paste it into docs/benchmarks.md, "Runner" section) and a JSON line.
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
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


def heal_times(history: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(fault, time) of every completed heal: a `stop-*` op, or a one-shot fault (replace-master,
    membership, ...) whose completion is its end. The final heal after the clients stopped is left out."""
    end = max((o["time"] for o in history if o["type"] == "invoke" and o["process"] != "nemesis"), default=0)
    out = []
    for op in history:
        f = str(op["f"])
        if (
            op["process"] != "nemesis"
            or op["type"] != "ok"
            or f.startswith("start-")
            or op["time"] + NS > end
        ):
            continue
        out.append((f.removeprefix("stop-"), op["time"]))
    return out


def recoveries(
    history: list[dict[str, Any]], baseline: float, concurrency: int
) -> list[tuple[str, float | None, float | None]]:
    """Per healed fault: (fault, seconds until the ok rate is back to half the baseline, seconds until
    every worker has completed an ok op since the heal). The second is full availability: a worker whose
    key's tablet is still unavailable holds it back. None: not within the run."""
    oks = sorted(
        (o["time"], o["process"]) for o in history if o["type"] == "ok" and o["process"] != "nemesis"
    )
    times = [t for t, _ in oks]
    end = max((o["time"] for o in history if o["type"] == "invoke" and o["process"] != "nemesis"), default=0)
    out: list[tuple[str, float | None, float | None]] = []
    for fault, healed in heal_times(history):
        rate_back = None
        t = healed
        while t + NS <= end:
            lo, hi = bisect.bisect_left(times, t), bisect.bisect_left(times, t + NS)
            if hi - lo >= max(1.0, baseline / 2):
                rate_back = (t - healed) / NS
                break
            t += NS // 10
        seen: set[int] = set()
        all_back = None
        for ts, proc in oks[bisect.bisect_left(times, healed) :]:
            seen.add(int(proc) % concurrency)
            if len(seen) == concurrency:
                all_back = (ts - healed) / NS
                break
        out.append((fault, rate_back, all_back))
    return out


def _shares_a_cluster(args: argparse.Namespace) -> bool:
    """The runs share one cluster brought up first, unless a DB option may shape the cluster itself (etcd's
    `members`, say): `cluster up` takes no DB options, so then each run brings up its own."""
    return not args.fake and not args.db_opt


def run_command(args: argparse.Namespace, nemesis: str, store: Path, name: str) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "faultline",
        "run",
        "--db",
        args.db,
        "--workload",
        args.workload,
        "--nemesis",
        nemesis,
        "--time-limit",
        str(args.time_limit),
        "--concurrency",
        str(args.concurrency),
        "--seed",
        "1",
        "--nemesis-interval",
        str(args.interval),
        "--store",
        str(store),
        "--quiet",
        "--cluster",
        "fake" if args.fake else args.cluster,
    ]
    cmd += [f"--inject-bug={b}" for b in args.inject_bug] + [f"--db-opt={o}" for o in args.db_opt]
    if _shares_a_cluster(args):
        cmd += ["--cluster-name", name, "--reuse-cluster"]
    return cmd


def run(args: argparse.Namespace, nemesis: str, store: Path, name: str) -> dict[str, Any]:
    cmd = run_command(args, nemesis, store, name)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time_limit * 6 + 600)
    wall = time.monotonic() - t0
    latest = store / "latest"
    history = [json.loads(x) for x in (latest / "history.jsonl").read_text().splitlines()]
    results = json.loads((latest / "results.json").read_text())
    return {
        "nemesis": nemesis,
        "exit": p.returncode,
        "valid": results.get("valid"),
        "wall_s": round(wall, 1),
        "ok_per_s": round(ok_rate(history), 1),
        "history": history,
        "ops": sum(1 for o in history if o["type"] == "ok" and o["process"] != "nemesis"),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30)
    ap.add_argument("--interval", type=float, default=8)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--nemeses", default="none,partition,kill,pause")
    ap.add_argument("--cluster", default="docker")
    ap.add_argument("--db", default="store", help="the DB under test (docs/your-own-db.md)")
    ap.add_argument("--workload", default="register")
    ap.add_argument("--fake", action="store_true", help="the in-memory fake cluster (the harness alone)")
    ap.add_argument(
        "--inject-bug",
        action="append",
        default=[],
        metavar="NAME",
        help="a DB's own bug, for every run and the shared cluster (repeatable), e.g. no-fsync",
    )
    ap.add_argument(
        "--db-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a DB option for every run (repeatable); each run then brings up its own cluster",
    )
    return ap.parse_args(argv)


def _run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One run per nemesis, on one shared cluster (brought up here and removed afterwards) when they can share."""
    name = f"flbench-{uuid.uuid4().hex[:6]}"  # never collides with a concurrent run
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        try:
            if _shares_a_cluster(args):
                subprocess.run(
                    [
                        *[sys.executable, "-m", "faultline", "cluster", "up", "--cluster", args.cluster],
                        *["--db", args.db, "--name", name],
                        *[f"--inject-bug={b}" for b in args.inject_bug],
                    ],
                    check=True,
                    timeout=600,
                    capture_output=True,
                )
            for nemesis in args.nemeses.split(","):
                rows.append(run(args, nemesis, store, name))
        finally:
            if _shares_a_cluster(args):
                subprocess.run(
                    [sys.executable, "-m", "faultline", "cluster", "down", "--name", name],
                    timeout=600,
                    capture_output=True,
                )
    return rows


def _median_max(xs: list[float | None]) -> str:
    got = [x for x in xs if x is not None]
    missing = len(xs) - len(got)
    if not got:
        return "-" if not xs else "not within the run"
    text = f"{statistics.median(got):.1f} / {max(got):.1f}"
    return text + (f" ({missing} not within the run)" if missing else "")


def main() -> int:
    args = parse_args()
    rows = _run_all(args)
    baseline = next(
        (r["ok_per_s"] for r in rows if r["nemesis"] == "none"), rows[0]["ok_per_s"] if rows else 0
    )
    print(
        "| nemesis | verdict | ok ops | ok ops/s | heals | rate back to half (s), median / max |"
        " every worker ok again (s), median / max |"
    )
    print("|---|---|---|---|---|---|---|")
    summary = []
    for r in rows:
        rec = recoveries(r.pop("history"), baseline, args.concurrency)
        print(
            f"| {r['nemesis']} | {r['valid']} | {r['ops']} | {r['ok_per_s']} | {len(rec)} | "
            f"{_median_max([a for _, a, _ in rec])} | {_median_max([b for _, _, b in rec])} |"
        )
        r["recoveries"] = rec
        summary.append(r)
    print(
        json.dumps(
            {
                "bench": "run",
                "db": args.db,
                "workload": args.workload,
                "concurrency": args.concurrency,
                "time_limit": args.time_limit,
                "fake": args.fake,
                "bugs": args.inject_bug,
                "db_opts": args.db_opt,
                "runs": summary,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
