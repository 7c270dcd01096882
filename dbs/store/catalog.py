"""catalog: CreateTable / DeleteTable / AlterTable / ListTables against the masters while they fail over
and are replaced. After healing, every acknowledged create must be visible exactly once, deleted tables
must stay deleted, a table's schema version must never go back, the leader master must locate a
leader for every tablet of the tables it lists, and every master must hold what the leader committed
(both retried for a while: the tablets and masters settle after healing).

The invariants are checked while the faults run too: every listing, alter and describe of the main phase
is held to them as it comes, and every `check_interval` seconds (default 2.5) a worker asks
`locate-tables` and `master-replicas` in turn, so the history shows when tablets lost their leaders and
masters fell behind (the checker judges those two only after healing, or by its own timed rules: during
a fault they may rightly fail).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.node.client import NotFoundError, catalog_lags
from faultline.workloads.api import Entry, Workload
from faultline.workloads.common import KVClient, LazyChecker, run_name


class CatalogClient(KVClient):
    read_fs = frozenset({"list-tables", "describe-table", "locate-tables", "master-replicas"})

    def apply(self, test: Run, op: Op) -> Op:
        f = op["f"]
        v: Any = op.get("value")
        if f == "create-table":
            # one tablet and no wait for its leader: this workload is about the catalog, not the tablets
            self.conn.create_table(run_name(test, v), num_tablets=1, wait=False)
            return {**op, "type": "ok"}
        if f == "delete-table":
            self.conn.delete_table(run_name(test, v))
            return {**op, "type": "ok"}
        if f == "alter-table":
            version = self.conn.alter_table(run_name(test, v["table"]), int(v["version"]))
            return {**op, "type": "ok", "value": {**v, "version": version}}
        if f == "describe-table":
            info = self.conn.table_info(run_name(test, v["table"]))
            return {
                **op,
                "type": "ok",
                "value": {"table": v["table"], "version": int(info["schema_version"])},
            }
        if f == "list-tables":
            return {**op, "type": "ok", "value": sorted(self._names(test))}
        if f == "locate-tables":
            # the master's answer for each tablet: a leader, or none (a definite answer, unlike an error)
            leaderless: dict[str, list[str]] = {}
            vanished: list[str] = []  # listed, then NOT_FOUND: the checker asks whether a delete explains it
            names = sorted(self._names(test))
            for name in names:
                try:
                    locs = self.conn.table_locations(run_name(test, name))
                except NotFoundError:
                    vanished.append(name)
                    continue
                missing = [
                    t.tablet_id for t in locs.tablets if not any(r.role == "LEADER" for r in t.replicas)
                ]
                if missing or not locs.tablets:
                    leaderless[name] = missing
            value: dict[str, Any] = {"tables": len(names), "leaderless": leaderless}
            if vanished:
                value["vanished"] = vanished
            if leaderless:
                return {
                    **op,
                    "type": "fail",
                    "value": value,
                    "error": f"{len(leaderless)} tables have tablets "
                    "with no leader known to the leader master",
                }
            return {**op, "type": "ok", "value": value}
        if f == "master-replicas":
            value = self._master_replicas()
            if value["problems"]:
                return {**op, "type": "fail", "value": value, "error": "; ".join(value["problems"])}
            return {**op, "type": "ok", "value": value}
        raise ValueError(f"catalog: unknown op {f!r}")

    def _master_replicas(self) -> dict[str, Any]:
        """Each master's own replica of the catalog, asked of it directly under the address clients use:
        one leader, one term, and every follower holding what that leader had committed when first asked.
        A master that never catches up (it cannot be reached under its name, KUDU-1620) leaves the catalog
        with fewer copies than it claims, silently."""

        def ask(addr: str) -> tuple[Any, str | None]:
            try:
                st = self.conn.catalog_replica(addr, timeout=2.0)
            except Exception as exc:
                return None, f"{type(exc).__name__}: {str(exc)[:120]}"
            return (st, None) if st is not None else (None, "no catalog replica")

        def view(st: Any, error: str | None) -> dict[str, Any]:
            if error is not None:
                return {"error": error}
            return {
                "role": st.role,
                "term": int(st.term),
                "last_index": int(st.last_index),
                "commit_index": int(st.commit_index),
            }

        answers = {addr: ask(addr) for addr in self.conn.masters}
        problems = [f"{a}: {error}" for a, (_, error) in answers.items() if error is not None]
        leaders = [a for a, (st, _) in answers.items() if st is not None and st.role == "LEADER"]
        if len(leaders) != 1:
            problems.append(f"{len(leaders)} masters lead")
        else:
            lead = answers[leaders[0]][0]
            for a, (_, error) in list(answers.items()):
                if a == leaders[0] or error is not None:
                    continue
                answers[a] = ask(a)  # asked after the leader: it has had a round trip to catch up
                again = answers[a][0]
                if catalog_lags(lead, again):
                    problems.append(
                        f"{a} lags the leader {leaders[0]}: term {getattr(again, 'term', None)} index "
                        f"{getattr(again, 'last_index', None)}, leader term {lead.term} committed "
                        f"{lead.commit_index}"
                    )
        return {"masters": {a: view(*ans) for a, ans in answers.items()}, "problems": problems}

    def _names(self, test: Run) -> list[str]:
        """Only this run's tables (a reused cluster holds others), under the names the generator gave."""
        suffix = run_name(test, "")
        return [
            n[: len(n) - len(suffix)] if suffix and n.endswith(suffix) else n
            for n in self.conn.list_tables()
            if not suffix or n.endswith(suffix)
        ]


@dataclass(frozen=True)
class CatalogOps(gen.Gen):
    """Creates fresh tables, and deletes, alters, describes and lists ones created before; pure (its state
    is two counters)."""

    created: int = 0
    version: int = 0

    def op(self, ctx: gen.Context) -> gen.Answer:
        thread = ctx.some_free_thread()
        if thread is None:
            return gen.PENDING, self
        roll = ctx.rng.random()
        nxt = self
        if self.created == 0 or roll < 0.35:
            o: Op = {"f": "create-table", "value": f"t{self.created}"}
            nxt = replace(self, created=self.created + 1)
        elif roll < 0.5:
            o = {"f": "delete-table", "value": f"t{ctx.rng.randrange(self.created)}"}
        elif roll < 0.65:
            # versions drawn from one growing counter: each alter asks for a version above all earlier ones
            o = {
                "f": "alter-table",
                "value": {"table": f"t{ctx.rng.randrange(self.created)}", "version": self.version + 1},
            }
            nxt = replace(self, version=self.version + 1)
        elif roll < 0.8:
            o = {"f": "describe-table", "value": {"table": f"t{ctx.rng.randrange(self.created)}"}}
        else:
            o = {"f": "list-tables", "value": None}
        return gen.invocation(o, ctx, thread), nxt


LIVE_CHECKS = ({"f": "locate-tables", "value": None}, {"f": "master-replicas", "value": None})


def workload(opts: Mapping[str, Any]) -> Workload:
    rate = float(opts.get("rate") or 20)  # catalog changes are heavy: a modest default rate
    g: gen.Gen = gen.stagger(1.0 / rate, CatalogOps())
    interval = float(opts.get("check_interval", 2.5))
    if interval > 0:
        # checks first: on a tie any_of takes the first
        g = gen.any_of(gen.delay(interval, gen.cycle(gen.seq(*map(gen.once, LIVE_CHECKS)))), g)
    return Workload(
        client=CatalogClient(),
        generator=g,
        # after healing: first until every tablet has a leader (bounded), then the listing the checker
        # holds the acknowledged creates against, then until every master holds what the leader committed
        final_generator=gen.seq(
            gen.until_ok(gen.delay(1.0, gen.repeat({"f": "locate-tables", "value": None})), attempts=30),
            gen.until_ok(gen.delay(1.0, gen.repeat({"f": "list-tables", "value": None})), attempts=30),
            gen.until_ok(gen.delay(1.0, gen.repeat({"f": "master-replicas", "value": None})), attempts=30),
        ),
        checker=LazyChecker("catalog"),
    )


ENTRY = Entry("catalog", "create, delete, alter and list tables while the masters fail over", workload)
