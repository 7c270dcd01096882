"""Jepsen's bank checker: every read sees the same total and no negative balance.

The total and the accounts come from the constructor, the test dict or opts
(`{"accounts": [...], "total": N}`; `accounts` may also be a count); without a
total, the first successful read's sum is taken as the truth. A successful read
whose value is not a map of balances raises ops.BadOp (bad input, as elsewhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline.checkers.ops import BadOp, pairs
from faultline.core import Op


def _accounts(spec: Any) -> list[str] | None:
    if spec is None:
        return None
    if isinstance(spec, int):
        return [str(i) for i in range(spec)]
    return [str(a) for a in spec]


class BankChecker:
    def __init__(self, total: int | None = None, accounts: Any = None, negative_ok: bool = False) -> None:
        self.total, self.accounts, self.negative_ok = total, accounts, negative_ok

    def check(self, test: Mapping[str, Any], history: list[Op], opts: Mapping[str, Any]) -> dict[str, Any]:
        opts = opts or {}
        total = next((x.get("total") for x in (opts, test or {}) if x.get("total") is not None), self.total)
        spec = next(
            (x.get("accounts") for x in (opts, test or {}) if x.get("accounts") is not None), self.accounts
        )
        accounts = _accounts(spec)
        wrong_total: list[dict[str, Any]] = []
        negative: list[dict[str, Any]] = []
        unexpected_accounts: list[dict[str, Any]] = []
        reads = 0
        inferred = total is None
        for p in pairs(history):
            if p.f != "read" or p.type != "ok" or p.completion is None:
                continue
            bal = p.completion.get("value")
            if not isinstance(bal, Mapping):
                # not a shape a read of balances can have: bad input, neither a violation nor a pass
                at = next(i for i, op in enumerate(history) if op is p.completion)
                raise BadOp(at, f"a bank read's value is a map of account to balance, not {bal!r}")
            reads += 1
            balances = {str(k): v for k, v in bal.items()}
            nums = [v for v in balances.values() if isinstance(v, int | float)]
            s = sum(nums)
            where = {
                "index": p.completion.get("index"),
                "process": p.invoke.get("process"),
                "value": balances,
            }
            if total is None:
                total = s
            if s != total:
                wrong_total.append({**where, "total": s})
            neg = {k: v for k, v in balances.items() if isinstance(v, int | float) and v < 0}
            if neg and not self.negative_ok:
                negative.append({**where, "negative": neg})
            if accounts is not None:
                extra = sorted(set(balances) - set(accounts))
                if extra:
                    unexpected_accounts.append({**where, "accounts": extra})
        if reads == 0:
            return {"valid": "unknown", "error": "no successful read", "read_count": 0}
        return {
            "valid": not wrong_total and not negative and not unexpected_accounts,
            "read_count": reads,
            "total": total,
            "total_inferred": inferred,
            "wrong_total_count": len(wrong_total),
            "first_wrong_total": wrong_total[:10],
            "negative_count": len(negative),
            "first_negative": negative[:10],
            "unexpected_accounts": unexpected_accounts[:10],
        }
