"""bank: transfers between accounts kept in one tablet, each an atomic batch; reads must always see the
same total and no negative balance.

A transfer reads both balances, then writes both new balances in one batch conditioned on the balances
it read (a compare-and-set on each row), so a concurrent transfer makes it fail instead of losing money.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.workloads.api import Workload
from faultline.workloads.common import KVClient, LazyChecker, at_rate, connect


class BankClient(KVClient):
    table = "bank"

    def __init__(self, conn: Any = None, accounts: int = 5, total: int = 100) -> None:
        super().__init__(conn)
        self.accounts, self.total = accounts, total

    def open(self, test: Run, node: str) -> BankClient:
        return BankClient(connect(test), self.accounts, self.total)

    def setup(self, test: Run) -> None:
        self.ensure_table(test, num_tablets=1)
        per = self.total // self.accounts
        balances = [per] * self.accounts
        balances[0] += self.total - per * self.accounts
        rows = [("put", f"a{i}", b) for i, b in enumerate(balances)]
        self.setup_write(test, lambda conn: conn.batch(self.tbl(test), rows))

    def _balances(self, test: Run) -> dict[int, int]:
        rows = self.conn.scan(self.tbl(test))
        items = rows.items() if isinstance(rows, Mapping) else rows
        return {int(str(k)[1:]): int(v) for k, v in items if str(k).startswith("a")}

    def apply(self, test: Run, op: Op) -> Op:
        if op["f"] == "read":
            return {**op, "type": "ok", "value": self._balances(test)}
        if op["f"] == "transfer":
            t = op["value"]
            src, dst, amount = f"a{t['from']}", f"a{t['to']}", int(t["amount"])
            try:
                b_src, b_dst = self.conn.get(self.tbl(test), src), self.conn.get(self.tbl(test), dst)
            except Exception as exc:  # nothing was written yet: a definite failure
                return {**op, "type": "fail", "error": f"read before transfer: {type(exc).__name__}"}
            if b_src is None or b_dst is None or int(b_src) < amount:
                return {**op, "type": "fail", "error": "insufficient funds"}
            # one tablet, so the batch is atomic: both conditional writes apply, or neither does
            results = self.conn.batch(
                self.tbl(test),
                [("cas", src, b_src, int(b_src) - amount), ("cas", dst, b_dst, int(b_dst) + amount)],
            )
            ok = all(applied for applied, _ in results)
            return {**op, "type": "ok" if ok else "fail", **({} if ok else {"error": "balances changed"})}
        raise ValueError(f"bank: unknown op {op['f']!r}")


def workload(opts: Mapping[str, Any]) -> Workload:
    accounts = int(opts.get("accounts", 5))
    total = int(opts.get("total", 100))

    def transfer(ctx: gen.Context) -> Op:
        a, b = ctx.rng.sample(range(accounts), 2)
        return {"f": "transfer", "value": {"from": a, "to": b, "amount": ctx.rng.randint(1, 5)}}

    g = gen.mix(gen.repeat(transfer), gen.repeat({"f": "read", "value": None}))
    return Workload(
        client=BankClient(accounts=accounts, total=total),
        generator=at_rate(g, opts),
        final_generator=gen.until_ok(gen.delay(1.0, gen.repeat({"f": "read", "value": None})), attempts=30),
        checker=LazyChecker("bank", total=total, accounts=accounts),
    )
