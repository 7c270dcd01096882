"""Disk faults through the disk layer (cluster/disklayer.py, docs/disk.md): `lose-unfsynced`.

A node's process is killed and what it wrote but never fsynced is dropped, as a power cut would; then it
starts again. On one node, a minority, a majority or every node at the same moment: all victims are
killed before any loses its writes, so none restarts while another still holds what it lost.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from faultline import gen
from faultline.core import Op, Run
from faultline.db.api import Kill
from faultline.db.nodes import backend, role_nodes
from faultline.nemesis.api import NemesisPackage
from faultline.nemesis.base import Seeded, bring_back, done, pick_subset

LOSE_SUBSETS = ("one", "minority", "majority", "all")


class LoseUnfsyncedNemesis(Seeded):
    """lose-unfsynced {subset}: kill the subset's processes, drop what they never fsynced, start them.

    The completion names the nodes and, for each, the files and bytes dropped: the history alone says what
    was lost. `setup` writes through what the DB wrote while it was set up, so every run starts from a
    durable state (initdb, for one, never fsyncs)."""

    salt = "lose-unfsynced"

    fs = frozenset({"lose-unfsynced"})

    def __init__(self) -> None:
        self.down: set[str] = set()  # killed and not yet started again (heal starts them)
        self.lock = threading.Lock()

    def setup(self, test: Run) -> LoseUnfsyncedNemesis:
        super().setup(test)
        b = backend(test)
        for n in b.nodes():
            if b.disk_layers(n):
                b.disk_checkpoint(n)
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        b = backend(test)
        v = op.get("value") or {}
        subset = str(v.get("subset", "one"))
        nodes = [n for n in role_nodes(test, "all") if b.disk_layers(n)]
        victims = pick_subset(nodes, subset, self.rng)
        db = cast(Kill, test.db)  # the registry gives this fault only to a DB with Kill
        with self.lock:
            self.down |= set(victims)  # before the act: a crash in between still gets healed
        with ThreadPoolExecutor(max_workers=max(1, len(victims))) as pool:
            list(pool.map(lambda n: db.kill(test, n), victims))
            lost = dict(zip(victims, pool.map(b.lose_unfsynced, victims), strict=True))
        started = self._start(test)
        return done(
            op,
            {
                "subset": subset,
                "nodes": victims,
                "started": started,
                "lost": {n: {"files": lost[n]["files"], "bytes": lost[n]["bytes"]} for n in victims},
                "bytes": sum(int(x["bytes"]) for x in lost.values()),
            },
        )

    def _start(self, test: Run) -> list[str]:
        db = cast(Kill, test.db)
        return bring_back(self.down, self.lock, lambda n: db.start(test, n), "restart")

    def heal(self, test: Run) -> None:
        self._start(test)


def lose_unfsynced_package(interval_s: float, subsets: tuple[str, ...] = LOSE_SUBSETS) -> NemesisPackage:
    """lose-unfsynced every interval, on a subset drawn with the run's randomness."""

    def value(ctx: gen.Context) -> dict[str, Any]:
        return {"subset": ctx.rng.choice(list(subsets))}

    op = gen.limit(1, gen.repeat(lambda ctx: {"f": "lose-unfsynced", "value": value(ctx)}))
    return NemesisPackage(
        nemesis=LoseUnfsyncedNemesis(), generator=gen.cycle(gen.seq(gen.sleep(interval_s), op))
    )
