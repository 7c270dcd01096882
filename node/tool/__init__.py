"""Admin tools named after Kudu's: `python -m faultline.node tool ...` (see docs/node.md)."""
