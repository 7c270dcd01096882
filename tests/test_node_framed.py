"""The framed replica transport (node/server/framed.py): batches and acks over one TCP connection per peer,
learned from a gRPC ack, dropped back to gRPC on any failure."""

from __future__ import annotations

import socket
import sys
import threading
import time

import grpc
import pytest

from faultline.node.protos import node_pb2 as pb
from faultline.node.server import transport as transport_mod
from faultline.node.server.framed import HEADER, FramedConnection, FramedListener, read_frame, write_frame
from faultline.node.server.transport import Transport


def _msg(to: str, payload: bytes = b"{}") -> pb.ConsensusMessage:
    return pb.ConsensusMessage(
        tablet_id="t", from_uuid="a", to_uuid=to, payload=payload, from_addr="127.0.0.1:1"
    )


def _echo(batch: pb.ConsensusBatch) -> pb.ConsensusAck:
    """Answers each message with one back to its sender, as a follower's AppendResponse would."""
    return pb.ConsensusAck(messages=[_msg(m.from_uuid, b"re:" + m.payload) for m in batch.messages])


def test_a_batch_and_its_ack_go_over_one_connection_in_turn():
    listener = FramedListener("127.0.0.1", 0, _echo)
    conn = FramedConnection("127.0.0.1", listener.port, 2.0)
    try:
        for i in range(3):
            ack = conn.exchange(
                pb.ConsensusBatch(messages=[_msg("b", str(i).encode())], reply_in_ack=True), 2.0
            )
            assert [m.payload for m in ack.messages] == [f"re:{i}".encode()]
    finally:
        conn.close()
        listener.stop()


def test_the_listener_drops_a_connection_that_sends_garbage_or_an_oversized_frame():
    listener = FramedListener("127.0.0.1", 0, _echo)
    try:
        for bad in (HEADER.pack(3) + b"\xff\xff\xff", HEADER.pack(1 << 30)):
            s = socket.create_connection(("127.0.0.1", listener.port), timeout=2.0)
            s.sendall(bad)
            with pytest.raises(ConnectionError):
                read_frame(s)  # closed without an answer
            s.close()
        conn = FramedConnection("127.0.0.1", listener.port, 2.0)  # still accepting
        assert conn.exchange(pb.ConsensusBatch(messages=[_msg("b")]), 2.0).messages
        conn.close()
    finally:
        listener.stop()


@pytest.fixture
def raw_peer():
    """A connection to a bare listening socket, and that socket: the test plays the peer's part by hand."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    conn = FramedConnection("127.0.0.1", srv.getsockname()[1], 1.0)
    try:
        yield conn, srv
    finally:
        conn.close()
        srv.close()


def test_an_ack_that_never_comes_is_a_timeout_not_a_hang(raw_peer):
    conn, _ = raw_peer
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        conn.exchange(pb.ConsensusBatch(messages=[_msg("b")]), 0.3)
    assert time.monotonic() - t0 < 2.0


def test_an_undecodable_ack_is_a_connection_failure(raw_peer):
    conn, srv = raw_peer
    peer, _ = srv.accept()
    try:
        write_frame(peer, b"\xff\xff\xff")  # a frame whose body is no ConsensusAck
        with pytest.raises(ConnectionError, match="undecodable ack"):
            conn.exchange(pb.ConsensusBatch(messages=[_msg("b")]), 1.0)
    finally:
        peer.close()


class _Pool:
    """A ChannelPool stand-in: `Send` by gRPC answers from `answer` and names `port`; `fail` makes it raise."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.grpc_sends = 0
        self.fail = False

    def call(self, addr, stub_cls, method, request, timeout, metadata=None):
        assert method == "Send"
        self.grpc_sends += 1
        if self.fail:
            raise _Unavailable()
        ack = _echo(request)
        ack.framed_port = self.port
        return ack

    def target_host(self, addr: str) -> str:
        return "127.0.0.1"


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def _collect(t_replies: list, n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(t_replies) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(t_replies) >= n, t_replies


def test_a_sender_learns_the_framed_port_from_a_grpc_ack_then_falls_back_when_it_breaks(monkeypatch):
    monkeypatch.setattr(transport_mod, "FRAMED_RETRY_S", 0.2)
    framed_batches = []

    def answer(batch: pb.ConsensusBatch) -> pb.ConsensusAck:
        framed_batches.append(batch)
        return _echo(batch)

    listener = FramedListener("127.0.0.1", 0, answer)
    pool = _Pool(listener.port)
    replies: list[pb.ConsensusMessage] = []
    lock = threading.Lock()

    def on_reply(msgs) -> None:
        with lock:
            replies.extend(msgs)

    t = Transport(pool, on_reply=on_reply)  # type: ignore[arg-type]
    try:
        t.send("peer:7050", [_msg("b", b"1")])
        _collect(replies, 1)
        assert pool.grpc_sends == 1 and not framed_batches  # the first batch learns the port by gRPC
        for i in range(2, 5):
            t.send("peer:7050", [_msg("b", str(i).encode())])
            _collect(replies, i)
        assert pool.grpc_sends == 1 and len(framed_batches) == 3
        assert [m.payload for m in replies] == [b"re:1", b"re:2", b"re:3", b"re:4"]

        listener.stop()  # the peer went away: the next batch is lost, as a failed call's would be
        pool.port = 0  # ... and comes back without a framed port
        t.send("peer:7050", [_msg("b", b"lost")])
        deadline = time.monotonic() + 5
        while t._senders["peer:7050"].framed_port and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)
        t.send("peer:7050", [_msg("b", b"6")])
        _collect(replies, 5)
        assert replies[-1].payload == b"re:6" and pool.grpc_sends == 2  # back on gRPC
    finally:
        t.stop()
        listener.stop()


def test_a_grpc_only_sender_never_connects(monkeypatch):
    listener = FramedListener("127.0.0.1", 0, lambda b: pytest.fail("framed batch"))  # type: ignore[arg-type]
    pool = _Pool(listener.port)
    replies: list = []
    t = Transport(pool, on_reply=replies.extend, framed=False)  # type: ignore[arg-type]
    try:
        for i in range(3):
            t.send("peer:7050", [_msg("b", str(i).encode())])
            _collect(replies, i + 1)
        assert pool.grpc_sends == 3
    finally:
        t.stop()
        listener.stop()


def test_frames_round_trip_over_a_socket_pair():
    a, b = socket.socketpair()
    try:
        write_frame(a, b"x" * 100_000)
        assert read_frame(b) == b"x" * 100_000
        a.close()
        with pytest.raises(ConnectionError):
            read_frame(b)
    finally:
        b.close()


def _wait_until_blocked_in_accept(thread: threading.Thread) -> None:
    """Stopping before the thread reaches accept() would pass even when a blocked accept() is never woken."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident or -1)
        if frame is not None and frame.f_code.co_name == "accept":
            time.sleep(0.05)  # from the Python frame into the system call
            return
        time.sleep(0.01)
    raise AssertionError("the accepting thread never reached accept()")


def test_stopping_the_listener_ends_its_accepting_thread():
    before = {t for t in threading.enumerate() if t.name == "framed-accept"}
    listener = FramedListener("127.0.0.1", 0, _echo)
    mine = {t for t in threading.enumerate() if t.name == "framed-accept"} - before
    assert len(mine) == 1
    (t,) = mine
    _wait_until_blocked_in_accept(t)
    listener.stop()
    t.join(2.0)
    assert not t.is_alive()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", listener.port), timeout=1.0)
