"""Process plumbing shared by masters and tablet servers: the data directory, gRPC channels
with DNS re-resolution, typed keys and values, and the replica host that drives Raft groups."""
