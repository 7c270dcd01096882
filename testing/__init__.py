"""Test doubles that belong to no DB: the placeholder daemon (a TCP stand-in for a node's process). The
store's in-memory fake cluster and loopback mini-cluster live with the store (dbs/store/)."""
