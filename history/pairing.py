"""The rules a history must keep to be judged at all (a completion follows its invocation, a process invokes
only when idle), and the split of Jepsen's independent `[k v]` values into key and value."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from faultline.core import Op
from faultline.history.jsonl import _jsonl  # history/_jsonl.c, when built: its pairs() is the usual case
from faultline.history.reading import HistoryFormatError


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def check_pairs(ops: Sequence[Mapping[str, Any]], lines: Sequence[int], path: str | os.PathLike[str]) -> None:
    """Every client completion follows an invocation of its process with the same f and key, and a process
    invokes only when idle: anything else is a history no checker can judge (HistoryFormatError). The
    compiled loop (history/_jsonl.c) answers for a history that pairs well; the loop here finds and names
    any problem (and does it all when that is not built)."""
    if _jsonl is not None and type(ops) is list and _jsonl.pairs(ops) is not None:
        return
    busy: dict[Any, int] = {}  # process -> position of its open invocation
    busy_get, busy_pop = busy.get, busy.pop
    for i, op in enumerate(ops):
        proc = op.get("process")
        if type(proc) is not int:
            if proc == "nemesis":
                continue
            if not _hashable(proc):
                raise HistoryFormatError(path, lines[i], f"process {proc!r} is neither a number nor a name")
        if op["type"] == "invoke":
            j = busy_get(proc)
            if j is not None:
                raise HistoryFormatError(
                    path,
                    lines[i],
                    f"process {proc!r} invokes {op.get('f')!r} while its "
                    f"{ops[j].get('f')!r} invoked on line {lines[j]} has not completed",
                )
            busy[proc] = i
            continue
        j = busy_pop(proc, None)
        if j is None:
            raise HistoryFormatError(
                path, lines[i], f"a completion (type {op['type']}) of process {proc!r} without an invocation"
            )
        inv = ops[j]
        a, b = inv.get("f"), op.get("f")
        if a is not b and a is not None and b is not None and a != b:
            _mismatch(path, lines, i, j, "f", a, b)
        a, b = inv.get("key"), op.get("key")
        if a is not None and b is not None and a != b:
            _mismatch(path, lines, i, j, "key", a, b)


def _mismatch(
    path: str | os.PathLike[str], lines: Sequence[int], i: int, j: int, k: str, a: Any, b: Any
) -> None:
    raise HistoryFormatError(
        path, lines[i], f"a completion with {k} {b!r} for an invocation with {k} {a!r} on line {lines[j]}"
    )


def _key_like(v: Any) -> bool:
    return isinstance(v, int | str) and not isinstance(v, bool)


def split_independent(ops: list[Op]) -> bool:
    """Jepsen's independent histories carry `[k v]` as every client op's value (a cas's `v` is `[old new]`);
    splits them into `key` and `value` so that each key is checked alone. Returns whether it did."""
    any_client = False
    for op in ops:
        if op.get("process") == "nemesis":
            continue
        any_client = True
        v = op.get("value")
        if "key" in op or not (isinstance(v, list) and len(v) == 2 and _key_like(v[0])):
            return False  # most histories: at their first client op
        if op.get("f") == "cas" and not (isinstance(v[1], list) and len(v[1]) == 2):
            return False
    for op in ops:
        if op.get("process") != "nemesis":
            op["key"], op["value"] = op["value"]
    return any_client
