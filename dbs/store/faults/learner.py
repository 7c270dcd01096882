"""A learner on the wrong side of a partition: an operator adds a NON_VOTER replica (a read replica, or the
copy target of a re-replication) to one tablet, and then the network splits so that the tablet's leader
and that learner are cut off from the tablet's other voters (a rack or switch failure that takes the two
servers that share a rack away from the rest).

A correct leader cannot commit anything while it is cut off: one voter out of three is no majority, and a
NON_VOTER's acknowledgement never counts. A leader that counts it (`count-nonvoter-acks`) keeps committing
and acknowledging writes that the voters on the other side never see; they elect a new leader, and those
writes are gone once the partition heals. Kudu keeps NON_VOTERs in a config for as long as a tablet copy
takes, which is minutes for a large tablet, so the window is real.

start-learner-partition {}: choose a tablet of this run's tables, add a spare tablet server to it as a
NON_VOTER through `tool tablet change_config add_replica --replica-type NON_VOTER`, then partition the
tablet servers into {leader, learner} and the rest. stop-learner-partition heals the network and removes
the learner again (`remove_replica`), so the tablet is back to its shape for the next round; `heal` does
both too.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from faultline.core import Op, Run
from faultline.db.nodes import backend, first_up, role_nodes
from faultline.dbs.store.admin import ConfigChange, ToolResult
from faultline.dbs.store.tools import admin, masters_arg, run_tablets, tserver_nodes, workload_tablets
from faultline.nemesis import grudge as gr
from faultline.nemesis.base import done, log, nemesis_rng


class LearnerPartitionNemesis:
    """Adds a NON_VOTER to a tablet, then isolates the tablet's leader together with it."""

    fs = frozenset({"start-learner-partition", "stop-learner-partition"})

    def __init__(self, tool_timeout_s: float = 45.0) -> None:
        self.tool_timeout_s = tool_timeout_s
        self.rng: random.Random | None = None  # set by setup
        self.lock = threading.Lock()
        self.learners: dict[str, str] = {}  # tablet id -> uuid of the NON_VOTER we added, not yet removed
        self.uuids: dict[str, str] = {}  # tablet server node -> uuid

    def setup(self, test: Run) -> LearnerPartitionNemesis:
        self.rng = nemesis_rng(test, "learner-partition")
        return self

    def _candidates(self, test: Run) -> list[dict[str, Any]]:
        """Tablets of this run's tables whose leader is known, freshest source first."""
        return run_tablets(test, lambda t: bool(t.get("leader_node")))

    def _uuid_of(self, test: Run, node: str) -> str | None:
        """A tablet server's uuid, remembered: asking ksck costs seconds that the split should not wait for."""
        if node not in self.uuids:
            self.uuids = {n: u for u, n in tserver_nodes(test).items()}
        return self.uuids.get(node)

    def _change(self, test: Run, change: ConfigChange) -> ToolResult:
        """`tablet change_config` of one replica, run on a master that answers."""
        runner = first_up(test, role_nodes(test, "masters"))
        return admin(test).change_config(runner, masters_arg(test), change, self.tool_timeout_s)

    def invoke(self, test: Run, op: Op) -> Op:
        if op["f"] == "stop-learner-partition":
            backend(test).heal_network()
            return done(op, {"removed": self._remove_learners(test)})
        pool = self._candidates(test)
        servers = role_nodes(test, "tservers")
        pool = [t for t in pool if [s for s in servers if s not in t["replica_nodes"]]]
        if not pool:
            return done(
                op, {"skipped": "no tablet with a known leader and a spare tablet server"}, kind="fail"
            )
        assert self.rng is not None
        t = self.rng.choice(pool)
        leader = t["leader_node"]
        spare = self.rng.choice([s for s in servers if s not in t["replica_nodes"]])
        uuid = self._uuid_of(test, spare)
        if uuid is None:
            return done(op, {"tablet": t["tablet"], "skipped": f"no uuid known for {spare}"}, kind="fail")
        added = self._change(test, ConfigChange("add_replica", t["tablet"], (uuid,), "NON_VOTER"))
        if added.ok:
            with self.lock:
                self.learners[t["tablet"]] = uuid
        else:
            # the leader moved or a change was pending: no learner, so no point in this split
            return done(op, {"tablet": t["tablet"], "learner": spare, "error": added.message()}, kind="info")
        # the leader as the masters see it now (the change went to the real leader, which may have moved)
        fresh = next((x for x in workload_tablets(test) if x["tablet"] == t["tablet"]), None)
        if fresh and fresh.get("leader_node") and fresh["leader_node"] != spare:
            leader = fresh["leader_node"]
        grudge = gr.from_components(
            servers, [[leader, spare], [s for s in servers if s not in (leader, spare)]]
        )
        backend(test).partition(grudge)
        return done(
            op,
            {
                "tablet": t["tablet"],
                "leader": leader,
                "learner": spare,
                "groups": gr.describe(grudge),
                "grudge": gr.to_json(grudge),
            },
        )

    def _remove_learners(self, test: Run) -> dict[str, str]:
        """Removes every learner this nemesis added; one that cannot be removed now is retried next time."""
        with self.lock:
            pending = dict(self.learners)
        out = {}
        for tablet, uuid in sorted(pending.items()):
            removed = self._change(test, ConfigChange("remove_replica", tablet, (uuid,)))
            msg = (removed.err or removed.out).strip()[-300:]
            out[tablet] = "removed" if removed.ok else f"not removed: {msg}"
            if removed.ok or "not a member" in msg:
                with self.lock:
                    self.learners.pop(tablet, None)
            else:
                log.warning("learner-partition: removing %s from %s: %s", uuid, tablet, msg)
        return out

    def heal(self, test: Run) -> None:
        backend(test).heal_network()
        self._remove_learners(test)
