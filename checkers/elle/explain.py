"""Anomalies in words: each step of a cycle says why one transaction must precede the next."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def _v(x: Any) -> str:
    return json.dumps(x, default=str)


def txn_text(op: Mapping[str, Any]) -> str:
    """One transaction as `index 7 (process 1): [["append", 250, 10], ...]`."""
    return f"index {op.get('index')} (process {op.get('process')}, {op.get('type')}): {_v(op.get('value'))}"


def step_observed(s: dict[str, Any]) -> bool:
    """False when the later append was never read (its place is inferred as after every seen one)."""
    return bool(s.get("observed", True))


def _ww(s: dict[str, Any], a: str, b: str, kind: str) -> str:
    k, v, v2 = "key " + _v(s["key"]), _v(s["value"]), _v(s["value'"])
    if kind == "list-append":
        if step_observed(s):
            return f"{b} appended {v2} to {k} right after {a}'s append of {v}"
        return f"{b} appended {v2} to {k} after {a}'s append of {v}, the last append to {k} any read saw"
    return f"{a} wrote {k} = {v}, which came before {b}'s write of {v2} in {k}'s version order" + _via(s)


def _wr(s: dict[str, Any], a: str, b: str, kind: str) -> str:
    k, v = "key " + _v(s["key"]), _v(s["value"])
    if kind == "list-append":
        return f"{b} read {a}'s append of {v} to {k}"
    return f"{b} read {k} = {v}, which {a} wrote"


def _rw(s: dict[str, Any], a: str, b: str, kind: str) -> str:
    k, v2 = "key " + _v(s["key"]), _v(s["value'"])
    if kind == "list-append":
        seen = "empty" if s["value"] is None else f"up to {_v(s['value'])}"
        return f"{b} appended {v2} to {k}, which {a}'s read of {k} ({seen}) did not see"
    v = "nil (the initial value)" if s["value"] is None else _v(s["value"])
    return f"{a} read {k} = {v}, which {b}'s write of {v2} overwrote later in the version order" + _via(s)


def _via(s: dict[str, Any]) -> str:
    """Why a register version order holds when only process or realtime order shows it."""
    if not s.get("via"):
        return ""
    i, j = s.get("witness") or (None, None)
    order = "completed before" if s["via"] == "realtime" else "came before, on the same process,"
    first, then = _v(s["value"]), _v(s["value'"])
    return (
        f" (the {s['via']} order shows it: the transaction at index {i}, which ended with {first}, "
        f"{order} the one at index {j}, which began with {then})"
    )


def step_text(step: dict[str, Any], a: str, b: str, kind: str) -> str:
    """Why `a` precedes `b`, in words."""
    t = step.get("type")
    if t == "ww":
        return _ww(step, a, b, kind)
    if t == "wr":
        return _wr(step, a, b, kind)
    if t == "rw":
        return _rw(step, a, b, kind)
    if t == "process":
        return f"{a} completed before {b} began, on the same process {_v(step.get('process'))}"
    if t == "realtime":
        return f"{a} completed (op {step.get('completed')}) before {b} was invoked (op {step.get('invoked')})"
    return f"{a} precedes {b} ({t})"


def cycle_text(names: Sequence[str], steps: Sequence[dict[str, Any]], kind: str) -> str:
    """The whole cycle: one clause per step, then the contradiction."""
    n = len(names)
    clauses = [
        f"{names[i]} < {names[(i + 1) % n]}: {step_text(steps[i], names[i], names[(i + 1) % n], kind)}"
        for i in range(n)
    ]
    chain = " < ".join([*names, names[0]])
    return "; ".join(clauses) + f"; so {chain}, a contradiction."


def direct_text(name: str, case: dict[str, Any]) -> str:
    """A sentence for an anomaly found without a cycle."""
    op = case.get("op")
    who = f"the transaction at index {op.get('index')}" if isinstance(op, dict) else "a transaction"
    k = "key " + _v(case.get("key", (case.get("mop") or [None, None])[1]))
    texts = {
        "internal": lambda: (
            f"{who} read {_v(case.get('mop'))}, but its own earlier reads and writes say "
            f"{_v(case.get('expected'))}"
        ),
        "future-read": lambda: (
            f"{who} read {_v(case.get('mop'))}, which includes a value it appends only later"
        ),
        "G1a": lambda: (
            f"{who} read {_v(case.get('element'))} in {k}, written by the failed transaction at index "
            f"{(case.get('writer') or {}).get('index')}"
        ),
        "G1b": lambda: (
            f"{who} read {_v(case.get('element'))} in {k}, an intermediate write of the transaction at "
            f"index {(case.get('writer') or {}).get('index')}"
        ),
        "dirty-update": lambda: (
            f"on {k}, a committed append followed appends of a failed transaction: {_v(case.get('values'))}"
        ),
        "incompatible-order": lambda: (
            f"{who} read {k} as {_v(case.get('read'))}, which is not a prefix of "
            f"another read {_v(case.get('longest'))}"
        ),
        "duplicate-elements": lambda: f"a read of {k} holds an element twice: {_v(case.get('duplicates'))}",
        "garbage-read": lambda: f"{who} saw {_v(case.get('elements'))} in {k}, which no transaction wrote",
        "cyclic-versions": lambda: f"the version order inferred for {k} is cyclic",
        "duplicate-appends": lambda: (
            f"{who} appended {_v(case.get('value'))} to {k}, which another transaction also appended"
        ),
        "lost-update": lambda: (
            f"{len(case.get('txns') or [])} committed transactions read the same version of "
            f"{k} ({_v(case.get('value'))}) and each then wrote it; one update is lost"
        ),
        "duplicate-writes": lambda: f"{case.get('count')} values were written more than once to the same key",
    }
    make = texts.get(name)
    return make() if make else name
