"""Test doubles that belong to no DB: the placeholder daemon (a TCP stand-in for a node's process) and the
generic in-memory key-value fake (kvfake.py: a DB and its `--cluster kvfake`), on which the runner, the
generic workloads and the generic nemeses are tested. The store's in-memory fake cluster (built on
kvfake) and loopback mini-cluster live with the store (dbs/store/)."""
