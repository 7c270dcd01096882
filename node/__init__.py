"""The system under test: a small Kudu-like store of tablet servers and replicated masters."""
