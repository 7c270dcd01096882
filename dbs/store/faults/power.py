"""Power loss: nodes lose power together and come back with only what had reached fsync.

start-power-loss {targets, subset} kills every victim first (a power cut hits them at the same moment,
so none can re-replicate to another before it dies too), then cuts each data directory back to its
fsynced state and starts the node again (`backend.power_loss`, see cluster/base.py). With fsync on, no
acknowledged write may be lost; with the `no-fsync` bug, losing a majority of a tablet's replicas
loses acknowledged writes, which the set checker must report (issue 9's `no-fsync` cell).

Subsets are those of nemesis.base, plus `tablet-majority` / `tablet-all`: a majority of / every replica
of one tablet of this run's tables. Losing a majority's unsynced writes can lose acknowledged writes (a
race with the surviving replica's election); losing all of them always does, so `tablet-all` is the cut
that shows missing fsyncs for sure.
stop-power-loss makes sure every victim runs again (a restart that failed is retried there and in heal).
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

from faultline.core import Op, Run
from faultline.db.nodes import backend, role_nodes
from faultline.dbs.store.tools import of_this_run, tablets
from faultline.nemesis.base import NemesisError, bring_back, done, log, nemesis_rng, pick_subset

SUBSETS = ("one", "minority", "majority", "all", "tablet-majority", "tablet-all")
PACKAGE_SUBSETS = ("one", "minority", "majority", "tablet-majority", "tablet-all")


class PowerLossNemesis:
    """Kills, cuts to the fsynced state, and restarts a subset of nodes at once."""

    fs = frozenset({"start-power-loss", "stop-power-loss"})

    def __init__(self) -> None:
        self.rng: random.Random | None = None  # set by setup
        self.pending: set[str] = set()  # victims not yet seen running again
        self.lock = threading.Lock()

    def setup(self, test: Run) -> PowerLossNemesis:
        self.rng = nemesis_rng(test, "power-loss")
        return self

    def _tablet_replicas(self, test: Run, subset: str) -> list[str]:
        ts = [t for t in tablets(test) if all(t.get("replica_nodes") or [None])]
        pool = of_this_run(test, ts)
        if not pool:
            return []
        assert self.rng is not None
        t = self.rng.choice(pool)
        nodes = sorted(t["replica_nodes"])
        return pick_subset(nodes, "all" if subset == "tablet-all" else "majority", self.rng)

    def victims(self, test: Run, targets: str, subset: str) -> list[str]:
        if subset not in SUBSETS:
            raise NemesisError(f"unknown power-loss subset {subset!r}; valid: {', '.join(SUBSETS)}")
        assert self.rng is not None
        if subset.startswith("tablet-"):
            return self._tablet_replicas(test, subset) or pick_subset(
                role_nodes(test, "tservers"), "majority", self.rng
            )
        return pick_subset(role_nodes(test, targets), subset, self.rng)

    def invoke(self, test: Run, op: Op) -> Op:
        if op["f"] == "stop-power-loss":
            return done(op, {"nodes": self._restart(test)})
        b = backend(test)
        v = op.get("value") or {}
        targets, subset = v.get("targets", "tservers"), v.get("subset", "one")
        victims = self.victims(test, targets, subset)
        if not victims:
            return done(
                op, {"targets": targets, "subset": subset, "nodes": []}, kind="fail", error="no node to cut"
            )
        with self.lock:
            self.pending |= set(victims)  # before the act: a crash in between still gets healed
        with ThreadPoolExecutor(max_workers=len(victims)) as ex:
            list(ex.map(b.kill, victims))  # all dark first: no victim outlives another
            reports = dict(
                zip(victims, ex.map(lambda n: b.power_loss(n, restart=False), victims), strict=True)
            )
        cut = {
            n: {
                "truncated_bytes": sum((r.get("truncated") or {}).values()),
                "deleted": len(r.get("deleted") or []),
                "restored": len(r.get("restored") or []),
            }
            for n, r in reports.items()
        }
        try:
            self._restart(test)
        except NemesisError as exc:
            log.warning("power-loss: %s (stop-power-loss and heal retry)", exc)
        return done(op, {"targets": targets, "subset": subset, "nodes": victims, "cut": cut})

    def _restart(self, test: Run) -> list[str]:
        b = backend(test)
        return bring_back(self.pending, self.lock, b.start, "restart after power loss")

    def heal(self, test: Run) -> None:
        self._restart(test)
