"""Plain data shared by the Raft core, the WAL, the node processes and the simulator.

Everything here is an immutable dataclass or an enum, so the node layer can map it to and from
protobuf field by field and the simulator can copy, duplicate and reorder messages freely.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from faultline.node.bugs import BugSet


class MemberType(enum.StrEnum):
    """A peer's role in a configuration: only VOTERs vote and count toward a majority."""

    VOTER = "VOTER"
    NON_VOTER = "NON_VOTER"


class Role(enum.StrEnum):
    FOLLOWER = "FOLLOWER"
    PRE_CANDIDATE = "PRE_CANDIDATE"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    LEARNER = "LEARNER"  # a NON_VOTER member, or a replica that is not in its own active config


class EntryType(enum.StrEnum):
    NO_OP = "NO_OP"  # written by every new leader at the start of its term
    WRITE = "WRITE"  # opaque payload for the state machine
    CONFIG = "CONFIG"  # a membership change; carries the whole new RaftConfig


class ChangeType(enum.StrEnum):
    ADD_PEER = "ADD_PEER"
    REMOVE_PEER = "REMOVE_PEER"
    MODIFY_PEER = "MODIFY_PEER"


class PeerHealth(enum.StrEnum):
    """The leader's view of a peer, for the master's re-replication decisions."""

    HEALTHY = "HEALTHY"
    FAILED = "FAILED"  # no answer for `failed_after_ticks`
    FAILED_UNRECOVERABLE = "FAILED_UNRECOVERABLE"  # needs log entries that were garbage-collected


class ErrorCode(enum.StrEnum):
    NOT_LEADER = "NOT_LEADER"
    LEADER_NOT_READY = "LEADER_NOT_READY"  # no entry of the current term committed yet
    TRANSFER_IN_PROGRESS = "TRANSFER_IN_PROGRESS"
    CONFIG_CHANGE_PENDING = "CONFIG_CHANGE_PENDING"
    CAS_FAILED = "CAS_FAILED"
    INVALID_CONFIG_CHANGE = "INVALID_CONFIG_CHANGE"
    STEPPING_DOWN = "STEPPING_DOWN"  # removing the leader itself: it is transferring leadership first
    ABORTED = "ABORTED"  # a pending read was dropped because leadership was lost


class RaftError(Exception):
    """A local request (propose, change_config, read_index, transfer) the core refused."""

    def __init__(self, code: ErrorCode, message: str = "", leader_hint: str | None = None) -> None:
        super().__init__(f"{code.value}: {message}" if message else code.value)
        self.code = code
        self.leader_hint = leader_hint


@dataclass(frozen=True)
class Peer:
    uuid: str
    address: str = ""  # host:port
    member_type: MemberType = MemberType.VOTER
    promote: bool = False  # a NON_VOTER the leader promotes to VOTER once it has caught up


@dataclass(frozen=True)
class RaftConfig:
    """A whole membership; `opid_index` is the log index of the entry that introduced it (-1: initial)."""

    peers: tuple[Peer, ...]
    opid_index: int = -1

    def __post_init__(self) -> None:
        # derived lookups, computed once: the core asks for them on every message
        voters = tuple(p.uuid for p in self.peers if p.member_type == MemberType.VOTER)
        object.__setattr__(self, "_voters", voters)
        object.__setattr__(self, "_by_uuid", {p.uuid: p for p in self.peers})

    def peer(self, uuid: str) -> Peer | None:
        return self._by_uuid.get(uuid)  # type: ignore[attr-defined]

    def voters(self) -> list[str]:
        return list(self._voters)  # type: ignore[attr-defined]

    def uuids(self) -> list[str]:
        return [p.uuid for p in self.peers]

    def is_voter(self, uuid: str) -> bool:
        return uuid in self._voters  # type: ignore[attr-defined]

    def majority(self) -> int:
        return len(self._voters) // 2 + 1  # type: ignore[attr-defined]

    def with_index(self, opid_index: int) -> RaftConfig:
        return replace(self, opid_index=opid_index)

    @staticmethod
    def of(*uuids: str) -> RaftConfig:
        """A convenience for tests: all VOTERs, address = uuid."""
        return RaftConfig(tuple(Peer(u, u) for u in uuids))


@dataclass(frozen=True)
class Entry:
    term: int
    index: int
    type: EntryType = EntryType.WRITE
    payload: bytes = b""
    config: RaftConfig | None = None  # set for CONFIG entries


@dataclass(frozen=True)
class HardState:
    term: int = 0
    voted_for: str | None = None


@dataclass(frozen=True)
class ConfigChange:
    type: ChangeType
    peer: (
        Peer  # for REMOVE_PEER only uuid matters; for MODIFY_PEER member_type and promote are the new values
    )
    cas_config_index: int | None = None  # refuse unless the committed config's opid_index equals this


# ---------------------------------------------------------------- messages
# Every message has src, dst and the sender's term.


@dataclass(frozen=True)
class VoteRequest:
    src: str
    dst: str
    term: int  # for a pre-vote: the term the candidate would use (its term + 1)
    last_log_term: int
    last_log_index: int
    pre_vote: bool = False
    transfer: bool = False  # a leadership transfer: voters must not withhold their vote


@dataclass(frozen=True)
class VoteResponse:
    src: str
    dst: str
    term: int  # the voter's term, or the request's term for a granted pre-vote
    granted: bool
    pre_vote: bool = False
    reason: str = ""


@dataclass(frozen=True)
class AppendRequest:
    """Kudu's UpdateConsensus: replicate entries after (prev_index, prev_term); also the heartbeat."""

    src: str
    dst: str
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...] = ()
    commit_index: int = 0
    seq: int = 0  # heartbeat round, echoed back, confirms leadership for read-index


@dataclass(frozen=True)
class AppendResponse:
    src: str
    dst: str
    term: int
    success: bool
    match_index: int = 0  # on success: last index known to match the leader (prev + len(entries))
    last_index: int = 0  # the follower's last log index (fast back-off)
    conflict_index: int = 0  # on a term mismatch: first index of the conflicting term (fast back-off)
    seq: int = 0


@dataclass(frozen=True)
class TimeoutNow:
    """Leadership transfer: the target starts an election at once, bypassing pre-vote and withholding."""

    src: str
    dst: str
    term: int


@dataclass(frozen=True)
class InstallSnapshot:
    """Raft's InstallSnapshot: the leader's state machine as of `index` (whose entry has `snap_term`), for a
    follower that needs entries the leader no longer holds. The core names index, term and config; the node
    fills `data` from its state machine when it sends the message (and drops it if that moved on). The
    follower answers with an AppendResponse whose match_index is `index`."""

    src: str
    dst: str
    term: int
    index: int
    snap_term: int
    config: RaftConfig
    data: bytes = b""


Message = VoteRequest | VoteResponse | AppendRequest | AppendResponse | TimeoutNow | InstallSnapshot


# ---------------------------------------------------------------- outputs


class EventKind(enum.StrEnum):
    BECAME_LEADER = "BECAME_LEADER"
    LOST_LEADERSHIP = "LOST_LEADERSHIP"
    LEADER_CHANGED = "LEADER_CHANGED"  # a new leader was heard of (leader may be None)
    CONFIG_CHANGED = "CONFIG_CHANGED"  # the active config changed (appended, or rolled back)
    CONFIG_COMMITTED = "CONFIG_COMMITTED"
    TRANSFER_STARTED = "TRANSFER_STARTED"
    TRANSFER_FAILED = "TRANSFER_FAILED"
    REMOVED = "REMOVED"  # this replica is no longer in its committed config
    PEER_PROMOTED = "PEER_PROMOTED"  # the leader proposed promoting a caught-up NON_VOTER


@dataclass(frozen=True)
class Event:
    kind: EventKind
    term: int
    leader: str | None = None
    config: RaftConfig | None = None
    detail: str = ""


@dataclass(frozen=True)
class ReadState:
    """Answer to read_index(ctx): serve the read once the state machine has applied `index`."""

    ctx: object
    index: int
    ok: bool = True
    error: ErrorCode | None = None


@dataclass(frozen=True)
class Snapshot:
    """A snapshot the follower accepted: the state machine as of `index` (term `term`) and the committed
    config then. The node installs it before anything else in the Ready."""

    index: int
    term: int
    config: RaftConfig
    data: bytes


@dataclass
class Ready:
    """What the node must do, in this order: install `snapshot` (replace the state machine with it and
    empty the WAL, which then starts after its index), truncate the WAL at `truncate_from` (drop every
    entry with index >= it), append `entries`, save cmeta if `hard_state` or `committed_config` is set, sync;
    then send `messages`, apply `committed_entries`, answer `read_states`, handle `events`;
    then call `advance(ready)`."""

    messages: list[Message] = field(default_factory=list)
    truncate_from: int | None = None
    entries: list[Entry] = field(default_factory=list)
    hard_state: HardState | None = None
    committed_config: RaftConfig | None = None
    committed_entries: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    commit_index: int = 0
    snapshot: Snapshot | None = None

    def must_persist(self) -> bool:
        return bool(
            self.entries
            or self.truncate_from is not None
            or self.hard_state
            or self.committed_config
            or self.snapshot
        )

    def empty(self) -> bool:
        return not (
            self.messages or self.must_persist() or self.committed_entries or self.read_states or self.events
        )


@dataclass(frozen=True)
class PersistentState:
    """What a replica reads back on start: cmeta (hard state, committed config) and the WAL's entries.

    `log_start` is the first index still in the WAL (entries below were garbage-collected) and
    `log_start_prev_term` the term of the entry just before it, so log matching still works there.
    `applied_index` is what the state machine already holds (a snapshot or tablet copy)."""

    hard_state: HardState
    committed_config: RaftConfig
    entries: tuple[Entry, ...] = ()
    log_start: int = 1
    log_start_prev_term: int = 0
    applied_index: int = 0


@dataclass(frozen=True)
class Options:
    election_ticks: int = 10  # minimum election timeout; the actual one is random in [n, 2n)
    heartbeat_ticks: int = 2
    pre_vote: bool = True
    max_batch_entries: int = 64  # entries per AppendRequest
    promote_lag_entries: int = 8  # a promotable NON_VOTER within this many entries is promoted
    failed_after_ticks: int = 600  # leader marks a silent peer FAILED after this many ticks
    transfer_ticks: int = 0  # leadership transfer window; 0 means election_ticks
    install_snapshots: bool = False  # a peer behind the log's start gets the leader's snapshot (else it
    # stays FAILED_UNRECOVERABLE until someone replaces it: the tablet servers' tablet copy)
    bugs: frozenset[str] = frozenset()  # names or members of node.bugs.Bug; held as a BugSet

    def __post_init__(self) -> None:
        # an unknown name fails when the options are made, not silently at the first check
        object.__setattr__(self, "bugs", BugSet(self.bugs))
