"""Carries Raft messages between replicas: one sender thread and queue per destination address.

Raft tolerates lost messages, so a send that fails is dropped (the core retries on its next
heartbeat); a dead peer therefore never blocks the messages to live ones. Queues are bounded.

Answers ride back in the ack: a batch asks for `reply_in_ack`, the receiver holds the call until its
replicas have handled the batch, and whatever they send to us meanwhile (the AppendResponses above all)
goes into the ack instead of a Send of its own, so a replication round trip costs one RPC, not two.
A receiver that does not know the field answers with its own Send, as before.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import grpc

from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.rpc import ChannelPool

log = logging.getLogger("faultline.node.transport")

MAX_QUEUE = 4000
MAX_BATCH = 256
SEND_TIMEOUT_S = 1.0


class _Sender:
    def __init__(self, transport: Transport, addr: str) -> None:
        self.t = transport
        self.addr = addr
        self.q: collections.deque[pb.ConsensusMessage] = collections.deque()
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"send-{addr}", daemon=True)
        self.thread.start()

    def put(self, msgs: list[pb.ConsensusMessage]) -> None:
        with self.cv:
            self.q.extend(msgs)
            while len(self.q) > MAX_QUEUE:
                self.q.popleft()
            self.cv.notify()

    def _run(self) -> None:
        failures = 0
        while not self.t.stopped:
            with self.cv:
                if not self.q:
                    self.cv.wait(0.5)
                    if not self.q:
                        continue
                batch = [self.q.popleft() for _ in range(min(MAX_BATCH, len(self.q)))]
            try:
                on_reply = self.t.on_reply
                ack = cast(pb.ConsensusAck, self.t.pool.call(
                    self.addr, pbg.ConsensusStub, "Send",
                    pb.ConsensusBatch(messages=batch, reply_in_ack=on_reply is not None),
                    timeout=SEND_TIMEOUT_S))
                failures = 0
                if on_reply is not None and ack.messages:
                    on_reply(ack.messages)
            except grpc.RpcError as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.debug("send to %s failed (%s): %s", self.addr, failures, exc.code())
                self.t.wait_stop(min(0.05 * failures, 0.3))
            except Exception:  # never let a sender thread die: log and keep going
                log.exception("send to %s", self.addr)
                self.t.wait_stop(0.2)


@dataclass(eq=False)
class ReplySlot:
    """Collects what this node sends to `addr` while a Send from `addr` is being answered."""

    addr: str
    msgs: list[pb.ConsensusMessage] = field(default_factory=list)


class Transport:
    def __init__(self, pool: ChannelPool,
                 on_reply: Callable[[Sequence[pb.ConsensusMessage]], object] | None = None) -> None:
        self.pool = pool
        self.on_reply = on_reply   # delivers messages that came back in an ack; None: never ask for them
        self.stopped = False
        self._stop_ev = threading.Event()
        self._lock = threading.Lock()
        self._senders: dict[str, _Sender] = {}
        self._slots: dict[str, list[ReplySlot]] = {}

    def open_slot(self, addr: str) -> ReplySlot:
        """From now until close_slot, messages for `addr` are kept for the ack of its Send."""
        slot = ReplySlot(addr)
        with self._lock:
            self._slots.setdefault(addr, []).append(slot)
        return slot

    def close_slot(self, slot: ReplySlot) -> list[pb.ConsensusMessage]:
        with self._lock:
            slots = self._slots.get(slot.addr, [])
            if slot in slots:
                slots.remove(slot)
            if not slots:
                self._slots.pop(slot.addr, None)
            return slot.msgs

    def wait_stop(self, s: float) -> None:
        self._stop_ev.wait(s)

    def send(self, addr: str, msgs: list[pb.ConsensusMessage]) -> None:
        if not addr or not msgs:
            return
        with self._lock:
            slots = self._slots.get(addr)
            if slots:
                slots[0].msgs.extend(msgs)
                return
            s = self._senders.get(addr)
            if s is None:
                s = self._senders[addr] = _Sender(self, addr)
        s.put(msgs)

    def stop(self) -> None:
        self.stopped = True
        self._stop_ev.set()
