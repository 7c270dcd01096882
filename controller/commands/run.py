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


def add_arguments(p: argparse.ArgumentParser) -> None:
    from faultline.dbs import all_bugs
    from faultline.dbs import every_nemesis as all_nemeses
    from faultline.dbs import every_workload as all_workloads

    def listed(entries: Any) -> str:
        return "; ".join(
            f"{e.name} ({e.help}{', ' + e.db + ' only' if e.db else ''})" for e in entries.values()
        )

    p.add_argument(
        "--workload",
        "-w",
        default="register",
        metavar="NAME",
        help=f"what the clients do (default register): {listed(all_workloads())}",
    )
    p.add_argument(
        "--nemesis",
        "-n",
        default="none",
        metavar="A,B,...",
        help=f"faults, comma-separated, interleaved on a schedule (default none): {listed(all_nemeses())}",
    )
    p.add_argument(
        "--nemesis-interval",
        type=str,
        default=None,
        metavar="S",
        help="seconds between a fault's start and stop, and between faults (default 10)",
    )
    p.add_argument(
        "--nemesis-opt",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an option of a nemesis (repeatable): file_glob=GLOB names the files the file faults "
        "damage, relative to the node's data directories or absolute (docs/disk.md)",
    )
    p.add_argument(
        "--time-limit", type=str, default=None, metavar="S", help="length of the main phase (default 60)"
    )
    p.add_argument(
        "--concurrency", "-c", type=str, default=None, metavar="N", help="client workers (default 10)"
    )
    p.add_argument(
        "--db",
        default=None,
        metavar="NAME",
        help="the DB under test: store (default, the bundled Kudu-like store), etcd, redis-sentinel, "
        "postgres, nats, or package.module:Attribute for your own (docs/your-own-db.md)",
    )
    p.add_argument(
        "--db-opt",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an option of the DB (repeatable), e.g. members=5 for etcd (docs/your-own-db.md)",
    )
    p.add_argument(
        "--isolation",
        default=None,
        metavar="LEVEL",
        help="transactional workloads: the isolation level the DB runs them at "
        "(postgres: read-committed, repeatable-read, serializable; default serializable)",
    )
    p.add_argument(
        "--cluster",
        default="docker",
        metavar="KIND",
        help="where the nodes run: docker (default), local (network namespaces, root) or ssh",
    )
    p.add_argument(
        "--cluster-name",
        default=None,
        metavar="NAME",
        help="name of the cluster (default: a fresh fl-XXXXXX per run; faultline with --reuse-cluster)",
    )
    p.add_argument(
        "--nodes",
        default=None,
        metavar="HOSTS_FILE",
        help="for --cluster ssh: the hosts file naming each machine and its role (docs/cluster.md)",
    )
    p.add_argument("--masters", type=str, default=None, metavar="N", help="master nodes (default 3)")
    p.add_argument("--tservers", type=str, default=None, metavar="N", help="tablet servers (default 5)")
    p.add_argument(
        "--seed",
        type=str,
        default=None,
        metavar="N",
        help="seed of every random choice (default: random, recorded in test.json)",
    )
    p.add_argument(
        "--test-count",
        type=str,
        default=None,
        metavar="N",
        help="run the test N times (seeds SEED, SEED+1, ...); the exit code merges the verdicts",
    )
    p.add_argument(
        "--inject-bug",
        action="append",
        default=None,
        metavar="NAME",
        help="turn on a known bug in every node (repeatable; the DB's own, the bundled store's: "
        f"{', '.join(sorted(all_bugs()))})",
    )
    p.add_argument(
        "--rate",
        type=str,
        default=None,
        metavar="OPS",
        help="target client ops/s over all workers (default: as fast as the cluster answers)",
    )
    p.add_argument(
        "--op-timeout",
        type=str,
        default=None,
        metavar="SECONDS",
        help="client operation timeout; an op that outlasts it completes as indeterminate (info). "
        "Default 5 s (Kudu's own default is 30 s; a longer timeout lets writes stuck on a "
        "deposed leader live through a leader change)",
    )
    p.add_argument(
        "--leave-cluster-running", action="store_true", help="do not tear the cluster down afterwards"
    )
    p.add_argument(
        "--reuse-cluster",
        action="store_true",
        help="run against the running cluster named --cluster-name (e.g. from `faultline cluster up` "
        "or --leave-cluster-running) instead of bringing one up; it is left running",
    )
    p.add_argument("--quiet-period", type=str, default=None, help=argparse.SUPPRESS)
    p.add_argument("--store", default="store", metavar="DIR", help="where runs are stored (default ./store)")
    p.add_argument("--quiet", "-q", action="store_true", help="no live progress; print only the summary")


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
