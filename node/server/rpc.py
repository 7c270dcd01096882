"""gRPC channels that follow a DNS name when it moves, plus server construction.

gRPC's own resolver re-resolves only after a failure and at most every 30 s by default, so a
name moved to a replacement node could be missed for a long time (KUDU-1620's class). We
resolve names ourselves: a channel is opened to `ip:port`; after a call to it fails with
UNAVAILABLE or DEADLINE_EXCEEDED the name is resolved again (at most every
REREOLVE_INTERVAL_S) and, if the address changed, the channel is replaced. The resolver also
sets gRPC's own `grpc.dns_min_time_between_resolutions_ms` low for any target left as a name.

Resolution goes through `getaddrinfo`, unless a hosts file is named by the environment
variable FAULTLINE_HOSTS_FILE ("IP NAME..." lines, re-read on each resolution), which lets
tests on loopback move a name from one 127.0.0.x address to another.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent import futures

import grpc

log = logging.getLogger("faultline.node.rpc")

REREOLVE_INTERVAL_S = 0.5
CHANNEL_OPTIONS = [
    ("grpc.dns_min_time_between_resolutions_ms", 500),
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 2000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
]
SERVER_OPTIONS = [
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 1000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 256 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]
HOSTS_ENV = "FAULTLINE_HOSTS_FILE"


def split_addr(addr: str, allow_zero: bool = False) -> tuple[str, int]:
    """`host:port` -> (host, port); ValueError with a clear message otherwise (port 0 only for binding)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not (0 if allow_zero else 1) <= int(port) < 65536:
        raise ValueError(f"bad address {addr!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def check_addrs(addrs: list[str]) -> list[str]:
    """`addrs` if each is `host:port` (split_addr's ValueError for the first that is not)."""
    for a in addrs:
        split_addr(a)
    return addrs


def _hosts_lookup(name: str) -> str | None:
    path = os.environ.get(HOSTS_ENV)
    if not path:
        return None
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2 and name in parts[1:]:
            found = parts[0]  # the last line naming it wins, like an edited record
    return found


def resolve_host(host: str) -> str:
    """One IPv4/IPv6 address for a host name (hosts-file override first)."""
    override = _hosts_lookup(host)
    if override:
        return override
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    for fam in (socket.AF_INET, socket.AF_INET6):
        for info in infos:
            if info[0] == fam:
                return str(info[4][0])
    raise OSError(f"cannot resolve {host}")


class ChannelPool:
    """One channel per logical address, re-resolved after failures unless told never to."""

    def __init__(self, reresolve: bool = True, resolve: Callable[[str], str] | None = None):
        self.reresolve = reresolve
        self._resolve = resolve or resolve_host
        self._lock = threading.Lock()
        self._chans: dict[str, tuple[str, grpc.Channel, float]] = {}
        # stubs per (channel, stub class): building one creates a callable per RPC method, which cost
        # more CPU than a small call itself when done per call
        self._stubs: dict[tuple[int, type], tuple[grpc.Channel, object]] = {}

    def _target(self, addr: str) -> str:
        host, port = split_addr(addr)
        try:
            ip = self._resolve(host)
        except OSError:
            return addr  # leave it to gRPC's resolver (options above keep it quick)
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"

    def get(self, addr: str) -> grpc.Channel:
        with self._lock:
            ent = self._chans.get(addr)
            if ent is not None:
                return ent[1]
        target = self._target(addr)
        with self._lock:
            ent = self._chans.get(addr)
            if ent is None:
                opts = (
                    CHANNEL_OPTIONS
                    if self.reresolve
                    else [
                        (k, 3_600_000) if k == "grpc.dns_min_time_between_resolutions_ms" else (k, v)
                        for k, v in CHANNEL_OPTIONS
                    ]
                )
                ch = grpc.insecure_channel(target, options=opts)
                ent = (target, ch, time.monotonic())
                self._chans[addr] = ent
            return ent[1]

    def target_host(self, addr: str) -> str:
        """The host (an IP once resolved) that the channel to `addr` connects to now."""
        self.get(addr)
        with self._lock:
            ent = self._chans.get(addr)
        return split_addr(ent[0] if ent is not None else addr)[0]

    def failed(self, addr: str) -> None:
        """A call to `addr` failed: re-resolve its name (rate-limited) and swap the channel if it moved."""
        if not self.reresolve:
            return
        with self._lock:
            ent = self._chans.get(addr)
        if ent is None or time.monotonic() - ent[2] < REREOLVE_INTERVAL_S:
            return
        target = self._target(addr)
        old = None
        with self._lock:
            cur = self._chans.get(addr)
            if cur is not ent:
                return
            if target != ent[0]:
                log.info("address %s moved: %s -> %s", addr, ent[0], target)
                old = ent[1]
                self._chans[addr] = (
                    target,
                    grpc.insecure_channel(target, options=CHANNEL_OPTIONS),
                    time.monotonic(),
                )
            else:
                self._chans[addr] = (ent[0], ent[1], time.monotonic())
        if old is not None:
            old.close()

    def call(
        self,
        addr: str,
        stub_cls: type,
        method: str,
        request: object,
        timeout: float,
        metadata: tuple | None = None,
    ) -> object:
        """Unary call with a deadline; re-resolves the name after a transport failure."""
        stub = self.stub(addr, stub_cls)
        try:
            return getattr(stub, method)(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self.failed(addr)
            raise

    def stub(self, addr: str, stub_cls: type) -> object:
        """A stub of `stub_cls` on the current channel to `addr` (cached while that channel lives)."""
        ch = self.get(addr)
        key = (id(ch), stub_cls)
        ent = self._stubs.get(key)
        if ent is None or ent[0] is not ch:
            with self._lock:
                if len(self._stubs) > 4 * len(self._chans) + 64:  # drop stubs of replaced channels
                    live = {id(c) for _, c, _ in self._chans.values()}
                    self._stubs = {k: v for k, v in self._stubs.items() if k[0] in live}
                ent = (ch, stub_cls(ch))
                self._stubs[key] = ent
        return ent[1]

    def close(self) -> None:
        with self._lock:
            chans, self._chans = self._chans, {}
            self._stubs = {}
        for _, ch, _ in chans.values():
            ch.close()


def make_server(bind: str, workers: int = 128) -> tuple[grpc.Server, int]:
    """A gRPC server bound to `bind`; raises OSError with one clear line if the port is taken.

    Writes block a worker until they commit (or their deadline), so the pool is large: Raft traffic
    must still find a free worker when many clients wait on an isolated leader."""
    host, port = split_addr(bind, allow_zero=True)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"), options=SERVER_OPTIONS
    )
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot bind {bind}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot bind {bind}: address in use or not available")
    return server, bound
