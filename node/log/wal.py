"""A segmented write-ahead log with CRC-framed entries and group commit.

Layout: a directory of segments `wal-<first index, 20 digits>.seg`. A segment starts with a header
(magic, first index, term of the entry before it, CRC) followed by frames:

    u32 body length | u32 CRC-32 of (length, term, index, body) | u64 term | u64 index | body

Group commit (after Kudu's design document): producers enqueue and get a Future; one appender thread
takes everything queued, writes it with one write() and, with fsync="always", syncs once, and only then
completes the futures. Truncation and segment roll go through the same queue so order is preserved.
A caller that waits for its own write anyway (a replica's driver, one `Ready` at a time) may use
`write()`, which does the work on the calling thread when nothing is queued or being written: the same
order and the same sync, without two thread hand-offs per batch.

Recovery on open replays every segment and verifies every CRC; so does every later read (`read_from`),
since the file may have been damaged under the running replica. With the `no-wal-checksum` bug neither
compares an entry's CRC, and a damaged entry is handed up as if it were intact. A damaged frame at the very end of the
last segment is a torn write: it is cut off with a log line. Damage anywhere else, damage inside the
part recorded as fsynced, or a gap in the indexes, is WalCorruption: the replica refuses to start.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import zlib
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from io import BufferedRandom
from pathlib import Path

from faultline.node.bugs import Bug, BugSet
from faultline.node.consensus.types import Entry, EntryType
from faultline.node.log.cmeta import config_from_json, config_to_json
from faultline.node.log.durable import SIDECAR, SyncLog, fsync_dir

log = logging.getLogger("faultline.wal")

SEG_MAGIC = b"FLWALSEG"
SEG_HEADER = struct.Struct(">8sQQI")  # magic, first index, prev term, crc
FRAME = struct.Struct(">IIQQ")  # body length, crc, term, index
_TYPES = {EntryType.NO_OP: 0, EntryType.WRITE: 1, EntryType.CONFIG: 2}
_TYPES_BACK = {v: k for k, v in _TYPES.items()}
MAX_BODY = 64 << 20


class WalCorruption(Exception):
    """The WAL is damaged somewhere other than a torn tail; starting would silently lose data."""


class WalClosed(Exception):
    pass


def encode_entry(e: Entry) -> bytes:
    if e.type == EntryType.CONFIG:
        assert e.config is not None
        body = bytes([_TYPES[e.type]]) + json.dumps(config_to_json(e.config), sort_keys=True).encode()
    else:
        body = bytes([_TYPES[e.type]]) + e.payload
    crc = zlib.crc32(struct.pack(">IQQ", len(body), e.term, e.index) + body)
    return FRAME.pack(len(body), crc, e.term, e.index) + body


def _valid_frame_after(data: bytes, start: int, index: int) -> bool:
    """Is there an intact frame for `index` anywhere after `start`? Then the damage is not a torn tail."""
    needle = struct.pack(">Q", index)
    pos = data.find(needle, start)
    while pos != -1:
        off = pos - 16
        if off >= start - 1 and off + FRAME.size <= len(data):
            blen, fcrc, term, idx = FRAME.unpack_from(data, off)
            end = off + FRAME.size + blen
            if end <= len(data) and fcrc == zlib.crc32(
                struct.pack(">IQQ", blen, term, idx) + data[off + FRAME.size : end]
            ):
                return True
        pos = data.find(needle, pos + 1)
    return False


def _crc_ok(crc: int, blen: int, term: int, index: int, body: bytes, check: bool) -> bool:
    """Does a frame's CRC match its fields and body? Always yes when `check` is off (no-wal-checksum)."""
    return not check or crc == zlib.crc32(struct.pack(">IQQ", blen, term, index) + body)


def _decode_body(term: int, index: int, body: bytes) -> Entry:
    t = _TYPES_BACK.get(body[0]) if body else None
    if t is None:
        raise ValueError(f"unknown entry type at index {index}")
    if t == EntryType.CONFIG:
        return Entry(term, index, t, config=config_from_json(json.loads(body[1:])).with_index(index))
    return Entry(term, index, t, body[1:])


@dataclass
class _Segment:
    path: Path
    first_index: int
    prev_term: int
    offsets: list[int] = field(default_factory=list)  # byte offset of each entry, first_index + i
    terms: list[int] = field(default_factory=list)
    size: int = 0  # bytes written (header included)

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.offsets) - 1


@dataclass
class RecoveryReport:
    segments: int = 0
    entries: int = 0
    torn_bytes: int = 0  # bytes cut from the tail of the last segment


@dataclass
class WalStats:
    appends: int = 0  # entries written
    batches: int = 0  # appender write() calls
    syncs: int = 0  # fsyncs of segment files


@dataclass
class _Op:
    kind: str  # append | truncate
    future: Future
    entries: list[Entry] = field(default_factory=list)
    frames: list[bytes] = field(default_factory=list)
    index: int = 0


_TORN_PROBLEMS = ("partial frame header", "frame runs past the end of the segment")


def _frame_problem(data: bytes, off: int, seg: _Segment, check_crc: bool) -> tuple[str | None, int, int]:
    """(what is wrong with the frame at `off` or None, where it ends, its term) during recovery."""
    if off + FRAME.size > len(data):
        return "partial frame header", -1, 0
    blen, fcrc, term, index = FRAME.unpack_from(data, off)
    end = off + FRAME.size + blen
    if blen > MAX_BODY or end > len(data):
        return "frame runs past the end of the segment", end, term
    body = data[off + FRAME.size : end]
    if not _crc_ok(fcrc, blen, term, index, body, check_crc):
        return "CRC mismatch", end, term
    if index != seg.first_index + len(seg.offsets):
        return f"index {index} out of sequence", end, term
    try:
        _decode_body(term, index, body)
    except ValueError as exc:
        return str(exc), end, term
    return None, end, term


class Wal:
    """The log of one Raft replica. Thread-safe; all writes go through one appender thread."""

    def __init__(
        self,
        path: str | os.PathLike,
        fsync: str = "always",
        segment_size: int = 8 << 20,
        bugs: Iterable[str] = (),
        start_index: int = 1,
        start_prev_term: int = 0,
    ):
        if fsync not in ("always", "never"):
            raise ValueError(f"fsync must be 'always' or 'never', not {fsync!r}")
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._synclog = SyncLog(self.path)
        self.sync = fsync == "always" and not BugSet(bugs).enabled(Bug.NO_FSYNC)
        self.check_crc = not BugSet(bugs).enabled(Bug.NO_WAL_CHECKSUM)
        self.segment_size = segment_size
        self.stats = WalStats()
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._queue: deque[_Op] = deque()
        self._busy = False  # a batch is being written (by the appender or by write()); guarded by _cv
        self._closed = False
        self._segments: list[_Segment] = []
        self._file: BufferedRandom | None = None  # open handle of the last segment
        self._next_start = (start_index, start_prev_term)  # for an empty log
        self.recovery = self._recover()
        self._thread = threading.Thread(
            target=self._appender, name=f"wal-appender-{self.path.name}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------ recovery
    def _synced_lengths(self) -> dict[str, int]:
        p = self.path / SIDECAR
        out: dict[str, int] = {}
        if p.exists():
            for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split(" ", 2)
                if len(parts) == 3 and parts[0] == "len":
                    out[parts[2]] = int(parts[1])
                elif len(parts) == 3 and parts[0] == "removed":
                    out.pop(parts[2], None)
        return out

    def _recover(self) -> RecoveryReport:
        report = RecoveryReport()
        paths = sorted(p for p in self.path.glob("wal-*.seg"))
        synced = self._synced_lengths()
        expected: int | None = None
        for n, p in enumerate(paths):
            last = n == len(paths) - 1
            data = p.read_bytes()
            seg = self._segment_header(p, data, last, synced, expected, report)
            if seg is None:
                continue
            self._recover_frames(p, data, seg, last, synced, report)
            expected = seg.last_index + 1
            report.entries += len(seg.offsets)
            self._segments.append(seg)
        report.segments = len(self._segments)
        if self._segments:
            self._file = open(self._segments[-1].path, "r+b")  # noqa: SIM115 - kept open for appends
            self._file.seek(self._segments[-1].size)
        return report

    def _segment_header(
        self,
        p: Path,
        data: bytes,
        last: bool,
        synced: dict[str, int],
        expected: int | None,
        report: RecoveryReport,
    ) -> _Segment | None:
        """The segment `p` describes, or None when it was a torn (never synced) last header, now removed."""
        if len(data) < SEG_HEADER.size:
            if last and synced.get(p.name, 0) == 0:
                log.warning(
                    "wal %s: segment %s has a torn header (%d bytes); removing it",
                    self.path,
                    p.name,
                    len(data),
                )
                report.torn_bytes += len(data)
                p.unlink()
                return None
            raise WalCorruption(f"{p}: segment header truncated ({len(data)} bytes)")
        magic, first, prev_term, crc = SEG_HEADER.unpack_from(data)
        if magic != SEG_MAGIC or crc != zlib.crc32(data[: SEG_HEADER.size - 4]):
            raise WalCorruption(f"{p}: bad segment header")
        if expected is not None and first != expected:
            raise WalCorruption(f"{p}: starts at index {first}, expected {expected} (a segment is missing)")
        return _Segment(p, first, prev_term, size=SEG_HEADER.size)

    def _recover_frames(
        self,
        p: Path,
        data: bytes,
        seg: _Segment,
        last: bool,
        synced: dict[str, int],
        report: RecoveryReport,
    ) -> None:
        """Index every frame of `data` into `seg`, cutting a torn tail off the last segment."""
        off = SEG_HEADER.size
        while off < len(data):
            problem, end, term = _frame_problem(data, off, seg, self.check_crc)
            if problem is not None:
                index_here = seg.first_index + len(seg.offsets)
                torn_shape = problem in _TORN_PROBLEMS or (problem == "CRC mismatch" and end == len(data))
                if (
                    last
                    and torn_shape
                    and off >= synced.get(p.name, 0)
                    and not _valid_frame_after(data, off + 1, index_here + 1)
                ):
                    self._cut_torn_tail(p, data, off, problem, report)
                    break
                raise WalCorruption(f"{p}: {problem} at byte {off} (entry {index_here}); refusing to start")
            seg.offsets.append(off)
            seg.terms.append(term)
            off = end
            seg.size = off

    def _cut_torn_tail(self, p: Path, data: bytes, off: int, problem: str, report: RecoveryReport) -> None:
        log.warning(
            "wal %s: torn tail in %s at byte %d (%s); truncating %d bytes",
            self.path,
            p.name,
            off,
            problem,
            len(data) - off,
        )
        report.torn_bytes += len(data) - off
        with open(p, "r+b") as f:
            f.truncate(off)
            if self.sync:
                os.fsync(f.fileno())
        if self.sync:
            self._synclog.synced(p, off)

    # ------------------------------------------------------------ queries
    @property
    def first_index(self) -> int:
        with self._lock:
            return self._segments[0].first_index if self._segments else self._next_start[0]

    @property
    def last_index(self) -> int:
        with self._lock:
            return self._last_index_locked()

    def _last_index_locked(self) -> int:
        return self._segments[-1].last_index if self._segments else self._next_start[0] - 1

    @property
    def prev_term(self) -> int:
        """Term of the entry just before first_index (0 at the start of history)."""
        with self._lock:
            return self._segments[0].prev_term if self._segments else self._next_start[1]

    def term_at(self, index: int) -> int | None:
        with self._lock:
            for seg in self._segments:
                if seg.first_index <= index <= seg.last_index:
                    return seg.terms[index - seg.first_index]
        return None

    def read_from(self, index: int, max_entries: int | None = None) -> list[Entry]:
        """Entries from `index` on (those appended and completed so far)."""
        out: list[Entry] = []
        with self._lock:
            segs = [
                (s.path, s.first_index, list(s.offsets), s.size)
                for s in self._segments
                if s.last_index >= index
            ]
        for path, first, offsets, size in segs:
            with open(path, "rb") as f:
                data = f.read(size)
            for i, off in enumerate(offsets):
                if first + i < index:
                    continue
                blen, crc, term, idx = FRAME.unpack_from(data, off)
                body = data[off + FRAME.size : off + FRAME.size + blen]
                if idx != first + i or not _crc_ok(crc, blen, term, idx, body, self.check_crc):
                    raise WalCorruption(f"{path}: entry {first + i} at byte {off} is damaged (CRC mismatch)")
                out.append(_decode_body(term, idx, body))
                if max_entries is not None and len(out) >= max_entries:
                    return out
        return out

    def entries(self) -> list[Entry]:
        return self.read_from(self.first_index)

    # ------------------------------------------------------------ writes
    def append(self, entries: list[Entry], callback=None) -> Future:
        """Queue entries (indexes must continue the log); the Future (and callback(future)) completes
        after the batch that holds them is written and, with fsync="always", synced."""
        fut: Future = Future()
        if callback is not None:
            fut.add_done_callback(callback)
        self._enqueue(_Op("append", fut, list(entries), [encode_entry(e) for e in entries]))
        return fut

    def append_sync(self, entries: list[Entry], timeout: float = 30.0) -> int:
        return self.append(entries).result(timeout)

    def truncate_suffix(self, index: int) -> Future:
        """Drop every entry with index >= `index` (a conflict with the leader), in queue order."""
        fut: Future = Future()
        self._enqueue(_Op("truncate", fut, index=index))
        return fut

    def write(self, truncate_from: int | None, entries: list[Entry], timeout: float = 30.0) -> None:
        """Truncate at `truncate_from` (if given), then append `entries`, and return once written (and
        synced, with fsync="always"). Runs on the calling thread when the appender is idle; otherwise
        it queues behind the work in progress, so writes stay in the order they were asked for."""
        frames = [encode_entry(e) for e in entries]
        with self._cv:
            if self._closed:
                raise WalClosed(f"wal {self.path} is closed")
            inline = not self._queue and not self._busy
            if inline:
                self._busy = True
        if not inline:
            fut = None
            if truncate_from is not None:
                fut = self.truncate_suffix(truncate_from)
            if entries:
                fut = Future()
                self._enqueue(_Op("append", fut, list(entries), frames))
            if fut is not None:
                fut.result(timeout)
            return
        try:
            if truncate_from is not None:
                self._do_truncate(_Op("truncate", Future(), index=truncate_from))
            if entries:
                self._do_append([_Op("append", Future(), list(entries), frames)])
        finally:
            with self._cv:
                self._busy = False
                self._cv.notify_all()

    def _enqueue(self, op: _Op) -> None:
        with self._cv:
            if self._closed:
                raise WalClosed(f"wal {self.path} is closed")
            self._queue.append(op)
            self._cv.notify()

    def gc(self, below_index: int) -> int:
        """Delete closed segments whose entries are all below `below_index`; returns the new first index."""
        with self._lock:
            while len(self._segments) > 1 and self._segments[0].last_index < below_index:
                seg = self._segments.pop(0)
                seg.path.unlink()
                if self.sync:
                    fsync_dir(self.path)
                self._synclog.removed(seg.path)
            return self._segments[0].first_index if self._segments else self._next_start[0]

    def close(self, timeout: float = 30.0) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout)
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._synclog.close()

    def __enter__(self) -> Wal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ appender thread
    def _appender(self) -> None:
        while True:
            with self._cv:
                while (not self._queue or self._busy) and not (self._closed and not self._busy):
                    self._cv.wait()
                if not self._queue and self._closed:
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                self._write_batch(batch)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _write_batch(self, batch: list[_Op]) -> None:
        i = 0
        while i < len(batch):
            if batch[i].kind == "truncate":
                self._run(lambda op=batch[i]: self._do_truncate(op), [batch[i]])
                i += 1
                continue
            j = i
            while j < len(batch) and batch[j].kind == "append":
                j += 1
            self._run(lambda ops=batch[i:j]: self._do_append(ops), batch[i:j])
            i = j

    def _run(self, fn, ops: list[_Op]) -> None:
        try:
            result = fn()
        except BaseException as exc:
            for op in ops:
                if not op.future.done():
                    op.future.set_exception(exc)
            return
        for op in ops:
            op.future.set_result(result)

    def _open_segment(self, first_index: int, prev_term: int) -> _Segment:
        p = self.path / f"wal-{first_index:020d}.seg"
        head = SEG_HEADER.pack(SEG_MAGIC, first_index, prev_term, 0)[: SEG_HEADER.size - 4]
        head += struct.pack(">I", zlib.crc32(head))
        if self._file is not None:
            self._file.close()
        self._file = open(p, "w+b")  # noqa: SIM115 - kept open for appends
        self._file.write(head)
        self._file.flush()
        if self.sync:
            os.fsync(self._file.fileno())
            fsync_dir(self.path)
            self._synclog.synced(p, len(head))
        seg = _Segment(p, first_index, prev_term, size=len(head))
        return seg

    def _do_append(self, ops: list[_Op]) -> int:
        with self._lock:
            expect = self._last_index_locked() + 1
            last_term = (
                self._segments[-1].terms[-1]
                if self._segments and self._segments[-1].terms
                else (self._segments[-1].prev_term if self._segments else self._next_start[1])
            )
        for op in ops:
            for e in op.entries:
                if e.index != expect:
                    raise ValueError(f"wal append out of order: got index {e.index}, expected {expect}")
                expect += 1
        seg_new = None
        with self._lock:
            need_roll = not self._segments or self._segments[-1].size >= self.segment_size
        if need_roll:
            first = self._last_index_locked() + 1
            seg_new = self._open_segment(first, last_term)
            with self._lock:
                self._segments.append(seg_new)
        seg = self._segments[-1]
        data = b"".join(fr for op in ops for fr in op.frames)
        f = self._file
        assert f is not None
        f.seek(seg.size)
        f.write(data)
        f.flush()
        if self.sync:
            os.fsync(f.fileno())
            self.stats.syncs += 1
        off = seg.size
        offsets, terms = [], []
        for op in ops:
            for e, fr in zip(op.entries, op.frames, strict=True):
                offsets.append(off)
                terms.append(e.term)
                off += len(fr)
        with self._lock:
            seg.offsets.extend(offsets)
            seg.terms.extend(terms)
            seg.size = off
            self.stats.batches += 1
            self.stats.appends += len(offsets)
            last = self._last_index_locked()
        if self.sync:
            self._synclog.synced(seg.path, seg.size)
        return last

    def _do_truncate(self, op: _Op) -> int:
        index = op.index
        with self._lock:
            drop = [s for s in self._segments if s.first_index >= index]
            keep = [s for s in self._segments if s.first_index < index]
            if drop and not keep:
                self._next_start = (index, drop[0].prev_term)
            self._segments = keep
        if drop:
            if self._file is not None:
                self._file.close()
                self._file = None
            for s in drop:
                s.path.unlink()
                self._synclog.removed(s.path)
            if self.sync:
                fsync_dir(self.path)
            if not keep:
                # an empty segment keeps the log's start (index, previous term) durable across a restart
                seg = self._open_segment(index, drop[0].prev_term)
                with self._lock:
                    self._segments = [seg]
                return self.last_index
        if keep:
            seg = keep[-1]
            if seg.last_index >= index:
                cut = seg.offsets[index - seg.first_index]
                with self._lock:
                    del seg.offsets[index - seg.first_index :]
                    del seg.terms[index - seg.first_index :]
                    seg.size = cut
            if self._file is None or drop:
                if self._file is not None:
                    self._file.close()
                self._file = open(seg.path, "r+b")  # noqa: SIM115 - kept open for appends
            self._file.truncate(seg.size)
            self._file.flush()
            if self.sync:
                os.fsync(self._file.fileno())
                self._synclog.synced(seg.path, seg.size)
        return self.last_index
