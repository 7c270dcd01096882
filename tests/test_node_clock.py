"""The node's clock interface (node/clock.py): the offset file moves it, the Raft tick loop follows it
(timers fire early when it jumps forward, late when it goes back), a strobe never breaks a replica, and
a real cluster keeps serving writes after one tablet server's clock is bumped."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from faultline.node.clock import CLOCK_ENV, Clock, parse_offset
from faultline.node.consensus import MemberType, Peer, RaftConfig
from faultline.node.server.fs import FsLayout
from faultline.node.server.replica import DriverOptions, Replica
from faultline.node.server.storage import ReplicaStorage
from faultline.node.tablet.state import Op, encode_write


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def test_parse_offset_forms() -> None:
    assert parse_offset("+3.500000\n") == 3.5
    assert parse_offset("-2") == -2.0
    assert parse_offset("") == 0.0
    assert parse_offset("+1h") == 3600.0
    for bad in ("soon", "nan", "+1e12"):
        with pytest.raises(ValueError):
            parse_offset(bad)


def test_offset_file_moves_the_clock(tmp_path: Path) -> None:
    f = tmp_path / "clock-offset"
    clk = Clock(str(f), check_every_s=0.0)
    assert abs(clk.monotonic() - time.monotonic()) < 0.05  # no file: real time
    _write(f, "+3.500000\n")
    assert clk.offset() == 3.5
    assert 3.4 < clk.monotonic() - time.monotonic() < 3.6
    assert 3.4 < clk.time() - time.time() < 3.6
    _write(f, "-2.000000\n")
    assert -2.1 < clk.time() - time.time() < -1.9
    _write(f, "garbage")  # a bad write keeps the last good offset
    assert clk.offset() == -2.0
    f.unlink()
    assert clk.offset() == 0.0
    assert Clock(None).offset() == 0.0


def test_same_size_rewrite_in_the_same_second_is_seen(tmp_path: Path) -> None:
    """Writers may stamp mtime with one-second resolution: a strobe's "+3" then "-3" must still be seen."""
    import os

    f = tmp_path / "clock-offset"
    clk = Clock(str(f), check_every_s=0.0)
    f.write_text("+3.000000\n")
    os.utime(f, (1_000_000, 1_000_000))
    assert clk.offset() == 3.0
    f.write_text("-3.000000\n")
    os.utime(f, (1_000_000, 1_000_000))
    assert clk.offset() == -3.0


def test_logging_a_change_reads_the_clock_without_deadlock(tmp_path: Path) -> None:
    """Log records read the node's clock (install_log_time). The offset change is logged; if that
    happened under the clock's lock, a record made after the re-check interval had passed (a loaded
    machine) re-entered the lock and hung the node for good (seen on Docker under the clock nemesis)."""
    import logging

    f = tmp_path / "clock-offset"
    clk = Clock(str(f), check_every_s=0.0)  # every call re-checks: the worst case of a slow log call
    seen: list[float] = []

    class ReadsTheClock(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(clk.offset())

    handler = ReadsTheClock()
    logger = logging.getLogger("faultline.node.clock")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        _write(f, "+2.5\n")
        worker = threading.Thread(target=clk.offset, daemon=True)
        worker.start()
        worker.join(5.0)
        assert not worker.is_alive(), "the clock deadlocked while logging an offset change"
        assert seen == [2.5]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_re_read_is_rate_limited(tmp_path: Path) -> None:
    f = tmp_path / "clock-offset"
    _write(f, "+1\n")
    clk = Clock(str(f), check_every_s=0.2)
    assert clk.offset() == 1.0
    _write(f, "+2\n")
    assert clk.offset() == 1.0  # within the check interval: the cached value
    time.sleep(0.25)
    assert clk.offset() == 2.0


def test_waits_are_clamped_whatever_the_offset(tmp_path: Path) -> None:
    f = tmp_path / "clock-offset"
    clk = Clock(str(f), check_every_s=0.0)
    deadline = clk.monotonic() + 0.5
    _write(f, "-3600\n")  # clock set back an hour: never one long sleep
    assert 0 < clk.wait_s(deadline, 0.1) <= 0.1
    _write(f, "+3600\n")  # forward: the deadline has passed, never a negative sleep
    assert clk.wait_s(deadline, 0.1) == 0.0
    ev = threading.Event()
    t0 = time.monotonic()
    assert clk.sleep_on(ev, 0.3) is False  # a pause measured on the shifted clock, from now
    assert 0.25 <= time.monotonic() - t0 < 1.0
    ev.set()
    assert clk.sleep_on(ev, 30.0) is True  # an event still ends it at once


def _replica(tmp_path: Path, clk: Clock, tick_s: float = 0.02) -> tuple[Replica, list[int]]:
    """A single-voter replica driven by `clk`, with its core's ticks counted."""
    layout = FsLayout(tmp_path / "fs")
    tid = "ab" * 16
    cfg = RaftConfig(peers=(Peer("u1", "127.0.0.1:1", MemberType.VOTER),))
    storage = ReplicaStorage(layout, tid, fsync=False)
    storage.create(cfg)
    state, snap, si, st = storage.load(cfg)
    opts = DriverOptions(tick_s=tick_s, heartbeat_ticks=2, election_ticks=5, failed_after_ticks=50, clock=clk)
    r = Replica("u1", tid, storage, state, snap, si, st, opts, lambda addr, msgs: None, "127.0.0.1:1")
    ticks = [0]
    real_tick = r.core.tick

    def counting_tick() -> None:
        ticks[0] += 1
        real_tick()

    r.core.tick = counting_tick  # type: ignore[method-assign]
    return r, ticks


def _put(r: Replica, key: int) -> None:
    res = r.propose(encode_write([Op("put", key, key)]), timeout=5.0)
    assert res and res[0].ok


def test_tick_loop_follows_clock_jumps(tmp_path: Path) -> None:
    f = tmp_path / "clock-offset"
    _write(f, "0\n")
    clk = Clock(str(f), check_every_s=0.0)
    r, ticks = _replica(tmp_path, clk, tick_s=0.02)
    r.start()
    try:
        time.sleep(0.3)
        before = ticks[0]
        _write(f, "+1.0\n")  # forward 1 s = 50 ticks: timers fire early, at once
        time.sleep(0.1)
        assert ticks[0] - before >= 45
        _write(f, "-2.0\n")  # back 3 s: no tick for a while (timers fire late)
        time.sleep(0.1)
        frozen = ticks[0]
        time.sleep(0.5)
        assert ticks[0] - frozen <= 1
        _write(f, "-3600\n")  # an hour back: the stall is bounded (MAX_JUMP_TICKS ticks = 2 s)
        time.sleep(0.1)
        frozen = ticks[0]
        deadline = time.monotonic() + 4
        while ticks[0] == frozen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ticks[0] > frozen
        assert not r.stopped() and r.last_error == ""
    finally:
        r.stop()


def test_strobe_never_breaks_the_tick_loop(tmp_path: Path) -> None:
    f = tmp_path / "clock-offset"
    clk = Clock(str(f), check_every_s=0.0)
    r, ticks = _replica(tmp_path, clk, tick_s=0.02)
    r.start()
    try:
        deadline = time.monotonic() + 10
        while not r.core.is_leader() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert r.core.is_leader()
        for i in range(60):  # 1.2 s of +-3 s flips every 20 ms, writing meanwhile
            _write(f, "+3.000000\n" if i % 2 == 0 else "-3.000000\n")
            time.sleep(0.02)
            if i % 10 == 0:
                _put(r, i)
        _write(f, "0\n")
        time.sleep(0.1)
        assert not r.stopped() and r.last_error == "" and r.thread.is_alive()
        n = ticks[0]
        deadline = time.monotonic() + 5  # the last flip set it back 3 s at most: ticks resume by then
        while ticks[0] == n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ticks[0] > n  # still ticking
        _put(r, 1000)  # and still committing
    finally:
        r.stop()


@pytest.mark.integration
def test_minicluster_serves_writes_after_a_clock_bump(tmp_path: Path) -> None:
    """One tablet server's clock jumps +5 s (its election timer fires at once), another's goes back 5 s
    (its timers stall): the tablet keeps taking writes and loses none."""
    from faultline.dbs.store.minicluster import MiniCluster

    offsets = {n: tmp_path / f"{n}.clock" for n in ("t1", "t2")}
    with MiniCluster(tmp_path / "c", num_masters=1, num_tservers=3) as c:
        for n, f in offsets.items():
            _write(f, "0\n")
            c.nodes[n].env[CLOCK_ENV] = str(f)
        c.start_all()
        cl = c.client(timeout=20)
        try:
            cl.create_table("clk", num_tablets=1, replication=3)
            acked = []
            for i in range(20):
                cl.put("clk", i, i)
                acked.append(i)
            _write(offsets["t1"], "+5.000000\n")
            _write(offsets["t2"], "-5.000000\n")
            t0 = time.monotonic()
            i = 20
            while time.monotonic() - t0 < 4.0:
                cl.put("clk", i, i)
                acked.append(i)
                i += 1
            _write(offsets["t1"], "0\n")
            _write(offsets["t2"], "0\n")
            for j in range(i, i + 10):
                cl.put("clk", j, j)
                acked.append(j)
            rows = dict(cl.scan("clk"))
            assert [k for k in acked if rows.get(k) != k] == []
            assert len(acked) > 35
            for n in offsets:
                log = c.logs(n, 400)
                assert "clock offset" in log, log  # the node read the file
                assert "consensus core failed" not in log
        finally:
            cl.close()
