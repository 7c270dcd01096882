"""The master process: the catalog's Raft group, tablet server registry, DDL, placement, background
tablet creation and deletion, and 3-4-3 re-replication driven by tablet leaders' reports.

Leadership: only the master whose system-tablet replica is leader, has committed an entry of its
term and has rebuilt its caches from the catalog serves DDL and locations; the others answer
NOT_LEADER with a hint. Every master records tablet server liveness from heartbeats, so a new
leader is never cold (KUDU-1358), unless the `cold-tserver-cache` bug is on.
"""

from __future__ import annotations

import argparse
import logging
import random
import threading
import time
import uuid as uuidlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

import grpc

from faultline.node.bugs import Bug, BugSet
from faultline.node.clock import clock
from faultline.node.consensus import (
    ChangeType,
    ConfigChange,
    ErrorCode,
    Event,
    EventKind,
    MemberType,
    Peer,
    RaftConfig,
    RaftError,
)
from faultline.node.master.catalog import (
    CREATING,
    DELETED,
    RUNNING,
    SYS_TABLET,
    CatalogCache,
    TableRec,
    TabletRec,
    name_key,
    table_key,
    tablet_key,
)
from faultline.node.protos import common_pb2 as cpb
from faultline.node.protos import common_pb2_grpc as cpbg
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.codec import config_from_dict, config_to_dict
from faultline.node.server.host import ReplicaHost, abort_not_leader
from faultline.node.server.replica import Indeterminate, Replica, config_from_pb, config_to_pb
from faultline.node.tablet.state import CAS, Op, encode_write

log = logging.getLogger("faultline.node.master")

MAX_TABLETS = 256
MAX_NAME = 256
# A tablet still CREATING this long, most of its servers dead, is placed anew (Kudu: creation timeout).
CREATE_TIMEOUT_S = 30.0
READ_CONFIRM_S = 2.0  # how long a catalog read waits for a majority to confirm this master still leads


@dataclass
class TServerEntry:
    uuid: str
    addr: str
    last_seen: float


class MasterError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


class MasterServer:
    def __init__(self, host: ReplicaHost, masters: list[str], args: argparse.Namespace, bugs: Iterable[str]):
        self.host = host
        self.masters = masters
        self.bugs = BugSet(bugs)
        self.hb_s = args.heartbeat_interval_ms / 1000
        self.live_s = max(3.0, 6 * self.hb_s)
        self.cache = CatalogCache()
        self.loaded_term = -1  # term whose leadership has a rebuilt cache
        self.lock = threading.RLock()  # cache, registry, reports
        self.ddl_lock = threading.Lock()
        self.tservers: dict[str, TServerEntry] = {}
        self.full_reported: set[str] = set()  # tservers that sent this leader a full report
        self.ever_seen: set[str] = set()
        self.reports: dict[tuple[str, str], pb.ReplicaStatus] = {}  # (tablet, tserver) -> status
        self.leaders: dict[str, tuple[str, pb.ReplicaStatus]] = {}  # tablet -> (tserver, status)
        self.inflight: set[str] = set()
        self.last_sent: dict[str, float] = {}
        self.creating_since: dict[str, float] = {}  # tablet -> when this leader first saw it CREATING
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="master-rpc")
        self.stop_ev = threading.Event()
        self.service = MasterService(self)
        self.bootstrap_error = ""
        sb_path = host.layout.superblock(SYS_TABLET)
        self.initialized = sb_path.exists()
        host.event_listeners.append(self._on_event)
        if self.initialized:
            r = host.get(SYS_TABLET)
            if r is not None:
                self._check_identity(r.core.committed_config)

    def _check_identity(self, cfg: RaftConfig) -> None:
        for p in cfg.peers:
            if p.address == self.host.advertise and p.uuid != self.host.uuid:
                raise ValueError(
                    f"the master config lists {p.address} as {p.uuid}, but this data directory "
                    f"is formatted for {self.host.uuid} (formatted for another uuid?)"
                )

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        if not self.initialized:
            threading.Thread(target=self._bootstrap, name="master-bootstrap", daemon=True).start()
        threading.Thread(target=self._background, name="master-bg", daemon=True).start()

    def stop(self) -> None:
        self.stop_ev.set()
        self.pool.shutdown(wait=False, cancel_futures=True)

    def sys(self) -> Replica | None:
        return self.host.get(SYS_TABLET)

    def _bootstrap(self) -> None:
        """First start: learn every master's uuid, or find an existing config to join.

        If another master already holds a catalog whose config lists us in the initial config, we
        create our replica from it; if it does not list us (a master being added), we wait for the
        leader to add us and copy the catalog to us."""
        others = [a for a in self.masters if a != self.host.advertise]
        uuids: dict[str, str] = {self.host.advertise: self.host.uuid}
        deadline = time.monotonic() + 3600
        waited = 0
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            waited += 1
            if waited % 20 == 0 and self.bootstrap_error:
                log.info("catalog not initialized: %s", self.bootstrap_error)
            if self.host.get(SYS_TABLET) is not None:  # copied in by the leader meanwhile
                self.initialized = True
                return
            existing = None
            for a in others:
                try:
                    resp = cast(
                        pb.ListMastersResponse,
                        self.host.pool.call(
                            a, pbg.MasterStub, "ListMasters", pb.ListMastersRequest(), timeout=1.0
                        ),
                    )
                    if resp.masters:
                        existing = resp
                        break
                except grpc.RpcError:
                    pass
                if a not in uuids:
                    try:
                        ping = cast(
                            cpb.PingResponse,
                            self.host.pool.call(a, cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=1.0),
                        )
                        uuids[a] = ping.server.uuid
                    except grpc.RpcError:
                        pass
            if existing is not None:
                mine = [m for m in existing.masters if m.uuid == self.host.uuid]
                if mine and existing.config_index == -1:
                    cfg = RaftConfig(
                        tuple(
                            Peer(m.uuid, m.addr, MemberType.VOTER if m.voter else MemberType.NON_VOTER)
                            for m in existing.masters
                        ),
                        -1,
                    )
                    self._create_sys(cfg)
                    return
                self.bootstrap_error = "waiting to be added to the masters' Raft config (tool master add)"
            elif all(a in uuids for a in others):
                cfg = RaftConfig(tuple(Peer(uuids[a], a) for a in self.masters), -1)
                self._create_sys(cfg)
                return
            else:
                self.bootstrap_error = (
                    f"waiting for masters {[a for a in others if a not in uuids]} to answer"
                )
            self.stop_ev.wait(0.5)

    def _create_sys(self, cfg: RaftConfig) -> None:
        log.info(
            "creating the system catalog tablet with config %s", [(p.uuid, p.address) for p in cfg.peers]
        )
        self.host.create_replica(SYS_TABLET, "sys", "sys.catalog", cfg)
        self.initialized = True
        self.bootstrap_error = ""

    # ------------------------------------------------------------------ leadership
    def _on_event(self, r: Replica, ev: Event) -> None:
        if r.tablet_id != SYS_TABLET:
            return
        if ev.kind == EventKind.BECAME_LEADER:
            threading.Thread(
                target=self._become_leader, args=(ev.term,), name="master-load", daemon=True
            ).start()
        elif ev.kind == EventKind.LOST_LEADERSHIP:
            with self.lock:
                self.loaded_term = -1

    def _become_leader(self, term: int) -> None:
        """Rebuild every cache from the replicated catalog before serving (KUDU-1353, KUDU-1358)."""
        deadline = time.monotonic() + 30
        while not self.stop_ev.is_set() and time.monotonic() < deadline:
            r = self.sys()
            if r is None or r.core.term != term or not r.core.is_leader():
                return
            try:
                r.read_index(2.0)
                break
            except (RaftError, TimeoutError):
                self.stop_ev.wait(0.1)
        else:
            return
        with self.lock:
            if self.bugs.enabled(Bug.COLD_TSERVER_CACHE):
                # the bug: keep whatever caches this master had, and forget tablet servers
                self.tservers.clear()
            else:
                self.cache.load(r.tablet.items())
            self.reports.clear()
            self.leaders.clear()
            self.full_reported.clear()
            self.loaded_term = term
        log.info(
            "leader master for term %d: %d tables, %d tablets loaded",
            term,
            len(self.cache.tables),
            len(self.cache.tablets),
        )

    def leader_hint(self) -> str:
        r = self.sys()
        if r is None:
            return ""
        lid = r.leader_uuid()
        return f"{lid}@{r.leader_addr()}" if lid and lid != self.host.uuid else ""

    def require_leader(self) -> Replica:
        r = self.sys()
        if r is None:
            raise MasterError(
                grpc.StatusCode.UNAVAILABLE, f"catalog not initialized: {self.bootstrap_error or 'starting'}"
            )
        with r.lock:
            is_leader, term = r.core.is_leader(), r.core.term
        if not is_leader:
            raise MasterError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"NOT_LEADER: master {self.host.uuid} is not the leader",
                self.leader_hint(),
            )
        with self.lock:
            if self.loaded_term != term:
                raise MasterError(
                    grpc.StatusCode.UNAVAILABLE, "LEADER_NOT_READY: the leader is loading the catalog"
                )
        return r

    def confirm_leader(self) -> Replica:
        """`require_leader`, with leadership confirmed by a majority (a read index): a leader cut off from
        the others does not know it has been deposed, and would answer reads from a catalog the new
        leader has since changed (a deleted table listed again, a schema version going back)."""
        r = self.require_leader()
        try:
            r.read_index(READ_CONFIRM_S)
        except (RaftError, TimeoutError) as exc:
            raise MasterError(
                grpc.StatusCode.UNAVAILABLE, f"read not confirmed: {exc}", self.leader_hint()
            ) from None
        return r

    def is_leader(self) -> bool:
        try:
            self.require_leader()
            return True
        except MasterError:
            return False

    def replicate(self, ops: list[Op], timeout: float = 10.0) -> list:
        """One logical operation = one replicated batch. Failure fails the operation, never the master."""
        r = self.require_leader()
        try:
            results = r.propose(encode_write(ops), timeout)
        except RaftError as exc:
            raise MasterError(
                grpc.StatusCode.FAILED_PRECONDITION
                if exc.code == ErrorCode.NOT_LEADER
                else grpc.StatusCode.UNAVAILABLE,
                f"{exc.code.value}: {exc}",
                self.leader_hint(),
            ) from None
        except Indeterminate as exc:
            raise MasterError(grpc.StatusCode.UNAVAILABLE, f"catalog replication failed: {exc}") from None
        if results and all(x.ok for x in results):
            with self.lock:
                self.cache.apply_ops(ops)
        return results

    # ------------------------------------------------------------------ tablet servers
    def heartbeat(self, req: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        leader = self.is_leader()
        now = clock().monotonic()
        with self.lock:
            if leader or not self.bugs.enabled(Bug.COLD_TSERVER_CACHE):
                self.tservers[req.uuid] = TServerEntry(req.uuid, req.addr, now)
            masters = self._master_addrs()
            if not leader:
                return pb.HeartbeatResponse(is_leader=False, master_addrs=masters)
            term = self.loaded_term
            if req.report.full:
                self.full_reported.add(req.uuid)
                for k in [k for k in self.reports if k[1] == req.uuid]:
                    self.reports.pop(k)
            for st in req.report.replicas:
                self._record_report(req.uuid, st)
            if self.bugs.enabled(Bug.EDGE_TRIGGERED_REPORTS):
                needs_full = req.uuid not in self.ever_seen
            else:
                needs_full = req.uuid not in self.full_reported and not req.report.full
            self.ever_seen.add(req.uuid)
        return pb.HeartbeatResponse(
            is_leader=True, needs_full_report=needs_full, leader_term=term, master_addrs=masters
        )

    def _master_addrs(self) -> list[str]:
        r = self.sys()
        if r is None:
            return []
        return [p.address for p in r.core.config.peers if p.address]

    def _record_report(self, ts: str, st: pb.ReplicaStatus) -> None:
        key = (st.tablet_id, ts)
        if st.state in ("DELETED", "TOMBSTONED"):
            self.reports.pop(key, None)
        else:
            self.reports[key] = st
        cur = self.leaders.get(st.tablet_id)
        if st.role == "LEADER" and st.state == "RUNNING":
            if cur is None or cur[1].term <= st.term:
                self.leaders[st.tablet_id] = (ts, st)
        elif cur is not None and cur[0] == ts:
            self.leaders.pop(st.tablet_id, None)

    def live_tservers(self) -> list[TServerEntry]:
        now = clock().monotonic()
        with self.lock:
            return [t for t in self.tservers.values() if now - t.last_seen <= self.live_s]

    def tserver_addr(self, uuid: str) -> str:
        with self.lock:
            t = self.tservers.get(uuid)
            return t.addr if t else ""

    # ------------------------------------------------------------------ DDL
    def create_table(self, name: str, num_tablets: int, replication: int, table_id: str = "") -> str:
        if not name or len(name) > MAX_NAME or "/" in name:
            raise MasterError(
                grpc.StatusCode.INVALID_ARGUMENT, f"bad table name {name!r}: 1-{MAX_NAME} chars, no '/'"
            )
        if not 1 <= num_tablets <= MAX_TABLETS:
            raise MasterError(
                grpc.StatusCode.INVALID_ARGUMENT, f"num_tablets must be 1..{MAX_TABLETS}, got {num_tablets}"
            )
        if replication < 1 or replication % 2 == 0:
            raise MasterError(
                grpc.StatusCode.INVALID_ARGUMENT, f"replication must be odd and >= 1, got {replication}"
            )
        if table_id and not (len(table_id) == 32 and all(ch in "0123456789abcdef" for ch in table_id)):
            raise MasterError(grpc.StatusCode.INVALID_ARGUMENT, f"bad table_id {table_id!r}: 32 hex digits")
        self.require_leader()
        with self.ddl_lock:
            with self.lock:
                if table_id and self.cache.by_name.get(name) == table_id:
                    return table_id  # a retry of a create that succeeded
                if table_id and table_id in self.cache.tables:
                    raise MasterError(grpc.StatusCode.ALREADY_EXISTS, f"table id {table_id} was already used")
                if name in self.cache.by_name:
                    raise MasterError(grpc.StatusCode.ALREADY_EXISTS, f"table {name!r} already exists")
                live = self.live_tservers()
                if len(live) < replication:
                    raise MasterError(
                        grpc.StatusCode.UNAVAILABLE,
                        f"NOT_ENOUGH_TSERVERS: replication {replication} needs as many live tablet "
                        f"servers; {len(live)} live",
                    )
                counts = self.cache.replica_counts()
            table_id = table_id or uuidlib.uuid4().hex
            tablets = []
            for part in range(num_tablets):
                chosen = sorted(live, key=lambda t: (counts.get(t.uuid, 0), random.random()))[:replication]
                for t in chosen:
                    counts[t.uuid] = counts.get(t.uuid, 0) + 1
                cfg = RaftConfig(tuple(Peer(t.uuid, t.addr) for t in chosen), -1)
                tablets.append(TabletRec(uuidlib.uuid4().hex, table_id, part, CREATING, config_to_dict(cfg)))
            table = TableRec(
                table_id, name, num_tablets, replication, 1, RUNNING, [t.tablet_id for t in tablets]
            )
            ops = [
                Op(CAS, name_key(name), table_id, None),
                Op(CAS, table_key(table_id), table.to_json(), None),
            ]
            ops += [Op(CAS, tablet_key(t.tablet_id), t.to_json(), None) for t in tablets]
            results = self.replicate(ops)
            if not results[0].ok:
                raise MasterError(grpc.StatusCode.ALREADY_EXISTS, f"table {name!r} already exists")
        log.info("created table %s (%s) with %d tablets x %d", name, table_id, num_tablets, replication)
        for tab in tablets:
            self._send_creates(tab)
        return table_id

    def delete_table(self, name: str, table_id: str = "") -> None:
        self.require_leader()
        with self.ddl_lock:
            with self.lock:
                table = self.cache.table_by_name(name)
                if table_id and (table is None or table.table_id != table_id):
                    old = self.cache.tables.get(table_id)
                    if old is not None and old.name == name and old.state == DELETED:
                        return  # a retry of a delete that succeeded
                    raise MasterError(
                        grpc.StatusCode.NOT_FOUND, f"table {name!r} with id {table_id} not found"
                    )
                if table is None:
                    raise MasterError(grpc.StatusCode.NOT_FOUND, f"table {name!r} not found")
                new = TableRec(**{**table.__dict__, "state": DELETED})
                ops = [
                    Op(CAS, name_key(name), None, table.table_id),
                    self.cache.put_op(table_key(table.table_id), new.to_json()),
                ]
                for tid in table.tablet_ids:
                    t = self.cache.tablets.get(tid)
                    if t is not None:
                        ops.append(
                            self.cache.put_op(
                                tablet_key(tid), TabletRec(**{**t.__dict__, "state": DELETED}).to_json()
                            )
                        )
            results = self.replicate(ops)
            if not all(x.ok for x in results):
                raise MasterError(grpc.StatusCode.ABORTED, f"table {name!r} changed concurrently; retry")
        log.info("deleted table %s (%s)", name, table.table_id)

    def alter_table(self, name: str, schema_version: int) -> int:
        self.require_leader()
        with self.ddl_lock:
            with self.lock:
                table = self.cache.table_by_name(name)
                if table is None:
                    raise MasterError(grpc.StatusCode.NOT_FOUND, f"table {name!r} not found")
                if schema_version == table.schema_version:
                    return schema_version  # already there (a retry, or a no-op)
                if schema_version < table.schema_version:
                    raise MasterError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"schema version must grow: table {name!r} is at {table.schema_version}",
                    )
                new = TableRec(**{**table.__dict__, "schema_version": schema_version})
                ops = [self.cache.put_op(table_key(table.table_id), new.to_json())]
            results = self.replicate(ops)
            if not results[0].ok:
                raise MasterError(grpc.StatusCode.ABORTED, f"table {name!r} changed concurrently; retry")
        return schema_version

    def locations(self, name: str) -> pb.GetTableLocationsResponse:
        self.confirm_leader()
        with self.lock:
            table = self.cache.table_by_name(name)
            if table is None:
                raise MasterError(grpc.StatusCode.NOT_FOUND, f"table {name!r} not found")
            out = pb.GetTableLocationsResponse(table=table_info(table))
            for tid in table.tablet_ids:
                t = self.cache.tablets.get(tid)
                if t is None:
                    continue
                lead = self.leaders.get(tid)
                loc = pb.TabletLocation(
                    tablet_id=tid, partition=t.partition, state=t.state, config_index=t.config_index()
                )
                for p in t.peers():
                    role = (
                        "LEADER"
                        if lead and lead[0] == p["uuid"]
                        else ("FOLLOWER" if p.get("member_type", "VOTER") == "VOTER" else "LEARNER")
                    )
                    loc.replicas.append(
                        pb.ReplicaLocation(
                            uuid=p["uuid"],
                            addr=p.get("address", ""),
                            role=role,
                            voter=p.get("member_type", "VOTER") == "VOTER",
                        )
                    )
                out.tablets.append(loc)
            return out

    def list_tables(self) -> list[pb.TableInfo]:
        self.confirm_leader()
        with self.lock:
            return [
                table_info(t)
                for t in sorted(self.cache.tables.values(), key=lambda t: t.name)
                if t.state != DELETED
            ]

    # ------------------------------------------------------------------ masters
    def list_masters(self) -> pb.ListMastersResponse:
        r = self.sys()
        if r is None:
            return pb.ListMastersResponse()
        with r.lock:
            cfg, lid, committed = r.core.config, r.core.leader_id, r.core.committed_config
        return pb.ListMastersResponse(
            config_index=committed.opid_index,
            masters=[
                pb.MasterInfo(
                    uuid=p.uuid,
                    addr=p.address,
                    voter=p.member_type == MemberType.VOTER,
                    role="LEADER"
                    if p.uuid == lid
                    else ("FOLLOWER" if p.member_type == MemberType.VOTER else "LEARNER"),
                )
                for p in cfg.peers
            ],
        )

    def change_masters(self, add: bool, addr: str, uuid: str, timeout: float) -> int:
        r = self.require_leader()
        cfg = r.core.config
        if add:
            if not uuid:
                try:
                    ping = cast(
                        cpb.PingResponse,
                        self.host.pool.call(addr, cpbg.GenericStub, "Ping", cpb.PingRequest(), timeout=3.0),
                    )
                    uuid = ping.server.uuid
                except grpc.RpcError as exc:
                    raise MasterError(
                        grpc.StatusCode.UNAVAILABLE,
                        f"NEW_MASTER_UNREACHABLE: cannot reach {addr}: {exc.code().name}",
                    ) from None
            if cfg.peer(uuid) is not None:
                raise MasterError(grpc.StatusCode.ALREADY_EXISTS, f"master {uuid} is already a member")
            change = ConfigChange(ChangeType.ADD_PEER, Peer(uuid, addr, MemberType.NON_VOTER, promote=True))
        else:
            victim = [p for p in cfg.peers if p.address == addr or p.uuid == uuid]
            if not victim:
                raise MasterError(grpc.StatusCode.NOT_FOUND, f"no master at {addr or uuid} in the config")
            change = ConfigChange(ChangeType.REMOVE_PEER, victim[0])
        try:
            return r.change_config(change, timeout)
        except RaftError as exc:
            code = (
                grpc.StatusCode.FAILED_PRECONDITION
                if exc.code in (ErrorCode.NOT_LEADER, ErrorCode.STEPPING_DOWN)
                else grpc.StatusCode.UNAVAILABLE
                if exc.code
                in (
                    ErrorCode.CONFIG_CHANGE_PENDING,
                    ErrorCode.LEADER_NOT_READY,
                    ErrorCode.TRANSFER_IN_PROGRESS,
                )
                else grpc.StatusCode.INVALID_ARGUMENT
            )
            raise MasterError(code, f"{exc.code.value}: {exc}", self.leader_hint()) from None
        except Indeterminate as exc:
            raise MasterError(grpc.StatusCode.UNAVAILABLE, f"config change outcome unknown: {exc}") from None

    # ------------------------------------------------------------------ background work
    def _async(self, key: str, fn, *args, every: float = 2.0) -> None:
        """Run an RPC to a tablet server off-thread, at most one in flight per key, rate-limited."""
        now = time.monotonic()
        with self.lock:
            if key in self.inflight or now - self.last_sent.get(key, 0) < every:
                return
            self.inflight.add(key)
            self.last_sent[key] = now

        def run() -> None:
            try:
                fn(*args)
            except grpc.RpcError as exc:
                log.info("%s: %s %s", key, exc.code(), exc.details())
            except Exception:
                log.exception("%s", key)
            finally:
                with self.lock:
                    self.inflight.discard(key)

        try:
            self.pool.submit(run)
        except RuntimeError:
            with self.lock:
                self.inflight.discard(key)

    def _ts_call(self, addr: str, method: str, req, timeout: float = 10.0):
        stub = pbg.ConsensusStub if method in ("ChangeConfig", "LeaderStepDown") else pbg.TabletServerStub
        return self.host.pool.call(addr, stub, method, req, timeout=timeout)

    def _send_creates(self, t: TabletRec) -> None:
        with self.lock:
            table = self.cache.tables.get(t.table_id)
        cfg = config_from_dict(t.config)
        for p in cfg.peers:
            req = pb.CreateTabletRequest(
                tablet_id=t.tablet_id,
                table_id=t.table_id,
                table_name=table.name if table else "",
                config=config_to_pb(cfg),
                schema_version=table.schema_version if table else 0,
            )
            self._async(f"create:{t.tablet_id}:{p.uuid}", self._ts_call, p.address, "CreateTablet", req)

    def _creation_stuck(self, t: TabletRec) -> bool:
        """A CREATING tablet with no leader after CREATE_TIMEOUT_S, most of whose placed servers are not
        live: it can never elect (the servers it was placed on died), so re-sending the creates is futile."""
        now = clock().monotonic()
        since = self.creating_since.setdefault(t.tablet_id, now)
        if now - since < CREATE_TIMEOUT_S:
            return False
        live = {x.uuid for x in self.live_tservers()}
        placed = [p["uuid"] for p in t.peers()]
        return 2 * sum(u in live for u in placed) <= len(placed)

    def _replace_tablet(self, old: TabletRec) -> None:
        """Kudu's answer to a tablet whose creation timed out: a new tablet (new id, same partition) placed
        on live servers takes its place in the table; the old one is marked deleted, so its replicas on
        servers that are still alive get tombstoned."""
        with self.ddl_lock:
            with self.lock:
                table = self.cache.tables.get(old.table_id)
                current = self.cache.tablets.get(old.tablet_id)
                if table is None or table.state == DELETED or current is None or current.state != CREATING:
                    return
                live = self.live_tservers()
                if len(live) < table.replication:
                    return
                counts = self.cache.replica_counts()
            chosen = sorted(live, key=lambda x: (counts.get(x.uuid, 0), random.random()))[: table.replication]
            cfg = RaftConfig(tuple(Peer(x.uuid, x.addr) for x in chosen), -1)
            new = TabletRec(uuidlib.uuid4().hex, old.table_id, old.partition, CREATING, config_to_dict(cfg))
            ids = [new.tablet_id if tid == old.tablet_id else tid for tid in table.tablet_ids]
            new_table = TableRec(
                table.table_id,
                table.name,
                table.num_tablets,
                table.replication,
                table.schema_version,
                table.state,
                ids,
            )
            gone = TabletRec(old.tablet_id, old.table_id, old.partition, DELETED, old.config)
            with self.lock:
                ops = [
                    self.cache.put_op(table_key(table.table_id), new_table.to_json()),
                    self.cache.put_op(tablet_key(old.tablet_id), gone.to_json()),
                    Op(CAS, tablet_key(new.tablet_id), new.to_json(), None),
                ]
            try:
                results = self.replicate(ops, timeout=5.0)
            except MasterError as exc:
                log.info("replacing tablet %s: %s", old.tablet_id, exc)
                return
            if not all(r.ok for r in results):
                return  # the catalog moved meanwhile (an alter, a delete): look again next round
        self.creating_since.pop(old.tablet_id, None)
        log.warning(
            "tablet %s of table %s could not be created on its servers for %.0f s (most are not live); "
            "replaced by tablet %s on %s",
            old.tablet_id,
            table.name,
            CREATE_TIMEOUT_S,
            new.tablet_id,
            ", ".join(x.uuid for x in chosen),
        )
        self._send_creates(new)

    def _background(self) -> None:
        while not clock().sleep_on(self.stop_ev, self.hb_s):
            try:
                if self.is_leader():
                    self._background_once()
            except MasterError:
                pass
            except Exception:
                log.exception("background task")

    def _background_once(self) -> None:
        with self.lock:
            tablets = list(self.cache.tablets.values())
            tables = dict(self.cache.tables)
            reports = dict(self.reports)
            leaders = dict(self.leaders)
        for t in tablets:
            table = tables.get(t.table_id)
            lead = leaders.get(t.tablet_id)
            if t.state == DELETED or table is None or table.state == DELETED:
                for (tid, ts), st in reports.items():
                    if tid == t.tablet_id and st.state == "RUNNING":
                        addr = self.tserver_addr(ts)
                        if addr:
                            self._async(
                                f"delete:{tid}:{ts}",
                                self._ts_call,
                                addr,
                                "DeleteTablet",
                                pb.DeleteTabletRequest(
                                    tablet_id=tid, tombstone=True, cas_config_index=-2, reason="table deleted"
                                ),
                            )
                continue
            if lead is None:
                if t.state == CREATING:
                    if self._creation_stuck(t):
                        self._replace_tablet(t)
                    else:
                        self._send_creates(t)
                continue
            self.creating_since.pop(t.tablet_id, None)  # it has a leader: its creation finished
            ts, st = lead
            self._sync_config(t, st)
            self._rereplicate(t, table, ts, st)
            if st.schema_version < table.schema_version:
                self._async(
                    f"alter:{t.tablet_id}",
                    self._ts_call,
                    self.tserver_addr(ts) or st_addr(st, ts),
                    "AlterSchema",
                    pb.AlterSchemaRequest(tablet_id=t.tablet_id, schema_version=table.schema_version),
                )
            # replicas evicted from the config: tombstone them (CAS on their config index)
            members = {p["uuid"] for p in t.peers()}
            for (tid, rts), rst in reports.items():
                if tid != t.tablet_id or rts in members or rst.state != "RUNNING":
                    continue
                if rst.committed_config.index < st.committed_config.index:
                    addr = self.tserver_addr(rts)
                    if addr:
                        self._async(
                            f"evict:{tid}:{rts}",
                            self._ts_call,
                            addr,
                            "DeleteTablet",
                            pb.DeleteTabletRequest(
                                tablet_id=tid,
                                tombstone=True,
                                cas_config_index=rst.committed_config.index,
                                reason="no longer in the config",
                            ),
                        )

    def _sync_config(self, t: TabletRec, st: pb.ReplicaStatus) -> None:
        """Record the leader's committed config in the catalog (CAS on the row we last saw)."""
        cfg = config_to_dict(config_from_pb(st.committed_config))
        if t.state == RUNNING and cfg == t.config:
            return
        if st.committed_config.index < t.config_index():
            return
        new = TabletRec(t.tablet_id, t.table_id, t.partition, RUNNING, cfg)
        with self.lock:
            op = self.cache.put_op(tablet_key(t.tablet_id), new.to_json())
        try:
            self.replicate([op], timeout=5.0)
        except MasterError as exc:
            log.info("updating tablet %s in the catalog: %s", t.tablet_id, exc)

    def _rereplicate(self, t: TabletRec, table: TableRec, ts: str, st: pb.ReplicaStatus) -> None:
        """Kudu's 3-4-3: add a NON_VOTER (promote) for a failed voter, evict the failed one once the
        voter count exceeds the replication factor. One change at a time, CAS on the config index."""
        if st.pending_config.peers:
            return
        cfg = config_from_pb(st.committed_config)
        failed = set(st.failed_peers)
        voters = [p for p in cfg.peers if p.member_type == MemberType.VOTER]
        nonvoters = [p for p in cfg.peers if p.member_type == MemberType.NON_VOTER]
        peer = cfg.peer(ts)
        addr = (self.tserver_addr(ts) or peer.address) if peer else self.tserver_addr(ts)
        change = None
        bad_nv = [p for p in nonvoters if p.uuid in failed]
        bad_v = [p for p in voters if p.uuid in failed]
        if bad_nv:
            change = ConfigChange(ChangeType.REMOVE_PEER, bad_nv[0])
        elif bad_v and len(voters) > table.replication:
            change = ConfigChange(ChangeType.REMOVE_PEER, bad_v[0])
        elif (bad_v or len(voters) < table.replication) and not nonvoters:
            now = clock().monotonic()
            fresh = max(1.0, 3 * self.hb_s)  # a replacement must be heard from very recently
            live = [
                x
                for x in self.live_tservers()
                if cfg.peer(x.uuid) is None and now - x.last_seen <= fresh and x.uuid not in failed
            ]
            if not live:
                return
            counts = self.cache.replica_counts()
            pick = min(live, key=lambda x: (counts.get(x.uuid, 0), random.random()))
            change = ConfigChange(
                ChangeType.ADD_PEER, Peer(pick.uuid, pick.addr, MemberType.NON_VOTER, promote=True)
            )
        if change is None or not addr:
            return
        req = pb.ChangeConfigRequest(
            tablet_id=t.tablet_id,
            cas_config_index=cfg.opid_index,
            type={
                ChangeType.ADD_PEER: pb.ChangeConfigRequest.ADD_PEER,
                ChangeType.REMOVE_PEER: pb.ChangeConfigRequest.REMOVE_PEER,
            }[change.type],
            peer=pb.RaftPeer(
                uuid=change.peer.uuid,
                addr=change.peer.address,
                voter=change.peer.member_type == MemberType.VOTER,
                promote=change.peer.promote,
            ),
        )
        log.info(
            "re-replication of %s: %s %s (cas %d)",
            t.tablet_id,
            change.type.value,
            change.peer.uuid,
            cfg.opid_index,
        )
        self._async(f"cc:{t.tablet_id}", self._ts_call, addr, "ChangeConfig", req, every=3.0)


def st_addr(st: pb.ReplicaStatus, uuid: str) -> str:
    for p in st.committed_config.peers:
        if p.uuid == uuid:
            return p.addr
    return ""


def table_info(t: TableRec) -> pb.TableInfo:
    return pb.TableInfo(
        table_id=t.table_id,
        name=t.name,
        num_tablets=t.num_tablets,
        replication=t.replication,
        schema_version=t.schema_version,
        state=t.state,
    )


class MasterService(pbg.MasterServicer):
    def __init__(self, m: MasterServer) -> None:
        self.m = m

    def _run(self, context, fn, *args):
        try:
            return fn(*args)
        except MasterError as exc:
            if exc.hint:
                context.set_trailing_metadata((("leader-hint", exc.hint),))
            context.abort(exc.code, str(exc))

    def CreateTable(self, request, context):
        tid = self._run(
            context,
            self.m.create_table,
            request.name,
            request.num_tablets,
            request.replication,
            request.table_id,
        )
        return pb.CreateTableResponse(table_id=tid)

    def DeleteTable(self, request, context):
        self._run(context, self.m.delete_table, request.name, request.table_id)
        return pb.DeleteTableResponse()

    def AlterTable(self, request, context):
        v = self._run(context, self.m.alter_table, request.name, request.schema_version)
        return pb.AlterTableResponse(schema_version=v)

    def ListTables(self, request, context):
        return pb.ListTablesResponse(tables=self._run(context, self.m.list_tables))

    def GetTableLocations(self, request, context):
        return self._run(context, self.m.locations, request.name)

    def Heartbeat(self, request, context):
        return self.m.heartbeat(request)

    def ListTServers(self, request, context):
        now = clock().monotonic()
        with self.m.lock:
            servers = [
                pb.TServerInfo(
                    uuid=t.uuid,
                    addr=t.addr,
                    seconds_since_heartbeat=now - t.last_seen,
                    live=now - t.last_seen <= self.m.live_s,
                )
                for t in self.m.tservers.values()
            ]
        return pb.ListTServersResponse(servers=sorted(servers, key=lambda s: s.addr))

    def ListMasters(self, request, context):
        return self.m.list_masters()

    def ChangeMasters(self, request, context):
        if not request.addr and not request.uuid:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the master's address is required")
        timeout = max(1.0, (context.time_remaining() or 15.0) - 0.5)
        idx = self._run(context, self.m.change_masters, request.add, request.addr, request.uuid, timeout)
        return pb.ChangeMastersResponse(config_index=idx)


__all__ = ["SYS_TABLET", "MasterServer", "MasterService", "abort_not_leader"]
