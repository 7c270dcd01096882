"""A cluster of real node processes on loopback, for tests and benchmarks (no Docker needed).

Every process runs in its own session so that `kill` can signal its whole process group;
`MiniCluster` is a context manager whose exit kills everything it started, also on failure.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from faultline.node.server.fs import format_fs

if TYPE_CHECKING:
    from faultline.node.client import KuduClient

T = TypeVar("T")

BIND_FAILED = "cannot bind"  # what a node logs when its port was taken (node/server/rpc.py make_server)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, chosen below the kernel's ephemeral range.

    The node binds it later, in its own process. A port from the ephemeral range (what `bind(0)` and
    every outgoing connection get) can be handed to any socket in between; one below it only to another
    process that picks ports itself, and `start_all` retries with fresh ports if that ever happens."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(max(1024, low - 12000), max(1025, low))
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class NodeProc:
    name: str
    kind: str  # master | tserver
    fs_dir: Path
    bind: str  # host:port it listens on
    advertise: str  # host:port others use (may be a DNS name)
    uuid: str
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # on top of the cluster's (e.g. a clock offset file)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class MiniCluster:
    def __init__(
        self,
        base: Path,
        num_masters: int = 3,
        num_tservers: int = 3,
        heartbeat_ms: int = 200,
        election_ms: int = 1000,
        follower_unavailable_s: float = 10.0,
        fsync: str = "never",
        bugs: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        master_names: list[str] | None = None,
    ) -> None:
        self.base = Path(base)
        self.heartbeat_ms, self.election_ms = heartbeat_ms, election_ms
        self.follower_unavailable_s = follower_unavailable_s
        self.fsync = fsync
        self.bugs = bugs
        self.env = dict(os.environ, **(env or {}))
        self.nodes: dict[str, NodeProc] = {}
        self.master_addrs: list[str] = []
        self.master_names = master_names
        self._ever_started = False
        for i in range(num_masters):
            port = free_port()
            adv = f"{master_names[i]}:{port}" if master_names else f"127.0.0.1:{port}"
            self.master_addrs.append(adv)
            self._add(f"m{i + 1}", "master", f"127.0.0.1:{port}", adv)
        for i in range(num_tservers):
            self.add_tserver(f"t{i + 1}")

    def _fresh_ports(self) -> None:
        """Every node on a new port with its data directory formatted afresh (same uuid): only before
        the cluster first formed, when no node has written anything that names the old addresses."""
        masters = [n for n in self.nodes.values() if n.kind == "master"]
        self.master_addrs = []
        for i, n in enumerate(masters):
            port = free_port()
            n.bind = f"127.0.0.1:{port}"
            n.advertise = f"{self.master_names[i]}:{port}" if self.master_names else n.bind
            self.master_addrs.append(n.advertise)
        for n in self.nodes.values():
            if n.kind != "master":
                n.bind = n.advertise = f"127.0.0.1:{free_port()}"
            shutil.rmtree(n.fs_dir)
            format_fs(n.fs_dir, n.uuid)

    def _add(self, name: str, kind: str, bind: str, advertise: str, uuid: str | None = None) -> NodeProc:
        fs = self.base / name
        u = format_fs(fs, uuid)
        n = NodeProc(name, kind, fs, bind, advertise, u, self.base / f"{name}.log")
        self.nodes[name] = n
        return n

    def add_tserver(self, name: str) -> NodeProc:
        port = free_port()
        return self._add(name, "tserver", f"127.0.0.1:{port}", f"127.0.0.1:{port}")

    def add_master(self, name: str, bind: str, advertise: str, uuid: str | None = None) -> NodeProc:
        return self._add(name, "master", bind, advertise, uuid)

    def argv(self, n: NodeProc, masters: list[str] | None = None) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "faultline.node",
            n.kind,
            "--fs-dir",
            str(n.fs_dir),
            "--rpc-bind",
            n.bind,
            "--rpc-advertise",
            n.advertise,
            "--master-addresses",
            ",".join(masters or self.master_addrs),
            "--heartbeat-interval-ms",
            str(self.heartbeat_ms),
            "--election-timeout-ms",
            str(self.election_ms),
            "--follower-unavailable-s",
            str(self.follower_unavailable_s),
            "--fsync",
            self.fsync,
        ]
        for b in self.bugs:
            argv += ["--inject-bug", b]
        return argv + n.extra

    def start(self, name: str, masters: list[str] | None = None, wait: bool = True) -> NodeProc:
        """Start a node; with `wait`, return once it answers Ping (raises if it exits or never answers)."""
        n = self.nodes[name]
        if n.alive():
            return n
        self._ever_started = True
        logf = open(n.log_path, "ab")  # noqa: SIM115 - handed to the child
        n.proc = subprocess.Popen(
            self.argv(n, masters),
            stdout=logf,
            stderr=subprocess.STDOUT,
            env={**self.env, **n.env},
            start_new_session=True,
            cwd=str(self.base),
        )
        logf.close()
        if wait:
            self.wait_ready(name)
        return n

    def wait_ready(self, name: str, timeout: float = 60.0) -> None:
        import grpc

        from faultline.node.protos import common_pb2, common_pb2_grpc

        n = self.nodes[name]
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(n.bind) as ch:
            # protoc's gRPC stubs (common_pb2_grpc.py) come without annotations
            stub = common_pb2_grpc.GenericStub(ch)  # type: ignore[no-untyped-call]
            while time.monotonic() < deadline:
                if not n.alive():
                    raise RuntimeError(f"{name} exited during start:\n{self.logs(name, 20)}")
                try:
                    stub.Ping(common_pb2.PingRequest(), timeout=1.0)
                    return
                except grpc.RpcError:
                    time.sleep(0.1)
        raise TimeoutError(f"{name} did not answer within {timeout:.0f}s:\n{self.logs(name, 20)}")

    def start_all(self, attempts: int = 3) -> None:
        """Starts every node and waits for each to answer. On the first start, a node whose port was
        taken meanwhile (another process picked the same one) makes the whole cluster start again on
        fresh ports."""
        first = not self._ever_started
        for attempt in range(attempts):
            for name in self.nodes:
                self.start(name, wait=False)
            try:
                for name in self.nodes:
                    self.wait_ready(name)
                return
            except RuntimeError:
                if not (first and attempt + 1 < attempts and self._bind_failed()):
                    raise
            self.stop_all()
            self._fresh_ports()

    def _bind_failed(self) -> bool:
        return any(not n.alive() and BIND_FAILED in self.logs(n.name, 20) for n in self.nodes.values())

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        n = self.nodes[name]
        if n.proc is None:
            return
        try:
            os.killpg(n.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            n.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(n.proc.pid, signal.SIGKILL)
            n.proc.wait(timeout=10)
        n.proc = None

    def stop_all(self) -> None:
        for name in list(self.nodes):
            self.kill(name)

    def tool(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "faultline.node", "tool", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=str(self.base),
        )

    def masters_arg(self) -> str:
        return ",".join(self.master_addrs)

    def client(self, timeout: float = 10.0) -> KuduClient:
        from faultline.node.client import KuduClient

        return KuduClient(self.master_addrs, default_timeout_s=timeout)

    def wait_for(self, pred: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        while time.monotonic() < deadline:
            try:
                v = pred()
                if v:
                    return v
            except Exception as exc:  # the condition may raise while the cluster settles
                last_exc = exc
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_exc})")

    def logs(self, name: str, tail: int = 60) -> str:
        p = self.nodes[name].log_path
        return "\n".join(p.read_text(errors="replace").splitlines()[-tail:]) if p.exists() else ""

    def __enter__(self) -> MiniCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()
