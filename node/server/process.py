"""Start a master or a tablet server: checks that refuse a bad start, then serve until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable

from faultline.node.bugs import Bug, BugSet, UnknownBug
from faultline.node.log import CmetaCorruption, WalCorruption
from faultline.node.protos import common_pb2 as cpb
from faultline.node.protos import common_pb2_grpc as cpbg
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server import profiling
from faultline.node.server.fs import FsError, FsLayout, lock_dir, read_uuid
from faultline.node.server.host import ConsensusService, ReplicaHost
from faultline.node.server.replica import DriverOptions
from faultline.node.server.rpc import ChannelPool, check_addrs, make_server, split_addr

log = logging.getLogger("faultline.node.process")


class StartupError(Exception):
    """The process refuses to start; the message is one line for the operator."""


class GenericService(cpbg.GenericServicer):
    def __init__(self, uuid: str, advertise: str, role: str) -> None:
        self.uuid, self.advertise, self.role = uuid, advertise, role
        self.started = time.monotonic()

    def Ping(self, request, context):
        host, port = split_addr(self.advertise)
        return cpb.PingResponse(
            server=cpb.ServerIdentity(uuid=self.uuid, host=host, port=port),
            role=self.role,
            uptime_ms=int((time.monotonic() - self.started) * 1000),
        )


def parse_masters(value: str) -> list[str]:
    addrs = [a.strip() for a in value.split(",") if a.strip()]
    if not addrs:
        raise StartupError("--master-addresses is empty")
    try:
        check_addrs(addrs)
    except ValueError as exc:
        raise StartupError(f"--master-addresses: {exc}") from None
    if len(set(addrs)) != len(addrs):
        raise StartupError("--master-addresses lists an address twice")
    return addrs


def driver_options(args: argparse.Namespace) -> DriverOptions:
    """Map wall-clock flags to the core's ticks (1 tick = 100 ms, or less for fast heartbeats)."""
    hb_ms = max(20, args.heartbeat_interval_ms)
    tick_ms = min(100, max(10, hb_ms // 2))
    hb_ticks = max(1, round(hb_ms / tick_ms))
    el_ticks = max(2 * hb_ticks + 1, round(max(args.election_timeout_ms, 2 * hb_ms) / tick_ms))
    failed = max(el_ticks, round(args.follower_unavailable_s * 1000 / tick_ms))
    return DriverOptions(
        tick_s=tick_ms / 1000,
        heartbeat_ticks=hb_ticks,
        election_ticks=el_ticks,
        failed_after_ticks=failed,
        bugs=BugSet(args.inject_bug),
    )


def advertise_addr(args: argparse.Namespace, port: int) -> str:
    if args.rpc_advertise:
        try:
            split_addr(args.rpc_advertise)
        except ValueError as exc:
            raise StartupError(f"--rpc-advertise: {exc}") from None
        return args.rpc_advertise
    host, _ = split_addr(args.rpc_bind, allow_zero=True)
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"{host}:{port}"


def _checked_flags(args: argparse.Namespace) -> tuple[str, list[str], BugSet]:
    """(uuid, masters, bugs) after the checks that refuse a bad start; the data directory stays locked."""
    try:
        uuid = read_uuid(args.fs_dir)
        lock_dir(args.fs_dir)  # held until exit
    except FsError as exc:
        raise StartupError(str(exc)) from None
    masters = parse_masters(args.master_addresses)
    try:
        split_addr(args.rpc_bind, allow_zero=True)
    except ValueError as exc:
        raise StartupError(f"--rpc-bind: {exc}") from None
    try:
        bugs = BugSet(args.inject_bug)
    except UnknownBug as exc:
        raise StartupError(str(exc)) from None
    return uuid, masters, bugs


def _load_host(
    kind: str, args: argparse.Namespace, uuid: str, server, advertise: str, bugs: BugSet
) -> tuple[ReplicaHost, bool]:
    """The replica host with every replica loaded (and its framed consensus port open), and its fsync."""
    layout = FsLayout(__import__("pathlib").Path(args.fs_dir))
    pool = ChannelPool(reresolve=not bugs.enabled(Bug.NO_DNS_RERESOLVE))
    fsync = args.fsync == "always" and not bugs.enabled(Bug.NO_FSYNC)
    opts = driver_options(args)
    # the masters' catalog catches up a master behind the leader's log by snapshot (unlike Kudu 1.x's masters);
    # a tablet server's replica that far behind is replaced by tablet copy instead (docs/node.md)
    opts.install_snapshots = kind == "master"
    host = ReplicaHost(uuid, layout, advertise, pool, opts, fsync)
    try:
        host.load_all()
    except (CmetaCorruption, WalCorruption, ValueError) as exc:
        server.stop(0)
        raise StartupError(f"corrupt or foreign metadata: {exc}") from None
    if args.consensus_port is not None:
        try:
            host.listen_framed(split_addr(args.rpc_bind, allow_zero=True)[0], args.consensus_port)
        except OSError as exc:
            server.stop(0)
            raise StartupError(f"--consensus-port {args.consensus_port}: cannot listen: {exc}") from None
    return host, fsync


def _add_role_service(
    kind: str, args: argparse.Namespace, host: ReplicaHost, masters: list[str], bugs: BugSet, server
) -> tuple[Callable[[], None], Callable[[], None]]:
    """Register the tablet server's or the master's own service; returns its (start, stop)."""
    if kind == "tserver":
        from faultline.node.tserver.heartbeat import Heartbeater
        from faultline.node.tserver.service import TabletServerService

        pbg.add_TabletServerServicer_to_server(TabletServerService(host, bugs), server)
        hb = Heartbeater(host, masters, args.heartbeat_interval_ms / 1000, bugs)
        return hb.start, hb.stop
    from faultline.node.master.service import MasterServer

    try:
        ms = MasterServer(host, masters, args, bugs)
    except ValueError as exc:
        server.stop(0)
        raise StartupError(str(exc)) from None
    pbg.add_MasterServicer_to_server(ms.service, server)
    return ms.start, ms.stop


def _wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT."""
    stop_ev = threading.Event()

    def on_signal(signum, frame):
        stop_ev.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop_ev.wait(1.0):
        pass


def run_server(kind: str, args: argparse.Namespace) -> int:
    profiling.install()  # FAULTLINE_PROFILE=PATH only
    uuid, masters, bugs = _checked_flags(args)
    try:
        server, port = make_server(args.rpc_bind)
    except OSError as exc:
        raise StartupError(f"{exc} (is another process using the port?)") from None
    advertise = advertise_addr(args, port)
    host, fsync = _load_host(kind, args, uuid, server, advertise, bugs)
    cpbg.add_GenericServicer_to_server(GenericService(uuid, advertise, kind), server)
    pbg.add_ConsensusServicer_to_server(ConsensusService(host), server)
    start_role, stop_role = _add_role_service(kind, args, host, masters, bugs, server)
    server.start()
    start_role()
    log.info(
        "%s %s listening on %s (advertised %s), masters %s, fsync=%s, bugs=%s",
        kind,
        uuid,
        args.rpc_bind,
        advertise,
        ",".join(masters),
        fsync,
        ",".join(sorted(bugs)) or "none",
    )
    _wait_for_signal()
    log.info("%s %s shutting down", kind, uuid)
    stop_role()
    server.stop(1.0).wait(2.0)
    host.stop()
    profiling.dump()
    return 0
