"""Transactional operations out of a history: invocations paired with completions.

A transaction is a client op whose `f` is "txn" (or absent, as in elle-cli files) and whose value is a
list of micro-ops `[f, k, v]` with f in `append`, `r`, `w`. Each transaction gets an id (its rank in
invocation order); the checker works on these ids, and keeps the ops only to report them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultline.core.native import extension

OK, INFO, FAIL = 0, 1, 2
TYPE_CODES = {"ok": OK, "info": INFO, "fail": FAIL}
TYPE_NAMES = ("ok", "info", "fail")
MOP_FS = frozenset({"append", "r", "w"})

APPEND_ABI = 1  # the calling convention of _append.c this package speaks
_append = extension("faultline.checkers.elle._append", APPEND_ABI)  # None: the same loops in Python


def compiled() -> Any:
    """The compiled loops of `_append.c`, or None when not built (or turned off: tests set `_append` to None
    to compare both). Each of its functions answers None where the Python loop must run instead."""
    return _append


class ElleInputError(ValueError):
    """A history that is not a transactional history these checkers can read."""


@dataclass
class Txns:
    """Parallel lists, one entry per transaction, indexed by transaction id."""

    type: list[int] = field(default_factory=list)  # OK, INFO or FAIL
    mops: list[list[Any]] = field(default_factory=list)  # an ok completion's micro-ops, else the invocation's
    inv: list[int] = field(default_factory=list)  # position of the invocation in the history, or -1
    cmp: list[int] = field(default_factory=list)  # position of the completion, or -1 (never completed)
    inv_index: list[Any] = field(default_factory=list)  # the invocation's `index` field, for reports
    process: list[Any] = field(default_factory=list)
    op: list[dict[str, Any]] = field(default_factory=list)  # the op to show: completion, else invocation
    skipped: int = 0  # client ops that are not transactions

    def __len__(self) -> int:
        return len(self.type)


def is_mop_list(value: Any) -> bool:
    """True if `value` looks like a list of [f k v] micro-ops with known fs."""
    if not isinstance(value, list | tuple) or not value:
        return False
    return all(isinstance(m, list | tuple) and len(m) == 3 and m[0] in MOP_FS for m in value)


def _is_txn(op: dict[str, Any]) -> bool:
    f = op.get("f")
    return (f == "txn" or f is None) and op.get("process") != "nemesis"


def _mops(op: dict[str, Any]) -> list[Any]:
    """The op's micro-ops; only the container is checked here (validate() checks each micro-op)."""
    value = op.get("value")
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ElleInputError(
            f"op {op.get('index')}: a transaction's value must be a list of [f k v], got {value!r}"
        )
    return value  # type: ignore[return-value]


def validate(tx: Txns) -> None:
    """Raises ElleInputError naming the first malformed micro-op (called when inference trips on one)."""
    for t, mops in enumerate(tx.mops):
        for m in mops:
            if not isinstance(m, list | tuple) or len(m) != 3:
                raise ElleInputError(f"op {tx.op[t].get('index')}: micro-op {m!r} is not [f k v]")
            if m[0] not in MOP_FS:
                raise ElleInputError(f"op {tx.op[t].get('index')}: micro-op {m!r}: f must be append, r or w")


def parse(history: Sequence[Mapping[str, Any]]) -> Txns:
    """Pairs each process's invocation with its next completion; unmatched invocations are `info`.

    Ids follow invocation order. An ok completion's micro-ops are used (they hold the reads); an info or
    failed transaction keeps its invocation's."""
    tx = Txns()
    core = compiled()
    if core is not None and type(history) is list:
        skipped = core.parse(history, tx.type, tx.mops, tx.inv, tx.cmp, tx.inv_index, tx.process, tx.op)
        if skipped is not None:
            tx.skipped = skipped
            return tx
        tx = Txns()
    return _parse_loop(history, tx)


def _parse_loop(history: Sequence[Mapping[str, Any]], tx: Txns) -> Txns:
    """parse's loop in Python (the compiled one's twin)."""
    types, mops, inv, cmp_, inv_index, procs, ops = (
        tx.type,
        tx.mops,
        tx.inv,
        tx.cmp,
        tx.inv_index,
        tx.process,
        tx.op,
    )
    pending: dict[Any, int] = {}
    for pos, op in enumerate(history):
        if not isinstance(op, dict):
            raise ElleInputError(f"history entry {pos} is not an operation map")
        f = op.get("f")
        proc = op.get("process")
        if (f != "txn" and f is not None) or proc == "nemesis":
            if proc != "nemesis":
                tx.skipped += 1
            continue
        typ = op.get("type")
        if typ == "invoke":
            pending[proc] = len(types)  # a second invoke leaves the first open (info)
            types.append(INFO)
            value = op.get("value")
            mops.append(value if type(value) is list else _mops(op))
            inv.append(pos)
            cmp_.append(-1)
            inv_index.append(op.get("index", pos))
            procs.append(proc)
            ops.append(op)
            continue
        code = TYPE_CODES.get(typ) if isinstance(typ, str) else None
        if code is None:
            raise ElleInputError(f"op {op.get('index', pos)}: unknown type {typ!r}")
        t = pending.pop(proc, None)
        if t is None:
            t = _completion_only(tx, op)
        types[t] = code
        ops[t] = op
        if code != INFO:
            cmp_[t] = pos
            if code == OK:
                value = op.get("value")
                mops[t] = value if type(value) is list else _mops(op)
    return tx


def _completion_only(tx: Txns, op: dict[str, Any]) -> int:
    """A transaction whose invocation is not in the history (elle-cli files often omit them)."""
    tx.type.append(INFO)
    tx.mops.append(_mops(op))
    tx.inv.append(-1)
    tx.cmp.append(-1)
    tx.inv_index.append(None)
    tx.process.append(op.get("process"))
    tx.op.append(op)
    return len(tx.type) - 1


def detect_kind(history: Sequence[Mapping[str, Any]]) -> str | None:
    """ "list-append", "rw-register", or None when the history holds no Elle-style transactions.

    Every micro-op of every transaction is looked at once (`faultline check` infers the checker from a
    whole history before reading it again to check it), so the test of each is inlined: it is
    `is_mop_list`'s."""
    core = compiled()
    found = core.detect(history) if core is not None and type(history) is list else None
    if found is False:
        return None
    if found is not None:
        seen, has_append, has_w, list_reads = found
        if not seen:
            return None
        return "list-append" if has_append or (list_reads and not has_w) else "rw-register"
    return _detect_kind(history)


def _detect_kind(history: Sequence[Mapping[str, Any]]) -> str | None:
    """detect_kind's scan in Python (the compiled one's twin)."""
    seen = False
    fs: set[str] = set()
    add_f = fs.add
    list_reads = False
    mop_fs = MOP_FS
    for op in history:
        if not isinstance(op, dict):
            continue
        f = op.get("f")
        if (f != "txn" and f is not None) or op.get("process") == "nemesis":
            continue
        value = op.get("value")
        if value is None or value == []:
            continue
        if not isinstance(value, list | tuple) or not value:
            return None
        for m in value:
            if not isinstance(m, list | tuple) or len(m) != 3:
                return None
            mf = m[0]
            if mf not in mop_fs:
                return None
            add_f(mf)
            if mf == "r" and not list_reads and isinstance(m[2], list | tuple):
                list_reads = True
        seen = True
    if not seen:
        return None
    if "append" in fs or (list_reads and "w" not in fs):
        return "list-append"
    return "rw-register"
