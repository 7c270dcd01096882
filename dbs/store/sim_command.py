"""`faultline sim`: deterministic simulation of the Raft core under faults (node/consensus/sim.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from faultline.core import options
from faultline.core.errors import EXIT_INVALID, EXIT_VALID, UsageError

HELP = "deterministic simulation of the Raft core: faults, invariants after every step, liveness"
DESCRIPTION = (
    "Runs replicas of the Raft core over a simulated network (partitions of many shapes, loss, duplication, "
    "delay and reordering), with crashes and restarts that keep only what was persisted, client proposals "
    "and reads, membership changes and leadership transfers. Raft's invariants are checked after every "
    "step; after the network heals a leader must be elected and a proposal commit. A failing seed prints "
    "a short trace and replays exactly with --seed. Exit 0 if every seed passes, 1 on a violation."
)


# (flag, type, default, metavar, help) of the numeric options
_NUMBERS = (
    (
        "--seeds",
        options.positive_int,
        None,
        "N",
        "how many seeds to run: 0..N-1 (default 100, or 1 with --seed)",
    ),
    (
        "--seed",
        options.integer,
        None,
        "S",
        "run only this seed (with --seeds N: seeds S..S+N-1) and print its trace on failure",
    ),
    ("--nodes", options.positive_int, 5, None, "servers at the start, all voters (default 5)"),
    (
        "--steps",
        options.non_negative_int,
        None,
        "K",
        "ticks of faults per seed before the network heals (default 250)",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, kind, default, metavar, text in _NUMBERS:
        parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    parser.add_argument(
        "--inject-bug",
        action="append",
        default=[],
        metavar="NAME",
        help="enable a consensus bug from node/bugs.py (repeatable); the run should then fail",
    )
    parser.add_argument(
        "--snapshots",
        action="store_true",
        help="servers also compact their logs at random, and leaders catch a follower behind "
        "their log's start up by InstallSnapshot",
    )
    parser.add_argument("--keep-going", action="store_true", help="do not stop at the first failing seed")
    parser.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")


def _checked(args: argparse.Namespace) -> tuple[frozenset[str], range, Any]:
    """(bugs, seeds, SimOptions) from the command line, or a UsageError."""
    from faultline.node.bugs import validate
    from faultline.node.consensus.core import CORE_BUGS
    from faultline.node.consensus.sim import SimOptions

    try:
        bugs = frozenset(validate(args.inject_bug))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for b in sorted(bugs):
        if b not in CORE_BUGS:
            raise UsageError(
                f"bug {b!r} is not in the consensus core; the simulator accepts: {', '.join(CORE_BUGS)}"
            )
    count = args.seeds if args.seeds is not None else (1 if args.seed is not None else 100)
    if count < 1:
        raise UsageError("--seeds must be at least 1")
    if not 1 <= args.nodes <= 15:
        raise UsageError("--nodes must be between 1 and 15")
    opts = SimOptions(nodes=args.nodes, bugs=bugs, snapshots=args.snapshots)
    if args.steps is not None:
        if args.steps < 0:
            raise UsageError("--steps must be >= 0")
        opts.steps = args.steps
    first = args.seed if args.seed is not None else 0
    return bugs, range(first, first + count), opts


def _print_violation(res: Any, args: argparse.Namespace, bugs: frozenset[str], steps: int) -> None:
    """A failing seed's violation and the tail of its trace, with the command that replays it."""
    print(f"seed {res.seed}: VIOLATION {res.violation}")
    print(
        f"  last {len(res.trace)} trace lines (replay: faultline sim --seed {res.seed} --nodes {args.nodes}"
        + "".join(f" --inject-bug {b}" for b in sorted(bugs))
        + (f" --steps {steps}" if args.steps is not None else "")
        + "):"
    )
    for line in res.trace:
        print(f"    {line}")


def run(args: argparse.Namespace) -> int:
    from faultline.node.consensus.sim import simulate

    bugs, seeds, opts = _checked(args)
    start = time.monotonic()
    last_progress = start
    failures = []
    ticks = messages = 0
    ran = 0
    for seed in seeds:
        res = simulate(seed, opts)
        ran += 1
        ticks += res.ticks
        messages += res.messages
        if not res.ok:
            failures.append(res)
            if not args.json:
                _print_violation(res, args, bugs, opts.steps)
            if not args.keep_going:
                break
        now = time.monotonic()
        if not args.quiet and not args.json and now - last_progress >= 5:
            last_progress = now
            print(
                f"... {ran}/{len(seeds)} seeds, {len(failures)} failing, {now - start:.0f}s",
                file=sys.stderr,
                flush=True,
            )
    elapsed = time.monotonic() - start
    summary = {
        "seeds": ran,
        "failures": [f.seed for f in failures],
        "bugs": sorted(bugs),
        "nodes": args.nodes,
        "ticks": ticks,
        "messages": messages,
        "seconds": round(elapsed, 2),
        "valid": not failures,
    }
    if args.json:
        summary["violations"] = {str(f.seed): f.violation for f in failures}
        print(json.dumps(summary))
    else:
        verdict = "all passed" if not failures else f"{len(failures)} failing: {summary['failures']}"
        print(f"faultline sim: {ran} seeds, {ticks} ticks, {messages} messages in {elapsed:.1f}s; {verdict}")
    return EXIT_VALID if not failures else EXIT_INVALID
