"""Every injectable bug: one enumerated registry that the node processes, the simulator,
the `faultline run --inject-bug` option and campaign validation all read.

Each is a real class of defect from Raft or from Kudu's history. All are off by default. The node
code asks `bugs.enabled(Bug.X)` of a `BugSet`; a name that is not a `Bug` raises `UnknownBug`
wherever it appears (flag, campaign, options, or the check itself), so a misspelt bug can never
silently stay off.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Bug(StrEnum):
    """One injectable bug; the value is its command-line and campaign spelling."""

    description: str

    def __new__(cls, value: str, description: str) -> Bug:
        member = str.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    # consensus core (node/consensus), caught by `faultline sim`
    COMMIT_PRIOR_TERM = (
        "commit-prior-term",
        "leader commits an entry of an earlier term by counting replicas (Raft fig. 8)",
    )
    COUNT_NONVOTER_ACKS = (
        "count-nonvoter-acks",
        "NON_VOTER acknowledgements count toward the commit majority",
    )
    VOTE_NOT_DURABLE = ("vote-not-durable", "a vote is sent before it is persisted")
    FOLLOWER_COMMIT_PAST_BATCH = (
        "follower-commit-past-batch",
        "follower advances its commit index past the entries it received (KUDU-639)",
    )
    NO_VOTE_WITHHOLDING = (
        "no-vote-withholding",
        "voters grant votes despite hearing from a live leader recently",
    )
    STALE_LEADER_READS = (
        "stale-leader-reads",
        "leader serves reads from local state without a read-index round (KUDU-1188's class)",
    )
    # storage (node/log)
    NO_FSYNC = ("no-fsync", "WAL and consensus metadata are never fsynced (Kudu's own default)")
    NO_WAL_CHECKSUM = (
        "no-wal-checksum",
        "the WAL reader accepts an entry whose checksum does not match (damaged data is replayed)",
    )
    # masters and tablet servers (node/master, node/tserver, node/client)
    COLD_TSERVER_CACHE = (
        "cold-tserver-cache",
        "new leader master serves from an in-memory cache not rebuilt from the catalog (KUDU-1358)",
    )
    EDGE_TRIGGERED_REPORTS = (
        "edge-triggered-reports",
        "tablet servers do not send a full report to a newly elected leader master (KUDU-1374)",
    )
    NO_DNS_RERESOLVE = (
        "no-dns-reresolve",
        "nodes never re-resolve a master's DNS name after it moves (KUDU-1620)",
    )
    COPY_FROM_LAGGING_MASTER = (
        "copy-from-lagging-master",
        "remote bootstrap of a master copies from any master, even a lagging one (KUDU-1556)",
    )


# name -> description, for help texts and the controller's validation (plain str keys)
BUGS: dict[str, str] = {b.value: b.description for b in Bug}


class UnknownBug(ValueError):
    """A bug name that is not in the registry (a ValueError, so callers that validate keep working)."""

    def __init__(self, name: object) -> None:
        super().__init__(f"unknown bug {name!r}; valid: {', '.join(sorted(BUGS))}")
        self.name = name


def parse(name: object) -> Bug:
    """The member named `name` (a Bug or its spelling); raises UnknownBug for anything else."""
    if isinstance(name, Bug):
        return name
    if isinstance(name, str) and name in BUGS:
        # a value lookup (EnumMeta.__call__), which the checker mistakes for the two-argument __new__
        return Bug(name)  # type: ignore[call-arg]
    raise UnknownBug(name)


def validate(names: Iterable[str]) -> list[str]:
    """Returns the names, or raises UnknownBug (a ValueError) naming the unknown one and the valid choices."""
    out = list(names)
    for name in out:
        parse(name)
    return out


class BugSet(frozenset[Bug]):
    """The bugs turned on in one process or core. Built from names (an unknown one raises); asked with
    `enabled`. Membership tests validate too, so `"typo" in bugs` raises instead of answering False."""

    def __new__(cls, names: Iterable[str] = ()) -> BugSet:
        return super().__new__(cls, [parse(n) for n in names])

    def enabled(self, bug: Bug) -> bool:
        """Whether `bug` is on; raises UnknownBug when `bug` names no bug."""
        return frozenset.__contains__(self, parse(bug))

    def __contains__(self, bug: object) -> bool:
        return self.enabled(bug)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"BugSet({sorted(b.value for b in self)!r})"


NO_BUGS = BugSet()

__all__ = ["BUGS", "NO_BUGS", "Bug", "BugSet", "UnknownBug", "parse", "validate"]
