"""`faultline synth`: fill a store with realistic synthetic runs (no cluster needed)."""

from __future__ import annotations

import argparse
import sys
import time

from faultline.controller.errors import UsageError
from faultline.core import options

HELP = "write synthetic runs (clients, faults, optional injected anomalies) into a store"
DESCRIPTION = (
    "Writes N synthetic runs into STORE: concurrent clients over a simulated linearizable register with "
    'independent keys, a nemesis that opens partition/kill/pause windows (process "nemesis" ops), '
    "fail and info ops during outages, and in a chosen fraction of runs injected stale reads. "
    "Each run gets test.json, history.jsonl and history.parquet, as a real run would. "
    "For tests, benchmarks of `faultline score`, and the analysis notebook."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", metavar="STORE", help="store directory (created if missing)")
    parser.add_argument(
        "--runs", type=options.positive_int, required=True, metavar="N", help="number of runs to write"
    )
    parser.add_argument(
        "--ops",
        type=options.positive_int,
        required=True,
        metavar="M",
        help="client operations per run (each is an invocation and a completion line)",
    )
    parser.add_argument(
        "--anomaly-rate",
        type=options.fraction,
        default=0.2,
        metavar="R",
        help="fraction of runs with injected stale reads (default 0.2)",
    )
    parser.add_argument(
        "--seed",
        type=options.integer,
        default=0,
        metavar="S",
        help="seed; the same seed gives the same store",
    )
    parser.add_argument(
        "--concurrency", type=options.positive_int, default=5, help="concurrent clients per run (default 5)"
    )
    parser.add_argument(
        "--keys", type=options.positive_int, default=8, help="independent register keys per run (default 8)"
    )
    parser.add_argument(
        "--reports", action="store_true", help="also write report.html for every run (slower)"
    )
    parser.add_argument(
        "--jobs", type=options.positive_int, default=None, help="worker processes (default: one per CPU)"
    )


def run(args: argparse.Namespace) -> int:
    from faultline.results.store import StoreError
    from faultline.results.synth import synth_store

    started = time.monotonic()
    tty = sys.stderr.isatty()
    step = max(1, args.runs // 10)

    def progress(done: int, total: int) -> None:
        if tty or done == total or done % step == 0:
            end = "\n" if done == total or not tty else "\r"
            print(f"synth: {done}/{total} runs", end=end, file=sys.stderr, flush=True)

    try:
        paths = synth_store(
            args.store,
            runs=args.runs,
            ops=args.ops,
            anomaly_rate=args.anomaly_rate,
            seed=args.seed,
            concurrency=args.concurrency,
            keys=args.keys,
            reports=args.reports,
            jobs=args.jobs,
            progress=progress,
        )
    except (StoreError, ValueError, OSError) as exc:
        raise UsageError(str(exc)) from None
    took = time.monotonic() - started
    print(f"synth: wrote {len(paths)} runs x {args.ops} ops to {args.store} in {took:.1f} s", file=sys.stderr)
    return 0
