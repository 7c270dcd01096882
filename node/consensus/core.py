"""A Raft replica as a pure, deterministic state machine (docs/consensus.md).

Inputs: `step(message)`, `tick()`, and local requests (`propose`, `change_config`, `read_index`,
`transfer_leadership`, `step_down`). Outputs are collected and handed out by `ready()`; the caller
persists, sends and applies them and then calls `advance(ready)`. There is no I/O, clock, thread or
global randomness here, so the simulator can replay any run exactly from its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from faultline.node.bugs import Bug, BugSet
from faultline.node.consensus.types import (
    AppendRequest,
    AppendResponse,
    ChangeType,
    ConfigChange,
    Entry,
    EntryType,
    ErrorCode,
    Event,
    EventKind,
    HardState,
    InstallSnapshot,
    MemberType,
    Message,
    Options,
    Peer,
    PeerHealth,
    PersistentState,
    RaftConfig,
    RaftError,
    ReadState,
    Ready,
    Role,
    Snapshot,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

# The bug modes (members of node/bugs.py's Bug; each compares equal to its name) this core implements.
CORE_BUGS: tuple[Bug, ...] = (
    Bug.COMMIT_PRIOR_TERM,
    Bug.COUNT_NONVOTER_ACKS,
    Bug.VOTE_NOT_DURABLE,
    Bug.FOLLOWER_COMMIT_PAST_BATCH,
    Bug.NO_VOTE_WITHHOLDING,
    Bug.STALE_LEADER_READS,
)


class ConsensusInvariantError(AssertionError):
    """The core was driven into a state Raft forbids (e.g. told to truncate a committed entry).

    Only reachable with an injected bug or corrupted storage; a node must stop, not carry on."""


@dataclass
class Progress:
    """The leader's view of one peer."""

    match: int = 0
    next: int = 1
    probing: bool = True  # until a success, send empty appends at next-1 to find the match point
    inflight: bool = False  # a batch is on its way; the next one waits for its answer (flow control)
    last_contact: int = 0  # core tick of the last response in the current term
    acked_seq: int = 0


@dataclass
class _PendingRead:
    ctx: object
    index: int
    seq: int


class RaftCore:
    """One replica of one Raft group."""

    def __init__(
        self,
        uuid: str,
        state: PersistentState,
        options: Options | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.uuid = uuid
        self.opts = options or Options()
        self.rng = rng or random.Random(0)
        self.bugs = BugSet(self.opts.bugs)
        self.term = state.hard_state.term
        self.voted_for = state.hard_state.voted_for
        self._persisted_hs = state.hard_state
        self._vote_volatile = False  # bug vote-not-durable: a granted vote not yet written
        self.committed_config = state.committed_config
        self.log_start = state.log_start
        self._prev_term = state.log_start_prev_term
        self.log: list[Entry] = [e for e in state.entries if e.index >= state.log_start]
        for i, e in enumerate(self.log):
            if e.index != self.log_start + i:
                raise ValueError(f"log is not contiguous at position {i}: index {e.index}")
        self.commit_index = max(state.applied_index, self.log_start - 1)
        self.applied_index = state.applied_index  # what has been handed out in committed_entries
        self._stable_last = self.last_index()  # persisted through the last advance()
        self._pending_truncate: int | None = None
        self.role = Role.FOLLOWER
        self.leader_id: str | None = None
        self.config = self.committed_config
        self._recompute_config(emit=False)
        self.now = 0  # ticks since start
        self._election_elapsed = 0
        self._contact_elapsed = 10**9  # ticks since we last heard from a live leader
        self._timeout = self._random_timeout()
        self._heartbeat_elapsed = 0
        self._votes: dict[str, bool] = {}
        self.progress: dict[str, Progress] = {}
        self._seq = 0
        self._reads: list[_PendingRead] = []
        self._unsent_round = -1  # seq of a read round whose messages are all still in _msgs (not handed out)
        self._transfer_target: str | None = None
        self._transfer_elapsed = 0
        self._current_term_committed = False
        self._transfer_campaign = False
        self.failure_detection = True  # False: campaign only when asked (campaign_now), never on a timeout
        self.max_batch_entries = (
            self.opts.max_batch_entries
        )  # entries per AppendRequest; changeable at runtime
        # outputs accumulated for the next ready()
        self._msgs: list[Message] = []
        self._events: list[Event] = []
        self._read_states: list[ReadState] = []
        self._config_dirty = False
        self._snapshot: Snapshot | None = None  # accepted from the leader, for the node to install
        self._update_role_for_membership()

    # ------------------------------------------------------------ log helpers
    def last_index(self) -> int:
        return self.log[-1].index if self.log else self.log_start - 1

    def last_term(self) -> int:
        return self.log[-1].term if self.log else self._prev_term

    def term_at(self, index: int) -> int | None:
        """Term of the entry at index; None if it is beyond the log or was garbage-collected."""
        if index == self.log_start - 1:
            return self._prev_term
        if index < self.log_start or index > self.last_index():
            return None
        return self.log[index - self.log_start].term

    def entry(self, index: int) -> Entry:
        return self.log[index - self.log_start]

    def entries_from(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi inclusive (clipped to what the log holds)."""
        lo = max(lo, self.log_start)
        hi = min(hi, self.last_index())
        if lo > hi:
            return []
        return self.log[lo - self.log_start : hi - self.log_start + 1]

    def _append(self, entries: list[Entry]) -> None:
        for e in entries:
            assert e.index == self.last_index() + 1, (e.index, self.last_index())
            self.log.append(e)
            if e.type == EntryType.CONFIG:
                self._recompute_config()

    def _truncate(self, index: int) -> None:
        """Drop entries >= index (a conflict with the leader's log)."""
        if index <= self.commit_index:
            raise ConsensusInvariantError(
                f"{self.uuid}: truncating committed entry {index} (commit {self.commit_index})"
            )
        del self.log[index - self.log_start :]
        if index <= self._stable_last:
            self._stable_last = index - 1
            self._pending_truncate = (
                index if self._pending_truncate is None else min(self._pending_truncate, index)
            )
        self._recompute_config()

    # ------------------------------------------------------------ config
    def _recompute_config(self, emit: bool = True) -> None:
        """The active config is the newest config entry in the log, else the committed one.

        A change takes effect when appended; if its entry is truncated we roll back."""
        new = self.committed_config
        for e in reversed(self.log):
            if e.index <= self.committed_config.opid_index:
                break
            if e.type == EntryType.CONFIG and e.config is not None:
                new = e.config
                break
        if new != self.config:
            self.config = new
            if emit:
                self._event(EventKind.CONFIG_CHANGED, config=new)
                self._update_role_for_membership()
                if self.role == Role.LEADER:
                    for u in new.uuids():
                        if u != self.uuid and u not in self.progress:
                            self.progress[u] = Progress(next=self.last_index() + 1, last_contact=self.now)
                    for u in list(self.progress):
                        if u not in new.uuids():
                            del self.progress[u]

    def pending_config_index(self) -> int | None:
        """Index of an appended but uncommitted config entry, if any."""
        return self.config.opid_index if self.config.opid_index > self.committed_config.opid_index else None

    def _update_role_for_membership(self) -> None:
        if self.role == Role.LEADER:
            return
        if not self.config.is_voter(self.uuid):
            self.role = Role.LEARNER
        elif self.role == Role.LEARNER:
            self.role = Role.FOLLOWER

    # ------------------------------------------------------------ outputs
    def _send(self, msg: Message) -> None:
        self._msgs.append(msg)

    def _event(
        self, kind: EventKind, leader: str | None = None, config: RaftConfig | None = None, detail: str = ""
    ) -> None:
        self._events.append(Event(kind, self.term, leader, config, detail))

    def _hard_state(self) -> HardState:
        voted = self.voted_for
        if self._vote_volatile:
            # bug vote-not-durable: the vote went out but was never written
            voted = self._persisted_hs.voted_for if self._persisted_hs.term == self.term else None
        return HardState(self.term, voted)

    def has_ready(self) -> bool:
        return not self._peek_ready_empty()

    def _peek_ready_empty(self) -> bool:
        if self._msgs or self._events or self._read_states or self._config_dirty or self._snapshot:
            return False
        last = self.log[-1].index if self.log else self.log_start - 1
        if self._pending_truncate is not None or self._stable_last < last:
            return False
        if self.applied_index < min(self.commit_index, last):
            return False
        ph = self._persisted_hs
        return ph.term == self.term and (ph.voted_for == self.voted_for or self._vote_volatile)

    def ready(self) -> Ready:
        """Everything produced since the last advance(). Call advance(ready) once it is done."""
        hs = self._hard_state()
        entries = self.entries_from(self._stable_last + 1, self.last_index())
        commit_to = min(self.commit_index, self.last_index())
        committed = self.entries_from(self.applied_index + 1, commit_to)
        r = Ready(
            messages=self._msgs,
            truncate_from=self._pending_truncate,
            entries=list(entries),
            hard_state=hs if (hs != self._persisted_hs or self._config_dirty) else None,
            committed_config=self.committed_config if self._config_dirty else None,
            committed_entries=list(committed),
            read_states=self._read_states,
            events=self._events,
            commit_index=self.commit_index,
            snapshot=self._snapshot,
        )
        self._snapshot = None
        self._msgs, self._events, self._read_states = [], [], []
        self._unsent_round = -1
        self._config_dirty = False
        self._pending_truncate = None
        return r

    def advance(self, ready: Ready) -> None:
        """The node persisted and handled `ready`: entries are durable, committed entries applied."""
        if ready.entries:
            self._stable_last = max(self._stable_last, ready.entries[-1].index)
        if ready.hard_state is not None:
            self._persisted_hs = ready.hard_state
        if ready.committed_entries:
            self.applied_index = max(self.applied_index, ready.committed_entries[-1].index)
        if self.role == Role.LEADER:
            self._maybe_commit()

    # ------------------------------------------------------------ time
    def _random_timeout(self) -> int:
        n = self.opts.election_ticks
        return n + self.rng.randrange(n)

    def tick(self) -> None:
        self.now += 1
        self._contact_elapsed += 1
        if self.role == Role.LEADER:
            self._tick_leader()
            return
        self._election_elapsed += 1
        if self.role == Role.CANDIDATE:
            self._tick_candidate()
        if self._election_elapsed >= self._timeout:
            self._election_elapsed = 0
            self._timeout = self._random_timeout()
            if self.config.is_voter(self.uuid) and self.failure_detection:
                self._campaign(pre=self.opts.pre_vote, transfer=False)

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        if self._transfer_target is not None:
            self._transfer_elapsed += 1
            if self._transfer_elapsed >= (self.opts.transfer_ticks or self.opts.election_ticks):
                self._event(EventKind.TRANSFER_FAILED, leader=self.uuid, detail=self._transfer_target)
                self._transfer_target = None
        if self._heartbeat_elapsed >= self.opts.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._broadcast(heartbeat=True)

    def _tick_candidate(self) -> None:
        """Candidates retry vote requests to voters that have not answered (Raft 5.5: RPCs are retried).

        Pre-votes are not retried: a pre-vote grant is only true when given, and grants collected
        over a long window could add up to a majority that never existed at one moment."""
        self._heartbeat_elapsed += 1
        if self._heartbeat_elapsed < self.opts.heartbeat_ticks:
            return
        self._heartbeat_elapsed = 0
        for u in self.config.voters():
            if u != self.uuid and u not in self._votes:
                self._send(
                    VoteRequest(
                        self.uuid,
                        u,
                        self.term,
                        self.last_term(),
                        self.last_index(),
                        False,
                        self._transfer_campaign,
                    )
                )

    # ------------------------------------------------------------ elections
    def _become_follower(self, term: int, leader: str | None) -> None:
        was_leader = self.role == Role.LEADER
        if term > self.term:
            self.term = term
            self.voted_for = None
            self._vote_volatile = False
        self.role = Role.FOLLOWER
        self._update_role_for_membership()
        self._election_elapsed = 0
        self._timeout = self._random_timeout()
        if was_leader:
            self.progress = {}
            self._transfer_target = None
            for r in self._reads:
                self._read_states.append(ReadState(r.ctx, r.index, ok=False, error=ErrorCode.ABORTED))
            self._reads = []
            self._event(EventKind.LOST_LEADERSHIP, leader=leader)
        if leader != self.leader_id:
            self.leader_id = leader
            self._event(EventKind.LEADER_CHANGED, leader=leader)

    def _campaign(self, pre: bool, transfer: bool) -> None:
        self._votes = {self.uuid: True}
        self._heartbeat_elapsed = 0
        self._transfer_campaign = transfer
        if pre:
            self.role = Role.PRE_CANDIDATE
            term = self.term + 1
        else:
            self.role = Role.CANDIDATE
            self.term += 1
            self.voted_for = self.uuid
            self._vote_volatile = False
            term = self.term
            if self.leader_id is not None:
                self.leader_id = None
                self._event(EventKind.LEADER_CHANGED, leader=None)
        if self._count_votes(True) >= self.config.majority():
            self._on_vote_won(pre)
            return
        for u in self.config.voters():
            if u != self.uuid:
                self._send(
                    VoteRequest(self.uuid, u, term, self.last_term(), self.last_index(), pre, transfer)
                )

    def _count_votes(self, granted: bool) -> int:
        return sum(1 for u, g in self._votes.items() if g == granted and self.config.is_voter(u))

    def _on_vote_won(self, pre: bool) -> None:
        if pre:
            self._campaign(pre=False, transfer=self._transfer_campaign)
        else:
            self._become_leader()

    def _log_ok(self, last_term: int, last_index: int) -> bool:
        return (last_term, last_index) >= (self.last_term(), self.last_index())

    def _withholding(self) -> bool:
        """Disruption guard: a live leader was heard within the minimum election timeout."""
        if self.bugs.enabled(Bug.NO_VOTE_WITHHOLDING):
            return False
        if self.role == Role.LEADER:
            return True
        return self.leader_id is not None and self._contact_elapsed < self.opts.election_ticks

    def _on_vote_request(self, m: VoteRequest) -> None:
        def answer(granted: bool, reason: str, term: int | None = None) -> None:
            self._send(
                VoteResponse(
                    self.uuid, m.src, self.term if term is None else term, granted, m.pre_vote, reason
                )
            )

        if m.term < self.term:
            answer(False, "stale term")
            return
        if not m.transfer and m.term > self.term and self._withholding():
            answer(False, "heard from a live leader recently")
            return
        if m.pre_vote:
            if m.term > self.term and self._log_ok(m.last_log_term, m.last_log_index):
                answer(True, "", term=m.term)
            else:
                answer(False, "log not up to date" if m.term > self.term else "stale term")
            return
        if m.term > self.term:
            self._become_follower(m.term, None)
        if self.voted_for not in (None, m.src):
            answer(False, f"already voted for {self.voted_for}")
            return
        if not self._log_ok(m.last_log_term, m.last_log_index):
            answer(False, "log not up to date")
            return
        self.voted_for = m.src
        self._vote_volatile = self.bugs.enabled(Bug.VOTE_NOT_DURABLE)
        self._election_elapsed = 0
        answer(True, "")

    def _on_vote_response(self, m: VoteResponse) -> None:
        if m.term > self.term and not m.granted:
            self._become_follower(m.term, None)
            return
        want = Role.PRE_CANDIDATE if m.pre_vote else Role.CANDIDATE
        expected_term = self.term + 1 if m.pre_vote else self.term
        if self.role != want or m.term != expected_term:
            return
        self._votes[m.src] = m.granted
        if self._count_votes(True) >= self.config.majority():
            self._on_vote_won(m.pre_vote)
        elif self._count_votes(False) >= self.config.majority():
            self._become_follower(self.term, None)

    def _become_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.uuid
        self._heartbeat_elapsed = 0
        self._current_term_committed = False
        self._transfer_target = None
        self.progress = {
            u: Progress(next=self.last_index() + 1, last_contact=self.now)
            for u in self.config.uuids()
            if u != self.uuid
        }
        self._event(EventKind.BECAME_LEADER, leader=self.uuid)
        self._event(EventKind.LEADER_CHANGED, leader=self.uuid)
        self._append([Entry(self.term, self.last_index() + 1, EntryType.NO_OP)])
        self._maybe_commit()
        self._broadcast(heartbeat=False)

    # ------------------------------------------------------------ replication (leader)
    def _broadcast(self, heartbeat: bool) -> None:
        if heartbeat:
            self._seq += 1
        for u in list(self.progress):
            self._send_append(u, heartbeat)

    def _send_append(self, peer: str, heartbeat: bool = False) -> None:
        """One AppendRequest to `peer`. At most one batch is in flight per peer; a heartbeat re-sends the
        unacknowledged batch (from match + 1), so a lost message costs one heartbeat, not a timeout."""
        pr = self.progress[peer]
        if pr.inflight and not heartbeat:
            return
        if pr.inflight and not pr.probing:
            pr.next = pr.match + 1
        prev = pr.next - 1
        prev_term = self.term_at(prev)
        if prev_term is None:
            if prev < self.log_start - 1:
                # needs entries this log no longer holds: the snapshot, or (without it) FAILED_UNRECOVERABLE
                # until someone replaces the peer (the tablet servers' tablet copy)
                if self.opts.install_snapshots:
                    self._send_snapshot(peer, pr)
                return
            pr.next = self.last_index() + 1
            prev, prev_term = self.last_index(), self.last_term()
        entries: tuple[Entry, ...] = ()
        if not pr.probing:
            entries = tuple(self.entries_from(pr.next, pr.next + self.max_batch_entries - 1))
            pr.next += len(entries)
        pr.inflight = bool(entries) or pr.probing
        self._send(
            AppendRequest(self.uuid, peer, self.term, prev, prev_term, entries, self.commit_index, self._seq)
        )

    def _config_at(self, index: int) -> RaftConfig | None:
        """The committed config as of `index` (applied, so committed); None when this log cannot tell."""
        best = self.committed_config if self.committed_config.opid_index <= index else None
        for e in self.entries_from(self.log_start, index):
            if (
                e.type == EntryType.CONFIG
                and e.config is not None
                and (best is None or e.index > best.opid_index)
            ):
                best = e.config
        return best

    def _send_snapshot(self, peer: str, pr: Progress) -> None:
        """Raft's InstallSnapshot: the state machine as of what this leader applied, whose entries the log
        may no longer hold. The peer answers like an append that matched up to that index."""
        index = self.applied_index
        term, config = self.term_at(index), self._config_at(index)
        if term is None or config is None:
            return  # not applied far enough to name a snapshot: the next heartbeat tries again
        pr.probing, pr.inflight, pr.next = True, True, index + 1
        self._send(InstallSnapshot(self.uuid, peer, self.term, index, term, config))

    def _on_append_response(self, m: AppendResponse) -> None:
        pr = self.progress.get(m.src)
        if pr is None:
            return
        pr.last_contact = self.now
        pr.acked_seq = max(pr.acked_seq, m.seq)
        if not (m.success and pr.inflight and not pr.probing and m.match_index < pr.next - 1):
            # an answer to a read round's empty append leaves the batch in flight waiting for its own
            pr.inflight = False
        if m.success:
            if m.match_index > pr.match:
                pr.match = m.match_index
            pr.next = max(pr.next, pr.match + 1)
            if pr.probing:
                pr.probing = False
                pr.next = pr.match + 1
            self._maybe_commit()
            self._maybe_promote(m.src)
            if self._transfer_target == m.src and pr.match >= self.last_index():
                self._send(TimeoutNow(self.uuid, m.src, self.term))
            if pr.next <= self.last_index():
                self._send_append(m.src)
        else:
            # fast back-off: jump to the follower's last index or to the start of the conflicting term
            guess = m.conflict_index if m.conflict_index > 0 else m.last_index + 1
            pr.probing = True
            pr.next = max(pr.match + 1, min(pr.next - 1, guess, m.last_index + 1))
            self._send_append(m.src)
        self._release_reads()

    def _voter_matches(self) -> list[int]:
        """Match index of every member that counts toward the majority."""
        members = self.config.uuids() if self.bugs.enabled(Bug.COUNT_NONVOTER_ACKS) else self.config.voters()
        out = []
        for u in members:
            if u == self.uuid:
                out.append(self._stable_last)
            elif u in self.progress:
                out.append(self.progress[u].match)
            else:
                out.append(0)
        return out

    def _maybe_commit(self) -> None:
        if self.role != Role.LEADER:
            return
        matches = sorted(self._voter_matches(), reverse=True)
        need = self.config.majority()
        if len(matches) < need:
            return
        n = matches[need - 1]
        if n <= self.commit_index:
            return
        if self.term_at(n) != self.term and not self.bugs.enabled(Bug.COMMIT_PRIOR_TERM):
            # an earlier-term entry commits only through an entry of the current term (Raft 5.4.2)
            return
        self._set_commit(n)
        if self.term_at(n) == self.term:
            self._current_term_committed = True

    def _set_commit(self, n: int) -> None:
        old = self.commit_index
        self.commit_index = n
        newest_cfg = None
        for e in self.entries_from(old + 1, n):
            if e.type == EntryType.CONFIG and e.config is not None:
                newest_cfg = e.config
            if e.term == self.term and self.role == Role.LEADER:
                self._current_term_committed = True
        if newest_cfg is not None and newest_cfg.opid_index > self.committed_config.opid_index:
            self.committed_config = newest_cfg
            self._config_dirty = True
            self._event(EventKind.CONFIG_COMMITTED, config=newest_cfg)
            if self.committed_config.peer(self.uuid) is None:
                self._event(EventKind.REMOVED, config=newest_cfg)

    # ------------------------------------------------------------ replication (follower)
    def _on_append_request(self, m: AppendRequest) -> None:
        if m.term < self.term:
            self._send(
                AppendResponse(self.uuid, m.src, self.term, False, last_index=self.last_index(), seq=m.seq)
            )
            return
        if m.term > self.term or self.role != Role.FOLLOWER or self.leader_id != m.src:
            self._become_follower(m.term, m.src)
        self._election_elapsed = 0
        self._contact_elapsed = 0

        def reject(conflict: int = 0) -> None:
            self._send(
                AppendResponse(
                    self.uuid,
                    m.src,
                    self.term,
                    False,
                    last_index=self.last_index(),
                    conflict_index=conflict,
                    seq=m.seq,
                )
            )

        if m.prev_index > self.last_index():
            reject()
            return
        local = self.term_at(m.prev_index)
        if local is None:
            # prev was garbage-collected here: it is committed, so it matches by Log Matching
            if m.prev_index > self.commit_index:
                reject()
                return
        elif local != m.prev_term:
            first = m.prev_index
            while first - 1 > max(self.commit_index, self.log_start - 1) and self.term_at(first - 1) == local:
                first -= 1
            reject(conflict=first)
            return
        new: list[Entry] = []
        for i, e in enumerate(m.entries):
            if e.index < self.log_start:
                continue
            t = self.term_at(e.index)
            if t is None:
                new = list(m.entries[i:])
                break
            if t != e.term:
                self._truncate(e.index)
                new = list(m.entries[i:])
                break
        if new:
            self._append(new)
        received = m.prev_index + len(m.entries)
        bound = self.last_index() if self.bugs.enabled(Bug.FOLLOWER_COMMIT_PAST_BATCH) else received
        target = min(m.commit_index, bound)
        if target > self.commit_index:
            self._set_commit(target)
        self._send(
            AppendResponse(
                self.uuid,
                m.src,
                self.term,
                True,
                match_index=received,
                last_index=self.last_index(),
                seq=m.seq,
            )
        )

    def _on_install_snapshot(self, m: InstallSnapshot) -> None:
        """A snapshot beyond what this replica committed, whose last entry its log does not hold, replaces
        the whole log: past the first disagreement with the leader nothing here was committed, nor
        acknowledged to this leader. Otherwise (its last entry is in the log, or committed here) the log
        already matches the leader's up to the snapshot's index and is kept as it is, entries acknowledged
        after it included (Raft's Figure 13: a stale back-off can make the leader send a snapshot to a
        follower that is further along)."""
        if m.term < self.term:
            self._send(AppendResponse(self.uuid, m.src, self.term, False, last_index=self.last_index()))
            return
        if m.term > self.term or self.role != Role.FOLLOWER or self.leader_id != m.src:
            self._become_follower(m.term, m.src)
        self._election_elapsed = 0
        self._contact_elapsed = 0
        if m.index > self.commit_index and self.term_at(m.index) != m.snap_term:
            self.log = []
            self.log_start, self._prev_term = m.index + 1, m.snap_term
            self.commit_index = self.applied_index = self._stable_last = m.index
            self._pending_truncate = None
            if m.config != self.committed_config:
                self.committed_config = m.config
                self._event(EventKind.CONFIG_COMMITTED, config=m.config)
            self._config_dirty = True
            self._recompute_config()
            self._update_role_for_membership()
            self._snapshot = Snapshot(m.index, m.snap_term, m.config, m.data)
        self._send(
            AppendResponse(
                self.uuid, m.src, self.term, True, match_index=m.index, last_index=self.last_index()
            )
        )

    def _on_timeout_now(self, m: TimeoutNow) -> None:
        if m.term != self.term or not self.config.is_voter(self.uuid) or self.role == Role.LEADER:
            return
        self._election_elapsed = 0
        self._campaign(pre=False, transfer=True)

    # ------------------------------------------------------------ inputs
    def step(self, m: Message) -> None:
        """Handle one message addressed to this replica."""
        if m.dst != self.uuid:
            return
        if isinstance(m, VoteRequest):
            self._on_vote_request(m)
            return
        if m.term > self.term:
            if isinstance(m, VoteResponse) and m.pre_vote and m.granted:
                pass  # a granted pre-vote carries the proposed term, not the voter's
            else:
                self._become_follower(
                    m.term, m.src if isinstance(m, AppendRequest | InstallSnapshot) else None
                )
        if isinstance(m, AppendRequest):
            self._on_append_request(m)
        elif isinstance(m, InstallSnapshot):
            self._on_install_snapshot(m)
        elif isinstance(m, AppendResponse):
            if self.role == Role.LEADER and m.term == self.term:
                self._on_append_response(m)
        elif isinstance(m, VoteResponse):
            self._on_vote_response(m)
        elif isinstance(m, TimeoutNow):
            self._on_timeout_now(m)

    def _require_leader(self) -> None:
        if self.role != Role.LEADER:
            raise RaftError(ErrorCode.NOT_LEADER, f"{self.uuid} is {self.role.value}", self.leader_id)

    def propose(self, payload: bytes) -> int:
        """Append a WRITE entry; returns its index. It is committed when it shows up in committed_entries
        with this term (a different term at that index means it was lost)."""
        self._require_leader()
        if self._transfer_target is not None:
            raise RaftError(ErrorCode.TRANSFER_IN_PROGRESS, f"transferring to {self._transfer_target}")
        idx = self.last_index() + 1
        self._append([Entry(self.term, idx, EntryType.WRITE, payload)])
        self._maybe_commit()
        for u, pr in self.progress.items():
            if not pr.probing:
                self._send_append(u)
        return idx

    def change_config(self, change: ConfigChange) -> int:
        """One-by-one membership change; returns the index of the CONFIG entry."""
        self._require_leader()
        if self._transfer_target is not None:
            raise RaftError(ErrorCode.TRANSFER_IN_PROGRESS, f"transferring to {self._transfer_target}")
        if not self._current_term_committed:
            raise RaftError(ErrorCode.LEADER_NOT_READY, "no entry of the current term is committed yet")
        if self.pending_config_index() is not None:
            raise RaftError(
                ErrorCode.CONFIG_CHANGE_PENDING, f"config at {self.pending_config_index()} pending"
            )
        if (
            change.cas_config_index is not None
            and change.cas_config_index != self.committed_config.opid_index
        ):
            raise RaftError(
                ErrorCode.CAS_FAILED,
                f"committed config index is {self.committed_config.opid_index}, "
                f"not {change.cas_config_index}",
            )
        old = self.config
        cur = old.peer(change.peer.uuid)
        peers = list(old.peers)
        if change.type == ChangeType.ADD_PEER:
            if cur is not None:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, f"{change.peer.uuid} is already a member")
            peers.append(change.peer)
        elif change.type == ChangeType.REMOVE_PEER:
            if cur is None:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, f"{change.peer.uuid} is not a member")
            if change.peer.uuid == self.uuid:
                self.transfer_leadership(None)
                raise RaftError(
                    ErrorCode.STEPPING_DOWN,
                    "removing the leader: transferring leadership first",
                    self._transfer_target,
                )
            if cur.member_type == MemberType.VOTER and len(old.voters()) == 1:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, "cannot remove the last voter")
            peers = [p for p in peers if p.uuid != change.peer.uuid]
        else:
            if cur is None:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, f"{change.peer.uuid} is not a member")
            if change.peer.uuid == self.uuid and change.peer.member_type != MemberType.VOTER:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, "the leader cannot demote itself")
            peers = [
                replace(p, member_type=change.peer.member_type, promote=change.peer.promote)
                if p.uuid == cur.uuid
                else p
                for p in peers
            ]
        idx = self.last_index() + 1
        new = RaftConfig(tuple(peers), idx)
        if len(set(old.voters()) ^ set(new.voters())) > 1:
            raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, "at most one voter may change at a time")
        self._append([Entry(self.term, idx, EntryType.CONFIG, config=new)])
        self._maybe_commit()
        for u, pr in self.progress.items():
            if not pr.probing:
                self._send_append(u)
        return idx

    def _maybe_promote(self, uuid: str) -> None:
        p = self.config.peer(uuid)
        if p is None or p.member_type != MemberType.NON_VOTER or not p.promote:
            return
        if self.progress[uuid].match + self.opts.promote_lag_entries < self.last_index():
            return
        try:
            self.change_config(ConfigChange(ChangeType.MODIFY_PEER, Peer(uuid, p.address, MemberType.VOTER)))
        except RaftError:
            return
        self._event(EventKind.PEER_PROMOTED, leader=self.uuid, detail=uuid)

    def transfer_leadership(self, target: str | None = None) -> str:
        """Hand leadership to `target` (or the most caught-up voter); returns the chosen target.

        Writes and config changes are refused until the transfer ends or its window expires."""
        self._require_leader()
        if self._transfer_target is not None:
            raise RaftError(ErrorCode.TRANSFER_IN_PROGRESS, f"transferring to {self._transfer_target}")
        candidates = [u for u in self.config.voters() if u != self.uuid]
        if target is None:
            if not candidates:
                raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, "no other voter to transfer to")
            target = max(candidates, key=lambda u: (self.progress[u].match, u))
        elif target not in candidates:
            raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, f"{target} is not another voter")
        self._transfer_target = target
        self._transfer_elapsed = 0
        self._event(EventKind.TRANSFER_STARTED, leader=self.uuid, detail=target)
        if self.progress[target].match >= self.last_index():
            self._send(TimeoutNow(self.uuid, target, self.term))
        else:
            self._send_append(target)
        return target

    def campaign_now(self) -> int:
        """An election asked for from outside (an operator, a test): campaign at once, without pre-vote,
        with the transfer mark that lets voters grant while they still hear from a live leader. A leader
        first steps down. Returns the term of the campaign."""
        if not self.config.is_voter(self.uuid):
            raise RaftError(ErrorCode.INVALID_CONFIG_CHANGE, f"{self.uuid} is not a voter")
        if self.role == Role.LEADER:
            self._become_follower(self.term, None)
        self._election_elapsed = 0
        self._campaign(pre=False, transfer=True)
        return self.term

    def step_down(self) -> None:
        """Abrupt step-down: stop leading in this term; someone else will time out and run."""
        self._require_leader()
        self._become_follower(self.term, None)

    def read_index(self, ctx: object) -> None:
        """Linearizable read: answered in a later ready().read_states once a majority of voters
        confirmed this leader in a heartbeat round sent after the request."""
        self._require_leader()
        if not self._current_term_committed:
            raise RaftError(ErrorCode.LEADER_NOT_READY, "no entry of the current term is committed yet")
        if self.bugs.enabled(Bug.STALE_LEADER_READS):
            self._read_states.append(ReadState(ctx, self.commit_index))
            return
        if self._unsent_round == self._seq and self._reads:
            # a round started after the reads before it has not left yet: it was also sent after this one
            # arrived, so it confirms this read too (one round per Ready, however many reads came in)
            self._reads.append(_PendingRead(ctx, self.commit_index, self._seq))
            return
        self._seq += 1
        self._reads.append(_PendingRead(ctx, self.commit_index, self._seq))
        self._release_reads()
        if self._reads:
            self._read_round()

    def _read_round(self) -> None:
        """Send heartbeat round `_seq` to every peer. An AppendRequest still waiting in the outbox has not
        left yet, so it simply carries the new round; a peer with a batch in flight gets an empty append at
        its match point instead of a re-send of that batch (the periodic heartbeat still re-sends it)."""
        queued = set()
        for i, m in enumerate(self._msgs):
            if isinstance(m, AppendRequest) and m.src == self.uuid and m.term == self.term:
                self._msgs[i] = replace(m, seq=self._seq)
                queued.add(m.dst)
        for u in list(self.progress):
            if u in queued:
                continue
            pr = self.progress[u]
            prev_term = self.term_at(pr.match) if pr.inflight and not pr.probing else None
            if prev_term is None:
                self._send_append(u, heartbeat=True)
            else:
                self._send(
                    AppendRequest(
                        self.uuid, u, self.term, pr.match, prev_term, (), self.commit_index, self._seq
                    )
                )
        self._unsent_round = self._seq

    def _release_reads(self) -> None:
        if not self._reads:
            return
        acks = []
        for u in self.config.voters():
            acks.append(
                self._seq if u == self.uuid else (self.progress[u].acked_seq if u in self.progress else 0)
            )
        acks.sort(reverse=True)
        confirmed = acks[self.config.majority() - 1]
        while self._reads and self._reads[0].seq <= confirmed:
            r = self._reads.pop(0)
            self._read_states.append(ReadState(r.ctx, r.index))

    def compact(self, below_index: int) -> None:
        """The WAL garbage-collected entries below `below_index` (all applied); forget them here too."""
        below_index = min(below_index, self.applied_index + 1)
        if below_index <= self.log_start:
            return
        self._prev_term = self.term_at(below_index - 1) or self._prev_term
        del self.log[: below_index - self.log_start]
        self.log_start = below_index

    # ------------------------------------------------------------ queries
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    def transfer_target(self) -> str | None:
        return self._transfer_target

    def current_term_committed(self) -> bool:
        return self.role == Role.LEADER and self._current_term_committed

    def peer_health(self) -> dict[str, PeerHealth]:
        """Leader only (empty otherwise): every other member's health."""
        out: dict[str, PeerHealth] = {}
        if self.role != Role.LEADER:
            return out
        for u, pr in self.progress.items():
            if pr.match < self.log_start - 1:
                out[u] = PeerHealth.FAILED_UNRECOVERABLE
            elif self.now - pr.last_contact >= self.opts.failed_after_ticks:
                out[u] = PeerHealth.FAILED
            else:
                out[u] = PeerHealth.HEALTHY
        return out

    def retention_index(self, max_lag_entries: int) -> int:
        """Lowest index the WAL should keep: what healthy peers still need, but at most
        `max_lag_entries` behind the last index (beyond that a peer needs a tablet copy)."""
        floor = self.applied_index + 1
        if self.role == Role.LEADER:
            health = self.peer_health()
            for u, pr in self.progress.items():
                if health.get(u) == PeerHealth.HEALTHY:
                    floor = min(floor, pr.match + 1)
        return max(floor, self.last_index() - max_lag_entries + 1, self.log_start)

    def status(self) -> dict:
        return {
            "uuid": self.uuid,
            "role": self.role.value,
            "term": self.term,
            "leader": self.leader_id,
            "voted_for": self.voted_for,
            "commit_index": self.commit_index,
            "last_index": self.last_index(),
            "applied_index": self.applied_index,
            "config": self.config,
            "committed_config": self.committed_config,
        }
