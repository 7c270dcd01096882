"""Carries Raft messages between replicas: one sender thread and queue per destination address.

Raft tolerates lost messages, so a send that fails is dropped (the core retries on its next
heartbeat); a dead peer therefore never blocks the messages to live ones. Queues are bounded.

Answers ride back in the ack: a batch asks for `reply_in_ack`, the receiver holds the call until its
replicas have handled the batch, and whatever they send to us meanwhile (the AppendResponses above all)
goes into the ack instead of a Send of its own, so a replication round trip costs one RPC, not two.
A receiver that does not know the field answers with its own Send, as before.

A batch goes by a gRPC `Send` until the peer names its framed port in an ack, then over a plain TCP
connection to that port (node/server/framed.py: the same exchange without a gRPC call's CPU).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import grpc

from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg
from faultline.node.server.framed import FramedConnection
from faultline.node.server.rpc import ChannelPool

log = logging.getLogger("faultline.node.transport")

MAX_QUEUE = 4000
MAX_BATCH = 256
SEND_TIMEOUT_S = 1.0
FRAMED_RETRY_S = 2.0  # after a framed connection broke, batches go by gRPC this long
FRAMED_CONNECT_RETRY_S = 30.0  # ... and after a connect to the framed port timed out


class _Sender:
    def __init__(self, transport: Transport, addr: str) -> None:
        self.t = transport
        self.addr = addr
        self.q: collections.deque[pb.ConsensusMessage] = collections.deque()
        self.cv = threading.Condition()
        self.framed_port = 0  # the peer's framed port, once an ack named it
        self.framed_after = 0.0  # monotonic time before which batches go by gRPC
        self.conn: FramedConnection | None = None  # used by this sender's thread only
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
                ack = self._exchange(pb.ConsensusBatch(messages=batch, reply_in_ack=on_reply is not None))
                failures = 0
                if on_reply is not None and ack.messages:
                    on_reply(ack.messages)
            except (grpc.RpcError, OSError) as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    what = exc.code() if isinstance(exc, grpc.RpcError) else exc
                    log.debug("send to %s failed (%s): %s", self.addr, failures, what)
                self.t.wait_stop(min(0.05 * failures, 0.3))
            except Exception:  # never let a sender thread die: log and keep going
                log.exception("send to %s", self.addr)
                self.t.wait_stop(0.2)
        self._drop_connection()

    def _exchange(self, batch: pb.ConsensusBatch) -> pb.ConsensusAck:
        """One batch and its ack: over the peer's framed port once it named one, else by gRPC `Send`
        (which also learns the port). A failed connection is dropped and the next batch goes by gRPC."""
        if self.framed_port and self.t.framed and time.monotonic() >= self.framed_after:
            connected = self.conn is not None
            try:
                if self.conn is None:
                    self.conn = FramedConnection(
                        self.t.pool.target_host(self.addr), self.framed_port, SEND_TIMEOUT_S
                    )
                    connected = True
                return self.conn.exchange(batch, SEND_TIMEOUT_S)
            except OSError as exc:
                # gRPC for a while: it re-resolves a moved name and learns a restarted peer's port; a port
                # that never answers a connect (a firewall, say) is left alone longer
                silent = not connected and not isinstance(exc, ConnectionRefusedError)
                self._drop_connection()
                self.framed_port = 0
                self.framed_after = time.monotonic() + (FRAMED_CONNECT_RETRY_S if silent else FRAMED_RETRY_S)
                raise
        ack = cast(
            pb.ConsensusAck,
            self.t.pool.call(self.addr, pbg.ConsensusStub, "Send", batch, timeout=SEND_TIMEOUT_S),
        )
        self.framed_port = ack.framed_port
        return ack

    def _drop_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@dataclass(eq=False)
class ReplySlot:
    """Collects what this node sends to `addr` while a Send from `addr` is being answered."""

    addr: str
    msgs: list[pb.ConsensusMessage] = field(default_factory=list)


class Transport:
    def __init__(
        self,
        pool: ChannelPool,
        on_reply: Callable[[Sequence[pb.ConsensusMessage]], object] | None = None,
        framed: bool = True,
    ) -> None:
        self.pool = pool
        self.on_reply = on_reply  # delivers messages that came back in an ack; None: never ask for them
        self.framed = framed  # use a peer's framed port once it names one (node/server/framed.py)
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
