"""Completions of operations that raised: the one rule every client follows (after Jepsen's).

An error on an operation that cannot change state (a read) is a `fail`; an error on a write is `info`
(indeterminate) unless the client knows the error proves the write did not happen. Calling a
maybe-applied write `fail` would make the checkers report anomalies that did not happen.
"""

from __future__ import annotations

from typing import Any

Op = dict[str, Any]


def error_text(exc: BaseException) -> str:
    """`Type: first line of the message`, at most 200 characters."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"[:200] if msg else type(exc).__name__


def completion(op: Op, exc: BaseException, *, read_only: bool, definite: bool = False) -> Op:
    """The completion of `op` that failed with `exc`: fail when nothing can have changed, else info."""
    kind = "fail" if read_only or definite else "info"
    return {**op, "type": kind, "error": error_text(exc)}
