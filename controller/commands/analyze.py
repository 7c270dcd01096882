"""`faultline analyze RUN_DIR`: re-run the workload's checkers on a stored run."""

from __future__ import annotations

import argparse

HELP = "re-check a stored run (also one that was cut short) and rewrite its results and report"
DESCRIPTION = (
    "Reads RUN_DIR/test.json and history.jsonl, runs the workload's checkers again (with the checkers of "
    "this version of faultline), and rewrites results.json, plots and report.html. Prints the result as "
    "JSON. Exit codes: 0 valid, 1 invalid, 2 unknown, 254 not a run directory."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, e.g. store/latest")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from faultline.controller.analysis import reanalyze
    from faultline.controller.errors import UsageError, exit_code_for

    path = Path(args.run_dir)
    if not (path / "test.json").is_file():
        raise UsageError(f"{path} is not a run directory (no test.json)")
    try:
        json.loads((path / "test.json").read_text())
    except ValueError as exc:
        raise UsageError(f"{path}/test.json is not valid JSON: {exc}") from None
    from faultline.checkers.history import HistoryFormatError

    try:
        results = reanalyze(path)
    except HistoryFormatError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    print(json.dumps(results, default=str, sort_keys=True))
    return exit_code_for(results.get("valid"))
