"""The Raft core as a pure state machine; the public API is documented in docs/consensus.md."""

from faultline.node.consensus.core import CORE_BUGS, ConsensusInvariantError, Progress, RaftCore
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

__all__ = [
    "CORE_BUGS", "AppendRequest", "AppendResponse", "ChangeType", "ConfigChange", "ConsensusInvariantError", "Entry",
    "EntryType", "ErrorCode", "Event", "EventKind", "HardState", "InstallSnapshot", "MemberType", "Message", "Options", "Peer",
    "PeerHealth", "PersistentState", "Progress", "RaftConfig", "RaftCore", "RaftError", "ReadState", "Ready",
    "Role", "Snapshot", "TimeoutNow", "VoteRequest", "VoteResponse",
]
