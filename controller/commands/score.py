"""`faultline score`: score every run of one or several stores and write the campaign scorecard."""

from __future__ import annotations

import argparse
import re
import sys
import time

from faultline.controller.errors import UsageError, exit_code_for
from faultline.core import options

HELP = "score every run in one or several stores: metrics, verdicts, a per-(workload, nemesis, bug) scorecard"
DESCRIPTION = (
    "Scores every run's history in STORE (or in several stores together, e.g. the stores of the hosts that "
    "ran the shards of one campaign: then --out is needed) and computes per run: op counts by f and type, ok rate, "
    "latency p50/p95/p99/max, throughput, fault windows, outages and the time to recover after each heal, "
    "and the linearizability verdict (checked per (run, key) on the executors, by the same checker as "
    "`faultline check`). Then per (workload, nemesis, bug): runs, valid/invalid/unknown, detection rate, "
    "median time to first anomaly, availability. Writes scores.parquet, scorecard.json and scorecard.html "
    "to --out (default STORE/_score). A small store is scored in this process with pandas, a large one on "
    "Spark (--engine). Malformed or partial runs are scored with a warning. "
    "Exit status: 0 if every run is valid, 1 if any is invalid, 2 if any is unknown (and none invalid)."
)
MASTER_RE = re.compile(
    r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|yarn|k8s://\S+)$"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "store",
        metavar="STORE",
        nargs="+",
        help="store directory; several are scored together (their run ids then start with each "
        "store's folder name)",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master: local[*] (the default when Spark runs), local[N], or spark://HOST:7077 "
        "for a standalone cluster (the stores must be at the same paths on every worker); "
        "giving one scores on Spark",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=None,
        help="output directory (default STORE/_score; needed for several stores)",
    )
    parser.add_argument(
        "--time-limit",
        type=options.positive_float,
        default=None,
        metavar="S",
        help="seconds per (run, key) linearizability check; beyond it the verdict is unknown",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "spark", "pandas"),
        default="auto",
        help="auto (default): pandas for a store of under 2,000,000 history events (no JVM start), "
        "else Spark; spark or pandas: that one (same numbers either way)",
    )
    parser.add_argument(
        "--plan",
        choices=("runs", "groups"),
        default="runs",
        help="runs (default): one Spark task per run reads its Parquet history, no shuffle; "
        "groups: the histories as one DataFrame, groupBy(run, key).applyInPandas",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress messages")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the JVM's and Spark's own log output (default: into OUT/spark.log)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from faultline.results.store import Store, StoreError

    stores = [Path(s) for s in args.store]
    for store in stores:
        if not store.exists():
            raise UsageError(f"store {store} does not exist")
        if not store.is_dir():
            raise UsageError(f"store {store} is not a directory")
    if len({s.resolve() for s in stores}) < len(stores):
        raise UsageError("a store is given twice: its runs would count twice")
    if len(stores) > 1 and args.out is None:
        raise UsageError("scoring several stores together needs --out DIR (where the scorecard goes)")
    if args.master is not None and not MASTER_RE.match(args.master):
        raise UsageError(f"bad --master {args.master!r}: use local[*], local[N] or spark://HOST:PORT")
    from faultline.results.engines import score_store

    for store in stores:
        if next(Store(store, create=False).run_dirs(), None) is None:
            raise UsageError(f"store {store} has no runs (expected STORE/<test-name>/<stamp>/ directories)")
    started = time.monotonic()

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"score [{time.monotonic() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    try:
        result = score_store(
            stores if len(stores) > 1 else stores[0],
            args.out,
            engine=args.engine,
            master=args.master,
            plan=args.plan,
            time_limit=args.time_limit,
            progress=progress,
            verbose=args.verbose,
        )
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    for w in result.warnings:
        print(f"score: warning: {w}", file=sys.stderr)
    counts = result.runs["verdict"].value_counts()
    assert result.out_dir is not None  # set when the scores are written, which score_store always does
    print(
        f"score: {len(result.runs)} runs, {result.total_events:,} ops in {result.seconds:.1f} s "
        f"({result.total_events / max(result.seconds, 1e-9):,.0f} ops/s) with {result.engine}: "
        f"{counts.get('true', 0)} valid, {counts.get('false', 0)} invalid, {counts.get('unknown', 0)} unknown; "
        f"scorecard: {result.out_dir / 'scorecard.html'}",
        file=sys.stderr,
    )
    return exit_code_for(result.verdict)
