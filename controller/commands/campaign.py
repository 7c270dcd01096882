"""`faultline campaign CAMPAIGN.toml`: a matrix of runs with expectations, then scoring and a summary."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from faultline.controller.errors import UsageError

if TYPE_CHECKING:
    from faultline.core import TestSpec

HELP = "run a campaign: a matrix of workloads x nemeses x bugs x seeds, each cell with an expectation"
DESCRIPTION = (
    "Runs every cell of a campaign file one after another, each on a fresh cluster, then scores the "
    "campaign's store (pandas for a small store, else Spark) and prints a summary table. Progress is saved "
    "after every run: run the same command again to resume an interrupted campaign (finished runs are "
    "skipped). With --shard I/N, N hosts split the campaign, each running the same command with its own I; "
    "they may share one store. Exit 0 only if every cell met its expectation. See campaigns/ci.toml for the "
    "file format and docs/campaigns.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", metavar="CAMPAIGN.toml", help="the campaign file")
    parser.add_argument(
        "--store", help="store directory (default: the file's `store`, else store/campaign-NAME)"
    )
    from faultline.cluster.backends import kinds

    parser.add_argument("--cluster", choices=list(kinds()), help="override the cluster backend of every cell")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master for scoring (default local[*]); giving one scores on Spark",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "spark", "pandas"),
        default="auto",
        help="scoring engine: auto (default) scores a small store with pandas, a large one on Spark",
    )
    parser.add_argument("--no-score", action="store_true", help="skip the scoring at the end")
    parser.add_argument(
        "--restart", action="store_true", help="forget saved progress and run every cell again"
    )
    parser.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only the cells whose name matches this glob (repeatable)",
    )
    parser.add_argument(
        "--seeds",
        metavar="N,N,...|@FILE|random:N",
        help="override every cell's seeds: a list, e.g. 1,2,3; @FILE, the seeds listed in FILE; "
        "or random:N for N fresh seeds",
    )
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N: a fixed share of the runs, the same on every host, so N hosts "
        "(each with its own I) split the campaign; the shards may share one store",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="validate the file and list the runs, run nothing"
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress, only the summary")
    parser.add_argument(
        "--verbose", action="store_true", help="also show the JVM's and Spark's own log output"
    )


def run(args: argparse.Namespace) -> int:
    from faultline.controller import campaign as cp
    from faultline.controller.progress import console as make_console

    console = make_console(stderr=True)
    camp, planned_total = _plan(args, console)
    if args.dry_run:
        for planned in camp.runs:
            print(f"{planned.key}\texpect {planned.expect}")
        share = f" (shard {camp.shard} of {planned_total})" if camp.shard else ""
        print(f"{len(camp.runs)} runs{share}; store {camp.store}; progress in {cp.state_path(camp).name}")
        return 0
    records = _execute(args, camp, planned_total, console)
    if records is None:
        return 130
    score_dir = _score(args, camp, console)
    summary = cp.summarize(camp, records)
    print_summary(camp, summary, records, score_dir)
    return 0 if all(s.ok for s in summary) else 1


def _plan(args: argparse.Namespace, console: Any) -> tuple[Any, int]:
    """The campaign narrowed to the cells, seeds and shard asked for, and how many runs it plans in all;
    seeds drawn at random are said first, so an interrupted campaign can be resumed with the same seeds."""
    from faultline.controller import campaign as cp

    shard = cp.parse_shard(args.shard) if args.shard is not None else None
    if shard and args.seeds and args.seeds.strip().startswith("random:"):
        raise UsageError(
            "--seeds random:N draws other seeds on every host, so the shards would not split one "
            "campaign: draw them once (--seeds random:N --dry-run prints them) and give every "
            "shard the same list, --seeds 1,2,3 or --seeds @FILE"
        )
    camp = cp.load(args.campaign, args.store)
    seeds, drawn = cp.parse_seeds(args.seeds) if args.seeds else (None, False)
    if args.cell or seeds:
        camp = cp.select(camp, cells=args.cell, seeds=seeds)
    planned_total = len(camp.runs)
    if shard:
        camp = cp.apply_shard(camp, shard)
    if drawn:
        camp.drawn_seeds = seeds
        line = f"seeds drawn at random: {','.join(map(str, seeds or []))}"
        if args.dry_run:
            print(line)  # on stdout, for a seed file every shard can read (docs/campaigns.md)
        else:
            console.print(line)
    if args.cluster:
        for planned in camp.runs:
            planned.opts["cluster"] = args.cluster
    return camp, planned_total


def _execute(args: argparse.Namespace, camp: Any, planned_total: int, console: Any) -> dict[str, Any] | None:
    """Runs what is not finished yet, saying each run's start and verdict; None when interrupted."""
    from faultline.controller import campaign as cp
    from faultline.controller.analysis import verdict_word
    from faultline.controller.runner import run_once

    if args.restart and cp.state_path(camp).exists():
        cp.state_path(camp).unlink()
    finished = {} if args.restart else {**cp.load_other_states(camp), **cp.load_state(camp)}
    done_before = sum(r.key in finished for r in camp.runs)
    if done_before:
        console.print(f"resuming: {done_before} of {len(camp.runs)} runs already finished in {camp.store}")
    if camp.shard:
        console.print(
            f"shard {camp.shard}: {len(camp.runs)} of the campaign's {planned_total} runs; "
            f"progress in {cp.state_path(camp)}"
        )

    def on_start(planned: cp.PlannedRun, n: int, total: int) -> None:
        console.print(f"[bold][{n}/{total}][/bold] {planned.key} (expect {planned.expect})")

    def on_done(rec: cp.RunRecord) -> None:
        mark = "[green]expectation met[/green]" if rec.expectation_met else "[red]expectation NOT met[/red]"
        console.print(
            f"    {verdict_word(rec.valid)} (expected {rec.expect}): {mark} in {rec.elapsed_s:.0f} s; "
            f"run {rec.run_dir}",
            highlight=False,
        )

    def run_fn(test: TestSpec, store: Any) -> Any:
        return run_once(test, store, quiet=args.quiet)

    try:
        return cp.execute(camp, run_fn, on_start=on_start, on_done=on_done, others=not args.restart)
    except KeyboardInterrupt:
        again = (
            f"the same command with --seeds {','.join(map(str, camp.drawn_seeds))}"
            if camp.drawn_seeds
            else "the same command"
        )
        console.print(f"interrupted: progress saved in {cp.state_path(camp)}; run {again} to resume")
        return None


def _score(args: argparse.Namespace, camp: Any, console: Any) -> Any:
    """The scorecard's directory (None: not scored here: --no-score, or a shard, whose store holds part of
    the campaign or shares it with shards still running)."""
    if args.no_score:
        return None
    if camp.shard:
        console.print(
            f"shard {camp.shard}: not scored here; once every shard has finished: faultline score {camp.store} "
            "if the shards share this store, else faultline score STORE1 STORE2 ... --out DIR",
            highlight=False,
        )
        return None
    from faultline.results.engines import score_store

    result = score_store(
        camp.store,
        engine=args.engine,
        master=args.master,
        verbose=args.verbose,
        app_name=f"faultline-campaign-{camp.name}",
        progress=lambda m: console.print(f"  {m}"),
    )
    return result.out_dir


def print_summary(camp: Any, summary: list[Any], records: dict[str, Any], score_dir: Any) -> None:
    """The table, how many expectations were met, where every report and the scorecard are, and what to
    run next; on stdout, at least 120 columns wide when it is not a terminal."""
    from rich.table import Table

    from faultline.controller.analysis import verdict_word
    from faultline.controller.progress import command, console

    out = console()
    table = Table(title=f"campaign {camp.name}" + (f", shard {camp.shard}" if camp.shard else ""))
    for col in ("cell", "expect", "runs", "valid", "invalid", "unknown", "met", "median detection (s)"):
        table.add_column(col, no_wrap=col == "cell")
    for s in summary:
        style = "green" if s.ok else "red"
        table.add_row(
            s.cell,
            s.expect,
            str(s.runs),
            str(s.valid),
            str(s.invalid),
            str(s.unknown),
            f"[{style}]{s.met}/{s.runs}[/{style}]",
            "–" if s.median_detection_s is None else f"{s.median_detection_s:g}",
        )
    out.print(table)
    met, total = sum(s.met for s in summary), sum(s.runs for s in summary)
    out.print(f"[{'green' if met == total else 'red'}]{met}/{total} expectations met[/]", highlight=False)
    print("reports:")
    for rec in records.values():
        where = f"{rec.run_dir}/report.html" if rec.run_dir else "(no run directory)"
        print(
            f"  {rec.key}: {verdict_word(rec.valid)} (expected {rec.expect}"
            f"{'' if rec.expectation_met else ', NOT met'}): {where}"
        )
    for rec in records.values():
        if not rec.expectation_met:
            print(
                f"expectation not met: {rec.key}: {verdict_word(rec.valid)} (expected {rec.expect}); "
                f"report {rec.run_dir}/report.html"
                + (f"; first anomaly {rec.first_anomaly}" if rec.first_anomaly else "")
            )
    if camp.drawn_seeds:
        print(f"seeds drawn at random: {','.join(map(str, camp.drawn_seeds))}")
    print(f"store: {camp.store}")
    if score_dir:
        print(f"scorecard: {score_dir}/scorecard.html")
    fl = command()
    print(
        f"next: {fl} serve {camp.store}   (then open http://127.0.0.1:8080/ for the runs, reports and scorecard)"
    )
    missed = [r for r in records.values() if not r.expectation_met and r.run_dir]
    if missed:
        print(
            f"      {fl} analyze {missed[0].run_dir}   (re-check the first run that missed its expectation)"
        )
    if fl != "faultline":
        print(f'      (to type just `faultline`: export PATH="{_bin_dir()}:$PATH")')


def _bin_dir() -> str:
    from pathlib import Path

    return str(Path(sys.executable).parent)
