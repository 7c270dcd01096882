"""A tablet leader's network blips: it is cut off from the other tablet servers just long enough for them to
elect a new leader, then the network comes back (a flapping link or switch port).

The deposed leader still believes it leads while it is cut off and keeps appending the writes its clients
send it; those clients are still waiting for an answer when the network returns, because the blip is
shorter than their operation timeout. That is the moment a follower meets the new leader with a log full
of stale entries: a correct follower commits only what the new leader's request itself covers (and then
truncates the stale entries, failing those writes); one that advances its commit index to its own last
index (`follower-commit-past-batch`, KUDU-639) applies and acknowledges writes the group never committed.
A fixed-length partition either ends before the election or outlasts the clients' timeout, so the stale
entries are then never acknowledged by anyone; hence a blip that lasts exactly as long as the election.

leader-blip: pick a tablet of this run's tables, isolate its leader from the other tablet servers, ask the
tablet's other replicas directly (every `poll_s`) until one of them leads in a newer term, or `max_s`
passed, then heal. The completion records the tablet, the old and new leader, and how long the cut lasted.
"""

from __future__ import annotations

import random
import time
from typing import Any

from faultline.core import Op, Run
from faultline.db.nodes import backend, role_nodes
from faultline.dbs.store.tools import node_of_address
from faultline.nemesis import grudge as gr
from faultline.nemesis.base import done, log, nemesis_rng


class LeaderBlipNemesis:
    """Cuts one tablet leader off until the other replicas elected a new one, then heals."""

    fs = frozenset({"leader-blip"})

    def __init__(self, max_s: float = 10.0, poll_s: float = 0.1) -> None:
        self.max_s, self.poll_s = max_s, poll_s
        self.rng: random.Random | None = None  # set by setup

    def setup(self, test: Run) -> LeaderBlipNemesis:
        self.rng = nemesis_rng(test, "leader-blip")
        return self

    @staticmethod
    def _statuses(client: Any, addr: str, tablet: str) -> list[Any]:
        from faultline.node.protos import node_pb2 as pb
        from faultline.node.protos import node_pb2_grpc as pbg

        resp = client.pool.call(
            addr, pbg.ConsensusStub, "ListReplicas", pb.ListTabletsRequest(tablet_id=tablet), timeout=1.0
        )
        return [st for st in resp.replicas if st.tablet_id == tablet]

    def _leader(self, client: Any, addrs: list[str], tablet: str) -> tuple[str, str, int] | None:
        """(addr, uuid, term) of the replica among `addrs` that says it leads, with the highest term."""
        best = None
        for addr in addrs:
            try:
                for st in self._statuses(client, addr, tablet):
                    if st.role == "LEADER" and (best is None or st.term > best[2]):
                        best = (addr, st.leader_uuid, int(st.term))
            except Exception as exc:  # down, or not answering: it is not the leader we look for
                log.debug("leader-blip: %s: %s", addr, exc)
        return best

    def invoke(self, test: Run, op: Op) -> Op:
        connect = test.connect
        state = test.state
        tables = list(state.get("tables", ())) if isinstance(state, dict) else []
        if connect is None or not tables:
            return done(op, {"skipped": "no node client or no workload table"}, kind="fail")
        assert self.rng is not None
        client = connect()
        try:
            table = self.rng.choice(tables)
            tablets = list(client.table_locations(table, timeout=5.0).tablets)
            if not tablets:
                return done(op, {"table": table, "skipped": "no tablet"}, kind="fail")
            t = self.rng.choice(tablets)
            addrs = [r.addr for r in t.replicas]
            found = self._leader(client, addrs, t.tablet_id)
            if found is None:
                return done(op, {"tablet": t.tablet_id, "skipped": "no replica leads"}, kind="fail")
            old_addr, _, old_term = found
            node = node_of_address(test, old_addr)
            servers = role_nodes(test, "tservers")
            if node not in servers:
                return done(op, {"tablet": t.tablet_id, "skipped": f"no node for {old_addr}"}, kind="fail")
            others = [a for a in addrs if a != old_addr]
            b = backend(test)
            b.partition(gr.isolate_one(servers, self.rng, node=node))
            cut_at = time.monotonic()
            new = None
            try:
                while time.monotonic() - cut_at < self.max_s:
                    cand = self._leader(client, others, t.tablet_id)
                    if cand is not None and cand[2] > old_term:
                        new = cand
                        break
                    time.sleep(self.poll_s)
            finally:
                b.heal_network()
            lasted = round(time.monotonic() - cut_at, 3)
        finally:
            client.close()
        value = {
            "tablet": t.tablet_id,
            "leader": node,
            "term": old_term,
            "isolated_s": lasted,
            "new_leader": node_of_address(test, new[0]) if new else None,
            "new_term": new[2] if new else None,
        }
        return done(op, value)

    def heal(self, test: Run) -> None:
        backend(test).heal_network()
