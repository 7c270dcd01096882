"""Drives one Raft group's replica: the consensus core, its storage, and the tablet state machine.

A single driver thread per replica owns the order of effects the core asks for: feed inbound
messages and ticks into the core, then for each `Ready` persist (one fsync for the whole batch:
group commit), send, apply committed entries to the tablet, answer reads, and `advance`. RPC
threads only enqueue proposals and wait on per-entry waiters with their own deadline.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from faultline.node.bugs import BugSet
from faultline.node.clock import Clock, clock
from faultline.node.consensus import (
    AppendRequest,
    AppendResponse,
    ConfigChange,
    EntryType,
    ErrorCode,
    Event,
    EventKind,
    InstallSnapshot,
    Message,
    Options,
    PeerHealth,
    PersistentState,
    RaftConfig,
    RaftCore,
    RaftError,
    Role,
    VoteResponse,
)
from faultline.node.protos import node_pb2 as pb
from faultline.node.server.codec import decode_message, encode_message
from faultline.node.server.flags import RuntimeFlags
from faultline.node.server.storage import ReplicaStorage
from faultline.node.tablet.state import OpResult, TabletState

log = logging.getLogger("faultline.node.replica")


class Indeterminate(Exception):
    """The entry was proposed but its fate is unknown (deadline, or leadership lost before commit)."""


class ReplicaStopped(Exception):
    pass


@dataclass
class _Waiter:
    term: int
    ev: threading.Event = field(default_factory=threading.Event)
    ok: bool = False
    results: list[OpResult] | None = None
    error: str = ""
    lost: bool = False  # another leader's entry took this index: it can never commit


@dataclass
class _ReadWaiter:
    ev: threading.Event = field(default_factory=threading.Event)
    index: int = 0
    error: ErrorCode | None = None


SNAPSHOT_EVERY = int(os.environ.get("FAULTLINE_SNAPSHOT_EVERY", "20000"))  # applied entries between snapshots
MAX_JUMP_TICKS = 100  # bound on the ticks a clock jump bursts (forward) or withholds (back)
MAX_LAG_ENTRIES = int(os.environ.get("FAULTLINE_MAX_LAG_ENTRIES", "50000"))  # WAL kept for lagging followers


@dataclass
class DriverOptions:
    tick_s: float = 0.1
    heartbeat_ticks: int = 5
    election_ticks: int = 15
    failed_after_ticks: int = 100
    bugs: frozenset[str] = frozenset()  # names or members of node.bugs.Bug; held as a BugSet
    clock: Clock | None = None  # None: the process clock (node.clock), which clock faults move
    install_snapshots: bool = False  # Raft's InstallSnapshot to a peer behind the log (the masters' catalog)

    def __post_init__(self) -> None:
        self.bugs = BugSet(self.bugs)  # an unknown name fails at start, not silently at the first check


class Replica:
    """One tablet replica hosted by a node (a tablet server, or a master for the system tablet)."""

    def __init__(
        self,
        uuid: str,
        tablet_id: str,
        storage: ReplicaStorage,
        state: PersistentState,
        snapshot: bytes | None,
        snap_index: int,
        snap_term: int,
        opts: DriverOptions,
        send: Callable[[str, list[pb.ConsensusMessage]], None],
        my_addr: str,
        on_event: Callable[[Replica, Event], None] | None = None,
        on_apply: Callable[[Replica, int], None] | None = None,
    ) -> None:
        self.uuid = uuid
        self.tablet_id = tablet_id
        self.storage = storage
        self.opts = opts
        self.clock = opts.clock or clock()
        self._send = send
        self.my_addr = my_addr
        self.on_event = on_event
        self.on_apply = on_apply
        self.tablet = TabletState()
        if snapshot is not None:
            self.tablet.restore(snapshot, snap_index, snap_term)
        self.core = RaftCore(
            uuid,
            state,
            Options(
                election_ticks=opts.election_ticks,
                heartbeat_ticks=opts.heartbeat_ticks,
                failed_after_ticks=opts.failed_after_ticks,
                bugs=opts.bugs,
                install_snapshots=opts.install_snapshots,
            ),
            rng=random.Random(),
        )
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)
        self.apply_cv = threading.Condition()
        self._inbox: list[Message] = []
        self._waiters: dict[int, _Waiter] = {}
        self._reads: dict[int, _ReadWaiter] = {}
        self._read_ids = itertools.count(1)
        self._stopped = False
        self._gen_in = 0  # inbound batches delivered so far
        self._gen_done = 0  # ... of which the driver has fully handled (persisted, sent) this many
        self._done_cv = threading.Condition()
        self.leader_since = 0.0
        self.last_error = ""
        self.snapshot_index = snap_index
        self.log_anchor: Callable[[], int | None] = lambda: None  # set by the host: open copy sessions
        self.flags = RuntimeFlags()  # the host replaces it with the one all its replicas share
        self._crashing = False  # a crash point fired: take nothing in any more, the process exits
        self.thread = threading.Thread(target=self._run, name=f"replica-{tablet_id[:8]}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        with self.cv:
            self._stopped = True
            self.cv.notify_all()
        self._mark_handled(1 << 62)
        if threading.current_thread() is not self.thread and self.thread.is_alive():
            self.thread.join(timeout=5)
        for w in list(self._waiters.values()):
            w.error = "replica stopped"
            w.ev.set()
        for r in list(self._reads.values()):
            r.error = ErrorCode.ABORTED
            r.ev.set()
        self.storage.close()

    # ------------------------------------------------------------------ inbound
    def deliver(self, payloads: list[bytes]) -> int:
        """Queue inbound messages for the driver; returns a ticket for wait_handled()."""
        msgs = [decode_message(p) for p in payloads]
        with self.cv:
            if self._crashing:
                return 0
            self._inbox.extend(msgs)
            self._gen_in += 1
            self.cv.notify()
            return self._gen_in

    def wait_handled(self, ticket: int, timeout: float) -> bool:
        """Wait until the messages of `ticket` were stepped and their Ready handled (answers sent)."""
        with self._done_cv:
            return self._done_cv.wait_for(lambda: self._gen_done >= ticket, timeout)

    def _mark_handled(self, gen: int) -> None:
        if gen <= self._gen_done:
            return
        with self._done_cv:
            self._gen_done = max(self._gen_done, gen)
            self._done_cv.notify_all()

    # ------------------------------------------------------------------ driver loop
    def _run(self) -> None:
        """Ticks are counted on the node's clock: a clock set back delays them (timers fire late), a clock
        set forward delivers the skipped ticks at once, up to MAX_JUMP_TICKS (timers fire early), as a
        real clock fault would; the delay of a clock set back is bounded the same way. A stall of the
        process itself (GC, SIGSTOP) never bursts ticks."""
        tick = self.opts.tick_s
        clk = self.clock
        next_tick = clk.monotonic() + tick
        last_offset = clk.offset()
        while True:
            with self.cv:
                while not self._stopped and not self._inbox and not self.core.has_ready():
                    if clk.offset() != last_offset:
                        break  # a clock jump: account for it below
                    delay = clk.wait_s(next_tick, tick)  # in [0, tick]: offset jumps are seen promptly
                    if delay <= 0:
                        break
                    self.cv.wait(delay)
                if self._stopped:
                    return
                inbox, self._inbox = self._inbox, []
                gen = self._gen_in
                took_entries = any(isinstance(m, AppendRequest) and m.entries for m in inbox)
                self.core.failure_detection = self.flags.enable_leader_failure_detection
                self.core.max_batch_entries = self.flags.consensus_max_batch_entries
                try:
                    for m in inbox:
                        self.core.step(m)
                    now = clk.monotonic()
                    offset = clk.offset()
                    jumped = offset - last_offset
                    last_offset = offset
                    if jumped < 0:  # set back: late, but by no more than the burst bound
                        next_tick = min(next_tick, now + MAX_JUMP_TICKS * tick)
                    if now >= next_tick:
                        extra = min(MAX_JUMP_TICKS, int(jumped / tick)) if jumped > 0 else 0
                        for _ in range(1 + extra):
                            self.core.tick()
                        next_tick += tick
                        if now - next_tick > 5 * tick:  # stalled or jumped: don't burst-tick any more
                            next_tick = now + tick
                    rd = self.core.ready() if self.core.has_ready() else None
                    addrs = {p.uuid: p.address for p in self.core.committed_config.peers}
                    addrs.update({p.uuid: p.address for p in self.core.config.peers})
                except Exception as exc:
                    log.exception("%s: consensus core failed; stopping this replica", self.tablet_id)
                    self.last_error = f"consensus: {exc}"
                    self._stopped = True
                    self._mark_handled(1 << 62)
                    return
            if rd is not None:
                try:
                    self._handle(rd, addrs, took_entries)
                except Exception as exc:
                    log.exception("%s: handling a ready batch failed; stopping this replica", self.tablet_id)
                    self.last_error = f"storage: {exc}"
                    with self.cv:
                        self._stopped = True
                    self._mark_handled(1 << 62)
                    return
            self._mark_handled(gen)

    def _install_snapshot(self, snap) -> None:
        """The leader's snapshot replaces this replica's state machine and WAL (its log was emptied in the
        core); proposals this replica still waits on at or below it can no longer be told apart."""
        self.storage.install_snapshot(snap.data, snap.index, snap.term)
        self.tablet.restore(snap.data, snap.index, snap.term)
        self.snapshot_index = snap.index
        for idx, w in list(self._waiters.items()):
            if idx <= snap.index:
                self._waiters.pop(idx)
                w.error = "replaced by the leader's snapshot"
                w.ev.set()
        log.info(
            "%s: installed the leader's snapshot at index %d (term %d)",
            self.tablet_id[:12],
            snap.index,
            snap.term,
        )

    def _with_snapshot(self, m: InstallSnapshot) -> InstallSnapshot | None:
        """The snapshot message with this replica's state machine in it; None if the state machine is no
        longer at the index the core named (the next heartbeat names it again)."""
        data, index, term = self.tablet.snapshot()
        if index != m.index or term != m.snap_term:
            return None
        log.info("%s: sending a snapshot at index %d to %s", self.tablet_id[:12], index, m.dst)
        return replace(m, data=data)

    def _handle(self, rd, addrs: dict[str, str], took_entries: bool = False) -> None:
        if rd.snapshot is not None:
            self._install_snapshot(rd.snapshot)
        self.storage.persist(rd)
        self._send_messages(rd.messages, addrs)
        self._crash_points(rd.messages, took_entries)
        applied_any = self._apply_committed(rd.committed_entries)
        for rs in rd.read_states:
            r = self._reads.pop(rs.ctx, None)  # type: ignore[arg-type]
            if r is not None:
                r.index, r.error = rs.index, (None if rs.ok else (rs.error or ErrorCode.ABORTED))
                r.ev.set()
        for ev in rd.events:
            self._on_core_event(ev)
        with self.cv:
            self.core.advance(rd)
            # waiters whose index was overwritten by a newer term can never commit as proposed
            for idx, w in list(self._waiters.items()):
                t = self.core.term_at(idx)
                if t is not None and t != w.term:
                    self._waiters.pop(idx)
                    w.error, w.lost = "entry overwritten by a newer leader", True
                    w.ev.set()
        if applied_any:
            self._after_apply()

    def _send_messages(self, messages: list[Message], addrs: dict[str, str]) -> None:
        """Hand the core's messages to the network, one batch per destination address."""
        by_addr: dict[str, list[pb.ConsensusMessage]] = {}
        for m in messages:
            addr = addrs.get(m.dst, "")
            if not addr:
                continue
            if isinstance(m, InstallSnapshot):
                with_data = self._with_snapshot(m)
                if with_data is None:
                    continue
                m = with_data
            by_addr.setdefault(addr, []).append(
                pb.ConsensusMessage(
                    tablet_id=self.tablet_id,
                    from_uuid=self.uuid,
                    to_uuid=m.dst,
                    payload=encode_message(m),
                    from_addr=self.my_addr,
                )
            )
        for addr, msgs in by_addr.items():
            self._send(addr, msgs)

    def _apply_committed(self, entries) -> bool:
        """Apply committed entries to the tablet and answer their writers; True if any was applied."""
        applied_any = False
        for e in entries:
            res = self.tablet.apply(e.index, e.term, e.payload if e.type == EntryType.WRITE else b"")
            applied_any = True
            w = self._waiters.pop(e.index, None)
            if w is not None:
                if w.term == e.term:
                    w.ok, w.results = True, res or []
                else:
                    w.error, w.lost = "entry overwritten by a newer leader", True
                w.ev.set()
        return applied_any

    def _on_core_event(self, ev) -> None:
        if ev.kind == EventKind.BECAME_LEADER:
            self.leader_since = self.clock.monotonic()
        if ev.kind in (
            EventKind.LOST_LEADERSHIP,
            EventKind.BECAME_LEADER,
            EventKind.CONFIG_COMMITTED,
            EventKind.REMOVED,
        ):
            log.info(
                "%s: %s term=%s leader=%s %s",
                self.tablet_id[:12],
                ev.kind.value,
                ev.term,
                ev.leader,
                ev.detail,
            )
        if self.on_event is not None:
            try:
                self.on_event(self, ev)
            except Exception:
                log.exception("event handler")

    def _after_apply(self) -> None:
        with self.apply_cv:
            self.apply_cv.notify_all()
        if self.tablet.applied_index - self.snapshot_index >= SNAPSHOT_EVERY:
            self._snapshot_and_gc()
        if self.on_apply is not None:
            try:
                self.on_apply(self, self.tablet.applied_index)
            except Exception:
                log.exception("apply handler")

    def _crash_points(self, sent: list[Message], took_entries: bool) -> None:
        """Crash points (node/server/flags.py): what fired them was persisted (as far as this store persists
        it) and handed to the network; the process takes nothing in any more and exits once the answer had
        time to leave (it may ride back in the ack of the sender's own Send)."""
        flags = self.flags
        if flags.fault_crash_after_vote_fraction <= 0 and flags.fault_crash_after_append_fraction <= 0:
            return
        if flags.fault_crash_tablet and flags.fault_crash_tablet != self.tablet_id:
            return
        for m in sent:
            if isinstance(m, VoteResponse) and m.granted and not m.pre_vote:
                fraction, what = flags.fault_crash_after_vote_fraction, f"granting a vote in term {m.term}"
            elif isinstance(m, AppendResponse) and m.success and took_entries:
                fraction, what = (
                    flags.fault_crash_after_append_fraction,
                    f"acknowledging entries up to {m.match_index}",
                )
            else:
                continue
            if fraction > 0 and random.random() < fraction:
                self._crash(what)
                return

    def _crash(self, what: str) -> None:
        log.error("%s: fault injection: crashing right after %s", self.tablet_id[:12], what)
        with self.cv:
            self._crashing = True

        def exit_soon() -> None:
            time.sleep(0.5)
            logging.shutdown()
            os._exit(86)

        threading.Thread(target=exit_soon, name="crash-point", daemon=True).start()

    def _snapshot_and_gc(self) -> None:
        """Snapshot the state machine, then collect WAL segments nobody needs: not below the snapshot,
        not what healthy followers still lack (up to MAX_LAG_ENTRIES), not what a copy session anchors."""
        data, si, st = self.tablet.snapshot()
        self.storage.write_snapshot(data, si, st)
        self.snapshot_index = si
        with self.lock:
            below = min(si + 1, self.core.retention_index(MAX_LAG_ENTRIES))
        anchor = self.log_anchor()
        if anchor is not None:
            below = min(below, anchor)
        first = self.storage.gc(below)
        with self.lock:
            self.core.compact(first)
        log.info("%s: snapshot at %d, WAL now starts at %d", self.tablet_id[:12], si, first)

    # ------------------------------------------------------------------ requests
    def _add_waiter(self, idx: int) -> _Waiter:
        """Wait for the entry just proposed at `idx` in this term (called holding `cv`)."""
        w = _Waiter(self.core.term)
        self._waiters[idx] = w
        self.cv.notify()
        return w

    def _answered(self, idx: int, w: _Waiter, timeout: float) -> bool:
        """Whether the entry's fate was known within `timeout`; a waiter that timed out is dropped."""
        if w.ev.wait(timeout):
            return True
        with self.cv:
            self._waiters.pop(idx, None)
        return False

    def propose(self, payload: bytes, timeout: float) -> list[OpResult]:
        """Replicate one entry; returns the state machine's results once committed and applied.

        Raises RaftError (definitely not applied: not leader, transfer in progress) or
        Indeterminate (it may or may not commit)."""
        with self.cv:
            if self._stopped:
                raise RaftError(ErrorCode.NOT_LEADER, "replica stopped")
            idx = self.core.propose(payload)
            w = self._add_waiter(idx)
        if not self._answered(idx, w, timeout):
            raise Indeterminate(f"not committed within {timeout:.2f}s (index {idx})")
        if not w.ok:
            if w.lost:
                # Log Matching: a newer leader's entry at this index means ours was never committed
                raise RaftError(
                    ErrorCode.NOT_LEADER, f"{w.error} (index {idx}); not applied", self.core.leader_id
                )
            raise Indeterminate(f"{w.error} (index {idx})")
        return w.results or []

    def read_index(self, timeout: float) -> None:
        """Block until a read at this moment is linearizable: leadership confirmed by a majority and
        the state machine has applied the confirmed commit index."""
        deadline = time.monotonic() + timeout
        rid = next(self._read_ids)
        r = _ReadWaiter()
        with self.cv:
            if self._stopped:
                raise RaftError(ErrorCode.NOT_LEADER, "replica stopped")
            self._reads[rid] = r
            try:
                self.core.read_index(rid)
            except RaftError:
                self._reads.pop(rid, None)
                raise
            self.cv.notify()
        if not r.ev.wait(max(0.0, deadline - time.monotonic())):
            with self.cv:
                self._reads.pop(rid, None)
            raise TimeoutError("leadership not confirmed in time")
        if r.error is not None:
            raise RaftError(r.error, "read aborted: leadership lost", None)
        if not self._wait_applied_until(r.index, deadline):
            raise TimeoutError("state machine did not catch up in time")

    def wait_applied(self, index: int, timeout: float) -> bool:
        return self._wait_applied_until(index, time.monotonic() + timeout)

    def _wait_applied_until(self, index: int, deadline: float) -> bool:
        with self.apply_cv:
            while self.tablet.applied_index < index:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.apply_cv.wait(left)
        return True

    def change_config(self, change: ConfigChange, timeout: float) -> int:
        """Propose a one-by-one membership change and wait for it to commit; returns its index."""
        with self.cv:
            idx = self.core.change_config(change)
            w = self._add_waiter(idx)
        if not self._answered(idx, w, timeout):
            raise Indeterminate(f"config change not committed within {timeout:.1f}s")
        if not w.ok:
            raise Indeterminate(w.error)
        return idx

    def transfer_leadership(self, target: str | None) -> str:
        with self.cv:
            t = self.core.transfer_leadership(target)
            self.cv.notify()
            return t

    def step_down(self) -> None:
        with self.cv:
            self.core.step_down()
            self.cv.notify()

    def run_election(self) -> int:
        with self.cv:
            term = self.core.campaign_now()
            self.cv.notify()
            return term

    # ------------------------------------------------------------------ queries
    def role(self) -> Role:
        return self.core.role

    def leader_uuid(self) -> str | None:
        return self.core.leader_id

    def leader_addr(self) -> str:
        lid = self.core.leader_id
        p = self.core.config.peer(lid) if lid else None
        return p.address if p else ""

    def is_ready_leader(self) -> bool:
        with self.lock:
            return self.core.is_leader() and self.core.current_term_committed()

    def stopped(self) -> bool:
        return self._stopped

    def status(self) -> pb.ReplicaStatus:
        with self.lock:
            c = self.core
            st = pb.ReplicaStatus(
                tablet_id=self.tablet_id,
                state="FAILED" if self._stopped else "RUNNING",
                role=c.role.value,
                term=c.term,
                leader_uuid=c.leader_id or "",
                committed_config=config_to_pb(c.committed_config),
                last_index=c.last_index(),
                last_term=c.last_term(),
                commit_index=c.commit_index,
                applied_index=self.tablet.applied_index,
                schema_version=self.tablet.schema_version,
            )
            if c.config != c.committed_config:
                st.pending_config.CopyFrom(config_to_pb(c.config))
            if c.is_leader():
                for u, h in c.peer_health().items():
                    pr = c.progress.get(u)
                    if (
                        h == PeerHealth.FAILED_UNRECOVERABLE
                        and pr is not None
                        and pr.next - 1 >= c.log_start - 1
                    ):
                        continue  # not answered since this leader started: unknown, not unrecoverable
                    if h != PeerHealth.HEALTHY:
                        st.failed_peers.append(u)
                for u, pr in c.progress.items():
                    if pr.match >= c.commit_index:
                        st.caught_up_peers.append(u)
            return st


def config_to_pb(c: RaftConfig) -> pb.RaftConfig:
    return pb.RaftConfig(
        index=c.opid_index,
        peers=[
            pb.RaftPeer(uuid=p.uuid, addr=p.address, voter=p.member_type.value == "VOTER", promote=p.promote)
            for p in c.peers
        ],
    )


def config_from_pb(c: pb.RaftConfig) -> RaftConfig:
    from faultline.node.consensus import MemberType, Peer

    return RaftConfig(
        tuple(
            Peer(p.uuid, p.addr, MemberType.VOTER if p.voter else MemberType.NON_VOTER, p.promote)
            for p in c.peers
        ),
        c.index,
    )
