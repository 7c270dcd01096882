"""etcd 3.4 (Debian's etcd-server) as a DB: 3 or 5 members `e1..`, spoken to over etcd's own gRPC API.

The client (EtcdConnection) speaks the store's client API (get, put, cas, scan), so the bundled register
and set workloads run unchanged: a register is a key, cas is a Txn comparing the key's value, a set is
the keys under one prefix. Reads are linearizable (etcd's default: the leader's read index), so every
run must come out valid; an invalid verdict on etcd is a harness bug.

Clock faults are refused: etcd is a Go program, which reads the clock through the vDSO, where
libfaketime (an LD_PRELOAD library) cannot reach it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from faultline.cluster.base import ClusterSpec, RoleSpec
from faultline.core import Op, Run
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern
from faultline.db.process import Indeterminate, ProcessDB, common_notes, supported_nemeses
from faultline.workloads.common import ApplyOrComplete

ROLE = "etcd"
CLIENT_PORT = 2379
PEER_PORT = 2380
BINARY = "/usr/bin/etcd"
CLOCK_REASON = (
    "etcd is a Go program: it reads the clock through the vDSO, which libfaketime cannot reach, "
    "and it reads no offset file of ours"
)


class EtcdConnection:
    """One gRPC channel to one member, with the store's client API over etcd keys `/TABLE/KEY`."""

    def __init__(self, address: str, timeout_s: float = 5.0) -> None:
        import grpc

        from faultline.dbs.protos import etcd_kv_pb2_grpc

        self.address, self.timeout = address, timeout_s
        self.channel = grpc.insecure_channel(address)
        # protoc's gRPC stubs (etcd_kv_pb2_grpc.py) come without annotations
        self.kv = etcd_kv_pb2_grpc.KVStub(self.channel)  # type: ignore[no-untyped-call]
        self.maintenance = etcd_kv_pb2_grpc.MaintenanceStub(self.channel)  # type: ignore[no-untyped-call]
        self.lease = etcd_kv_pb2_grpc.LeaseStub(self.channel)  # type: ignore[no-untyped-call]

    # ------------------------------------------------------------------ the store's client API
    def create_table(self, name: str, **_: Any) -> None:
        """Nothing to create: a table is a key prefix."""

    def get(self, table: str, key: Any, timeout: float | None = None) -> Any:
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        resp = self._call(self.kv.Range, pb.RangeRequest(key=_key(table, key)), timeout)
        return _decode(resp.kvs[0].value) if resp.kvs else None

    def put(self, table: str, key: Any, value: Any, timeout: float | None = None) -> None:
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        self._call(self.kv.Put, pb.PutRequest(key=_key(table, key), value=_encode(value)), timeout)

    def cas(self, table: str, key: Any, expected: Any, new: Any, timeout: float | None = None) -> bool:
        """Sets `new` if the key holds `expected`, in one Txn; False when it does not (nothing written)."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        k = _key(table, key)
        txn = pb.TxnRequest(
            compare=[
                pb.Compare(result=pb.Compare.EQUAL, target=pb.Compare.VALUE, key=k, value=_encode(expected))
            ],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=k, value=_encode(new)))],
        )
        return bool(self._call(self.kv.Txn, txn, timeout).succeeded)

    def batch(
        self, table: str, rows: list[tuple[Any, ...]], timeout: float | None = None
    ) -> list[tuple[bool, None]]:
        """Rows `("put", key, value)` and `("cas", key, expected, new)` in one Txn: every put happens if
        every cas key holds its expected value, else nothing does. (applied, None) per row."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        compare = [
            pb.Compare(
                result=pb.Compare.EQUAL, target=pb.Compare.VALUE, key=_key(table, r[1]), value=_encode(r[2])
            )
            for r in rows
            if r[0] == "cas"
        ]
        puts = [
            pb.RequestOp(request_put=pb.PutRequest(key=_key(table, r[1]), value=_encode(r[-1]))) for r in rows
        ]
        applied = bool(
            self._call(self.kv.Txn, pb.TxnRequest(compare=compare, success=puts), timeout).succeeded
        )
        return [(applied, None) for _ in rows]

    def generate(self, table: str, timeout: float | None = None) -> int:
        """A put of one key; the revision etcd gave it (unique across the cluster: each write has its own)."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        resp = self._call(self.kv.Put, pb.PutRequest(key=_key(table, "id"), value=b"1"), timeout)
        return int(resp.header.revision)

    def scan(self, table: str, timeout: float | None = None) -> list[tuple[str, Any]]:
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        prefix = _key(table, "")
        resp = self._call(self.kv.Range, pb.RangeRequest(key=prefix, range_end=_prefix_end(prefix)), timeout)
        return [(kv.key.decode()[len(prefix) :], _decode(kv.value)) for kv in resp.kvs]

    def close(self) -> None:
        self.channel.close()

    # ------------------------------------------------------------------ leases, for locks
    def grant(self, ttl_s: int, timeout: float | None = None) -> int:
        """A new lease of `ttl_s` seconds; its id."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        return int(self._call(self.lease.LeaseGrant, pb.LeaseGrantRequest(TTL=ttl_s), timeout).ID)

    def keep_alive(self, lease_id: int, timeout: float | None = None) -> int:
        """Renews the lease once; its new time to live (0 or less: it has expired)."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        replies = self._call(
            self.lease.LeaseKeepAlive, iter([pb.LeaseKeepAliveRequest(ID=lease_id)]), timeout
        )
        try:
            return int(next(replies).TTL)
        finally:
            replies.cancel()

    def create(self, table: str, key: Any, value: Any, lease_id: int, timeout: float | None = None) -> bool:
        """Puts the key, attached to the lease, only if it does not exist (one Txn); False: it exists."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        k = _key(table, key)
        txn = pb.TxnRequest(
            compare=[pb.Compare(result=pb.Compare.EQUAL, target=pb.Compare.CREATE, key=k, create_revision=0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=k, value=_encode(value), lease=lease_id))],
        )
        return bool(self._call(self.kv.Txn, txn, timeout).succeeded)

    def delete_if(self, table: str, key: Any, value: Any, timeout: float | None = None) -> bool:
        """Deletes the key if it holds `value` (one Txn); False: it does not (nothing deleted)."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        k = _key(table, key)
        txn = pb.TxnRequest(
            compare=[
                pb.Compare(result=pb.Compare.EQUAL, target=pb.Compare.VALUE, key=k, value=_encode(value))
            ],
            success=[pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=k))],
        )
        return bool(self._call(self.kv.Txn, txn, timeout).succeeded)

    # ------------------------------------------------------------------ etcd's own
    def status(self, timeout: float = 2.0) -> tuple[int, int]:
        """(this member's id, the leader's id as this member sees it; 0 when it knows none)."""
        from faultline.dbs.protos import etcd_kv_pb2 as pb

        resp = self._call(self.maintenance.Status, pb.StatusRequest(), timeout)
        return int(resp.header.member_id), int(resp.leader)

    def _call(self, method: Callable[..., Any], request: Any, timeout: float | None) -> Any:
        import grpc

        try:
            return method(request, timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            # any gRPC error may come after the member applied the request: indeterminate (reads that
            # fail are `fail` anyway)
            raise Indeterminate(f"etcd {self.address}: {exc.code().name}: {exc.details()}") from None


class EtcdLockClient(ApplyOrComplete):
    """acquire: a lease of `lock_ttl` seconds (db option), then a Txn that creates the lock key attached
    to it only if the key does not exist; release: a Txn that deletes the key only if it still holds this
    client's token (`ok` with the value "lost" when the lease had expired). While it holds a lock, a thread renews the lease every third of its TTL, as etcd's
    own lock client does; a hold whose renewals stop (its member paused, cut off) expires with its lease
    on the leader, and another client may take the lock while this one still believes it holds it."""

    def __init__(self, conn: EtcdConnection | None = None, table: str = "lock", ttl_s: int = 10) -> None:
        import threading
        import uuid

        self.conn, self.table, self.ttl = conn, table, ttl_s
        self.held: dict[str, tuple[str, int]] = {}  # key -> (token, lease id), also when in doubt
        self.prefix, self.taken = uuid.uuid4().hex[:12], 0
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.renewer: threading.Thread | None = None

    def setup(self, test: Run) -> None:
        """Nothing to create: the lock is a key."""

    def open(self, test: Run, node: str) -> EtcdLockClient:
        from faultline.workloads.common import connect, run_name

        return EtcdLockClient(connect(test), run_name(test, "lock"), lock_ttl(test.spec.db_opts))

    def close(self) -> None:
        self.stop.set()
        if self.renewer is not None:
            self.renewer.join(timeout=2 * self.ttl)
        if self.conn is not None:
            self.conn.close()

    def _apply(self, op: Op) -> Op:
        assert self.conn is not None
        key = str(op.get("key"))
        if op["f"] == "acquire":
            if key in self.held:  # it holds the lock, or may: taking it again is refused, a no-op
                return {**op, "type": "fail", "error": "held by this client"}
            try:
                lease = self.conn.grant(self.ttl)
            except Indeterminate as exc:  # a lease alone takes no lock
                return {**op, "type": "fail", "error": f"no lease: {exc}"}
            self.taken += 1
            token = f"{self.prefix}-{self.taken}"
            with self.lock:
                self.held[key] = (token, lease)  # before the Txn: an acquire in doubt may hold it
            self._renew_in_background()
            if self.conn.create(self.table, key, token, lease):
                return {**op, "type": "ok"}
            with self.lock:
                del self.held[key]
            return {**op, "type": "fail", "error": "held"}
        if op["f"] == "release":
            with self.lock:
                token_lease = self.held.pop(key, None)
            if token_lease is None:
                return {**op, "type": "fail", "error": "not held"}
            if self.conn.delete_if(self.table, key, token_lease[0]):
                return {**op, "type": "ok"}
            # the hold had ended already (the lease expired): it ends now as far as this client knows
            return {**op, "type": "ok", "value": "lost"}
        raise ValueError(f"lock: unknown op {op['f']!r}")

    def _renew_in_background(self) -> None:
        import threading

        if self.renewer is None:
            self.renewer = threading.Thread(target=self._renew, name="etcd-lease-renewer", daemon=True)
            self.renewer.start()

    def _renew(self) -> None:
        """Renews every lease this client holds, every third of the TTL, until the client closes."""
        while not self.stop.wait(self.ttl / 3):
            with self.lock:
                leases = [lease for _, lease in self.held.values()]
            for lease in leases:
                try:
                    assert self.conn is not None
                    self.conn.keep_alive(lease, timeout=self.ttl / 3)
                except Exception:
                    continue  # the next round tries again; a lease that expired stays expired


def lock_ttl(opts: Mapping[str, Any], default: int = 10) -> int:
    """The `lock_ttl` option: whole seconds (etcd's leases count in seconds); ValueError unless >= 1."""
    raw = opts.get("lock_ttl", default)
    try:
        ttl = int(raw)
    except (TypeError, ValueError):
        ttl = 0
    if ttl < 1 or str(raw).strip() not in (str(ttl), f"{ttl}.0"):
        raise ValueError(f"lock_ttl must be a whole number of seconds >= 1, not {raw!r}")
    return ttl


def _key(table: str, key: Any) -> bytes:
    return f"/{table}/{key}".encode()


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (etcd's range_end for a prefix)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _encode(value: Any) -> bytes:
    return str(value).encode()


def _decode(raw: bytes) -> Any:
    text = raw.decode()
    try:
        return int(text)
    except ValueError:
        return text


# etcd 3.4 logs through capnslog by default (`--logger=capnslog`; zap's JSON lines with --logger=zap, the
# default from 3.5): "<date> <time> <level letter> | <package>: <message>", CRITICAL being "C", which its
# Panic and Fatal calls write before they panic or exit. Go's runtime writes "panic: " and "fatal error: "
# at the start of a line on stderr. etcd's WAL and snapshot readers fail with "wal: crc mismatch",
# "walpb: crc mismatch" and "snap: crc mismatch" (ErrCRCMismatch) on a record whose checksum does not
# match; a member whose WAL had bits flipped while it was stopped logs, measured with 3.4.23,
# "C | etcdmain: walpb: crc mismatch" and exits. One whose backend file (bbolt, member/snap/db) had a range
# zeroed logs "C | mvcc: cannot unmarshal event: ..." at start and exits (measured, 3.4.23, file-zero). A flip
# in a record's length gives "C | etcdmain: wal: max entry size limit exceeded" (measured, file-bitflip);
# the WAL reader's other refusals of an impossible record (wal/wal.go, wal/decoder.go of 3.4) are
# "wal: slice bounds out of range", "wal: conflicting metadata found" and "unexpected block type N"; a flip
# that breaks a record's protobuf encoding is refused by walpb.Record's decoder, which runs before the
# record's checksum is checked: "proto: Record: illegal tag 0 (wire type 0)" and "proto: illegal wireType 7" (both
# measured, 3.4.23, file-bitflip), or the decoder's other errors (integer overflow, negative length).
# A flip that makes a record look cut short is taken for a torn write: etcd repairs the WAL by truncating
# it there (the rest is kept as "*.wal.broken") and starts with a log shorter than what it had acknowledged;
# its Raft library then panics at the leader's first heartbeat with "tocommit(N) is out of range
# [lastIndex(M)]. Was the raft log corrupted, truncated, or lost?" (raft/log.go, commitTo), its guard against
# a member that lost committed entries (measured, 3.4.23, file-bitflip: the panic, then "walpb: crc mismatch"
# at the next start). Under a fault that damaged the files it is detection; under any other, a finding.
LOG_PATTERNS = [
    LogPattern("go-panic", r"^panic: ", "the Go runtime: an unrecovered panic"),
    LogPattern(
        "go-fatal-error", r"^fatal error: ", "the Go runtime: a fatal error (e.g. concurrent map writes)"
    ),
    LogPattern(
        "capnslog-critical",
        r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+ C \| ",
        "a CRITICAL line (etcd's panic or fatal log call)",
    ),
    LogPattern("zap-panic-or-fatal", r'"level":"(?:dpanic|panic|fatal)"', "a zap panic or fatal line"),
    LogPattern(
        "crc-mismatch",
        r"\b(?:wal|walpb|snap|snappb): crc mismatch",
        "etcd found a WAL or snapshot record with a bad checksum",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "wal-record-refused",
        r"\bwal: (?:slice bounds out of range|max entry size limit exceeded|conflicting metadata found)"
        r"|\bunexpected block type \d+"
        r"|\bproto: (?:Record: |illegal wireType \d+|wrong wireType = \d+ for field |integer overflow"
        r"|negative length found)",
        "etcd's WAL reader refused a record whose length, type, metadata or encoding is impossible",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "raft-log-lost",
        r"\btocommit\(\d+\) is out of range \[lastIndex\(\d+\)\]",
        "etcd's Raft found its log shorter than the commit index the leader sent: committed entries are gone",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
    LogPattern(
        "mvcc-unmarshal",
        r"\bmvcc: cannot unmarshal event",
        "etcd read a key-value record from its backend file (member/snap/db) that does not decode",
        expected_under=FILE_CORRUPTION_FAULTS,
    ),
]


class EtcdDB(ProcessDB):
    """etcd 3.4 from Debian, `members` (db option, default 3) members named e1.., one per container."""

    name = "etcd"
    workloads = frozenset({"register", "set", "lock", "bank", "counter", "unique-ids"})
    nemeses = supported_nemeses(clock=False) | FILE_CORRUPTION_FAULTS  # the data files are declared below
    nemesis_notes = common_notes(CLOCK_REASON)
    packages = ("etcd-server",)
    options = {
        "members": "how many members: 1, 3, 5 or 7 (default 3)",
        "lock_ttl": "whole seconds a lock's lease lasts without renewal, for the lock workload (default 10)",
    }
    data_dirs = {ROLE: ("{dir}/data",)}
    data_files = {ROLE: ("{dir}/data/member/wal/*.wal", "{dir}/data/member/snap/db")}

    def log_patterns(self) -> list[LogPattern]:
        return list(LOG_PATTERNS)

    def validate(self, opts: Mapping[str, Any]) -> None:
        lock_ttl(opts)
        members = _members(opts)
        if members < 1 or members % 2 == 0 or members > 7:
            raise ValueError(f"members must be 1, 3, 5 or 7, not {members}")

    def cluster_spec(self, name: str, opts: Mapping[str, Any]) -> ClusterSpec:
        self.validate(opts)
        members = _members(opts)
        peers = ",".join(f"e{i}=http://e{i}:{PEER_PORT}" for i in range(1, members + 1))
        role = RoleSpec(
            ROLE,
            members,
            "e",
            CLIENT_PORT,
            argv=[
                BINARY,
                "--name",
                "{name}",
                "--data-dir",
                "{dir}/data",
                "--listen-client-urls",
                f"http://0.0.0.0:{CLIENT_PORT}",
                "--advertise-client-urls",
                f"http://{{address}}:{CLIENT_PORT}",
                "--listen-peer-urls",
                f"http://0.0.0.0:{PEER_PORT}",
                "--initial-advertise-peer-urls",
                f"http://{{name}}:{PEER_PORT}",
                "--initial-cluster",
                peers,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                name,
            ],
        )
        return ClusterSpec.from_mapping(
            {
                "name": name,
                "roles": [role],
                "packages": list(self.packages),
                "db": self.name,
                "db_opts": {"members": members},
            }
        )

    def ready(self, test: Run, node: str) -> bool:
        """A linearizable read through this member answers (so the cluster has a leader and a quorum)."""
        conn = self._connect(test, node, 2.0)
        try:
            conn.get("faultline", "ready")
            return True
        finally:
            conn.close()

    def primaries(self, test: Run) -> list[str]:
        """The member that leads, as the members themselves report it."""
        for node in test.backend.nodes():
            conn = self._connect(test, node, 2.0)
            try:
                member, leader = conn.status()
            except Exception:
                continue
            finally:
                conn.close()
            if leader and leader == member:
                return [node]
        return []

    def connector(self, test: Run) -> Callable[[], Any]:
        """Each new client talks to the next member in turn, so the workers spread over every member."""
        turn = itertools.count()
        timeout = float(test.spec.op_timeout_s)

        def connect() -> EtcdConnection:
            nodes = self.client_nodes(
                test
            )  # asked each time: the cluster comes up after the connector is made
            return self._connect(test, nodes[next(turn) % len(nodes)], timeout)

        return connect

    def client(self, workload: str) -> Any:
        """Locks need their own client; register and set use the bundled ones over `connector`."""
        return EtcdLockClient() if workload == "lock" else None

    def _connect(self, test: Run, node: str, timeout: float) -> EtcdConnection:
        return EtcdConnection(f"{test.backend.address(node)}:{CLIENT_PORT}", timeout)


def _members(opts: Mapping[str, Any]) -> int:
    try:
        return int(opts.get("members", 3))
    except (TypeError, ValueError):
        raise ValueError(f"members must be a whole number, not {opts.get('members')!r}") from None
