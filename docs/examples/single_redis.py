"""A DB written by a user: one Redis server, tested with Faultline's register workload.

Run it (from the repository root, with Docker):

    PYTHONPATH=docs/examples faultline run --db single_redis:SingleRedis --workload register \
        --nemesis pause --time-limit 20

It also ships a fault of its own, `client-pause` (Redis's CLIENT PAUSE: the server holds every client's
commands for a while), offered beside the generic faults:

    PYTHONPATH=docs/examples faultline run --db single_redis:SingleRedis --workload register \
        --nemesis client-pause --time-limit 20

docs/your-own-db.md explains each part. Everything here uses Faultline's public seams only: the cluster
spec (what runs where), ProcessDB (start, stop, kill, pause and logs through the cluster), the completion
rule for errors, and the nemesis API (a fault, its schedule, its registry entry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Run, ops
from faultline.db.process import ProcessDB
from faultline.nemesis.api import Build, Entry, NemesisPackage
from faultline.nemesis.registry import start_stop

PORT = 6379


class SingleRedis(ProcessDB):
    """One redis-server on one node, `k1`; its data lives in the node's directory."""

    name = "single-redis"
    workloads = frozenset({"register"})
    nemeses = frozenset({"none", "pause", "kill"})
    nemesis_notes = {"partition": "one node has no peers to be cut off from"}
    packages = ("redis-server",)  # Debian packages: they go into the node image (and its hash)

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        # {dir} is the node's own directory; the daemon's log goes to {dir}/logs/<role>.log
        server = RoleSpec(
            "kv",
            1,
            "k",
            PORT,
            argv=[
                "/usr/bin/redis-server",
                "--port",
                str(PORT),
                "--bind",
                "0.0.0.0",
                "--protected-mode",
                "no",
                "--dir",
                "{dir}",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
        )
        return ClusterSpec(name=name, roles=[server], packages=list(self.packages), db=self.name)

    def ready(self, test: Run, node: str) -> bool:
        """One probe; ProcessDB.setup repeats it until the node serves (or fails with its log's tail)."""
        return bool(_connect(test).ping())

    def client(self, workload: str) -> Any:
        return RegisterClient()

    def nemesis_entries(self) -> Sequence[Entry]:
        """Faults of this DB's own (nemesis.api.OffersNemeses), listed beside the generic ones."""
        return [
            Entry(
                "client-pause",
                "Redis holds every client's commands for 5 s (CLIENT PAUSE)",
                client_pause_package,
            )
        ]


class ClientPauseNemesis:
    """start-client-pause: CLIENT PAUSE on the node, which ends by itself after `pause_ms`;
    stop-client-pause and heal: CLIENT UNPAUSE. The completion names the node and the length; a server
    that does not answer (another fault paused or killed it) makes the start `fail`: nothing was done."""

    fs = frozenset({"start-client-pause", "stop-client-pause"})

    def __init__(self, pause_ms: int = 5000) -> None:
        self.pause_ms = pause_ms

    def setup(self, test: Run) -> ClientPauseNemesis:
        return self

    def invoke(self, test: Run, op: dict[str, Any]) -> dict[str, Any]:
        node = test.backend.nodes()[0]
        if op["f"] == "start-client-pause":
            error = self._redis_cli(test, node, "CLIENT", "PAUSE", str(self.pause_ms), "ALL")
            if error:
                return {**op, "type": "fail", "value": {"node": node}, "error": error}
            return {**op, "type": "ok", "value": {"node": node, "pause_ms": self.pause_ms}}
        error = self._redis_cli(test, node, "CLIENT", "UNPAUSE")
        return {**op, "type": "ok", "value": {"node": node, **({"error": error} if error else {})}}

    def heal(self, test: Run) -> None:
        """Best effort: a pause the server cannot be told to end ends by itself after `pause_ms`."""
        for node in test.backend.nodes():
            self._redis_cli(test, node, "CLIENT", "UNPAUSE")

    @staticmethod
    def _redis_cli(test: Run, node: str, *args: str) -> str | None:
        """Runs redis-cli on the node; the error, or None when the server said OK."""
        try:
            rc, out, err = test.backend.remote.exec(node, ["redis-cli", "-p", str(PORT), *args], 3)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return (
            None if rc == 0 and "OK" in out else f"redis-cli {' '.join(args)}: {(err or out).strip()[:200]}"
        )


def client_pause_package(build: Build) -> NemesisPackage:
    """A pause every other interval, with the generic start/stop schedule (`build` says what the package is
    built for: the interval, and the DB's roles for a fault that aims at one)."""
    schedule, final = start_stop("client-pause", {}, build.interval_s)
    return NemesisPackage(nemesis=ClientPauseNemesis(), generator=schedule, final_generator=final)


def _connect(test: Run) -> Any:
    """A connection with one attempt per command (redis-py retries timed-out commands by default, which
    would let an operation outlast the run's op timeout)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    node = test.backend.nodes()[0]
    timeout = float(test.spec.op_timeout_s)
    return redis.Redis(
        host=test.backend.address(node),
        port=PORT,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


class RegisterClient:
    """read, write and cas on one key per register; errors become fail (reads) or info (writes)."""

    def __init__(self, conn: Any = None) -> None:
        self.conn = conn

    def setup(self, test: Run) -> None:
        """Nothing to create before the workers open their clients."""

    def open(self, test: Run, node: str) -> RegisterClient:
        return RegisterClient(_connect(test))

    def close(self) -> None:
        self.conn.close()

    def invoke(self, test: Run, op: dict[str, Any]) -> dict[str, Any]:
        key = f"register-{test.spec.run_tag}-{op['key']}"
        try:
            if op["f"] == "read":
                raw = self.conn.get(key)
                return {**op, "type": "ok", "value": None if raw is None else int(raw)}
            if op["f"] == "write":
                self.conn.set(key, op["value"])
                return {**op, "type": "ok"}
            old, new = op["value"]
            swapped = self.conn.eval(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                "redis.call('SET', KEYS[1], ARGV[2]); return 1 end; return 0",
                1,
                key,
                old,
                new,
            )
            return {**op, "type": "ok" if swapped == 1 else "fail"}
        except Exception as exc:
            return ops.completion(op, exc, read_only=op["f"] == "read")
