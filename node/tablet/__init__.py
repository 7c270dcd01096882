"""A tablet replica's key-value state machine, applied from committed log entries."""

from faultline.node.tablet.state import Op, OpResult, TabletState, decode_entry, encode_write

__all__ = ["Op", "OpResult", "TabletState", "decode_entry", "encode_write"]
