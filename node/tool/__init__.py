"""Admin tools named after Kudu's: `python -m node tool ...` (see docs/node.md)."""
