"""`faultline campaign CAMPAIGN.toml`: a matrix of runs with expectations, then scoring and a summary."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "run a campaign: a matrix of workloads x nemeses x bugs x seeds, each cell with an expectation"
DESCRIPTION = (
    "Runs every cell of a campaign file one after another, each on a fresh cluster, then scores the "
    "campaign's store on Spark and prints a summary table. Progress is saved after every run: run the "
    "same command again to resume an interrupted campaign (finished runs are skipped). Exit 0 only if "
    "every cell met its expectation. See campaigns/ci.toml for the file format."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", metavar="CAMPAIGN.toml", help="the campaign file")
    parser.add_argument("--store", help="store directory (default: the file's `store`, else store/campaign-NAME)")
    parser.add_argument("--cluster", choices=["docker", "local", "ssh"],
                        help="override the cluster backend of every cell")
    parser.add_argument("--master", default="local[2]", help="Spark master for scoring (default local[2])")
    parser.add_argument("--no-score", action="store_true", help="skip the Spark scoring at the end")
    parser.add_argument("--restart", action="store_true", help="forget saved progress and run every cell again")
    parser.add_argument("--cell", action="append", default=[], metavar="PATTERN",
                        help="run only the cells whose name matches this glob (repeatable)")
    parser.add_argument("--seeds", metavar="N,N,...", help="override every cell's seeds, e.g. 1,2,3")
    parser.add_argument("--dry-run", action="store_true", help="validate the file and list the runs, run nothing")
    parser.add_argument("--quiet", action="store_true", help="no live progress, only the summary")


def _seeds(text: str) -> list[int]:
    from faultline.controller.errors import UsageError

    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--seeds wants integers separated by commas, got {text!r}") from None
    if not seeds:
        raise UsageError("--seeds is empty")
    return seeds


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from faultline.controller import campaign as cp
    from faultline.controller.runner import run_once

    console = Console(stderr=True, quiet=False)
    camp = cp.load(args.campaign, args.store)
    if args.cell or args.seeds:
        camp = cp.select(camp, cells=args.cell, seeds=_seeds(args.seeds) if args.seeds else None)
    if args.cluster:
        for planned in camp.runs:
            planned.opts["cluster"] = args.cluster
    if args.dry_run:
        for planned in camp.runs:
            print(f"{planned.key}\texpect {planned.expect}")
        print(f"{len(camp.runs)} runs; store {camp.store}")
        return 0
    if args.restart and cp.state_path(camp).exists():
        cp.state_path(camp).unlink()
    done_before = len(cp.load_state(camp))
    if done_before:
        console.print(f"resuming: {done_before} of {len(camp.runs)} runs already finished in {camp.store}")

    def on_start(planned: cp.PlannedRun, n: int, total: int) -> None:
        console.print(f"[bold][{n}/{total}][/bold] {planned.key} (expect {planned.expect})")

    def on_done(rec: cp.RunRecord) -> None:
        mark = "[green]met[/green]" if rec.expectation_met else "[red]NOT met[/red]"
        console.print(f"    valid={rec.valid} {mark} in {rec.elapsed_s:.0f}s -> {rec.run_dir}")

    def run_fn(test: dict[str, Any], store: Any) -> Any:
        return run_once(test, store, quiet=args.quiet)

    try:
        records = cp.execute(camp, run_fn, on_start=on_start, on_done=on_done)
    except KeyboardInterrupt:
        console.print(f"interrupted: progress saved in {cp.state_path(camp)}; run the same command to resume")
        return 130

    score_dir = None
    if not args.no_score:
        from faultline.results.engines import score_store

        console.print(f"scoring {camp.store} on Spark ({args.master})")
        result = score_store(camp.store, engine="spark", master=args.master,
                             app_name=f"faultline-campaign-{camp.name}", progress=lambda m: console.print(f"  {m}"))
        score_dir = result.out_dir

    summary = cp.summarize(camp, records)
    table = Table(title=f"campaign {camp.name}")
    for col in ("cell", "expect", "runs", "valid", "invalid", "unknown", "met", "median detection (s)"):
        table.add_column(col)
    for s in summary:
        style = "green" if s.ok else "red"
        table.add_row(s.cell, s.expect, str(s.runs), str(s.valid), str(s.invalid), str(s.unknown),
                      f"[{style}]{s.met}/{s.runs}[/{style}]",
                      "-" if s.median_detection_s is None else f"{s.median_detection_s:g}")
    Console(file=sys.stdout).print(table)
    for rec in records.values():
        if not rec.expectation_met:
            print(f"expectation not met: {rec.key}: valid={rec.valid} (expected {rec.expect}); "
                  f"report {rec.run_dir}/report.html" + (f"; first anomaly {rec.first_anomaly}" if rec.first_anomaly else ""))
    print(f"store: {camp.store}")
    if score_dir:
        print(f"scorecard: {score_dir}/scorecard.html")
    return 0 if all(s.ok for s in summary) else 1
