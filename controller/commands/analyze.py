"""`faultline analyze RUN_DIR`: re-run the workload's checkers on a stored run."""

from __future__ import annotations

import argparse

HELP = "re-check a stored run (also one that was cut short) and rewrite its results and report"
DESCRIPTION = (
    "Reads RUN_DIR/test.json and history.jsonl, runs the workload's checkers again (with the checkers of "
    "this version of faultline), and rewrites results.json (keeping what the run recorded: its faults, "
    "residue, and whether it was cut short), plots and report.html. Prints a short summary, or the new "
    "results as JSON with --json. Exit codes: 0 valid, 1 invalid, 2 unknown or cut short (as `faultline "
    "run`), 254 not a run directory."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, e.g. store/latest")
    p.add_argument(
        "--json", action="store_true", help="print the new results.json on stdout instead of a summary"
    )


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from faultline.controller.analysis import describe, reanalyze
    from faultline.controller.errors import UsageError, exit_code_for
    from faultline.history import HistoryFormatError

    path = Path(args.run_dir)
    if not (path / "test.json").is_file():
        raise UsageError(f"{path} is not a run directory (no test.json)")
    try:
        test = json.loads((path / "test.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}/test.json is not valid JSON: {exc}") from None
    if not isinstance(test, dict):
        raise UsageError(f"{path}/test.json is not a JSON object (it holds a {type(test).__name__})")
    if not isinstance(test.get("workload"), str) or not test["workload"]:
        raise UsageError(f"{path}/test.json names no workload")
    try:
        results = reanalyze(path)
    except HistoryFormatError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if args.json:
        print(json.dumps(results, default=str, sort_keys=True))
    else:
        print("\n".join(describe(results, path)))
    code = exit_code_for(results.get("valid"))
    # A run cut short cannot vouch for a valid verdict: its history is partial (as `faultline run` says).
    return 2 if code == 0 and results.get("cut_short") else code
