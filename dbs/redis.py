"""Redis 7 with Sentinel (Debian's redis-server and redis-sentinel) as a DB: one primary and two replicas
`r1..r3`, and three sentinels `s1..s3` that watch them and promote a replica when the primary is lost.

Replication is asynchronous. When a partition cuts the primary off, the sentinels promote a replica while
the old primary goes on acknowledging writes from the clients still connected to it; when it rejoins, it
becomes a replica of the new primary and those writes are gone. This is Redis's documented behaviour
(its replication and Sentinel pages), so the `set` workload under `partition-primary` must come out
invalid, with the lost acknowledged adds listed.

Clients find the primary through the sentinels (redis-py's Sentinel), keep talking to it while it
answers, and ask again after an error. Clock faults are refused: libfaketime 0.9.10 (Debian bookworm's)
aborts redis-server at start ("unexpected recursive calls to clock_gettime()", measured with every
variant of its library and monotonic setting), and redis reads no offset file of ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from faultline.cluster.base import ClusterSpec, NodeBackend, RoleSpec
from faultline.core import Run, ops
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import ProcessDB, common_notes, supported_nemeses

REDIS, SENTINEL = "redis", "sentinel"
REDIS_PORT, SENTINEL_PORT = 6379, 26379
MASTER_NAME = "faultline"
DOWN_AFTER_MS = 2000
APPENDFSYNC = ("always", "everysec", "no")
FAILOVER_TIMEOUT_MS = 10000
CLOCK_REASON = (
    "libfaketime 0.9.10 aborts redis-server at start (a recursive clock_gettime during its start-up), "
    "and redis reads no offset file of ours"
)

# The config files are written once (prepare) and kept: redis-server and redis-sentinel rewrite them as
# the primary moves (CONFIG REWRITE), and a restarted process must come back with what it learnt.
_REDIS_CONF = """\
port {port}
bind 0.0.0.0
protected-mode no
dir {dir}/data
appendonly yes
appendfsync {appendfsync}
replica-announce-ip {address}
"""
_SENTINEL_CONF = """\
port {port}
bind 0.0.0.0
protected-mode no
dir {dir}
sentinel resolve-hostnames yes
sentinel announce-ip {address}
sentinel monitor {name} r1 {redis_port} 2
sentinel down-after-milliseconds {name} {down}
sentinel failover-timeout {name} {failover}
sentinel parallel-syncs {name} 1
"""


def _write_conf(text: str, conf: str) -> list[str]:
    """A prepare step that writes `text` (a role template: {dir}, {address} ... filled per node) to `conf`;
    every redis node but r1 starts as a replica of r1."""
    script = (
        'mkdir -p "$1/data" && printf "%s" "$2" > "$3" && '
        f'if [ "$4" = redis ] && [ "$5" != r1 ]; then echo "replicaof r1 {REDIS_PORT}" >> "$3"; fi'
    )
    role = REDIS if conf.endswith("redis.conf") else SENTINEL
    return ["sh", "-c", script, "sh", "{dir}", text, conf, role, "{name}"]


def _conf_role(role: str, prefix: str, port: int, binary: str, conf: str) -> RoleSpec:
    """Three nodes of `role` whose daemon reads one config file, `{dir}/<role>.conf`, written from `conf`
    before the node's first start (and kept across restarts)."""
    path = f"{{dir}}/{role}.conf"
    return RoleSpec(
        role, 3, prefix, port, argv=[binary, path], prepare=_write_conf(conf, path), prepare_unless=path
    )


# Redis logs "<pid>:<role> <day> <month> <year> <time> <mark> <message>". A crash (a signal, a failed
# assertion, serverPanic) writes "=== REDIS BUG REPORT START: Cut & paste starting from here ===", an
# assertion "=== ASSERTION FAILED ===", serverPanic "Guru Meditation: ...". Loading a damaged append-only
# file fails with "Bad file format reading the append only file ..." (or "Unexpected end of file reading
# the append only file" when it is truncated and aof-load-truncated is off), a damaged RDB file with
# "Wrong RDB checksum ..." or "Short read or OOM loading DB. Unrecoverable error, aborting now." (aof.c,
# rdb.c, debug.c in Redis 7).
LOG_PATTERNS = [
    LogPattern("bug-report", r"=== REDIS BUG REPORT START", "Redis crashed and wrote its bug report"),
    LogPattern("assertion", r"=== ASSERTION FAILED ===", "a Redis assertion failed"),
    LogPattern("panic", r"Guru Meditation: ", "Redis panicked (serverPanic)"),
    LogPattern(
        "bad-aof",
        r"Bad file format reading the append only file|Unexpected end of file reading the "
        r"append only file",
        "Redis found its append-only file damaged",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "bad-rdb",
        r"Wrong RDB checksum|Short read or OOM loading DB",
        "Redis found its RDB file damaged",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
]


class RedisSentinelDB(ProcessDB):
    """One primary, two replicas and three sentinels, each in a container of its own."""

    name = "redis-sentinel"
    workloads = frozenset({"set", "register", "queue", "lock", "counter", "unique-ids"})
    nemeses = supported_nemeses(clock=False) | FILE_CORRUPTION_FAULTS  # the data files are declared below
    nemesis_notes = common_notes(CLOCK_REASON)
    packages = ("redis-server", "redis-sentinel")
    data_dirs = {REDIS: ("{dir}/data",)}
    data_files = {REDIS: ("{dir}/data/appendonlydir/*.aof", "{dir}/data/dump.rdb")}
    options = {
        "appendfsync": f"when the append-only file is fsynced: {', '.join(APPENDFSYNC)} (default everysec, "
        "Redis's own; always fsyncs before each write is acknowledged)",
        "lock_ttl": "seconds a lock taken by the lock workload lasts unless released (default 10)",
    }

    def validate(self, opts: Mapping[str, Any]) -> None:
        mode = opts.get("appendfsync", "everysec")
        if mode not in APPENDFSYNC:
            raise ValueError(f"appendfsync must be one of {', '.join(APPENDFSYNC)}, not {mode!r}")
        lock_ttl(opts)

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        redis_conf = _REDIS_CONF.replace("{port}", str(REDIS_PORT)).replace(
            "{appendfsync}", str(opts.get("appendfsync", "everysec"))
        )
        sentinel_conf = _SENTINEL_CONF.format(
            port=SENTINEL_PORT,
            dir="{dir}",
            address="{address}",
            name=MASTER_NAME,
            redis_port=REDIS_PORT,
            down=DOWN_AFTER_MS,
            failover=FAILOVER_TIMEOUT_MS,
        )
        redis = _conf_role(REDIS, "r", REDIS_PORT, "/usr/bin/redis-server", redis_conf)
        sentinel = _conf_role(SENTINEL, "s", SENTINEL_PORT, "/usr/bin/redis-sentinel", sentinel_conf)
        return ClusterSpec.from_mapping(
            {"name": name, "roles": [redis, sentinel], "packages": list(self.packages), "db": self.name}
        )

    def ready(self, test: Run, node: str) -> bool:
        """A redis node is a primary or a replica in sync; a sentinel knows both replicas and both other
        sentinels (a failover needs them)."""
        conn = self._redis(test, node)
        try:
            if _role(test, node) == SENTINEL:
                state = conn.sentinel_master(MASTER_NAME)
                return int(state.get("num-slaves", 0)) >= 2 and int(state.get("num-other-sentinels", 0)) >= 2
            info = conn.info("replication")
            return bool(info.get("role") == "master" or info.get("master_link_status") == "up")
        finally:
            conn.close()

    def primaries(self, test: Run) -> list[str]:
        """The node the sentinels name as the primary now."""
        from faultline.db.process import node_of_host

        host, _ = self.sentinel(test, 2.0).discover_master(MASTER_NAME)
        node = node_of_host(test.backend, host)
        return [node] if node else []

    def client_nodes(self, test: Run) -> list[str]:
        return test.backend.nodes(REDIS)

    def sentinel(self, test: Run, timeout: float) -> Any:
        from redis.sentinel import Sentinel

        b = test.backend
        limits = {"socket_timeout": timeout, "socket_connect_timeout": timeout, "retry": _no_retry()}
        sentinels = [(b.address(s), SENTINEL_PORT) for s in b.nodes(SENTINEL)]
        # redis-py leaves Sentinel.__init__ unannotated
        return Sentinel(sentinels, sentinel_kwargs=limits, **limits)  # type: ignore[no-untyped-call]

    def _redis(self, test: Run, node: str, timeout: float = 2.0) -> Any:
        import redis

        return redis.Redis(
            host=test.backend.address(node),
            port=_port(test, node),
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
            retry=_no_retry(),
        )

    def client(self, workload: str) -> Any:
        clients: dict[str, type[RedisClient]] = {
            "set": RedisSetClient,
            "register": RedisRegisterClient,
            "queue": RedisQueueClient,
            "lock": RedisLockClient,
            "counter": RedisCounterClient,
            "unique-ids": RedisIdsClient,
        }
        return clients[workload]() if workload in clients else None


def lock_ttl(opts: Mapping[str, Any], default: float = 10.0) -> float:
    """The `lock_ttl` option in seconds; ValueError (one line) unless it is a positive number."""
    raw = opts.get("lock_ttl", default)
    try:
        ttl = float(raw)
    except (TypeError, ValueError):
        ttl = -1.0
    if not 0 < ttl < 1e6:
        raise ValueError(f"lock_ttl must be a number of seconds > 0, not {raw!r}")
    return ttl


def _no_retry() -> Any:
    """No retries inside redis-py (its default retries a timed-out command 3 times with backoff): one
    attempt per operation, so an operation never outlasts the op timeout and the history says what the
    client saw."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return Retry(NoBackoff(), 0)


def _role(test: Run, node: str) -> str:
    """The node's role: redis runs on the node backends (docker, local, ssh), which record it."""
    return cast(NodeBackend, test.backend).info[node].role


def _port(test: Run, node: str) -> int:
    return SENTINEL_PORT if _role(test, node) == SENTINEL else REDIS_PORT


class RedisClient:
    """One connection to the primary the sentinels name, kept while it answers and looked up again after
    an error (as an application using Sentinel does)."""

    read_fs: frozenset[str] = frozenset({"read"})

    def __init__(self, db: RedisSentinelDB | None = None, test: Run | None = None) -> None:
        self.db, self.test = db, test
        self.conn: Any = None  # a redis.Redis while connected

    def setup(self, test: Run) -> None:
        """Keys are named by the run's tag, so nothing to create."""

    def open(self, test: Run, node: str) -> RedisClient:
        return type(self)(cast(RedisSentinelDB, test.db), test)  # this client is only ever the redis DB's

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def invoke(self, test: Run, op: ops.Op) -> ops.Op:
        import redis

        try:
            if self.conn is None:
                self.conn = self._connect(test)
            return self.apply(test, op)
        except redis.exceptions.ReadOnlyError as exc:  # a replica refused it: nothing was written
            self.close()
            return ops.completion(op, exc, read_only=True)
        except (redis.exceptions.RedisError, OSError) as exc:
            self.close()
            return ops.completion(op, exc, read_only=op["f"] in self.read_fs)

    def _connect(self, test: Run) -> Any:
        import redis

        timeout = float(test.spec.op_timeout_s)
        host, port = cast(RedisSentinelDB, test.db).sentinel(test, timeout).discover_master(MASTER_NAME)
        return redis.Redis(
            host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout, retry=_no_retry()
        )

    def key(self, test: Run, name: Any) -> str:
        return f"{name}-{test.spec.run_tag}" if test.spec.run_tag else str(name)

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        raise NotImplementedError


class RedisSetClient(RedisClient):
    """add: SADD of a unique element to one set; read: SMEMBERS of it."""

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        if op["f"] == "add":
            self.conn.sadd(self.key(test, "set"), op["value"])
            return {**op, "type": "ok"}
        if op["f"] == "read":
            return {
                **op,
                "type": "ok",
                "value": sorted(int(v) for v in self.conn.smembers(self.key(test, "set"))),
            }
        raise ValueError(f"set: unknown op {op['f']!r}")


# compare-and-set in one step on the server: set ARGV[2] if the key holds ARGV[1]
_CAS = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]); return 1 end; return 0"


class RedisRegisterClient(RedisClient):
    """read: GET; write: SET; cas: a Lua script that compares and sets atomically."""

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        key = self.key(test, f"register-{op['key']}")
        if op["f"] == "read":
            raw = self.conn.get(key)
            return {**op, "type": "ok", "value": None if raw is None else int(raw)}
        if op["f"] == "write":
            self.conn.set(key, op["value"])
            return {**op, "type": "ok"}
        if op["f"] == "cas":
            old, new = op["value"]
            return {**op, "type": "ok" if self.conn.eval(_CAS, 1, key, old, new) == 1 else "fail"}
        raise ValueError(f"register: unknown op {op['f']!r}")


class RedisQueueClient(RedisClient):
    """enqueue: RPUSH onto one list; dequeue: LPOP (nil: the queue is empty, `fail`); drain: LPOP of up to
    1000 elements at a time until the list is empty. A drain cut off by an error is `info`, with the
    elements it took (a pop whose answer was lost may have taken more)."""

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        key = self.key(test, "queue")
        if op["f"] == "enqueue":
            self.conn.rpush(key, op["value"])
            return {**op, "type": "ok"}
        if op["f"] == "dequeue":
            raw = self.conn.lpop(key)
            if raw is None:
                return {**op, "type": "fail", "error": "empty"}
            return {**op, "type": "ok", "value": int(raw)}
        if op["f"] == "drain":
            return self._drain(key, op)
        raise ValueError(f"queue: unknown op {op['f']!r}")

    def _drain(self, key: str, op: ops.Op) -> ops.Op:
        import redis

        got: list[int] = []
        try:
            while batch := self.conn.lpop(key, 1000):
                got.extend(int(v) for v in batch)
        except (redis.exceptions.RedisError, OSError) as exc:
            if not got and isinstance(exc, redis.exceptions.ReadOnlyError):
                raise  # a replica refused the first pop: nothing was taken (invoke makes it `fail`)
            self.close()
            return {**op, "type": "info", "value": got, "error": f"{type(exc).__name__}: {exc}"}
        return {**op, "type": "ok", "value": got}


# Release the lock if this client's token still holds it. The shebang makes it a script that may write,
# which a read-only replica refuses before running it (READONLY: nothing done), instead of answering
# from its own copy of the key.
_RELEASE = (
    "#!lua\nif redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end; return 0"
)


class RedisLockClient(RedisClient):
    """acquire: `SET key token NX PX ttl` with a token of this client's own; release: a Lua script that
    deletes the key only while it still holds the token; one that finds the token gone (the key expired)
    is `ok` with the value "lost". A lock whose acquire was in doubt, or whose release a replica refused,
    keeps its token, so a later release may still let it go."""

    def __init__(self, db: RedisSentinelDB | None = None, test: Run | None = None) -> None:
        import uuid

        super().__init__(db, test)
        self.tokens: dict[str, str] = {}
        self.prefix, self.taken = uuid.uuid4().hex[:12], 0

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        key = self.key(test, f"lock-{op.get('key')}")
        if op["f"] == "acquire":
            if key in self.tokens:  # it holds the lock, or may: taking it again is refused, a no-op
                return {**op, "type": "fail", "error": "held by this client"}
            self.taken += 1
            token = f"{self.prefix}-{self.taken}"
            self.tokens[key] = token  # before the call: an acquire in doubt may have taken it
            ttl_ms = int(lock_ttl(test.spec.db_opts) * 1000)
            if self.conn.set(key, token, nx=True, px=ttl_ms):
                return {**op, "type": "ok"}
            del self.tokens[key]
            return {**op, "type": "fail", "error": "held"}
        if op["f"] == "release":
            held = self.tokens.get(key)
            if held is None:
                return {**op, "type": "fail", "error": "not held"}
            released = self.conn.eval(_RELEASE, 1, key, held)
            del self.tokens[key]
            if released:
                return {**op, "type": "ok"}
            # the hold had ended already (the key expired): it ends now as far as this client knows
            return {**op, "type": "ok", "value": "lost"}
        raise ValueError(f"lock: unknown op {op['f']!r}")


class RedisCounterClient(RedisClient):
    """add: INCRBY of one key; read: GET of it (none yet: 0)."""

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        key = self.key(test, "counter")
        if op["f"] == "add":
            self.conn.incrby(key, int(op["value"]))
            return {**op, "type": "ok"}
        if op["f"] == "read":
            raw = self.conn.get(key)
            return {**op, "type": "ok", "value": 0 if raw is None else int(raw)}
        raise ValueError(f"counter: unknown op {op['f']!r}")


class RedisIdsClient(RedisClient):
    """generate: INCR of one key; the new value is the id."""

    def apply(self, test: Run, op: ops.Op) -> ops.Op:
        assert self.conn is not None
        if op["f"] == "generate":
            return {**op, "type": "ok", "value": int(self.conn.incr(self.key(test, "ids")))}
        raise ValueError(f"unique-ids: unknown op {op['f']!r}")
