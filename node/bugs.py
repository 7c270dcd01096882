"""Every injectable bug, by name: one registry that the node processes, the simulator,
the `faultline run --inject-bug` option and campaign validation all read.

Each is a real class of defect from Raft or from Kudu's history. All are off by default.
"""

from __future__ import annotations

BUGS: dict[str, str] = {
    # consensus core (node/consensus), caught by `faultline sim`
    "commit-prior-term": "leader commits an entry of an earlier term by counting replicas (Raft fig. 8)",
    "count-nonvoter-acks": "NON_VOTER acknowledgements count toward the commit majority",
    "vote-not-durable": "a vote is sent before it is persisted",
    "follower-commit-past-batch": "follower advances its commit index past the entries it received (KUDU-639)",
    "no-vote-withholding": "voters grant votes despite hearing from a live leader recently",
    "stale-leader-reads": "leader serves reads from local state without a read-index round (KUDU-1188's class)",
    # storage (node/log)
    "no-fsync": "WAL and consensus metadata are never fsynced (Kudu's own default)",
    # masters and tablet servers (node/master, node/tserver, node/client)
    "cold-tserver-cache": "new leader master serves from an in-memory cache not rebuilt from the catalog (KUDU-1358)",
    "edge-triggered-reports": "tablet servers do not send a full report to a newly elected leader master (KUDU-1374)",
    "no-dns-reresolve": "nodes never re-resolve a master's DNS name after it moves (KUDU-1620)",
    "copy-from-lagging-master": "remote bootstrap of a master copies from any master, even a lagging one (KUDU-1556)",
}


def validate(names: list[str] | tuple[str, ...]) -> list[str]:
    """Returns the names, or raises ValueError naming the unknown one and the valid choices."""
    for name in names:
        if name not in BUGS:
            raise ValueError(f"unknown bug {name!r}; valid: {', '.join(sorted(BUGS))}")
    return list(names)
