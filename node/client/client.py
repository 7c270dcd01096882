"""Client library: finds the leader master, caches tablet locations, sends each row operation to
the tablet's leader, retries what is safe to retry within the caller's deadline.

Errors (all subclasses of KuduError, each with `.code` and a message):
  InvalidArgumentError  bad request (wrong key/value type, bad table name, ...): never retried
  NotFoundError         no such table
  AlreadyExistsError    create_table of an existing name
  UnavailableError      no answer within the deadline; the operation did NOT take effect
                        (reads and writes that were never sent, or refused by a non-leader)
  IndeterminateError    a write (or DDL) was sent but its outcome is unknown: it may have taken
                        effect or not; record it as indeterminate ("info"), never as a failure
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid as uuid_mod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import grpc

from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.rpc import ChannelPool, check_addrs, resolve_host
from faultline.node.server.values import BadValue, Scalar, check, from_pb, partition_of, sort_key, to_pb

log = logging.getLogger("faultline.node.client")


class KuduError(Exception):
    code = "ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(f"{self.code}: {message}")
        self.message = message


class DefiniteKuduError(KuduError):
    definite = True  # the operation did not take effect (a harness records it as `fail`)


class InvalidArgumentError(DefiniteKuduError):
    code = "INVALID_ARGUMENT"


class NotFoundError(DefiniteKuduError):
    code = "NOT_FOUND"


class AlreadyExistsError(DefiniteKuduError):
    code = "ALREADY_EXISTS"


class UnavailableError(DefiniteKuduError):
    code = "UNAVAILABLE"


class IndeterminateError(KuduError):
    indeterminate = True  # the operation may or may not have taken effect (`info`)
    code = "INDETERMINATE"


SUSPECT_S = 2.0  # a server that let a call time out is tried after the others for this long

# gRPC transport failures that prove the request never reached the server
_NOT_SENT = (
    "failed to connect",
    "connection refused",
    "connections to all backends failing",
    "dns resolution failed",
    "name resolution",
    "no route to host",
    "failed to pick subchannel",
    "channel closed",
    "unable to resolve",
    "errors resolving",
    "domain name not found",
)
# server answers that say "not applied, try again" (see node/server/host.py raft_error_status)
_RETRY_PREFIXES = (
    "NOT_LEADER",
    "LEADER_NOT_READY",
    "TRANSFER_IN_PROGRESS",
    "CONFIG_CHANGE_PENDING",
    "ABORTED",
    "read not confirmed",
    "catalog not initialized",
    "STEPPING_DOWN",
    "NOT_ENOUGH_TSERVERS",
    "NEW_MASTER_UNREACHABLE",
)


def _not_sent(exc: grpc.RpcError) -> bool:
    d = (exc.details() or "").lower()
    return exc.code() == grpc.StatusCode.UNAVAILABLE and any(s in d for s in _NOT_SENT)


def _retryable_answer(exc: grpc.RpcError) -> bool:
    d = exc.details() or ""
    return exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE) and d.startswith(
        _RETRY_PREFIXES
    )


def _hint(exc: grpc.RpcError) -> tuple[str, str] | None:
    for k, v in exc.trailing_metadata() or ():
        if k == "leader-hint" and v and "@" in v:
            u, _, a = v.partition("@")
            return u, a
    return None


def _raise_definite(exc: grpc.RpcError) -> None:
    """Map answers that are final (not worth a retry) to the library's errors."""
    c = exc.code()
    if c == grpc.StatusCode.INVALID_ARGUMENT:
        raise InvalidArgumentError(exc.details()) from None
    if c == grpc.StatusCode.ALREADY_EXISTS:
        raise AlreadyExistsError(exc.details()) from None
    if c == grpc.StatusCode.FAILED_PRECONDITION and not _retryable_answer(exc):
        raise InvalidArgumentError(exc.details()) from None
    if c == grpc.StatusCode.ABORTED:  # a catalog compare-and-set lost: nothing was changed
        raise UnavailableError(exc.details()) from None


@dataclass
class _Tablet:
    tablet_id: str
    partition: int
    replicas: list[tuple[str, str]]  # (uuid, addr)
    leader: str | None  # uuid


@dataclass
class _TableMeta:
    info: pb.TableInfo
    tablets: dict[int, _Tablet]
    fetched: float


def catalog_lags(leader: pb.ReplicaStatus, replica: pb.ReplicaStatus | None) -> bool:
    """Whether a master's catalog `replica` (`KuduClient.catalog_replica`; None: it did not answer) lacks
    what the `leader` had committed, or sits in another term."""
    return replica is None or replica.term != leader.term or replica.last_index < leader.commit_index


class KuduClient:
    """Thread-safe; share one per process. Keys and values are `str` or `int` (signed 64-bit)."""

    def __init__(
        self,
        master_addresses: list[str] | str,
        resolve: Callable[[str], str] | None = None,
        default_timeout_s: float = 10.0,
    ) -> None:
        if isinstance(master_addresses, str):
            master_addresses = [a for a in master_addresses.split(",") if a]
        if not master_addresses:
            raise InvalidArgumentError("at least one master address is required")
        try:
            check_addrs(list(master_addresses))
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from None
        self.masters = list(master_addresses)
        self.default_timeout_s = default_timeout_s
        self.pool = ChannelPool(reresolve=True, resolve=resolve or resolve_host)
        self._leader_master: str | None = None
        self._meta: dict[str, _TableMeta] = {}
        self._lock = threading.Lock()
        self._suspects: dict[str, float] = {}  # addr -> until when it is tried last (it timed out)
        self._masters_learned = -1e9

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> KuduClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ masters
    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.default_timeout_s if timeout is None else timeout)

    def _master_call(
        self, method: str, req: Any, deadline: float, mutating: bool, idempotent: bool = False
    ) -> Any:
        """Call the leader master; follow hints; retry what provably did not take effect, and, for
        requests the master recognises when repeated (`idempotent`), also what may have."""
        backoff = 0.05
        tried: list[str] = []
        last = "no master answered"
        ambiguous = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if ambiguous:
                    raise IndeterminateError(f"{method}: outcome unknown at the deadline ({last})")
                raise UnavailableError(f"{method}: no leader master within the deadline ({last})")
            addr = self._leader_master
            if addr is None or self._is_suspect(addr):
                # round-robin, masters that recently timed out last
                ring = sorted(self.masters, key=self._is_suspect)
                addr = ring[len(tried) % len(ring)]
            try:
                per_try = left if mutating and not idempotent else min(left, 5.0)
                resp = self.pool.call(addr, pbg.MasterStub, method, req, timeout=per_try)
                self._leader_master = addr
                self._learn_masters(addr)
                return resp
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.NOT_FOUND:
                    raise NotFoundError(exc.details()) from None
                _raise_definite(exc)
                last = f"{addr}: {code.name} {exc.details()}"
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    self._suspect(addr)
                    if self._leader_master == addr:
                        self._leader_master = None
                if _retryable_answer(exc) or _not_sent(exc):
                    h = _hint(exc)
                    self._leader_master = h[1] if h and not self._is_suspect(h[1]) else None
                    if h and h[1] not in self.masters:
                        self.masters.append(h[1])  # a master added since we were configured
                    tried.append(addr)
                elif mutating and not idempotent:
                    raise IndeterminateError(
                        f"{method} sent to {addr}, outcome unknown: {code.name} {exc.details()}"
                    ) from None
                else:
                    ambiguous = ambiguous or mutating
                    self._leader_master = None
                    tried.append(addr)
            if len(tried) % len(self.masters) == 0:
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 0.5)

    def _learn_masters(self, addr: str) -> None:
        """Add masters from the catalog's Raft config (at most every 30 s), so a client configured with
        some of the masters still finds the others after `master add` or a migration."""
        now = time.monotonic()
        if now - self._masters_learned < 30.0:
            return
        self._masters_learned = now
        try:
            resp = cast(
                pb.ListMastersResponse,
                self.pool.call(addr, pbg.MasterStub, "ListMasters", pb.ListMastersRequest(), timeout=2.0),
            )
        except grpc.RpcError:
            return
        for m in resp.masters:
            if m.addr and m.addr not in self.masters:
                self.masters.append(m.addr)

    def create_table(
        self,
        name: str,
        num_tablets: int = 3,
        replication: int = 3,
        timeout: float | None = None,
        wait: bool = True,
    ) -> str:
        """Create a table; with `wait`, return once every tablet has a leader. Returns the table id."""
        if not isinstance(name, str) or not isinstance(num_tablets, int) or not isinstance(replication, int):
            raise InvalidArgumentError("name must be str, num_tablets and replication int")
        deadline = self._deadline(timeout)
        # the id makes a retried create recognisable, so an ambiguous failure can be retried safely
        req = pb.CreateTableRequest(
            name=name, num_tablets=num_tablets, replication=replication, table_id=uuid_mod.uuid4().hex
        )
        resp = self._master_call("CreateTable", req, deadline, True, idempotent=True)
        if wait:
            while True:
                try:
                    locs = self._master_call(
                        "GetTableLocations", pb.GetTableLocationsRequest(name=name), deadline, False
                    )
                    if locs.tablets and all(
                        t.state == "RUNNING" and any(r.role == "LEADER" for r in t.replicas)
                        for t in locs.tablets
                    ):
                        break
                except (NotFoundError, UnavailableError):
                    pass
                if time.monotonic() > deadline:
                    raise IndeterminateError(f"table {name!r} created but not all tablets running in time")
                time.sleep(0.1)
        return resp.table_id

    def delete_table(self, name: str, timeout: float | None = None) -> None:
        deadline = self._deadline(timeout)
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("table name must be a non-empty str")
        info = self._master_call("GetTableLocations", pb.GetTableLocationsRequest(name=name), deadline, False)
        self._master_call(
            "DeleteTable",
            pb.DeleteTableRequest(name=name, table_id=info.table.table_id),
            deadline,
            True,
            idempotent=True,
        )
        with self._lock:
            self._meta.pop(name, None)

    def alter_table(self, name: str, schema_version: int, timeout: float | None = None) -> int:
        """Set the table's schema version (must grow); returns it."""
        if not isinstance(schema_version, int) or isinstance(schema_version, bool):
            raise InvalidArgumentError("schema_version must be int")
        resp = self._master_call(
            "AlterTable",
            pb.AlterTableRequest(name=name, schema_version=schema_version),
            self._deadline(timeout),
            True,
            idempotent=True,
        )
        with self._lock:
            self._meta.pop(name, None)
        return resp.schema_version

    def list_tables(self, timeout: float | None = None) -> list[str]:
        resp = self._master_call("ListTables", pb.ListTablesRequest(), self._deadline(timeout), False)
        return [t.name for t in resp.tables]

    def table_info(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        meta = self._table(name, self._deadline(timeout), refresh=True)
        i = meta.info
        return {
            "table_id": i.table_id,
            "name": i.name,
            "num_tablets": i.num_tablets,
            "replication": i.replication,
            "schema_version": i.schema_version,
        }

    def table_locations(self, name: str, timeout: float | None = None) -> pb.GetTableLocationsResponse:
        return self._master_call(
            "GetTableLocations", pb.GetTableLocationsRequest(name=name), self._deadline(timeout), False
        )

    def list_masters(self, timeout: float | None = None) -> pb.ListMastersResponse:
        return self._master_call("ListMasters", pb.ListMastersRequest(), self._deadline(timeout), False)

    def catalog_replica(self, addr: str, timeout: float = 2.0) -> pb.ReplicaStatus | None:
        """The masters' catalog replica held by the master at `addr`, as that master itself reports it (not
        routed to the leader): its role, term and indexes. None if it holds none; RpcError if unreachable."""
        catalog = "0" * 32  # the masters' own Raft group has a well-known id (node/master/catalog.py)
        resp = cast(
            pb.ListTabletsResponse,
            self.pool.call(
                addr,
                pbg.ConsensusStub,
                "ListReplicas",
                pb.ListTabletsRequest(tablet_id=catalog),
                timeout=timeout,
            ),
        )
        return next((r for r in resp.replicas if r.tablet_id == catalog), None)

    def list_tservers(self, timeout: float | None = None) -> pb.ListTServersResponse:
        return self._master_call("ListTServers", pb.ListTServersRequest(), self._deadline(timeout), False)

    def table(self, name: str) -> KuduTable:
        return KuduTable(self, name)

    # ------------------------------------------------------------------ tablets
    def _table(self, name: str, deadline: float, refresh: bool = False) -> _TableMeta:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("table name must be a non-empty str")
        with self._lock:
            meta = self._meta.get(name)
        if meta is not None and not refresh:
            return meta
        resp = self._master_call("GetTableLocations", pb.GetTableLocationsRequest(name=name), deadline, False)
        tablets = {}
        for t in resp.tablets:
            leader = next((r.uuid for r in t.replicas if r.role == "LEADER"), None)
            tablets[t.partition] = _Tablet(
                t.tablet_id, t.partition, [(r.uuid, r.addr) for r in t.replicas], leader
            )
        meta = _TableMeta(resp.table, tablets, time.monotonic())
        with self._lock:
            self._meta[name] = meta
        return meta

    def _tablet_call(
        self,
        table: str,
        partition: int,
        method: str,
        build: Callable[[str], Any],
        deadline: float,
        write: bool,
    ) -> Any:
        """Send to the tablet's leader. Retries only what provably had no effect; an ambiguous failure
        of a write raises IndeterminateError."""
        backoff = 0.02
        refresh = False
        last = ""
        attempt = 0
        while True:
            attempt += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise UnavailableError(f"{method} on {table}: no tablet leader within the deadline ({last})")
            meta = self._table(table, deadline, refresh=refresh)
            refresh = False
            tab = meta.tablets.get(partition)
            if tab is None:
                refresh = True
                last = "tablet locations incomplete"
                time.sleep(min(backoff, left))
                backoff = min(backoff * 2, 0.5)
                continue
            order = sorted(
                tab.replicas, key=lambda r: (self._is_suspect(r[1]), r[0] != tab.leader, random.random())
            )
            progressed = False
            for uuid, addr in order:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    resp = self.pool.call(
                        addr,
                        pbg.TabletServerStub,
                        method,
                        build(tab.tablet_id),
                        timeout=left if write else min(left, 2.0),
                    )
                    tab.leader = uuid
                    return resp
                except grpc.RpcError as exc:
                    last = f"{addr}: {exc.code().name} {exc.details()}"
                    stale, progressed = self._replica_failed(
                        exc, tab, uuid, addr, f"{method} on {table}", write
                    )
                    refresh = refresh or stale
                    if progressed:
                        break
            if not progressed:
                time.sleep(min(backoff, max(0.0, deadline - time.monotonic())))
                backoff = min(backoff * 2, 0.3)
                if attempt % 3 == 0:
                    refresh = True

    def _replica_failed(
        self, exc: grpc.RpcError, tab: _Tablet, uuid: str, addr: str, what: str, write: bool
    ) -> tuple[bool, bool]:
        """What one replica's failed answer means for `_tablet_call`: (locations are stale, a leader hint
        was taken so the round made progress); raises when the failure is final or the write ambiguous."""
        code = exc.code()
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            raise InvalidArgumentError(exc.details()) from None
        if code == grpc.StatusCode.NOT_FOUND:
            return True, False  # moved, deleted, or not created yet
        if _retryable_answer(exc):
            h = _hint(exc)
            if h is not None and h[0] != uuid and not self._is_suspect(h[1]):
                tab.leader = h[0]
                stale = all(h[0] != u for u, _ in tab.replicas)
                if stale:
                    tab.replicas.append(h)
                return stale, True
            return False, False
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            raise InvalidArgumentError(exc.details()) from None
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            self._suspect(addr)  # paused or partitioned: try the others first for a while
        if tab.leader == uuid:
            tab.leader = None
        if _not_sent(exc) or not write:
            return False, False
        raise IndeterminateError(
            f"{what} sent to {addr}, outcome unknown: {code.name} {exc.details()}"
        ) from None

    def _suspect(self, addr: str) -> None:
        with self._lock:
            self._suspects[addr] = time.monotonic() + SUSPECT_S

    def _is_suspect(self, addr: str) -> bool:
        with self._lock:
            until = self._suspects.get(addr)
            if until is not None and until < time.monotonic():
                self._suspects.pop(addr, None)
                return False
            return until is not None

    def _partition(self, table: str, key: Scalar, deadline: float) -> int:
        meta = self._table(table, deadline)
        return partition_of(key, meta.info.num_tablets)

    @staticmethod
    def _check(v: Any, what: str) -> Scalar:
        try:
            return check(v, what)
        except BadValue as exc:
            raise InvalidArgumentError(str(exc)) from None

    # ------------------------------------------------------------------ rows
    def get(self, table: str, key: Scalar, timeout: float | None = None) -> Scalar | None:
        """The row's value, or None if there is no row. Linearizable."""
        key = self._check(key, "key")
        deadline = self._deadline(timeout)
        resp = self._tablet_call(
            table,
            self._partition(table, key, deadline),
            "Read",
            lambda tid: pb.ReadRequest(tablet_id=tid, key=to_pb(key)),
            deadline,
            write=False,
        )
        return from_pb(resp.value) if resp.found else None

    def put(self, table: str, key: Scalar, value: Scalar, timeout: float | None = None) -> None:
        self.batch(table, [("put", key, value)], timeout)

    def delete(self, table: str, key: Scalar, timeout: float | None = None) -> None:
        self.batch(table, [("delete", key)], timeout)

    def cas(
        self,
        table: str,
        key: Scalar,
        expected: Scalar | None,
        new: Scalar | None,
        timeout: float | None = None,
    ) -> bool:
        """Set key to `new` iff it currently holds `expected` (None = no row / delete). True if it did."""
        return self.batch(table, [("cas", key, expected, new)], timeout)[0][0]

    def batch(
        self, table: str, ops: Iterable[tuple], timeout: float | None = None
    ) -> list[tuple[bool, Scalar | None]]:
        """Apply row ops: ("put", k, v), ("delete", k), ("cas", k, expected, new). The ops of each tablet
        are applied atomically (all or none: a failed CAS cancels that tablet's ops). Returns, per op,
        (applied, previous value). Raises IndeterminateError if any tablet's outcome is unknown."""
        parsed: list[pb.RowOp] = []
        for o in ops:
            if not isinstance(o, tuple | list) or not o:
                raise InvalidArgumentError(f"bad row op {o!r}")
            kind = o[0]
            if kind == "put" and len(o) == 3:
                parsed.append(
                    pb.RowOp(
                        type=pb.RowOp.PUT,
                        key=to_pb(self._check(o[1], "key")),
                        value=to_pb(self._check(o[2], "value")),
                    )
                )
            elif kind == "delete" and len(o) == 2:
                parsed.append(pb.RowOp(type=pb.RowOp.DELETE, key=to_pb(self._check(o[1], "key"))))
            elif kind == "cas" and len(o) == 4:
                exp = None if o[2] is None else self._check(o[2], "expected")
                new = None if o[3] is None else self._check(o[3], "value")
                parsed.append(
                    pb.RowOp(
                        type=pb.RowOp.CAS,
                        key=to_pb(self._check(o[1], "key")),
                        value=to_pb(new),
                        expected=to_pb(exp),
                    )
                )
            else:
                raise InvalidArgumentError(
                    f"bad row op {o!r}: expected ('put',k,v), ('delete',k) or ('cas',k,exp,new)"
                )
        if not parsed:
            raise InvalidArgumentError("empty batch")
        deadline = self._deadline(timeout)
        groups: dict[int, list[int]] = {}
        for i, op in enumerate(parsed):
            # every parsed op carries a key (set from a checked Scalar above), never an empty Value
            groups.setdefault(self._partition(table, cast(Scalar, from_pb(op.key)), deadline), []).append(i)
        out: list[tuple[bool, Scalar | None]] = [(False, None)] * len(parsed)
        indeterminate: IndeterminateError | None = None
        for part, idxs in groups.items():
            sub = [parsed[i] for i in idxs]

            def build(tid: str, sub: list[pb.RowOp] = sub) -> pb.WriteRequest:
                return pb.WriteRequest(tablet_id=tid, ops=sub)

            try:
                resp = self._tablet_call(table, part, "Write", build, deadline, write=True)
            except IndeterminateError as exc:
                indeterminate = exc
                continue
            except UnavailableError:
                if indeterminate is not None or part != next(iter(groups)):
                    raise IndeterminateError("batch partly applied: a later tablet was unavailable") from None
                raise
            for i, r in zip(idxs, resp.results, strict=True):
                out[i] = (r.ok, from_pb(r.previous))
        if indeterminate is not None:
            raise indeterminate
        return out

    def scan(
        self, table: str, start: Scalar | None = None, end: Scalar | None = None, timeout: float | None = None
    ) -> list[tuple[Scalar, Scalar]]:
        """Rows with start <= key < end (None = unbounded), in key order (ints before strings).
        Each tablet is read linearizably; the scan as a whole is not one snapshot."""
        start = None if start is None else self._check(start, "start")
        end = None if end is None else self._check(end, "end")
        deadline = self._deadline(timeout)
        meta = self._table(table, deadline)
        rows: list[tuple[Scalar, Scalar]] = []
        for part in range(meta.info.num_tablets):
            resp = self._tablet_call(
                table,
                part,
                "Scan",
                lambda tid: pb.ScanRequest(tablet_id=tid, start=to_pb(start), end=to_pb(end)),
                deadline,
                False,
            )
            # a stored row always has a key and a value (a delete removes the row)
            rows.extend((cast(Scalar, from_pb(r.key)), cast(Scalar, from_pb(r.value))) for r in resp.rows)
        rows.sort(key=lambda kv: sort_key(kv[0]))
        return rows


class KuduTable:
    """A handle on one table: the row operations without the table argument."""

    def __init__(self, client: KuduClient, name: str) -> None:
        self.client, self.name = client, name

    def get(self, key: Scalar, timeout: float | None = None) -> Scalar | None:
        return self.client.get(self.name, key, timeout)

    def put(self, key: Scalar, value: Scalar, timeout: float | None = None) -> None:
        self.client.put(self.name, key, value, timeout)

    def delete(self, key: Scalar, timeout: float | None = None) -> None:
        self.client.delete(self.name, key, timeout)

    def cas(
        self, key: Scalar, expected: Scalar | None, new: Scalar | None, timeout: float | None = None
    ) -> bool:
        return self.client.cas(self.name, key, expected, new, timeout)

    def batch(self, ops: Iterable[tuple], timeout: float | None = None) -> list[tuple[bool, Scalar | None]]:
        return self.client.batch(self.name, ops, timeout)

    def scan(
        self, start: Scalar | None = None, end: Scalar | None = None, timeout: float | None = None
    ) -> list[tuple[Scalar, Scalar]]:
        return self.client.scan(self.name, start, end, timeout)
