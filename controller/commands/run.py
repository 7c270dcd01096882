"""`faultline run`: one test (or several) against a real cluster, recorded and checked."""

from __future__ import annotations

import argparse
from typing import Any

from faultline.core import TestSpec

HELP = "run a workload under faults against a cluster, record the history and check it"
DESCRIPTION = (
    "Brings up a cluster (or reuses one), drives concurrent clients with the chosen workload while the "
    "nemesis injects faults, heals everything, runs the final reads, then checks the history. The run is "
    "stored under STORE/<test-name>/<time>/ (test.json, history.jsonl, results.json, plots, report). "
    "Ctrl-C, SIGTERM or SIGHUP stops cleanly (lets the fault in flight land, heals, keeps the history, "
    "checks what it has); a second one skips the checks but still heals and tears down; a third gives up "
    "healing and results.json names what was not healed. "
    "Exit codes: 0 valid, 1 invalid, 2 unknown or cut short, 254 bad options, 255 crash."
)


# One option: its flags and argparse's keywords. Most are text read by controller/testspec.py's rules.
Option = tuple[tuple[str, ...], dict[str, Any]]


def _text(*flags: str, metavar: str | None, help: str) -> Option:
    """An option read as text (checked, with the others, by testspec.build_test); none by default."""
    return flags, {"type": str, "default": None, "metavar": metavar, "help": help}


def _repeated(flag: str, metavar: str, help: str) -> Option:
    return (flag,), {"action": "append", "default": None, "metavar": metavar, "help": help}


def _test_options() -> list[Option]:
    """What the clients do and which faults hit them."""
    from faultline.dbs import every_nemesis as all_nemeses
    from faultline.dbs import every_workload as all_workloads

    def listed(entries: Any) -> str:
        return "; ".join(
            f"{e.name} ({e.help}{', ' + e.db + ' only' if e.db else ''})" for e in entries.values()
        )

    return [
        (
            ("--workload", "-w"),
            {
                "default": "register",
                "metavar": "NAME",
                "help": f"what the clients do (default register): {listed(all_workloads())}",
            },
        ),
        (
            ("--nemesis", "-n"),
            {
                "default": "none",
                "metavar": "A,B,...",
                "help": "faults, comma-separated, interleaved on a schedule (default none): "
                f"{listed(all_nemeses())}",
            },
        ),
        _text(
            "--nemesis-interval",
            metavar="S",
            help="seconds between a fault's start and stop, and between faults (default 10)",
        ),
        _repeated(
            "--nemesis-opt",
            "KEY=VALUE",
            "an option of a nemesis (repeatable): file_glob=GLOB names the files the file faults "
            "damage, relative to the node's data directories or absolute (docs/disk.md)",
        ),
        _text("--time-limit", metavar="S", help="length of the main phase (default 60)"),
        _text("--concurrency", "-c", metavar="N", help="client workers (default 10)"),
    ]


def _db_options() -> list[Option]:
    """The DB under test and its own options."""
    return [
        (
            ("--db",),
            {
                "default": None,
                "metavar": "NAME",
                "help": "the DB under test: store (default, the bundled Kudu-like store), etcd, "
                "redis-sentinel, postgres, nats, or package.module:Attribute for your own "
                "(docs/your-own-db.md)",
            },
        ),
        _repeated(
            "--db-opt",
            "KEY=VALUE",
            "an option of the DB (repeatable), e.g. members=5 for etcd (docs/your-own-db.md)",
        ),
        (
            ("--isolation",),
            {
                "default": None,
                "metavar": "LEVEL",
                "help": "transactional workloads: the isolation level the DB runs them at "
                "(postgres: read-committed, repeatable-read, serializable; default serializable)",
            },
        ),
    ]


def _cluster_options() -> list[Option]:
    """Where the nodes run."""
    from faultline.cluster.backends import DEFAULT
    from faultline.controller.testspec import DEPRECATED_DB_OPTS

    return [
        (
            ("--cluster",),
            {
                "default": DEFAULT,
                "metavar": "KIND",
                "help": "where the nodes run: docker (default), local (network namespaces, root) or ssh",
            },
        ),
        (
            ("--cluster-name",),
            {
                "default": None,
                "metavar": "NAME",
                "help": "name of the cluster (default: a fresh fl-XXXXXX per run; faultline with "
                "--reuse-cluster)",
            },
        ),
        (
            ("--nodes",),
            {
                "default": None,
                "metavar": "HOSTS_FILE",
                "help": "for --cluster ssh: the hosts file naming each machine and its role (docs/cluster.md)",
            },
        ),
        *(_text(f"--{key}", metavar="N", help=f"deprecated: --db-opt {key}=N") for key in DEPRECATED_DB_OPTS),
    ]


def _run_options() -> list[Option]:
    """Seeds, repetitions, pace, and what the run leaves behind."""
    from faultline.dbs import all_bugs

    return [
        _text(
            "--seed", metavar="N", help="seed of every random choice (default: random, recorded in test.json)"
        ),
        _text(
            "--test-count",
            metavar="N",
            help="run the test N times (seeds SEED, SEED+1, ...); the exit code merges the verdicts",
        ),
        _repeated(
            "--inject-bug",
            "NAME",
            "turn on a known bug in every node (repeatable; the DB's own, the bundled store's: "
            f"{', '.join(sorted(all_bugs()))})",
        ),
        _text(
            "--rate",
            metavar="OPS",
            help="target client ops/s over all workers (default: as fast as the cluster answers)",
        ),
        _text(
            "--op-timeout",
            metavar="SECONDS",
            help="client operation timeout; an op that outlasts it completes as indeterminate (info). "
            "Default 5 s (Kudu's own default is 30 s; a longer timeout lets writes stuck on a "
            "deposed leader live through a leader change)",
        ),
        (
            ("--leave-cluster-running",),
            {"action": "store_true", "help": "do not tear the cluster down afterwards"},
        ),
        (
            ("--reuse-cluster",),
            {
                "action": "store_true",
                "help": "run against the running cluster named --cluster-name (e.g. from `faultline cluster "
                "up` or --leave-cluster-running) instead of bringing one up; it is left running",
            },
        ),
        (("--quiet-period",), {"type": str, "default": None, "help": argparse.SUPPRESS}),
        (
            ("--store",),
            {"default": "store", "metavar": "DIR", "help": "where runs are stored (default ./store)"},
        ),
        (("--quiet", "-q"), {"action": "store_true", "help": "no live progress; print only the summary"}),
    ]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options in the order --help lists them."""
    test, db, cluster, rest = _test_options(), _db_options(), _cluster_options(), _run_options()
    for flags, kwargs in [*test, *db, *cluster, *rest]:
        p.add_argument(*flags, **kwargs)


def run(args: argparse.Namespace) -> int:
    from faultline.controller import testspec
    from faultline.controller.errors import UsageError, exit_code_for
    from faultline.controller.runner import run_once

    opts: dict[str, Any] = vars(args)
    test = testspec.build_test(opts)
    try:
        from faultline.results.store import Store

        Store(args.store)
    except Exception as exc:
        raise UsageError(f"cannot use store {args.store!r}: {exc}") from None
    verdicts = []
    cut = False
    for i in range(test.test_count):
        one = test.replace(seed=test.seed + i)
        out = run_once(one, args.store, quiet=args.quiet)
        verdicts.append(out.valid)
        cut = cut or bool(out.cut_short)
        print(summary(out, one), flush=True)
        if out.cut_short and "interrupted" in out.cut_short:
            break
    from faultline.checkers.api import merge_valid

    code = exit_code_for(merge_valid(verdicts))
    # A run cut short cannot vouch for a valid verdict: its history is partial.
    return 2 if code == 0 and cut else code


def summary(out: Any, test: TestSpec) -> str:
    from faultline.controller.analysis import failure_lines, verdict_word

    verdict = verdict_word(out.valid).replace("invalid", "INVALID")
    lines = [f"{test.name} seed {test.seed}: {verdict} ({out.ops} history entries)"]
    if out.cut_short:
        lines.append(f"  cut short: {out.cut_short}")
    lines += failure_lines(out.results)
    if out.run_dir is not None:
        lines.append(f"  run: {out.run_dir} (report: {out.run_dir}/report.html)")
    if test.leave_cluster_running and not test.reuse_cluster:
        name = test.cluster_name
        lines.append(
            f"  cluster left running: {name} (reuse: --reuse-cluster --cluster-name {name}; "
            f"remove: faultline cluster down --name {name})"
        )
    return "\n".join(lines)
