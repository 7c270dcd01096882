"""Hosts the Raft replicas of one node (tablet server or master) and serves the Consensus RPCs:
message delivery, config changes, leadership, unsafe recovery, and tablet copy in both roles.

Replica life cycle, recorded in the superblock (DIR/tablet-meta/<tablet>):
  COPYING     a tablet copy is writing files; on restart this is turned into a tombstone, so a
              half-copied replica can never vote or serve on stale data
  RUNNING     driven by a Replica
  TOMBSTONED  data deleted; only the superblock (and the cmeta, for the term) remain
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import grpc

from faultline.node.clock import clock
from faultline.node.consensus import (
    ChangeType,
    ConfigChange,
    ErrorCode,
    Event,
    HardState,
    MemberType,
    Peer,
    RaftConfig,
    RaftError,
)
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.codec import config_from_dict, config_to_dict, decode_entry, encode_entry
from faultline.node.server.flags import FlagError, RuntimeFlags
from faultline.node.server.framed import FramedListener
from faultline.node.server.fs import FsLayout, atomic_write
from faultline.node.server.replica import DriverOptions, Indeterminate, Replica, config_from_pb, config_to_pb
from faultline.node.server.rpc import ChannelPool
from faultline.node.server.storage import ReplicaStorage, WalCorruption
from faultline.node.server.transport import Transport

log = logging.getLogger("faultline.node.host")

RUNNING, TOMBSTONED, COPYING = "RUNNING", "TOMBSTONED", "COPYING"
COPY_SESSION_TTL_S = 120.0
REPLY_WAIT_S = 0.05  # how long a Send waits for the answers it carries back; later ones go on their own,
# so a slow receiver never holds the sender (and the heartbeats behind it) for long


class HostError(Exception):
    """A replica-admin request that cannot be done; `code` is the gRPC status to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Superblock:
    tablet_id: str
    table_id: str = ""
    table_name: str = ""
    state: str = RUNNING
    owner: str = ""  # uuid of the server whose data directory holds it
    initial_config: dict[str, Any] = field(default_factory=dict)
    schema_version: int = 0
    reason: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    @staticmethod
    def from_bytes(b: bytes) -> Superblock:
        d = json.loads(b)
        return Superblock(**{k: d[k] for k in Superblock.__dataclass_fields__ if k in d})


def read_superblock(layout: FsLayout, tablet_id: str) -> Superblock:
    return Superblock.from_bytes(layout.superblock(tablet_id).read_bytes())


def write_superblock(layout: FsLayout, sb: Superblock) -> None:
    atomic_write(layout.superblock(sb.tablet_id), sb.to_bytes())


# ---------------------------------------------------------------------- tablet copy (client side)
def fetch_copy(
    pool: ChannelPool, source_addr: str, tablet_id: str, requestor: str, timeout: float = 30.0
) -> pb.BeginCopySessionResponse:
    return cast(
        pb.BeginCopySessionResponse,
        pool.call(
            source_addr,
            pbg.ConsensusStub,
            "BeginCopySession",
            pb.BeginCopySessionRequest(tablet_id=tablet_id, requestor_uuid=requestor),
            timeout=timeout,
        ),
    )


def end_copy(pool: ChannelPool, source_addr: str, session_id: str) -> None:
    try:
        pool.call(
            source_addr,
            pbg.ConsensusStub,
            "EndCopySession",
            pb.EndCopySessionRequest(session_id=session_id),
            timeout=5.0,
        )
    except grpc.RpcError as exc:  # the session expires on its own
        log.info("ending copy session %s on %s: %s", session_id, source_addr, exc.code())


def install_copy(
    layout: FsLayout,
    my_uuid: str,
    tablet_id: str,
    resp: pb.BeginCopySessionResponse,
    fsync: bool = True,
    table_id: str = "",
    table_name: str = "",
) -> Superblock:
    """Write a copied replica: superblock COPYING first, then snapshot + WAL + cmeta, then RUNNING.

    Dying anywhere in between leaves COPYING, which the next start turns into a tombstone."""
    src_sb = Superblock.from_bytes(resp.superblock)
    sb = Superblock(
        tablet_id,
        src_sb.table_id or table_id,
        src_sb.table_name or table_name,
        COPYING,
        my_uuid,
        src_sb.initial_config,
        src_sb.schema_version,
    )
    write_superblock(layout, sb)
    cm = json.loads(resp.cmeta)
    storage = ReplicaStorage(layout, tablet_id, fsync=fsync)
    storage.destroy_data(keep_cmeta=False)
    storage.create(
        config_from_dict(cm["committed_config"]),
        term=int(cm["term"]),
        snapshot=resp.snapshot,
        snapshot_index=resp.snapshot_index,
        snapshot_term=resp.snapshot_term,
        entries=[decode_entry(b) for b in resp.log_entries],
    )
    storage.close()
    sb.state = RUNNING
    write_superblock(layout, sb)
    return sb


@dataclass
class _CopySession:
    tablet_id: str
    anchor_index: int
    expires: float


class ReplicaHost:
    """All replicas of one node, plus the Consensus service that reaches them."""

    def __init__(
        self,
        uuid: str,
        layout: FsLayout,
        advertise: str,
        pool: ChannelPool,
        opts: DriverOptions,
        fsync: bool,
        auto_copy: bool = True,
    ) -> None:
        self.uuid = uuid
        self.layout = layout
        self.advertise = advertise
        self.pool = pool
        self.transport = Transport(pool, on_reply=self.deliver_messages)
        self.opts = opts
        self.fsync = fsync
        self.auto_copy = auto_copy
        self.lock = threading.RLock()
        self.replicas: dict[str, Replica] = {}
        self.superblocks: dict[str, Superblock] = {}
        self.copying: set[str] = set()
        self.sessions: dict[str, _CopySession] = {}
        self.event_listeners: list[Callable[[Replica, Event], None]] = []
        self.apply_listeners: list[Callable[[Replica, int], None]] = []
        self.changed: set[str] = set()  # tablets whose state changed since the last report
        self.flags = RuntimeFlags()  # shared by every replica of this node (SetFlag)
        self.framed: FramedListener | None = None
        self.framed_port = 0  # named in every ConsensusAck; 0 until listen_framed

    # ------------------------------------------------------------------ life cycle
    def load_all(self) -> None:
        """Open every replica in the data directory; raises CmetaCorruption / ValueError on damage."""
        for tid in self.layout.tablet_ids():
            try:
                sb = read_superblock(self.layout, tid)
            except (ValueError, KeyError, TypeError, OSError) as exc:
                raise ValueError(f"corrupt tablet metadata {self.layout.superblock(tid)}: {exc}") from exc
            if sb.owner and sb.owner != self.uuid:
                raise ValueError(
                    f"tablet {tid} in {self.layout.root} belongs to server {sb.owner}, "
                    f"but this data directory is formatted for {self.uuid}"
                )
            if sb.state == COPYING:
                log.warning("%s: tablet copy was interrupted; tombstoning the half copy", tid)
                self._tombstone_files(sb, "interrupted tablet copy")
            self.superblocks[tid] = sb
            if sb.state == RUNNING:
                self._open(sb)

    def _open(self, sb: Superblock) -> Replica:
        storage = ReplicaStorage(self.layout, sb.tablet_id, fsync=self.fsync, bugs=self.opts.bugs)
        state, snap, si, st = storage.load(config_from_dict(sb.initial_config))
        r = Replica(
            self.uuid,
            sb.tablet_id,
            storage,
            state,
            snap,
            si,
            st,
            self.opts,
            self.transport.send,
            self.advertise,
            on_event=self._on_event,
            on_apply=self._on_apply,
        )

        def anchor(tid: str = sb.tablet_id) -> int | None:
            return self.log_anchor(tid)

        r.log_anchor = anchor
        r.flags = self.flags
        with self.lock:
            self.replicas[sb.tablet_id] = r
            self.changed.add(sb.tablet_id)
        r.start()
        return r

    def _on_event(self, r: Replica, ev: Event) -> None:
        with self.lock:
            self.changed.add(r.tablet_id)
        for fn in self.event_listeners:
            fn(r, ev)

    def _on_apply(self, r: Replica, index: int) -> None:
        for fn in self.apply_listeners:
            fn(r, index)

    def stop(self) -> None:
        self.transport.stop()
        if self.framed is not None:
            self.framed.stop()
        with self.lock:
            reps = list(self.replicas.values())
        for r in reps:
            r.stop()

    def get(self, tablet_id: str) -> Replica | None:
        with self.lock:
            return self.replicas.get(tablet_id)

    # ------------------------------------------------------------------ admin
    def create_replica(
        self, tablet_id: str, table_id: str, table_name: str, config: RaftConfig, schema_version: int = 0
    ) -> Replica:
        """Create a new replica with `config` (idempotent if it already runs)."""
        with self.lock:
            r = self.replicas.get(tablet_id)
            if r is not None:
                return r
            if tablet_id in self.copying:
                raise HostError(grpc.StatusCode.UNAVAILABLE, f"tablet {tablet_id} is being copied")
            if config.peer(self.uuid) is None:
                raise HostError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"config of {tablet_id} does not include this server {self.uuid}",
                )
            sb = Superblock(
                tablet_id, table_id, table_name, COPYING, self.uuid, config_to_dict(config), schema_version
            )
            write_superblock(self.layout, sb)
            storage = ReplicaStorage(self.layout, tablet_id, fsync=self.fsync, bugs=self.opts.bugs)
            storage.destroy_data(keep_cmeta=False)
            storage.create(config)
            storage.close()
            sb.state = RUNNING
            write_superblock(self.layout, sb)
            self.superblocks[tablet_id] = sb
            log.info("created replica %s of table %s", tablet_id, table_name)
            return self._open(sb)

    def _tombstone_files(self, sb: Superblock, reason: str) -> None:
        storage = ReplicaStorage(self.layout, sb.tablet_id, fsync=self.fsync, bugs=self.opts.bugs)
        storage.destroy_data(keep_cmeta=True)
        sb.state, sb.reason = TOMBSTONED, reason
        write_superblock(self.layout, sb)

    def delete_replica(
        self, tablet_id: str, tombstone: bool, cas_config_index: int | None, reason: str = ""
    ) -> None:
        with self.lock:
            sb = self.superblocks.get(tablet_id)
            if sb is None:
                raise HostError(grpc.StatusCode.NOT_FOUND, f"tablet {tablet_id} not found on {self.uuid}")
            r = self.replicas.get(tablet_id)
            if r is not None and cas_config_index is not None:
                idx = r.core.committed_config.opid_index
                if idx != cas_config_index:
                    raise HostError(
                        grpc.StatusCode.FAILED_PRECONDITION, f"config index is {idx}, not {cas_config_index}"
                    )
            if r is not None:
                self.replicas.pop(tablet_id)
        if r is not None:
            r.stop()
        with self.lock:
            if tombstone:
                self._tombstone_files(sb, reason or "deleted")
            else:
                ReplicaStorage(self.layout, tablet_id).destroy_data(keep_cmeta=False)
                self.layout.superblock(tablet_id).unlink(missing_ok=True)
                self.superblocks.pop(tablet_id, None)
            self.changed.add(tablet_id)
        log.info("deleted replica %s (tombstone=%s): %s", tablet_id, tombstone, reason)

    def copy_from(
        self, tablet_id: str, source_addr: str, table_id: str = "", table_name: str = ""
    ) -> Replica:
        """Tablet copy: replace any local replica (must be absent or tombstoned) with the source's."""
        with self.lock:
            if tablet_id in self.replicas:
                raise HostError(grpc.StatusCode.ALREADY_EXISTS, f"tablet {tablet_id} already runs here")
            if tablet_id in self.copying:
                raise HostError(grpc.StatusCode.UNAVAILABLE, f"tablet {tablet_id} is already being copied")
            self.copying.add(tablet_id)
        session = ""
        try:
            resp = fetch_copy(self.pool, source_addr, tablet_id, self.uuid)
            session = resp.session_id
            sb = install_copy(self.layout, self.uuid, tablet_id, resp, self.fsync, table_id, table_name)
            with self.lock:
                self.superblocks[tablet_id] = sb
            log.info(
                "copied tablet %s from %s (%d log entries after snapshot %d)",
                tablet_id,
                source_addr,
                len(resp.log_entries),
                resp.snapshot_index,
            )
            return self._open(sb)
        except Exception:
            sb0 = self.superblocks.get(tablet_id) or Superblock(
                tablet_id, table_id, table_name, COPYING, self.uuid
            )
            try:
                if self.layout.superblock(tablet_id).exists():
                    self._tombstone_files(read_superblock(self.layout, tablet_id), "failed tablet copy")
                    with self.lock:
                        self.superblocks[tablet_id] = read_superblock(self.layout, tablet_id)
            except Exception:
                log.exception("tombstoning failed copy of %s (%s)", tablet_id, sb0.state)
            raise
        finally:
            if session:
                end_copy(self.pool, source_addr, session)
            with self.lock:
                self.copying.discard(tablet_id)

    def begin_copy_session(self, tablet_id: str) -> pb.BeginCopySessionResponse:
        r = self.get(tablet_id)
        if r is None:
            raise HostError(grpc.StatusCode.NOT_FOUND, f"tablet {tablet_id} not running on {self.uuid}")
        with r.lock:
            snap, si, st = r.tablet.snapshot()
            try:
                entries = r.storage.entries_after(si)
            except WalCorruption as exc:
                # the file was damaged under the running replica: never ship what the CRC does not vouch for
                log.error(
                    "tablet %s: refusing to be a tablet copy source, its WAL is damaged: %s", tablet_id, exc
                )
                raise HostError(
                    grpc.StatusCode.DATA_LOSS, f"tablet {tablet_id}: WAL damaged: {exc}"
                ) from None
            cm = r.storage.cmeta
            term = r.core.term
            committed = r.core.committed_config
        sid = uuidlib.uuid4().hex
        with self.lock:
            now = clock().monotonic()
            for k in [k for k, s in self.sessions.items() if s.expires < now]:
                self.sessions.pop(k)
            self.sessions[sid] = _CopySession(tablet_id, si + 1, now + COPY_SESSION_TTL_S)
        sb = self.superblocks[tablet_id]
        cmeta = {"term": max(term, cm.term if cm else 0), "committed_config": config_to_dict(committed)}
        return pb.BeginCopySessionResponse(
            session_id=sid,
            superblock=sb.to_bytes(),
            cmeta=json.dumps(cmeta).encode(),
            snapshot=snap,
            snapshot_index=si,
            snapshot_term=st,
            log_entries=[encode_entry(e) for e in entries],
        )

    def log_anchor(self, tablet_id: str) -> int | None:
        """Lowest log index an open copy session still needs (the WAL must keep it)."""
        with self.lock:
            idx = [s.anchor_index for s in self.sessions.values() if s.tablet_id == tablet_id]
        return min(idx) if idx else None

    def end_copy_session(self, session_id: str) -> None:
        with self.lock:
            self.sessions.pop(session_id, None)

    def unsafe_change_config(self, tablet_id: str, voters: list[str]) -> RaftConfig:
        """Last-resort recovery after losing a majority: restart this replica with a config of the
        listed surviving voters (which must include this server), bumping the term so no stale
        leader can continue. Data written only to the lost replicas may be gone."""
        with self.lock:
            r = self.replicas.get(tablet_id)
            sb = self.superblocks.get(tablet_id)
        if r is None or sb is None:
            raise HostError(grpc.StatusCode.NOT_FOUND, f"tablet {tablet_id} not running on {self.uuid}")
        if self.uuid not in voters:
            raise HostError(
                grpc.StatusCode.INVALID_ARGUMENT, f"new config must include this server {self.uuid}"
            )
        with r.lock:
            old = r.core.config
            last = r.core.last_index()
            term = r.core.term
        peers = []
        for u in voters:
            p = old.peer(u)
            if p is None:
                raise HostError(
                    grpc.StatusCode.INVALID_ARGUMENT, f"{u} is not a member of the current config"
                )
            peers.append(Peer(u, p.address, MemberType.VOTER))
        new = RaftConfig(tuple(peers), last)
        with self.lock:
            self.replicas.pop(tablet_id, None)
        r.stop()
        storage = ReplicaStorage(self.layout, tablet_id, fsync=self.fsync, bugs=self.opts.bugs)
        storage.load(config_from_dict(sb.initial_config))
        storage.save_cmeta(HardState(term + 1, None), new)
        storage.close()
        log.warning("%s: UNSAFE config change to %s at index %d", tablet_id, voters, last)
        self._open(sb)
        return new

    def statuses(self, tablet_id: str = "") -> list[pb.ReplicaStatus]:
        with self.lock:
            items = [
                (t, self.replicas.get(t), sb)
                for t, sb in self.superblocks.items()
                if not tablet_id or t == tablet_id
            ]
        out = []
        for t, r, sb in items:
            if r is not None:
                st = r.status()
            else:
                st = pb.ReplicaStatus(
                    tablet_id=t, state=sb.state if t not in self.copying else COPYING, role="NONE"
                )
            st.table_id, st.table_name = sb.table_id, sb.table_name
            out.append(st)
        return out

    # ------------------------------------------------------------------ inbound consensus traffic
    def deliver(self, batch: pb.ConsensusBatch) -> list[tuple[Replica, int]]:
        """Hand each message to its replica; returns (replica, ticket) for Replica.wait_handled."""
        return self.deliver_messages(batch.messages)

    def deliver_messages(self, messages: Sequence[pb.ConsensusMessage]) -> list[tuple[Replica, int]]:
        by_tablet: dict[str, list[bytes]] = {}
        for m in messages:
            if m.to_uuid != self.uuid:
                continue
            by_tablet.setdefault(m.tablet_id, []).append(m.payload)
        out = []
        for tid, payloads in by_tablet.items():
            r = self.get(tid)
            if r is not None:
                out.append((r, r.deliver(payloads)))
            elif self.auto_copy:
                first = next(m for m in messages if m.tablet_id == tid)
                if first.from_addr and b'"_t":"areq"' in first.payload:
                    self._maybe_auto_copy(tid, first.from_addr)
        return out

    def deliver_and_collect(self, batch: pb.ConsensusBatch, wait_s: float) -> list[pb.ConsensusMessage]:
        """Deliver, wait (at most `wait_s`) until the replicas have handled it, and return what they sent
        to the batch's sender meanwhile; anything sent after that goes out with a Send of its own."""
        src = batch.messages[0].from_addr if batch.messages else ""
        if not src:
            self.deliver(batch)
            return []
        slot = self.transport.open_slot(src)
        try:
            waits = self.deliver(batch)
            deadline = time.monotonic() + wait_s
            for r, ticket in waits:
                left = deadline - time.monotonic()
                if left <= 0 or not r.wait_handled(ticket, left):
                    break
        finally:
            msgs = self.transport.close_slot(slot)
        return msgs

    def answer(self, batch: pb.ConsensusBatch, time_left: float | None = None) -> pb.ConsensusAck:
        """What a batch from a peer's sender gets back, by gRPC or over a framed connection: the answers
        its replicas sent meanwhile, if it asked, and the port that takes framed batches."""
        if not batch.reply_in_ack:
            self.deliver(batch)
            return pb.ConsensusAck(framed_port=self.framed_port)
        wait_s = REPLY_WAIT_S if time_left is None else max(0.0, min(REPLY_WAIT_S, time_left - 0.2))
        return pb.ConsensusAck(messages=self.deliver_and_collect(batch, wait_s), framed_port=self.framed_port)

    def listen_framed(self, bind_host: str, port: int = 0) -> None:
        """Take peers' batches over framed TCP too (node/server/framed.py), on `port` of `bind_host` (0: any
        free port)."""
        self.framed = FramedListener(bind_host, port, self.answer)
        self.framed_port = self.framed.port

    def _maybe_auto_copy(self, tablet_id: str, leader_addr: str) -> None:
        """A leader replicates to us a tablet we don't host: it added us, so copy it from the leader."""
        with self.lock:
            sb = self.superblocks.get(tablet_id)
            if tablet_id in self.copying or tablet_id in self.replicas:
                return
            if sb is not None and sb.state == TOMBSTONED and sb.reason == "table deleted":
                return  # a straggler of a deleted table: never bring it back
            self.copying.add(tablet_id)

        def run() -> None:
            with self.lock:
                self.copying.discard(tablet_id)
            try:
                self.copy_from(tablet_id, leader_addr, sb.table_id if sb else "", sb.table_name if sb else "")
            except Exception as exc:
                log.warning("tablet copy of %s from %s failed: %s", tablet_id, leader_addr, exc)

        threading.Thread(target=run, name=f"copy-{tablet_id[:8]}", daemon=True).start()


def raft_error_status(exc: RaftError) -> tuple[grpc.StatusCode, str]:
    if exc.code in (ErrorCode.NOT_LEADER, ErrorCode.STEPPING_DOWN):
        return grpc.StatusCode.FAILED_PRECONDITION, f"NOT_LEADER: {exc}"
    if exc.code in (
        ErrorCode.LEADER_NOT_READY,
        ErrorCode.TRANSFER_IN_PROGRESS,
        ErrorCode.CONFIG_CHANGE_PENDING,
        ErrorCode.ABORTED,
    ):
        return grpc.StatusCode.UNAVAILABLE, f"{exc.code.value}: {exc}"
    if exc.code == ErrorCode.CAS_FAILED:
        return grpc.StatusCode.FAILED_PRECONDITION, f"CAS_FAILED: {exc}"
    return grpc.StatusCode.INVALID_ARGUMENT, str(exc)


def abort_not_leader(context: grpc.ServicerContext, r: Replica | None, exc: RaftError) -> None:
    code, msg = raft_error_status(exc)
    hint = ""
    if r is not None and r.leader_uuid() and r.leader_uuid() != r.uuid:
        hint = f"{r.leader_uuid()}@{r.leader_addr()}"
    context.set_trailing_metadata((("leader-hint", hint),))
    context.abort(code, msg)


class ConsensusService(pbg.ConsensusServicer):
    """Raft transport, membership, leadership and tablet copy, for masters and tablet servers."""

    def __init__(self, host: ReplicaHost) -> None:
        self.host = host

    def Send(self, request, context):
        return self.host.answer(request, context.time_remaining())

    def _replica(self, tablet_id: str, context) -> Replica:
        r = self.host.get(tablet_id)
        if r is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"tablet {tablet_id} not found on {self.host.uuid}")
        assert r is not None  # context.abort raised
        return r

    def ChangeConfig(self, request, context):
        r = self._replica(request.tablet_id, context)
        types = {
            pb.ChangeConfigRequest.ADD_PEER: ChangeType.ADD_PEER,
            pb.ChangeConfigRequest.REMOVE_PEER: ChangeType.REMOVE_PEER,
            pb.ChangeConfigRequest.MODIFY_PEER: ChangeType.MODIFY_PEER,
        }
        if request.type not in types or not request.peer.uuid:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "change type and peer uuid are required")
        if types[request.type] == ChangeType.ADD_PEER and not request.peer.addr:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "ADD_PEER needs the peer's address")
        peer = config_from_pb(pb.RaftConfig(peers=[request.peer])).peers[0]
        change = ConfigChange(
            types[request.type], peer, None if request.cas_config_index == -2 else request.cas_config_index
        )
        timeout = max(1.0, (context.time_remaining() or 10.0) - 0.2)
        try:
            idx = r.change_config(change, timeout)
        except RaftError as exc:
            abort_not_leader(context, r, exc)
        except Indeterminate as exc:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"outcome unknown: {exc}")
        return pb.ChangeConfigResponse(config_index=idx)

    def LeaderStepDown(self, request, context):
        r = self._replica(request.tablet_id, context)
        try:
            if request.abrupt:
                r.step_down()
            elif request.new_leader_uuid:
                r.transfer_leadership(request.new_leader_uuid)
            else:
                try:
                    r.transfer_leadership(None)
                except RaftError as exc:
                    if exc.code != ErrorCode.INVALID_CONFIG_CHANGE:
                        raise
                    r.step_down()
        except RaftError as exc:
            abort_not_leader(context, r, exc)
        return pb.LeaderStepDownResponse()

    def UnsafeChangeConfig(self, request, context):
        try:
            cfg = self.host.unsafe_change_config(request.tablet_id, list(request.voter_uuids))
        except HostError as exc:
            context.abort(exc.code, str(exc))
        return pb.UnsafeChangeConfigResponse(config=config_to_pb(cfg))

    def RunLeaderElection(self, request, context):
        r = self._replica(request.tablet_id, context)
        try:
            term = r.run_election()
        except RaftError as exc:
            context.abort(*raft_error_status(exc))
        return pb.RunLeaderElectionResponse(term=term)

    def SetFlag(self, request, context):
        try:
            old = self.host.flags.set(request.flag, request.value)
        except FlagError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        log.warning("flag %s set to %s (was %s)", request.flag, request.value, old)
        return pb.SetFlagResponse(old_value=old)

    def ListReplicas(self, request, context):
        return pb.ListTabletsResponse(
            server_uuid=self.host.uuid, replicas=self.host.statuses(request.tablet_id)
        )

    def BeginCopySession(self, request, context):
        try:
            return self.host.begin_copy_session(request.tablet_id)
        except HostError as exc:
            context.abort(exc.code, str(exc))

    def EndCopySession(self, request, context):
        self.host.end_copy_session(request.session_id)
        return pb.EndCopySessionResponse()
