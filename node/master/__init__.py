"""The master process: the catalog in a Raft-replicated system tablet, DDL, placement, re-replication."""
