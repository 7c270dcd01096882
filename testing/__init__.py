"""Test doubles and harnesses: the in-memory fake cluster, the placeholder daemon, a loopback MiniCluster."""
