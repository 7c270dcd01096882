"""Keys and values of the store: Python `str` or `int` (a signed 64-bit integer); nothing else.

Rows order ints before strings, each type in its natural order, so a range scan over a table
with mixed key types is well defined. Keys are hash-partitioned across a table's tablets.
"""

from __future__ import annotations

import zlib
from typing import Any

from faultline.node.protos import node_pb2 as pb

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
MAX_STRING = 64 * 1024

Scalar = str | int


class BadValue(ValueError):
    """A key or value of a type the store does not hold."""


def check(v: Any, what: str = "value") -> Scalar:
    """Return `v` if it is a storable str or int, else raise BadValue naming the problem."""
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise BadValue(f"{what} must be str or int, got {type(v).__name__}")
    if isinstance(v, int) and not INT_MIN <= v <= INT_MAX:
        raise BadValue(f"{what} {v} does not fit in a signed 64-bit integer")
    if isinstance(v, str) and len(v.encode()) > MAX_STRING:
        raise BadValue(f"{what} is longer than {MAX_STRING} bytes")
    return v


def to_pb(v: Scalar | None, what: str = "value") -> pb.Value:
    if v is None:
        return pb.Value()
    v = check(v, what)
    return pb.Value(s=v) if isinstance(v, str) else pb.Value(i=v)


def from_pb(v: pb.Value) -> Scalar | None:
    kind = v.WhichOneof("kind")
    if kind == "s":
        return v.s
    if kind == "i":
        return v.i
    return None


def sort_key(v: Scalar) -> tuple[int, Any]:
    return (0, v) if isinstance(v, int) else (1, v)


def encode_key(v: Scalar) -> str:
    """A JSON-safe, type-tagged encoding used as the state machine's dict key."""
    return f"i:{v}" if isinstance(v, int) else f"s:{v}"


def decode_key(k: str) -> Scalar:
    return int(k[2:]) if k[0] == "i" else k[2:]


def partition_of(key: Scalar, num_tablets: int) -> int:
    """The hash bucket of a key: stable across processes and Python versions."""
    return zlib.crc32(encode_key(key).encode()) % max(1, num_tablets)
