"""Tablet server -> every master heartbeats, with tablet reports.

Each master gets its own heartbeat stream (followers only record liveness; the leader acts on
reports). Reports are incremental (replicas whose state changed since the last report that master
acknowledged), except that a full report goes to a master that asks for one, after a restart, and
to a master that has just become leader (KUDU-1374) -- unless `edge-triggered-reports` is on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import cast

import grpc

from faultline.node.bugs import Bug, BugSet
from faultline.node.clock import clock
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.host import ReplicaHost

log = logging.getLogger("faultline.node.heartbeat")


def signature(st: pb.ReplicaStatus) -> tuple:
    return (
        st.state,
        st.role,
        st.term,
        st.leader_uuid,
        st.committed_config.SerializeToString(),
        st.pending_config.SerializeToString(),
        st.schema_version,
        tuple(st.failed_peers),
        tuple(sorted(st.caught_up_peers)) if st.role == "LEADER" else (),
    )


class _MasterStream:
    def __init__(self, hb: Heartbeater, addr: str) -> None:
        self.hb = hb
        self.addr = addr
        self.sent: dict[str, tuple] = {}
        self.need_full = True
        self.was_leader = False
        self.leader_term = 0
        self.thread = threading.Thread(target=self._run, name=f"hb-{addr}", daemon=True)

    def _run(self) -> None:
        failures = 0
        while not clock().sleep_on(
            self.hb.stop_ev, self.hb.interval_s if failures == 0 else min(1.0, self.hb.interval_s)
        ):
            try:
                self.beat()
                failures = 0
            except grpc.RpcError as exc:
                failures += 1
                if failures in (1, 20) or failures % 200 == 0:
                    log.info("heartbeat to %s failed (%d): %s", self.addr, failures, exc.code())
            except Exception:
                log.exception("heartbeat to %s", self.addr)

    def beat(self) -> None:
        statuses = self.hb.host.statuses()
        full = self.need_full
        cur = {st.tablet_id: signature(st) for st in statuses}
        if full:
            report = statuses
        else:
            report = [st for st in statuses if self.sent.get(st.tablet_id) != cur[st.tablet_id]]
            gone = [t for t in self.sent if t not in cur]
            report += [pb.ReplicaStatus(tablet_id=t, state="DELETED") for t in gone]
        req = pb.HeartbeatRequest(
            uuid=self.hb.host.uuid,
            addr=self.hb.host.advertise,
            report=pb.TabletReport(full=full, replicas=report),
        )
        resp = cast(
            pb.HeartbeatResponse,
            self.hb.host.pool.call(
                self.addr, pbg.MasterStub, "Heartbeat", req, timeout=max(1.0, 2 * self.hb.interval_s)
            ),
        )
        if full:
            self.sent = dict(cur)
        else:
            for st in report:
                if st.state == "DELETED":
                    self.sent.pop(st.tablet_id, None)
                else:
                    self.sent[st.tablet_id] = cur[st.tablet_id]
        self.need_full = bool(resp.needs_full_report)
        new_leader = resp.is_leader and (not self.was_leader or resp.leader_term != self.leader_term)
        if new_leader and not full and not self.hb.bugs.enabled(Bug.EDGE_TRIGGERED_REPORTS):
            log.info(
                "master %s is a new leader (term %d): sending a full tablet report",
                self.addr,
                resp.leader_term,
            )
            self.need_full = True
        self.was_leader, self.leader_term = resp.is_leader, resp.leader_term
        for addr in resp.master_addrs:
            self.hb.add_master(addr)


class Heartbeater:
    def __init__(self, host: ReplicaHost, masters: list[str], interval_s: float, bugs: Iterable[str]) -> None:
        self.host = host
        self.interval_s = interval_s
        self.bugs = BugSet(bugs)
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.started = False
        self.streams = {a: _MasterStream(self, a) for a in masters}

    def start(self) -> None:
        with self.lock:
            self.started = True
            for s in self.streams.values():
                s.thread.start()

    def add_master(self, addr: str) -> None:
        """A master joined the masters' Raft config (master add, migration): heartbeat to it too."""
        with self.lock:
            if addr in self.streams or not self.started:
                return
            log.info("heartbeating to master %s too (learned from the masters' config)", addr)
            s = self.streams[addr] = _MasterStream(self, addr)
            s.thread.start()

    def stop(self) -> None:
        self.stop_ev.set()
