"""Fast checks of the node's pieces: values, the tablet state machine, codecs, the data directory,
startup refusals, tool misuse, and the tombstoning of half-finished tablet copies."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from cli_runs import run_module
from store_cluster import started_with_table

from faultline.node.consensus import AppendRequest, Entry, EntryType, RaftConfig
from faultline.node.server.codec import decode_message, encode_message
from faultline.node.server.fs import FsError, FsLayout, format_fs, read_uuid
from faultline.node.server.host import (
    COPYING,
    TOMBSTONED,
    ReplicaHost,
    Superblock,
    read_superblock,
    write_superblock,
)
from faultline.node.server.replica import DriverOptions
from faultline.node.server.rpc import ChannelPool
from faultline.node.server.values import BadValue, check, partition_of
from faultline.node.tablet.state import Op, TabletState, encode_write


def run_node(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return run_module("faultline.node", *args, timeout=timeout)


def run_cmeta(command: str, *args: str, fs_dir: Path) -> subprocess.CompletedProcess:
    """The node's `tool local_replica cmeta COMMAND ARGS` on data directory `fs_dir`."""
    return run_node("tool", "local_replica", "cmeta", command, *args, "--fs-dir", str(fs_dir))


def test_values_accept_str_and_int_only():
    assert check("a") == "a" and check(-5) == -5
    for bad in (1.5, None, True, b"x", [1], 2**63):
        with pytest.raises(BadValue):
            check(bad)
    # hash partitioning is stable and in range
    assert partition_of("k1", 4) == partition_of("k1", 4)
    assert {partition_of(i, 4) for i in range(100)} == {0, 1, 2, 3}
    assert partition_of(1, 4) != partition_of("1", 4) or True  # ints and strings are distinct keys


def test_tablet_batches_are_all_or_nothing_and_scans_ordered():
    s = TabletState()
    res = s.apply(1, 1, encode_write([Op("put", "a", 1), Op("put", 2, "x"), Op("cas", "a", 5, 1)]))
    assert [r.ok for r in res] == [True, True, True] and s.get("a") == 5
    res = s.apply(2, 1, encode_write([Op("put", "b", 1), Op("cas", "a", 9, 999)]))
    assert [r.ok for r in res] == [False, False] and s.get("b") is None
    s.apply(3, 1, encode_write([Op("delete", "a"), Op("cas", "c", 1, None), Op("put", 1, "y")]))
    assert s.get("a") is None and s.get("c") == 1
    assert s.scan(None, None) == [(1, "y"), (2, "x"), ("c", 1)]
    assert s.scan(2, "c") == [(2, "x")]
    assert s.apply(3, 1, encode_write([Op("put", "z", 1)])) is None  # already applied: skipped
    data, idx, term = s.snapshot()
    t = TabletState()
    t.restore(data, idx, term)
    assert t.scan(None, None) == s.scan(None, None) and t.applied_index == 3


def test_message_codec_round_trip():
    m = AppendRequest(
        "a",
        "b",
        3,
        4,
        2,
        (
            Entry(3, 5, EntryType.CONFIG, b"", RaftConfig.of("a", "b")),
            Entry(3, 6, EntryType.WRITE, b"\x00\xff"),
        ),
        4,
        7,
    )
    assert decode_message(encode_message(m)) == m


def test_fs_format_and_refusals(tmp_path):
    u = format_fs(tmp_path / "d")
    assert read_uuid(tmp_path / "d") == u
    with pytest.raises(FsError, match="already formatted"):
        format_fs(tmp_path / "d")
    with pytest.raises(FsError, match="invalid uuid"):
        format_fs(tmp_path / "e", uuid="xyz")
    with pytest.raises(FsError, match="not formatted"):
        (tmp_path / "f").mkdir()
        read_uuid(tmp_path / "f")
    (tmp_path / "d" / "instance").write_text("{garbage")
    with pytest.raises(FsError, match="corrupt"):
        read_uuid(tmp_path / "d")


def test_tool_fs_commands_and_misuse(tmp_path):
    r = run_node("tool", "fs", "format", "--fs-dir", str(tmp_path / "d"), "--uuid", "ab" * 16)
    assert r.returncode == 0 and r.stdout.strip() == "ab" * 16
    r = run_node("tool", "fs", "dump", "uuid", "--fs-dir", str(tmp_path / "d"))
    assert r.returncode == 0 and r.stdout.strip() == "ab" * 16
    r = run_node("tool", "fs", "format", "--fs-dir", str(tmp_path / "d"))
    assert r.returncode == 1 and r.stderr.startswith("error:") and "already formatted" in r.stderr
    r = run_node("tool", "fs", "format", "--fs-dir", str(tmp_path / "x"), "--uuid", "nope")
    assert r.returncode == 254 and "usage:" in r.stderr
    r = run_node("tool")
    assert r.returncode == 254 and "usage:" in r.stderr
    r = run_cmeta("print_replica_uuids", "not-a-tablet", fs_dir=tmp_path / "d")
    assert r.returncode == 254 and "bad tablet id" in r.stderr
    r = run_cmeta("print_replica_uuids", "sys", fs_dir=tmp_path / "d")
    assert r.returncode == 1 and "no consensus metadata" in r.stderr
    r = run_node("tool", "table", "list", "not-an-address")
    assert r.returncode == 254 and "HOST:PORT" in r.stderr


def _busy_port() -> tuple[socket.socket, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def test_server_startup_refusals(tmp_path):
    common = ["--master-addresses", "127.0.0.1:1"]
    r = run_node("tserver", "--fs-dir", str(tmp_path / "none"), "--rpc-bind", "127.0.0.1:0", *common)
    assert r.returncode == 1 and "refusing to start" in r.stderr and "does not exist" in r.stderr
    (tmp_path / "empty").mkdir()
    r = run_node("tserver", "--fs-dir", str(tmp_path / "empty"), "--rpc-bind", "127.0.0.1:0", *common)
    assert r.returncode == 1 and "not formatted" in r.stderr
    format_fs(tmp_path / "ok")
    sock, port = _busy_port()
    try:
        r = run_node("tserver", "--fs-dir", str(tmp_path / "ok"), "--rpc-bind", f"127.0.0.1:{port}", *common)
        assert r.returncode == 1 and "cannot bind" in r.stderr
        r = run_node(
            "tserver",
            "--fs-dir",
            str(tmp_path / "ok"),
            "--rpc-bind",
            "127.0.0.1:0",
            "--consensus-port",
            str(port),
            *common,
        )
        assert r.returncode == 1 and f"--consensus-port {port}: cannot listen" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        sock.close()
    # corrupt tablet metadata
    layout = FsLayout(tmp_path / "ok")
    (layout.root / "tablet-meta" / ("a" * 32)).write_text("{not json")
    r = run_node("tserver", "--fs-dir", str(tmp_path / "ok"), "--rpc-bind", "127.0.0.1:0", *common)
    assert r.returncode == 1 and "corrupt" in r.stderr
    # a replica that belongs to another server's data directory
    write_superblock(layout, Superblock("a" * 32, owner="b" * 32, state=TOMBSTONED))
    r = run_node("tserver", "--fs-dir", str(tmp_path / "ok"), "--rpc-bind", "127.0.0.1:0", *common)
    assert r.returncode == 1 and "formatted for" in r.stderr
    # one line each time, no traceback
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_node(
        "tserver", "--fs-dir", str(tmp_path / "ok"), "--master-addresses", "x:1", "--inject-bug", "nonsense"
    )
    assert r.returncode == 254 and "unknown bug" in r.stderr


def test_half_copied_replica_is_tombstoned_on_start(tmp_path):
    u = format_fs(tmp_path / "d")
    layout = FsLayout(Path(tmp_path / "d"))
    tid = "c" * 32
    write_superblock(layout, Superblock(tid, "t", "tbl", COPYING, u, {"peers": [], "opid_index": -1}))
    layout.wal_dir(tid).mkdir(parents=True)
    (layout.wal_dir(tid) / "wal-00000000000000000001.seg").write_bytes(b"half a segment")
    host = ReplicaHost(u, layout, "127.0.0.1:1", ChannelPool(), DriverOptions(), fsync=False)
    try:
        host.load_all()
        assert host.get(tid) is None  # never runs, never votes
        assert read_superblock(layout, tid).state == TOMBSTONED
        assert not layout.wal_dir(tid).exists()
        st = host.statuses(tid)[0]
        assert st.state == TOMBSTONED
    finally:
        host.stop()


def test_replica_create_write_restart(tmp_path):
    """A single-voter replica elects itself, applies writes, and replays them from the WAL on restart."""
    u = format_fs(tmp_path / "d")
    layout = FsLayout(Path(tmp_path / "d"))
    opts = DriverOptions(tick_s=0.01, heartbeat_ticks=2, election_ticks=5)
    tid = "d" * 32
    cfg = RaftConfig.of(u)
    host = ReplicaHost(u, layout, "127.0.0.1:1", ChannelPool(), opts, fsync=True)
    try:
        r = host.create_replica(tid, "t", "tbl", cfg)
        import time

        deadline = time.monotonic() + 10
        while not r.is_ready_leader() and time.monotonic() < deadline:
            time.sleep(0.02)
        res = r.propose(encode_write([Op("put", "k", 1)]), 5)
        assert res[0].ok
        r.read_index(5)
        assert r.tablet.get("k") == 1
    finally:
        host.stop()
    host = ReplicaHost(u, layout, "127.0.0.1:1", ChannelPool(), opts, fsync=True)
    try:
        host.load_all()
        r = host.get(tid)
        import time

        deadline = time.monotonic() + 10
        while r.tablet.get("k") != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert r.tablet.get("k") == 1
        assert json.loads(layout.superblock(tid).read_text())["state"] == "RUNNING"
    finally:
        host.stop()


@pytest.mark.integration
def test_data_directory_is_locked_by_a_running_server(tmp_path):
    from faultline.dbs.store.minicluster import MiniCluster

    c = MiniCluster(tmp_path / "c", num_masters=1, num_tservers=1)
    try:
        c.start("t1")
        t = c.nodes["t1"]
        r = run_node(
            "tserver",
            "--fs-dir",
            str(t.fs_dir),
            "--rpc-bind",
            "127.0.0.1:0",
            "--master-addresses",
            c.masters_arg(),
        )
        assert r.returncode == 1 and "in use by a running process" in r.stderr
        r = run_cmeta("rewrite_raft_config", "sys", f"{'a' * 32}:h:1", fs_dir=t.fs_dir)
        assert r.returncode == 1 and "in use" in r.stderr
    finally:
        c.stop_all()


@pytest.mark.integration
@pytest.mark.parametrize("fsync", ["always", "never"])
def test_power_loss_on_every_tablet_server(tmp_path, fsync):
    """Kill every tablet server and cut each data directory back to what reached fsync (node.log's
    power-loss simulation). With fsync on, every acknowledged write survives; with it off, the
    servers still start cleanly (what they lost is for the checkers to find)."""
    from faultline.dbs.store.minicluster import MiniCluster
    from faultline.node.log import cut_to_synced

    c = MiniCluster(tmp_path / "c", num_masters=1, num_tservers=3, fsync=fsync)
    try:
        cl = started_with_table(c, "t", 2, 3, 30)
        tservers = [n for n, p in c.nodes.items() if p.kind == "tserver"]
        for n in tservers:
            c.kill(n)
        for n in tservers:
            cut_to_synced(c.nodes[n].fs_dir)
        c.start_all()
        if fsync == "always":
            assert [cl.get("t", i, timeout=30) for i in range(30)] == list(range(30))
        else:
            cl.put("t", "after", 1, timeout=30)  # the servers elected leaders and serve again
        cl.close()
    finally:
        c.stop_all()


def test_answers_to_a_send_ride_back_in_its_ack():
    """While a Send from an address is answered, what the node sends there is kept for the ack; after
    the slot closes, messages go out through the sender queue again."""
    from faultline.node.protos import node_pb2 as pb
    from faultline.node.server.transport import Transport

    t = Transport(ChannelPool(), on_reply=lambda msgs: None)
    try:
        slot = t.open_slot("10.0.0.1:7050")
        m = pb.ConsensusMessage(tablet_id="t", from_uuid="b", to_uuid="a", payload=b"{}")
        t.send("10.0.0.1:7050", [m])
        assert t._senders == {}  # nothing queued for a Send of its own
        assert [x.to_uuid for x in t.close_slot(slot)] == ["a"]
        t.send("10.0.0.1:7050", [m])
        assert list(t._senders) == ["10.0.0.1:7050"]  # slot closed: the normal path
    finally:
        t.stop()


def test_crash_points_fire_on_their_message_and_only_for_their_tablet() -> None:
    from faultline.node.consensus import AppendResponse, VoteResponse
    from faultline.node.server.flags import FlagError, RuntimeFlags
    from faultline.node.server.replica import Replica

    fired: list[str] = []
    r = Replica.__new__(Replica)  # only the crash-point logic: no storage, no driver thread
    r.tablet_id, r.flags, r._crash = "tab1", RuntimeFlags(), fired.append
    grant, refusal = VoteResponse("b", "a", 3, True), VoteResponse("b", "a", 3, False)
    ack = AppendResponse("b", "a", 3, True, match_index=7)
    r._crash_points([grant, ack], took_entries=True)
    assert fired == []  # nothing armed
    r.flags.set("fault_crash_after_vote_fraction", "1")
    r._crash_points([refusal, ack], took_entries=True)
    assert fired == []  # a refusal and an ack are not a granted vote
    r._crash_points([grant], took_entries=False)
    assert fired == ["granting a vote in term 3"]
    r.flags.set("fault_crash_after_vote_fraction", "0")
    r.flags.set("fault_crash_after_append_fraction", "1")
    r._crash_points([ack], took_entries=False)  # a heartbeat's answer carried no entries
    r.flags.set("fault_crash_tablet", "tab2")
    r._crash_points([ack], took_entries=True)  # armed for another tablet
    assert len(fired) == 1
    r.flags.set("fault_crash_tablet", "tab1")
    r._crash_points([ack], took_entries=True)
    assert fired[-1] == "acknowledging entries up to 7"
    with pytest.raises(FlagError, match="between 0 and 1"):
        r.flags.set("fault_crash_after_append_fraction", "2")
    with pytest.raises(FlagError, match="at least 1"):
        r.flags.set("consensus_max_batch_entries", "0")


def test_bad_flags_and_data_directories_stop_at_the_edge(tmp_path):
    """Every case exits with usage and one `error:` line, no traceback, nothing started."""
    regular = tmp_path / "file"
    regular.write_text("x")

    def server(kind: str, fs_dir: str, *flags: str) -> tuple[str, ...]:
        return (kind, "--fs-dir", str(tmp_path / fs_dir), "--master-addresses", "127.0.0.1:1", *flags)

    cases = [
        (("tool", "fs", "format", "--fs-dir", str(regular)), f"data directory {regular} is not a directory"),
        (("tool", "fs", "format", "--fs-dir", str(regular / "sub")), f"{regular} is not a directory"),
        (
            ("tool", "fs", "dump", "uuid", "--fs-dir", str(regular)),
            f"data directory {regular} is not a directory",
        ),
        (
            ("tool", "table", "create", "127.0.0.1:1", "t", "--num-tablets", "-1"),
            "--num-tablets: must be > 0, not -1",
        ),
        (
            ("tool", "table", "create", "127.0.0.1:1", "t", "--replication", "0"),
            "--replication: must be > 0, not 0",
        ),
        (
            server("master", "m", "--heartbeat-interval-ms", "-5"),
            "--heartbeat-interval-ms: must be > 0, not -5",
        ),
        (
            server("tserver", "t", "--follower-unavailable-s", "nan"),
            "--follower-unavailable-s: must be a finite number > 0, not nan",
        ),
        (
            server("tserver", "t", "--consensus-port", "70000"),
            "--consensus-port: port must be in 0..65535, not 70000",
        ),
        (
            server("tserver", "t", "--consensus-port", "grpc"),
            "--consensus-port: 'grpc' is neither a port number nor `off`",
        ),
    ]
    for argv, needle in cases:
        r = run_node(*argv)
        assert r.returncode == 254, (argv, r.stderr)
        errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
        assert len(errors) == 1 and needle in errors[0], (argv, r.stderr)
        assert "Traceback" not in r.stderr and "does not exist" not in r.stderr
    assert not (tmp_path / "m").exists() and not (tmp_path / "t").exists()


def test_a_data_directory_that_cannot_be_created_is_one_line(tmp_path, monkeypatch):
    """As root nothing is unwritable, so the OS says no here."""
    from faultline.node.server import fs

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path / "ro"))

    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(fs.FsError, match=f"cannot format {tmp_path / 'ro'}: Permission denied"):
        fs.format_fs(tmp_path / "ro")


def test_atomic_write_from_two_threads_at_once_never_loses_its_temporary_file(tmp_path) -> None:
    """A tablet copy and its tombstone may write one tablet's metadata at the same moment: each writer has
    its own temporary file, so neither rename finds its file already moved away."""
    import threading

    from faultline.node.server.fs import atomic_write

    target = tmp_path / "meta" / "tablet"
    errors: list[BaseException] = []

    def write(tag: bytes) -> None:
        try:
            for _ in range(300):
                atomic_write(target, tag * 64, fsync=False)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(t,)) for t in (b"a", b"b", b"c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
    assert target.read_bytes() in (b"a" * 64, b"b" * 64, b"c" * 64)
    assert [p.name for p in target.parent.iterdir()] == ["tablet"]  # no temporary file left behind
