"""Raft batches over one plain TCP connection per peer: a length-prefixed `ConsensusBatch` out, its
`ConsensusAck` back, in turn.

Why not a gRPC call per batch: in Python, a unary gRPC call costs the receiver about 0.15 ms of CPU and
two thread hand-offs (the completion-queue thread, then a pool worker) before the handler runs, and the
caller about 0.1 ms more; a replication round is one such call per follower, so on a 2-core machine the
calls were a fifth of the tablet servers' CPU per client op (docs/benchmarks.md). Here the sender's own
thread writes the frame and reads the ack, and one thread per incoming connection reads, hands the
batch to the replicas and answers.

The semantics stay those of the unary `Send`: one batch in flight per peer, a deadline per exchange
(the sender closes the connection when it passes, so a late ack is never taken for the next batch's),
and a failure drops the batch, which Raft sends again. A receiver names its port in every gRPC
`ConsensusAck`; a sender starts with gRPC, switches once it learns the port, and goes back to gRPC
after any failure of the connection, so name re-resolution (ChannelPool) and a restarted peer's new
port are found exactly as before.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Callable

from google.protobuf.message import DecodeError

from faultline.node.protos import node_pb2 as pb

log = logging.getLogger("faultline.node.framed")

HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024  # as the gRPC channels' message limit (node/server/rpc.py)
IDLE_S = 60.0  # an incoming connection silent this long is closed (its sender is gone or cut off)


def write_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(HEADER.pack(len(data)) + data)


def read_frame(sock: socket.socket) -> bytes:
    """One frame's body; ConnectionError when the peer closed the connection or sent a bad length."""
    (size,) = HEADER.unpack(_read_exact(sock, HEADER.size))
    if size > MAX_FRAME:
        raise ConnectionError(f"frame of {size} bytes is over the limit")
    return _read_exact(sock, size)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        buf += chunk
    return bytes(buf)


class FramedConnection:
    """The sending side: one connection to a peer, one exchange at a time (its sender thread's)."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def exchange(self, batch: pb.ConsensusBatch, timeout_s: float) -> pb.ConsensusAck:
        """Send `batch`, wait for its ack; OSError (the caller closes this connection) on any failure."""
        self.sock.settimeout(timeout_s)
        write_frame(self.sock, batch.SerializeToString())
        ack = pb.ConsensusAck()
        try:
            ack.ParseFromString(read_frame(self.sock))
        except DecodeError as exc:  # not an ack: the stream is out of step, so the connection must go
            raise ConnectionError(f"undecodable ack: {exc}") from exc
        return ack

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


Answer = Callable[[pb.ConsensusBatch], pb.ConsensusAck]


class FramedListener:
    """The receiving side: accepts peers' connections on `bind_host`:`port` (0: any free port) and answers
    each batch with `answer(batch)`, on a thread per connection."""

    def __init__(self, bind_host: str, port: int, answer: Answer) -> None:
        self.answer = answer
        family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((bind_host, port))
        self.sock.listen(64)
        self.port: int = self.sock.getsockname()[1]
        self._stopped = False
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        threading.Thread(target=self._accept, name="framed-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self._stopped:
                    return
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(IDLE_S)
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="framed-recv", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._stopped:
                batch = pb.ConsensusBatch()
                batch.ParseFromString(read_frame(conn))
                write_frame(conn, self.answer(batch).SerializeToString())
        except (OSError, DecodeError) as exc:  # closed, timed out, or not a batch: drop the connection
            if not self._stopped:
                log.debug("framed connection ends: %s", exc)
        except Exception:  # a bug in answering must not take the listener down
            log.exception("framed connection")
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def stop(self) -> None:
        self._stopped = True
        try:  # on Linux, close() alone leaves a thread blocked in accept() asleep; shutdown() wakes it
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
