"""NATS JetStream (Debian's nats-server 2.9) as a DB: three servers `n1..n3` joined by cluster routes into
one JetStream cluster, and per workload one file-backed stream with three replicas, created at setup.

Clients speak nats-py (asyncio): each client owns an event loop in a thread of its own, and every call
is bounded by the run's op timeout. A publish JetStream acknowledged is an enqueue or an add; one the
server refused (no responders, an API error) did not happen (`fail`); one whose acknowledgement never
came may have (`info`).

Durability: nats-server 2.9.10 fsyncs a stream's message blocks every two minutes (stream.go sets the
file store's SyncInterval to 2 min; its Raft logs every 5 min) and has no setting to change that: its
config parser refuses `sync_interval` ("unknown field", measured), which came in 2.10. Jepsen's NATS
2.12.1 analysis (2025) found that this default loses acknowledged messages when every node loses power
at once, so `set` under `lose-unfsynced-all` is expected invalid.

Clock faults are refused: nats-server is a Go program, which reads the clock through the vDSO.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Op, Run
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import Definite, Indeterminate, ProcessDB, common_notes, supported_nemeses

ROLE = "nats"
NODES = 3
CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT = 4222, 6222, 8222
BINARY = "/usr/sbin/nats-server"
CLUSTER_NAME = "faultline"
# A queue's consumer redelivers a message it handed out and never saw acknowledged after this long: well
# past the op timeout, so a slow ack is not raced by a redelivery to another worker (a duplicate).
ACK_WAIT_S = 20.0
CLOCK_REASON = (
    "nats-server is a Go program: it reads the clock through the vDSO, which libfaketime cannot "
    "reach, and it reads no offset file of ours"
)
FILE_FAULT_REASON = "not tried on nats-server yet: what it logs on a damaged message block is not known here"

# nats-server's config format; `{name}` and `{dir}` are filled per node by the cluster (RoleSpec).
_CONF = """\
server_name: {name}
listen: 0.0.0.0:%(client)d
http: 0.0.0.0:%(monitor)d
jetstream {
  store_dir: "{dir}/data"
}
cluster {
  name: %(cluster)s
  listen: 0.0.0.0:%(cluster_port)d
  routes: [
%(routes)s
  ]
}
"""

T = TypeVar("T")


def config_text(nodes: int = NODES) -> str:
    """The config file of every node, as a role template: routes to every node (a server ignores its
    route to itself), JetStream's store below the node's data directory."""
    routes = "\n".join(f"    nats-route://n{i}:{CLUSTER_PORT}" for i in range(1, nodes + 1))
    return _CONF % {
        "client": CLIENT_PORT,
        "monitor": MONITOR_PORT,
        "cluster": CLUSTER_NAME,
        "cluster_port": CLUSTER_PORT,
        "routes": routes,
    }


# nats-server logs "[pid] date time [LVL] message"; s.Fatalf writes [FTL] and exits. Go's runtime writes
# "panic: " and "fatal error: " at the start of a line on stderr. Damage it finds in its files (2.9.10's
# source): a message block record that fails its hash ("malformed or corrupt message"), an index file
# ("corrupt state file"), Raft's "raft: snapshot corrupt", "raft: append entry corrupt" and "raft: corrupt
# peer state", "corrupt stream snapshot detected" in a catch-up, a stream's metafile whose checksum file
# disagrees ("checksums do not match"), "Stream assigment corrupt" [sic] in the meta layer.
LOG_PATTERNS = [
    LogPattern("go-panic", r"^panic: ", "the Go runtime: an unrecovered panic"),
    LogPattern(
        "go-fatal-error", r"^fatal error: ", "the Go runtime: a fatal error (e.g. concurrent map writes)"
    ),
    LogPattern("nats-fatal", r"\[FTL\] ", "nats-server logged a fatal error and exited"),
    LogPattern(
        "corrupt-data",
        r"malformed or corrupt message|corrupt state file|raft: (?:snapshot corrupt|append "
        r"entry corrupt|corrupt peer state)|corrupt stream snapshot detected|checksums do not match|"
        r"Stream assigment corrupt",
        "nats-server found a damaged message block, index, Raft log or metafile",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
]


class NatsDB(ProcessDB):
    """Three nats-server 2.9 nodes, one JetStream cluster; each workload's stream has three replicas."""

    name = "nats"
    workloads = frozenset({"set", "queue"})
    nemeses = supported_nemeses(clock=False)
    nemesis_notes = {**common_notes(CLOCK_REASON), **dict.fromkeys(FILE_CORRUPTION_FAULTS, FILE_FAULT_REASON)}
    packages = ("nats-server",)
    # JetStream's consumers deliver at least once: a message whose ack the server confirmed (AckSync) may
    # still come again, because 2.9.10 answers the ack once it is proposed to the consumer's Raft group, not
    # once it is committed (consumer.go, processAck), and a new consumer leader that never saw it redelivers
    # ... and a set read costs a request per message (NatsSetClient), so the set workload reads every 5 s
    workload_opts = {"queue": {"allow_duplicates": True}, "set": {"read_interval": 5.0}}
    data_dirs = {ROLE: ("{dir}/data",)}
    data_files = {
        ROLE: ("{dir}/data/jetstream/*/streams/*/msgs/*.blk", "{dir}/data/jetstream/*/streams/*/msgs/*.idx")
    }

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    def validate(self, opts: Mapping[str, Any]) -> None:
        if "sync_interval" in opts:
            raise ValueError(
                "nats-server 2.9 has no sync_interval (it came in 2.10): its streams fsync every "
                "two minutes, and its config parser refuses the field"
            )

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        conf = "{dir}/nats.conf"
        prepare = [
            "sh",
            "-c",
            'mkdir -p "$1/data" && printf "%s" "$2" > "$3"',
            "sh",
            "{dir}",
            config_text(),
            conf,
        ]
        role = RoleSpec(
            ROLE, NODES, "n", CLIENT_PORT, argv=[BINARY, "-c", conf], prepare=prepare, prepare_unless=conf
        )
        return ClusterSpec.from_mapping(
            {"name": name, "roles": [role], "packages": list(self.packages), "db": self.name}
        )

    def ready(self, test: Run, node: str) -> bool:
        """The node's health endpoint answers ok: it serves clients, and JetStream knows its meta leader."""
        import json
        import urllib.request

        url = f"http://{test.backend.address(node)}:{MONITOR_PORT}/healthz"
        with urllib.request.urlopen(url, timeout=2.0) as resp:
            return bool(json.loads(resp.read()).get("status") == "ok")

    def setup(self, test: Run, node: str) -> None:
        """Waits until the node serves; the first node then makes the run's stream. Made here, before the
        faults are set up, the stream is part of the durable state the disk layer's checkpoint starts the
        run from: nats-server 2.9.10 writes a stream's meta.inf without fsync (filestore.go,
        writeStreamMeta), so a stream created moments before a power loss on every node is forgotten
        whole ("checksums do not match" on restart), as one that has lived a while would not be."""
        super().setup(test, node)
        client = self.client(test.spec.workload)
        if client is not None and node == test.backend.nodes()[0]:
            client.setup(test)

    def primaries(self, test: Run) -> list[str]:
        """The leader of the run's stream (the first stream found), as JetStream reports it."""

        async def leader(js: Any) -> str | None:
            async for name in _stream_names(js):
                info = await js.stream_info(name)
                return info.cluster.leader if info.cluster else None
            return None

        try:
            found = _once(test, lambda nc: leader(nc.jetstream(timeout=2.0)), 4.0)
        except Exception:
            return []
        return [found] if found in test.backend.nodes() else []

    def client(self, workload: str) -> Any:
        clients: dict[str, type[NatsClient]] = {"set": NatsSetClient, "queue": NatsQueueClient}
        return clients[workload]() if workload in clients else None


async def _stream_names(js: Any) -> Any:
    """Every stream's name (nats-py's streams_info lists them with their state)."""
    for info in await js.streams_info():
        yield info.config.name


def servers(test: Run, first: str | None = None) -> list[str]:
    """Every node's client URL, `first` leading: a client connects there and fails over to the others."""
    nodes = test.backend.nodes()
    order = ([first] if first in nodes else []) + [n for n in nodes if n != first]
    return [f"nats://{test.backend.address(n)}:{CLIENT_PORT}" for n in order]


async def connect(urls: list[str], timeout: float) -> Any:
    """A nats-py connection that tries `urls` in order and reconnects to any of them after a loss."""
    import nats

    return await nats.connect(
        servers=urls,
        connect_timeout=timeout,
        dont_randomize=True,
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        ping_interval=5,
        max_outstanding_pings=2,
        error_cb=_ignore,
    )


async def _ignore(exc: Exception) -> None:
    """nats-py's error callback: its default logs each lost connection with a traceback on the run's
    console; what a lost connection did to an op is in that op's completion already."""


def _once(test: Run, body: Any, timeout: float) -> Any:
    """Runs `body(nc)` on a fresh connection in a loop of its own (setup, probes), bounded by `timeout`."""

    async def main() -> Any:
        nc = await connect(servers(test), timeout)
        try:
            return await body(nc)
        finally:
            await nc.close()

    return asyncio.run(asyncio.wait_for(main(), timeout))


def classify(exc: BaseException) -> BaseException:
    """A nats-py error as the workloads' completion rule reads it: refused before anything was stored
    (no server answered the subject, JetStream's API said no) is Definite; a timeout, a lost connection
    or anything unknown stays as it is (indeterminate on a write)."""
    import nats.errors
    import nats.js.errors

    if isinstance(exc, nats.errors.NoRespondersError | nats.js.errors.NoStreamResponseError):
        return Definite(f"no responders: {exc}")
    if isinstance(exc, nats.js.errors.APIError):
        return Definite(f"JetStream refused it: {exc}")
    if isinstance(exc, TimeoutError):
        return Indeterminate(f"timed out: {type(exc).__name__} {exc}".strip())
    return exc


class EventLoop:
    """An asyncio event loop in a daemon thread: nats-py reads its socket and answers the server's pings
    there between calls; `run` waits for one call from a worker's thread, bounded by `timeout`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Awaitable[T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        try:
            return future.result(timeout + 1.0)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=2.0)
        if not self.thread.is_alive():
            self.loop.close()


def stream_name(test: Run, workload: str) -> str:
    """The run's stream for `workload`, also its one subject (a run tag keeps reused clusters apart)."""
    from faultline.workloads.common import run_name

    return run_name(test, f"faultline-{workload}")


class NatsClient:
    """One connection per worker, to its own node first; the workload's stream, made once at setup."""

    workload = ""
    read_fs: frozenset[str] = frozenset({"read"})

    def __init__(self, urls: list[str] | None = None, stream: str = "", timeout: float = 5.0) -> None:
        self.urls, self.stream, self.timeout = urls or [], stream, timeout
        self.loop: EventLoop | None = None
        self.nc: Any = None
        self.js: Any = None

    def setup(self, test: Run) -> None:
        """Creates the stream (three replicas, on file), and what the workload needs beside it, trying
        again until the setup timeout: JetStream refuses until its cluster has elected a meta leader.
        Idempotent (JetStream accepts a create whose config matches): the DB's setup made it already."""
        deadline = time.monotonic() + float(test.spec.setup_timeout_s)
        while True:
            try:
                _once(
                    test,
                    lambda nc: self.create(nc.jetstream(timeout=5.0), stream_name(test, self.workload)),
                    10.0,
                )
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"could not create stream {stream_name(test, self.workload)}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
                time.sleep(1.0)

    async def create(self, js: Any, name: str) -> None:
        from nats.js.api import StorageType, StreamConfig

        await js.add_stream(
            StreamConfig(name=name, subjects=[name], num_replicas=NODES, storage=StorageType.FILE)
        )

    def open(self, test: Run, node: str) -> NatsClient:
        return type(self)(
            servers(test, node), stream_name(test, self.workload), float(test.spec.op_timeout_s)
        )

    def close(self) -> None:
        if self.loop is not None:
            if self.nc is not None:
                try:
                    self.loop.run(self.nc.close(), 2.0)
                except Exception:
                    pass  # closing a connection that is gone already
            self.loop.close()
        self.loop, self.nc, self.js = None, None, None

    def invoke(self, test: Run, op: Op) -> Op:
        from faultline.workloads.common import completion

        try:
            if self.loop is None:
                self.loop = EventLoop()
            if self.nc is not None and self.nc.is_closed:  # gave up reconnecting: start afresh
                self.nc, self.js = None, None
            if self.nc is None:
                self.nc = self.loop.run(connect(self.urls, self.timeout), self.timeout)
                self.js = self.nc.jetstream(timeout=self.timeout)
            return self.loop.run(self.apply(op), self._limit(op))
        except Exception as exc:
            return completion(op, classify(exc), read_only=op["f"] in self.read_fs)

    def _limit(self, op: Op) -> float:
        """How long one op may take: the op timeout, longer for the reads of a whole stream."""
        return self.timeout

    async def apply(self, op: Op) -> Op:
        raise NotImplementedError

    async def publish(self, value: int) -> None:
        """A publish of `value` that returns once JetStream acknowledged it (stored on a quorum)."""
        await self.js.publish(self.stream, str(value).encode(), timeout=self.timeout, stream=self.stream)


STREAM_NOT_FOUND, NO_MESSAGE_FOUND = 10059, 10037  # JetStream's API error codes
GETS_IN_FLIGHT = 512


class NatsSetClient(NatsClient):
    """add: a publish of the element; read: every message of the stream, each fetched by its sequence
    from the stream's leader (STREAM.MSG.GET, many in flight), from the first to the last sequence the
    leader reported at the start. No consumer is made: a consumer per read would churn JetStream's meta
    layer, whose Raft log and snapshots the faults reach as well. A stream the cluster says does not
    exist (the DB made it at setup, and nothing deletes it) holds nothing: the read is `ok` and empty."""

    workload = "set"

    def _limit(self, op: Op) -> float:
        """A read makes a request per message (about 4,000 a second here: 30,000 messages take 8 s), each
        bounded by the op timeout; the whole read gets twelve op timeouts."""
        return self.timeout * (12 if op["f"] == "read" else 1)

    async def apply(self, op: Op) -> Op:
        if op["f"] == "add":
            await self.publish(int(op["value"]))
            return {**op, "type": "ok"}
        if op["f"] == "read":
            return {**op, "type": "ok", "value": sorted(await self.read_all())}
        raise ValueError(f"set: unknown op {op['f']!r}")

    async def read_all(self) -> list[int]:
        import nats.js.errors

        try:
            state = (await self.js.stream_info(self.stream)).state
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code == STREAM_NOT_FOUND:
                return []
            raise
        if not state.messages:
            return []
        got: list[int] = []
        seqs = list(range(state.first_seq, state.last_seq + 1))
        for start in range(0, len(seqs), GETS_IN_FLIGHT):
            found = await asyncio.gather(*(self._get(seq) for seq in seqs[start : start + GETS_IN_FLIGHT]))
            got.extend(v for v in found if v is not None)
        return got

    async def _get(self, seq: int) -> int | None:
        """The element at `seq`; None when the stream has no message there (a gap)."""
        import nats.js.errors

        try:
            msg = await self.js.get_msg(self.stream, seq)
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code == NO_MESSAGE_FOUND:
                return None
            raise
        return int(msg.data)


class NatsQueueClient(NatsClient):
    """enqueue: a publish; dequeue: one message fetched from a durable pull consumer (explicit acks, made
    at setup) and acknowledged with a confirmed ack (nothing to fetch: `fail`, the queue was empty or out
    of reach); drain: fetch and acknowledge until the consumer has nothing pending or unacknowledged."""

    workload = "queue"
    durable = "faultline"

    async def create(self, js: Any, name: str) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        await super().create(js, name)
        await js.add_consumer(
            name,
            ConsumerConfig(
                durable_name=self.durable,
                ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL,
                ack_wait=ACK_WAIT_S,
                max_ack_pending=-1,
            ),
        )

    def _limit(self, op: Op) -> float:
        return ACK_WAIT_S * 2 + self.timeout if op["f"] == "drain" else self.timeout

    async def apply(self, op: Op) -> Op:
        if op["f"] == "enqueue":
            await self.publish(int(op["value"]))
            return {**op, "type": "ok"}
        # a subscription per op: a message that arrives after its fetch gave up is dropped with it (and
        # redelivered after ACK_WAIT_S), never taken by a later dequeue from a stale delivery
        sub = await self.js.pull_subscribe_bind(self.durable, self.stream)
        try:
            return await self._take(sub, op)
        finally:
            await sub.unsubscribe()

    async def _take(self, sub: Any, op: Op) -> Op:
        if op["f"] == "dequeue":
            try:
                msgs = await sub.fetch(1, timeout=min(1.0, self.timeout / 2))
            except TimeoutError:  # nats-py raises its own or asyncio's, by where the wait ran out
                # nothing handed out, or handed out and not received: redelivered after ACK_WAIT_S
                return {**op, "type": "fail", "error": "empty"}
            await msgs[0].ack_sync(timeout=self.timeout / 2)
            return {**op, "type": "ok", "value": int(msgs[0].data)}
        if op["f"] == "drain":
            return await self._drain(sub, op)
        raise ValueError(f"queue: unknown op {op['f']!r}")

    async def _drain(self, sub: Any, op: Op) -> Op:
        """Takes everything left, waiting out the redelivery of messages handed out and never acked; `info`
        with what it took when it could not confirm the consumer empty."""
        got: list[int] = []
        deadline = time.monotonic() + ACK_WAIT_S * 2
        try:
            while True:
                try:
                    for msg in await sub.fetch(100, timeout=1.0):
                        await msg.ack_sync(timeout=self.timeout)
                        got.append(int(msg.data))
                    continue
                except TimeoutError:  # nothing more to fetch now
                    pass
                info = await sub.consumer_info()
                if info.num_pending == 0 and info.num_ack_pending == 0:
                    return {**op, "type": "ok", "value": got}
                if time.monotonic() > deadline:
                    return {
                        **op,
                        "type": "info",
                        "value": got,
                        "error": f"{info.num_pending} pending, "
                        f"{info.num_ack_pending} unacknowledged after {ACK_WAIT_S * 2:.0f} s",
                    }
        except Exception as exc:
            if not got:
                raise
            return {**op, "type": "info", "value": got, "error": f"{type(exc).__name__}: {exc}"}
