"""`python -m faultline.node master|tserver|tool ...`: the store's processes and admin tools."""

from __future__ import annotations

import argparse
import logging
import sys

from faultline.node import bugs
from faultline.node.args import NodeParser, port_or_off, positive_float, positive_int

SERVER_HELP = {
    "master": "run a master: catalog in a Raft-replicated system tablet, heartbeats, placement",
    "tserver": "run a tablet server: hosts tablet replicas, each a Raft group",
    "tool": "admin tools named after Kudu's (fs, local_replica, remote_replica, tserver, master, tablet, table, cluster)",
}


def _server_args(p: argparse.ArgumentParser, default_port: int) -> None:
    p.add_argument("--fs-dir", required=True, help="data directory, formatted by `tool fs format`")
    p.add_argument("--rpc-bind", default=f"0.0.0.0:{default_port}", help="HOST:PORT to listen on")
    p.add_argument(
        "--rpc-advertise",
        default=None,
        help="HOST:PORT other nodes use to reach this one (default: --rpc-bind, or the "
        "hostname with the bound port when binding 0.0.0.0)",
    )
    p.add_argument(
        "--master-addresses",
        required=True,
        help="comma-separated HOST:PORT of every master (DNS names are re-resolved on failure)",
    )
    p.add_argument(
        "--heartbeat-interval-ms",
        type=positive_int,
        default=500,
        help="Raft heartbeat and tserver->master heartbeat period (default 500)",
    )
    p.add_argument(
        "--election-timeout-ms",
        type=positive_int,
        default=1500,
        help="Raft election timeout; a leader is presumed dead after it (default 1500)",
    )
    p.add_argument(
        "--fsync",
        choices=["always", "never"],
        default="always",
        help="fsync the WAL and consensus metadata before acknowledging (default always)",
    )
    p.add_argument(
        "--consensus-port",
        type=port_or_off,
        default=0,
        metavar="PORT|off",
        help="TCP port on the --rpc-bind host that takes Raft batches from peers as plain frames, "
        "cheaper than a gRPC call each (default 0: any free port, named to peers in their "
        "acks); off: gRPC only, e.g. behind a firewall that opens the RPC port alone",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument(
        "--inject-bug",
        action="append",
        default=[],
        metavar="NAME",
        help=f"turn on an injected bug (repeatable): {', '.join(sorted(bugs.BUGS))}",
    )
    p.add_argument(
        "--follower-unavailable-s",
        type=positive_float,
        default=10.0,
        help="seconds a replica's server must be silent before the master re-replicates it",
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "tool":
        from faultline.node.tool.cli import main as tool_main

        return tool_main(argv[1:])
    parser = NodeParser(prog="python -m faultline.node", description="Faultline's Kudu-like store.")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="{master,tserver,tool}")
    _server_args(
        sub.add_parser("master", help=SERVER_HELP["master"], description=SERVER_HELP["master"]), 7051
    )
    _server_args(
        sub.add_parser("tserver", help=SERVER_HELP["tserver"], description=SERVER_HELP["tserver"]), 7050
    )
    sub.add_parser("tool", help=SERVER_HELP["tool"], add_help=False)
    args = parser.parse_args(argv)
    try:
        bugs.validate(args.inject_bug)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format=f"%(asctime)s {args.cmd} %(levelname)s %(name)s: %(message)s",
    )
    from faultline.node.clock import install_log_time

    install_log_time()  # log times follow the node's clock, as under a real clock fault
    from faultline.node.server.process import StartupError, run_server

    try:
        return run_server(args.cmd, args)
    except StartupError as exc:
        print(f"{args.cmd}: refusing to start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
