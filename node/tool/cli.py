"""`python -m faultline.node tool ...`: admin tools named after Kudu's.

Misuse prints usage and one `error:` line and exits 254 (node/args.py); an operation that fails prints
one `error:` line and exits 1.
Tools that write a cmeta write it atomically, so a failing tool never leaves half a file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import grpc

from faultline.node.args import EXIT_BAD_INPUT, NodeParser, positive_float, positive_int
from faultline.node.tool import ops


def _masters(p: argparse.ArgumentParser) -> None:
    p.add_argument("masters", metavar="MASTERS", help="comma-separated HOST:PORT of the masters")


def _json(p: argparse.ArgumentParser, what: str) -> None:
    """`--json`: the machine-readable form (node/tool/output.py); the text form is for people only."""
    p.add_argument(
        "--json", action="store_true", help=f"print {what} as one line of JSON (node/tool/output.py)"
    )


def _fs_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fs-dir", required=True)


def _actions(groups: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """One tool group (`fs`, `master`, ...) whose actions are its own subcommands."""
    return groups.add_parser(name, help=help).add_subparsers(dest="action", required=True)


def _add_fs(groups: argparse._SubParsersAction) -> None:
    fs = _actions(groups, "fs", "data directories")
    p = fs.add_parser("format", help="create an empty data directory with a permanent uuid")
    _fs_dir(p)
    p.add_argument(
        "--uuid", default=None, help="use this uuid (32 hex digits), e.g. to replace a dead master"
    )
    p.set_defaults(fn=ops.fs_format)
    dump = fs.add_parser("dump", help="print facts about a data directory").add_subparsers(
        dest="what", required=True
    )
    p = dump.add_parser("uuid", help="print the data directory's uuid")
    _fs_dir(p)
    p.set_defaults(fn=ops.fs_dump_uuid)

    p = fs.add_parser(
        "cut_to_synced",
        help="simulated power loss: cut every file back to what reached fsync (server must be stopped)",
    )
    p.add_argument("--fs-dir", required=True, help="data directory of a stopped (killed) server")
    p.add_argument("--json", action="store_true", help="print what was cut as JSON")
    p.set_defaults(fn=ops.fs_cut_to_synced)


def _add_local_replica(groups: argparse._SubParsersAction) -> None:
    lrs = _actions(groups, "local_replica", "replicas in a local data directory (server stopped)")
    p = lrs.add_parser("list", help="list the replicas in a data directory")
    _fs_dir(p)
    _json(p, "the replicas")
    p.set_defaults(fn=ops.local_list)
    cm = lrs.add_parser("cmeta", help="consensus metadata").add_subparsers(dest="what", required=True)
    p = cm.add_parser("print_replica_uuids", help="print the uuids of the replica's committed config")
    p.add_argument("tablet", metavar="TABLET")
    _fs_dir(p)
    p.set_defaults(fn=ops.cmeta_print_uuids)
    p = cm.add_parser("rewrite_raft_config", help="replace the committed config (server must be stopped)")
    p.add_argument("tablet", metavar="TABLET")
    p.add_argument("peers", metavar="UUID:HOST:PORT", nargs="+")
    _fs_dir(p)
    p.set_defaults(fn=ops.cmeta_rewrite)
    p = lrs.add_parser("copy_from_remote", help="copy a replica from a running server (tablet copy)")
    p.add_argument(
        "tablet", metavar="TABLET", help="tablet id, or 'sys' / 00000000000000000000000000000000 for masters"
    )
    p.add_argument(
        "source",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the server to copy from; for 'sys', several masters: the tool copies from the leader",
    )
    _fs_dir(p)
    p.add_argument(
        "--inject-bug", action="append", default=[], help="copy-from-lagging-master: skip the leader check"
    )
    p.set_defaults(fn=ops.copy_from_remote)


def _add_remote_replica(groups: argparse._SubParsersAction) -> None:
    rr = _actions(groups, "remote_replica", "replicas on a running server")
    p = rr.add_parser("list", help="list the replicas of a server")
    p.add_argument("server", metavar="HOST:PORT")
    _json(p, "the replicas")
    p.set_defaults(fn=ops.remote_list)
    p = rr.add_parser(
        "unsafe_change_config", help="force a config of surviving voters (after losing a majority)"
    )
    p.add_argument("server", metavar="HOST:PORT")
    p.add_argument("tablet", metavar="TABLET")
    p.add_argument("uuids", metavar="UUID", nargs="+")
    p.set_defaults(fn=ops.unsafe_change_config)


def _add_set_flag(sub: argparse._SubParsersAction, role: str) -> None:
    p = sub.add_parser(
        "set_flag",
        help=f"change a runtime flag of a running {role} (node/server/flags.py); "
        "a restart brings back the default",
    )
    p.add_argument("server", metavar="HOST:PORT")
    p.add_argument("flag", metavar="FLAG")
    p.add_argument("value", metavar="VALUE")
    p.set_defaults(fn=ops.set_flag)


def _add_master(groups: argparse._SubParsersAction) -> None:
    ma = _actions(groups, "master", "the masters' Raft config")
    p = ma.add_parser("list", help="list masters and their roles")
    _masters(p)
    _json(p, "the masters")
    p.set_defaults(fn=ops.master_list)
    p = ma.add_parser("add", help="add a running, empty master to the config (it copies the catalog)")
    _masters(p)
    p.add_argument("new", metavar="HOST:PORT")
    p.add_argument("--uuid", default="")
    p.add_argument("--timeout", type=positive_float, default=60.0)
    p.set_defaults(fn=ops.master_add)
    p = ma.add_parser("remove", help="remove a master from the config")
    _masters(p)
    p.add_argument("old", metavar="HOST:PORT")
    p.add_argument("--uuid", default="")
    p.set_defaults(fn=ops.master_remove)
    _add_set_flag(ma, "master")


def _masters_and_tablet(p: argparse.ArgumentParser) -> None:
    _masters(p)
    p.add_argument("tablet", metavar="TABLET")


def _add_tablet(groups: argparse._SubParsersAction) -> None:
    tbs = _actions(groups, "tablet", "tablet replicas and leadership")
    cc = tbs.add_parser("change_config", help="add/remove/move a replica").add_subparsers(
        dest="what", required=True
    )
    p = cc.add_parser("add_replica", help="add a replica on a tablet server")
    _masters_and_tablet(p)
    p.add_argument("ts", metavar="TS_UUID")
    p.add_argument("--replica-type", choices=["VOTER", "NON_VOTER"], default="VOTER")
    p.set_defaults(fn=ops.add_replica)
    p = cc.add_parser("remove_replica", help="remove a replica")
    _masters_and_tablet(p)
    p.add_argument("ts", metavar="TS_UUID")
    p.set_defaults(fn=ops.remove_replica)
    p = cc.add_parser("move_replica", help="move a replica: add on the target, wait, remove from the source")
    _masters_and_tablet(p)
    p.add_argument("src", metavar="FROM_TS_UUID")
    p.add_argument("dst", metavar="TO_TS_UUID")
    p.add_argument("--timeout", type=positive_float, default=60.0)
    p.set_defaults(fn=ops.move_replica)
    p = tbs.add_parser("leader_step_down", help="make the tablet's leader step down")
    _masters_and_tablet(p)
    p.add_argument("--new-leader", default="", metavar="UUID")
    p.add_argument(
        "--abrupt", action="store_true", help="stop leading at once instead of handing the leadership over"
    )
    p.set_defaults(fn=ops.leader_step_down)


def _add_table_and_cluster(groups: argparse._SubParsersAction) -> None:
    ta = _actions(groups, "table", "tables")
    p = ta.add_parser("create", help="create a table")
    _masters(p)
    p.add_argument("name")
    p.add_argument("--num-tablets", type=positive_int, default=3)
    p.add_argument("--replication", type=positive_int, default=3)
    p.set_defaults(fn=ops.table_create)
    p = ta.add_parser("delete", help="delete a table")
    _masters(p)
    p.add_argument("name")
    p.set_defaults(fn=ops.table_delete)
    p = ta.add_parser("list", help="list tables (with --tablets: their tablets and replicas)")
    _masters(p)
    p.add_argument("--tablets", action="store_true")
    _json(p, "the tables")
    p.set_defaults(fn=ops.table_list)

    cl = _actions(groups, "cluster", "the whole cluster")
    p = cl.add_parser("ksck", help="check every tablet: a leader, agreeing replicas, full replication")
    _masters(p)
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(fn=ops.ksck)


def build_parser() -> argparse.ArgumentParser:
    top = NodeParser(prog="python -m faultline.node tool", description=__doc__.splitlines()[0])
    groups = top.add_subparsers(dest="group", required=True, metavar="GROUP")
    _add_fs(groups)
    _add_local_replica(groups)
    _add_remote_replica(groups)
    _add_set_flag(_actions(groups, "tserver", "a running tablet server"), "tablet server")
    _add_master(groups)
    _add_tablet(groups)
    _add_table_and_cluster(groups)
    return top


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except ops.UsageProblem as exc:
        parser.print_usage(sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ops.ToolFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except grpc.RpcError as exc:
        print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1


__all__ = ["build_parser", "main"]
