"""Operations: the `Op` type every layer passes around, and the rule for completing one that raised.

An op is one event of a history (the format docs/architecture.md and the shared architecture describe):
a generator writes its fields (`{"f": "read", "value": None}`), the interpreter makes it an invocation
(`type`, `process`, `time`), a client or nemesis answers with its completion (`{**op, "type": "ok"}`), and
the recorder numbers it (`index`). Every key is optional so that each of those stages is an `Op`.

Completions of operations that raised follow one rule (after Jepsen's): an error on an operation that
cannot change state (a read) is a `fail`; an error on a write is `info` (indeterminate) unless the client
knows the error proves the write did not happen. Calling a maybe-applied write `fail` would make the
checkers report anomalies that did not happen.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

OpType = Literal["invoke", "ok", "fail", "info"]
# a client's process number; faults run as the process "nemesis"
Process = int | str


class Op(TypedDict, total=False):
    """One history event, or the part of one a stage has filled in so far (every key is optional)."""

    index: int  # position in the history, set by the recorder
    time: int  # nanoseconds since the run began (monotonic); an invocation's is when it is due
    type: OpType
    process: Process
    f: str  # what is done: "read", "write", "cas", "txn", a nemesis's "start-partition", ...
    value: Any  # the argument of an invocation, the result of a completion
    key: Any  # the independent key (gen.independent), for per-key checking
    node: str  # the node the op went to, when one did
    error: Any  # why it failed or is indeterminate (text in Faultline's own histories)


def error_text(exc: BaseException) -> str:
    """`Type: first line of the message`, at most 200 characters."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"[:200] if msg else type(exc).__name__


def completion(op: Op, exc: BaseException, *, read_only: bool, definite: bool = False) -> Op:
    """The completion of `op` that failed with `exc`: fail when nothing can have changed, else info."""
    kind: OpType = "fail" if read_only or definite else "info"
    return {**op, "type": kind, "error": error_text(exc)}
