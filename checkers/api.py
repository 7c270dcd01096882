"""The checker protocol and the merge of verdicts.

A history is a list of operation dicts in the format of docs/architecture.md
(`index`, `time`, `type`, `process`, `f`, optional `key`, `value`, `node`, `error`).
A checker returns a plain dict with `valid` in {True, False, "unknown"} plus evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from faultline.checkers.ops import BadOp
from faultline.core import Op

Valid = bool | Literal["unknown"]
History = list[Op]


class Checker(Protocol):
    def check(self, test: Mapping[str, Any], history: History, opts: Mapping[str, Any]) -> dict[str, Any]: ...


def merge_valid(values: Iterable[Valid]) -> Valid:
    """False beats "unknown" beats True (Jepsen's merge); no values is True."""
    seen_unknown = False
    for v in values:
        if v is False:
            return False
        if v is not True:
            seen_unknown = True
    return "unknown" if seen_unknown else True


class Compose:
    """Runs several named checkers over one history; `valid` is their merge."""

    def __init__(self, checkers: Mapping[str, Checker]) -> None:
        self.checkers = dict(checkers)

    def check(self, test: Mapping[str, Any], history: History, opts: Mapping[str, Any]) -> dict[str, Any]:
        results = {name: c.check(test, history, opts) for name, c in self.checkers.items()}
        return {"valid": merge_valid(r.get("valid", "unknown") for r in results.values()), **results}


class PerKey:
    """Runs a checker on each key's ops alone (Jepsen's independent checker): ops carrying `key` (Jepsen's
    `[k v]` values split by `history.load`) belong to that key; nemesis ops go to every key. `valid` is
    the merge; `keys` holds each key's result (at most `limit`, failures first)."""

    def __init__(self, checker: Checker, limit: int = 100) -> None:
        self.checker, self.limit = checker, limit

    def check(self, test: Mapping[str, Any], history: History, opts: Mapping[str, Any]) -> dict[str, Any]:
        from faultline.checkers.models import freeze, thaw

        groups: dict[Any, list[Op]] = {}
        nemesis: list[Op] = []
        for op in history:
            if op.get("process") == "nemesis":
                nemesis.append(op)
                for ops in groups.values():
                    ops.append(op)
                continue
            k = freeze(op.get("key"))
            if k not in groups:
                groups[k] = list(nemesis)
            groups[k].append(op)
        results = {}
        for k, ops in groups.items():
            try:
                results[k] = self.checker.check(test, ops, opts)
            except BadOp as exc:  # the position in the whole history, so a reader can name the line
                bad = ops[exc.position]
                raise BadOp(next(i for i, op in enumerate(history) if op is bad), str(exc)) from None
        order = sorted(results, key=lambda k: (results[k].get("valid") is not False, repr(k)))
        return {
            "valid": merge_valid(r.get("valid", "unknown") for r in results.values()),
            "key_count": len(results),
            "failed_keys": [thaw(k) for k in order if results[k].get("valid") is False][: self.limit],
            "keys": [{"key": thaw(k), **results[k]} for k in order[: self.limit]],
        }
