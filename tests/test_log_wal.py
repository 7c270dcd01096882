"""WAL: framing, group commit, recovery (torn tail vs corruption), truncation, GC; cmeta; power loss."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from faultline.node.consensus import Entry, EntryType, MemberType, Peer, RaftConfig
from faultline.node.log import CmetaCorruption, ConsensusMetadata, Wal, WalCorruption, cut_to_synced
from faultline.node.log.wal import FRAME, SEG_HEADER


def entries(lo: int, hi: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, EntryType.WRITE, b"value-%d" % i) for i in range(lo, hi + 1)]


def segment_files(path) -> list:
    return sorted(p for p in path.iterdir() if p.name.endswith(".seg"))


def test_round_trip_all_entry_types(tmp_path):
    cfg = RaftConfig((Peer("a", "h:1"), Peer("b", "h:2", MemberType.NON_VOTER, True)), 3)
    es = [
        Entry(1, 1, EntryType.NO_OP),
        Entry(1, 2, EntryType.WRITE, b"\x00\xffbin"),
        Entry(2, 3, EntryType.CONFIG, config=cfg),
    ]
    with Wal(tmp_path / "wal") as w:
        assert w.append_sync(es) == 3
    with Wal(tmp_path / "wal") as w:
        assert w.entries() == es
        assert (w.first_index, w.last_index, w.term_at(3)) == (1, 3, 2)
        assert w.recovery.entries == 3 and w.recovery.torn_bytes == 0


def test_callbacks_run_after_the_sync_in_order(tmp_path):
    done: list[int] = []
    with Wal(tmp_path / "wal") as w:
        futs = [w.append([e], callback=lambda f: done.append(f.result())) for e in entries(1, 50)]
        for f in futs:
            f.result(10)
        assert w.stats.syncs == w.stats.batches and w.stats.appends == 50
    assert done == sorted(done) and done[-1] == 50


def test_group_commit_batches_concurrent_producers(tmp_path):
    with Wal(tmp_path / "wal") as w:
        lock = threading.Lock()
        next_index = [1]
        barrier = threading.Barrier(8)

        def producer():
            barrier.wait()
            for _ in range(25):
                with lock:  # reserve an index and enqueue in order, like the consensus layer does
                    i = next_index[0]
                    next_index[0] += 1
                    fut = w.append([Entry(1, i, payload=b"p")])
                fut.result(30)

        threads = [threading.Thread(target=producer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert w.last_index == 200
        assert w.stats.syncs < 200  # several producers shared one fsync
    with Wal(tmp_path / "wal") as w:
        assert [e.index for e in w.entries()] == list(range(1, 201))


def test_out_of_order_append_fails_the_future(tmp_path):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 2))
        with pytest.raises(ValueError, match="out of order"):
            w.append_sync(entries(5, 5))
        assert w.last_index == 2


def test_torn_tail_recovers_the_acknowledged_prefix(tmp_path, caplog):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 10))
    seg = segment_files(tmp_path / "wal")[-1]
    size = seg.stat().st_size
    # a crash in the middle of the next batch: two whole frames and half of a third reached the file
    from faultline.node.log.wal import encode_entry

    batch = b"".join(encode_entry(e) for e in entries(11, 13))
    with open(seg, "ab") as f:
        f.write(batch[: len(batch) - 7])
    with caplog.at_level(logging.WARNING, logger="faultline.wal"), Wal(tmp_path / "wal") as w:
        assert w.last_index == 12  # the acknowledged 1..10 and the whole frames; the torn one is cut
        assert [e.index for e in w.entries()] == list(range(1, 13))
        assert w.recovery.torn_bytes > 0
        w.append_sync(entries(13, 14))
    assert "torn tail" in caplog.text
    with Wal(tmp_path / "wal") as w:
        assert w.last_index == 14
    assert seg.stat().st_size > size


def test_torn_frame_header_is_a_torn_tail(tmp_path):
    with Wal(tmp_path / "wal", fsync="never") as w:
        w.append_sync(entries(1, 3))
    seg = segment_files(tmp_path / "wal")[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00")
    with Wal(tmp_path / "wal") as w:
        assert w.last_index == 3


def test_flipped_byte_in_the_middle_is_refused(tmp_path):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 20))
    seg = segment_files(tmp_path / "wal")[-1]
    data = bytearray(seg.read_bytes())
    pos = SEG_HEADER.size + 5 * (FRAME.size + len(b"value-5") + 1) + FRAME.size + 3  # inside entry 6's body
    data[pos] ^= 0x40
    seg.write_bytes(bytes(data))
    with pytest.raises(WalCorruption, match="CRC mismatch"):
        Wal(tmp_path / "wal")


def test_flipped_length_in_the_middle_is_refused(tmp_path):
    with Wal(tmp_path / "wal", fsync="never") as w:  # no sync record to lean on: the frames after tell
        w.append_sync(entries(1, 20))
    seg = segment_files(tmp_path / "wal")[-1]
    data = bytearray(seg.read_bytes())
    data[SEG_HEADER.size + 3 * (FRAME.size + len(b"value-1") + 1)] ^= 0x7F  # entry 4's length field
    seg.write_bytes(bytes(data))
    with pytest.raises(WalCorruption):
        Wal(tmp_path / "wal")


def test_damage_inside_the_synced_part_is_refused(tmp_path):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 5))
    seg = segment_files(tmp_path / "wal")[-1]
    data = seg.read_bytes()
    seg.write_bytes(data[:-3])  # the last acknowledged, fsynced frame lost its end: not a torn write
    with pytest.raises(WalCorruption):
        Wal(tmp_path / "wal")


def test_missing_segment_is_refused(tmp_path):
    with Wal(tmp_path / "wal", segment_size=300) as w:
        for i in range(1, 31):
            w.append_sync(entries(i, i))
    segs = segment_files(tmp_path / "wal")
    assert len(segs) >= 3
    segs[1].unlink()
    with pytest.raises(WalCorruption, match="missing"):
        Wal(tmp_path / "wal")


def test_truncate_suffix_then_append(tmp_path):
    with Wal(tmp_path / "wal", segment_size=300) as w:
        for i in range(1, 31):
            w.append_sync(entries(i, i))
        w.truncate_suffix(12).result(10)
        assert w.last_index == 11
        w.append_sync([Entry(2, 12, EntryType.NO_OP)])
    with Wal(tmp_path / "wal") as w:
        es = w.entries()
        assert [e.index for e in es] == list(range(1, 13)) and es[-1].term == 2


def test_truncate_everything(tmp_path):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 5))
        w.truncate_suffix(1).result(10)
        assert w.last_index == 0
        w.append_sync(entries(1, 2, term=3))
    with Wal(tmp_path / "wal") as w:
        assert [(e.index, e.term) for e in w.entries()] == [(1, 3), (2, 3)]


def test_gc_keeps_the_anchor(tmp_path):
    with Wal(tmp_path / "wal", segment_size=300) as w:
        for i in range(1, 41):
            w.append_sync(entries(i, i, term=1 + i // 10))
        before = len(segment_files(tmp_path / "wal"))
        first = w.gc(25)
        assert first <= 25 and w.first_index == first
        assert len(segment_files(tmp_path / "wal")) < before
        assert w.read_from(25)[0].index == 25
    with Wal(tmp_path / "wal") as w:
        assert w.first_index == first and w.last_index == 40
        assert w.prev_term == w_term(first - 1)


def w_term(index: int) -> int:
    return 1 + index // 10


def test_bad_fsync_policy(tmp_path):
    with pytest.raises(ValueError):
        Wal(tmp_path / "wal", fsync="sometimes")


def test_cmeta_round_trip_and_corruption(tmp_path):
    cfg = RaftConfig((Peer("a", "h:1"), Peer("b", "h:2", MemberType.NON_VOTER, True)), 7)
    p = tmp_path / "cmeta"
    ConsensusMetadata(5, "a", cfg).save(p)
    got = ConsensusMetadata.load(p)
    assert got == ConsensusMetadata(5, "a", cfg) and got.hard_state.term == 5
    assert not (tmp_path / "cmeta.tmp").exists()
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(CmetaCorruption):
        ConsensusMetadata.load(p)
    p.write_bytes(b"")
    with pytest.raises(CmetaCorruption):
        ConsensusMetadata.load(p)
    with pytest.raises(FileNotFoundError):
        ConsensusMetadata.load(tmp_path / "absent")


def _write_node(d, fsync_ok: bool) -> None:
    bugs = set() if fsync_ok else {"no-fsync"}
    cfg = RaftConfig.of("a", "b", "c")
    ConsensusMetadata(1, None, cfg).save(d / "cmeta", fsync=fsync_ok)
    with Wal(d / "wal", bugs=bugs) as w:
        w.append_sync(entries(1, 10))  # acknowledged
    ConsensusMetadata(2, "b", cfg).save(d / "cmeta", fsync=fsync_ok)


def test_power_loss_keeps_what_was_fsynced(tmp_path):
    _write_node(tmp_path, fsync_ok=True)
    # written after the last sync: must not survive
    seg = segment_files(tmp_path / "wal")[-1]
    with open(seg, "ab") as f:
        f.write(b"unsynced garbage")
    report = cut_to_synced(tmp_path)
    assert report.truncated
    assert ConsensusMetadata.load(tmp_path / "cmeta").term == 2
    with Wal(tmp_path / "wal") as w:
        assert w.last_index == 10


def test_power_loss_with_no_fsync_loses_acknowledged_writes(tmp_path):
    _write_node(tmp_path, fsync_ok=False)
    report = cut_to_synced(tmp_path)
    assert report.deleted
    assert not (tmp_path / "cmeta").exists()
    with Wal(tmp_path / "wal") as w:
        assert w.last_index == 0  # the ten acknowledged entries are gone


def test_power_loss_restores_the_last_synced_cmeta(tmp_path):
    cfg = RaftConfig.of("a")
    ConsensusMetadata(3, "a", cfg).save(tmp_path / "cmeta")
    ConsensusMetadata(4, "a", cfg).save(tmp_path / "cmeta", fsync=False)
    cut_to_synced(tmp_path)
    assert ConsensusMetadata.load(tmp_path / "cmeta").term == 3


def test_sidecar_files_are_not_segments(tmp_path):
    with Wal(tmp_path / "wal") as w:
        w.append_sync(entries(1, 1))
    names = sorted(os.listdir(tmp_path / "wal"))
    assert ".fsynced" in names and any(n.endswith(".seg") for n in names)


def test_sidecar_is_compacted_and_still_right(tmp_path, monkeypatch):
    from faultline.node.log.durable import SIDECAR, SyncLog

    monkeypatch.setattr(SyncLog, "COMPACT_AFTER", 20)
    with Wal(tmp_path / "wal", segment_size=400) as w:
        for i in range(1, 101):
            w.append_sync(entries(i, i))
    lines = (tmp_path / "wal" / SIDECAR).read_text().splitlines()
    assert len(lines) <= 21
    seg = segment_files(tmp_path / "wal")[-1]
    with open(seg, "ab") as f:
        f.write(b"never synced")
    cut_to_synced(tmp_path)
    with Wal(tmp_path / "wal") as w:
        assert w.last_index == 100


def test_wal_matches_a_model_under_random_operations(tmp_path_factory):
    """Random appends, suffix truncations, GCs and reopenings against a plain list."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    ops = st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 6)),
            st.tuples(st.just("truncate"), st.integers(0, 40)),
            st.tuples(st.just("gc"), st.integers(0, 40)),
            st.tuples(st.just("reopen"), st.just(0)),
        ),
        min_size=1,
        max_size=25,
    )

    @settings(max_examples=int(os.environ.get("WAL_PROP_EXAMPLES", "25")), deadline=None)
    @given(ops)
    def check(seq):
        d = tmp_path_factory.mktemp("walprop") / "wal"
        model: list[Entry] = []
        first = 1
        w = Wal(d, segment_size=200)
        term = 1
        try:
            for op, n in seq:
                if op == "append":
                    start = model[-1].index + 1 if model else first
                    batch = [Entry(term, i, payload=b"%d" % i) for i in range(start, start + n)]
                    w.append_sync(batch)
                    model.extend(batch)
                elif op == "truncate":
                    idx = max(first, n)
                    w.truncate_suffix(idx).result(10)
                    model = [e for e in model if e.index < idx]
                    term += 1
                elif op == "gc":
                    first = w.gc(n)
                    model = [e for e in model if e.index >= first]
                else:
                    w.close()
                    w = Wal(d, segment_size=200)
                assert w.entries() == model
                assert w.last_index == (model[-1].index if model else w.first_index - 1)
        finally:
            w.close()

    check()


_WRITER = r"""
import sys, threading
from faultline.node.consensus import Entry
from faultline.node.log import Wal
w = Wal(sys.argv[1], bugs=set(sys.argv[2:]))
lock = threading.Lock()
nxt = [1]
def producer():
    while True:
        with lock:
            i = nxt[0]; nxt[0] += 1
            fut = w.append([Entry(1, i, payload=b"x" * 100)])
        fut.result()
        with lock:
            print(i, flush=True)
for _ in range(4):
    threading.Thread(target=producer, daemon=True).start()
threading.Event().wait()
"""


@pytest.mark.parametrize("bugs", [(), ("no-fsync",)], ids=["fsync", "no-fsync"])
def test_killed_writer_then_power_loss(tmp_path, bugs):
    """A process appending from 4 threads is killed; after a simulated power cut every entry it had
    acknowledged is still there (with fsync), or acknowledged entries are lost (with no-fsync)."""
    import signal
    import subprocess
    import sys
    import time

    d = tmp_path / "wal"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(d), *bugs], stdout=subprocess.PIPE, text=True, cwd=root
    )
    acked: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(acked) < 300 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            acked.append(int(line))
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        p.stdout.close()
    assert len(acked) >= 300, "the writer did not make progress"
    cut_to_synced(tmp_path)
    with Wal(d) as w:
        if not bugs:
            assert w.last_index >= max(acked)
            assert [e.index for e in w.entries()] == list(range(1, w.last_index + 1))
        else:
            assert w.last_index < max(acked)


def test_write_on_the_callers_thread_keeps_order_with_queued_appends(tmp_path):
    with Wal(tmp_path / "wal") as w:
        futs = [w.append(entries(i, i)) for i in range(1, 21)]  # may still be queued or being written
        w.write(None, entries(21, 25))  # waits behind them, never overtakes
        assert all(f.done() for f in futs) and w.last_index == 25
        w.write(23, entries(23, 24, term=2))  # truncate and append in one call
        assert (w.last_index, w.term_at(22), w.term_at(23)) == (24, 1, 2)
    with Wal(tmp_path / "wal") as w:
        assert [e.index for e in w.entries()] == list(range(1, 25)) and w.term_at(24) == 2
