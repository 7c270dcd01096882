"""file-corrupt with no Docker: the damage planned from the seed, carried out on a file by the node-side
module, the nemesis's choice of nodes and files, its records, its refusals (exit 254), and the store's
`no-wal-checksum` bug at the WAL level."""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultline.controller import testspec
from faultline.controller.errors import UsageError
from faultline.db.api import FILE_CORRUPTION_FAULTS, FILE_CORRUPTION_KINDS
from faultline.dbs.store import StoreDB
from faultline.nemesis import filedamage
from faultline.nemesis.base import NemesisError
from faultline.nemesis.corruption import FileCorruptNemesis, damage_bytes, pick_file, plan
from faultline.node.bugs import BUGS
from faultline.node.consensus import Entry, EntryType
from faultline.node.log import Wal, WalCorruption
from faultline.node.log.wal import FRAME, SEG_HEADER
from faultline.node.tablet import TabletState, encode_write
from faultline.node.tablet.state import PUT, Op

# ------------------------------------------------------------------ the damage


@pytest.mark.parametrize("kind", ["bitflip", "zero", "truncate"])
def test_a_planned_damage_stays_in_the_data_and_replays_from_the_seed(kind: str) -> None:
    for seed in range(200):
        end = random.Random(seed).randint(1, 5000)
        d = plan(kind, end, random.Random(seed))
        assert d == plan(kind, end, random.Random(seed))
        if kind == "bitflip":
            offs = [o for o, _ in d["flips"]]
            assert 1 <= len(offs) <= 3 and len(set(offs)) == len(offs)
            assert all(0 <= o < end and 0 <= b < 8 for o, b in d["flips"])
        elif kind == "zero":
            start, length = d["zero"]
            assert length >= 1 and start >= 0 and start + length <= end
        else:
            assert 0 <= d["truncate"] < end


def test_a_plan_refuses_an_empty_file_and_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="no data"):
        plan("bitflip", 0, random.Random(1))
    with pytest.raises(ValueError, match="unknown damage kind"):
        plan("shred", 10, random.Random(1))


@pytest.mark.parametrize("kind", ["bitflip", "zero", "truncate"])
def test_the_node_side_does_what_the_plan_says(tmp_path: Path, kind: str) -> None:
    data = bytes(range(256)) * 8 + bytes(100)  # data, then trailing zeros as in a preallocated log
    f = tmp_path / "seg"
    f.write_bytes(data)
    assert filedamage.data_end(str(f)) == 256 * 8
    damage = plan(kind, filedamage.data_end(str(f)), random.Random(7))
    got = filedamage.apply(str(f), damage)
    assert f.read_bytes() == damage_bytes(data, damage) != data
    assert got["size_before"] == len(data) and got["size_after"] == f.stat().st_size


def test_the_node_side_runs_from_its_source_alone(tmp_path: Path) -> None:
    """What the nemesis sends: the module's source as `python3 -c`, with a JSON request."""
    (tmp_path / "wal").mkdir()
    for name, body in (("wal/b.seg", b"xy\0\0"), ("wal/a.seg", b"\0\0"), ("meta", b"m")):
        (tmp_path / name).write_bytes(body)
    req = {"op": "list", "globs": [f"{tmp_path}/wal/*.seg", f"{tmp_path}/none*", f"{tmp_path}/meta"]}
    out = subprocess.run(
        [sys.executable, "-c", Path(filedamage.__file__).read_text(), json.dumps(req)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listing = json.loads(out.stdout)
    assert listing == [
        [[f"{tmp_path}/wal/a.seg", 2, 0], [f"{tmp_path}/wal/b.seg", 4, 2]],
        [],
        [[f"{tmp_path}/meta", 1, 1]],
    ]
    # the first glob with a file that has data: the all-zero one is passed over
    assert pick_file(listing, random.Random(1)) == (f"{tmp_path}/wal/b.seg", 2)
    assert pick_file([[], [[f"{tmp_path}/wal/a.seg", 2, 0]]], random.Random(1)) is None


def test_snapshot_and_restore_roll_a_file_back(tmp_path: Path) -> None:
    f, copy = tmp_path / "f", tmp_path / "snaps" / "f"
    f.write_bytes(b"old")
    filedamage.handle({"op": "snapshot", "path": str(f), "to": str(copy)})
    f.write_bytes(b"newer and longer")
    assert filedamage.handle({"op": "restore", "path": str(f), "from": str(copy)}) == {
        "size_before": 16,
        "size_after": 3,
    }
    assert f.read_bytes() == b"old"


# ------------------------------------------------------------------ the nemesis, on local files


class LocalNodes:
    """Each node a folder under `root`; commands run here. Records kills and starts; `refuse` names the
    nodes whose DB will not start again."""

    def __init__(self, root: Path, roles: dict[str, list[str]], refuse: set[str] = frozenset()) -> None:
        self.root, self.roles, self.refuse = root, roles, set(refuse)
        self.events: list[tuple[str, str]] = []
        self.remote = self

    def nodes(self, role: str | None = None) -> list[str]:
        return sorted(self.roles.get(role, []) if role else [n for ns in self.roles.values() for n in ns])

    def node_dir(self, node: str) -> str:
        return str(self.root / node)

    def expand(self, node: str, template: list[str]) -> list[str]:
        return [t.replace("{python}", sys.executable).replace("{dir}", self.node_dir(node)) for t in template]

    def exec(self, node: str, argv: list[str], timeout: float) -> tuple[int, str, str]:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr


class FilesDB:
    name = "files"
    data_dirs = {"a": ("{dir}/data",), "b": ("{dir}/data",)}
    data_files = {"a": ("{dir}/data/wal/*.seg", "{dir}/data/meta"), "b": ("{dir}/data/wal/*.seg",)}

    def __init__(self, b: LocalNodes) -> None:
        self.b = b

    def kill(self, test: Any, node: str) -> None:
        self.b.events.append(("kill", node))

    def start(self, test: Any, node: str) -> None:
        self.b.events.append(("start", node))
        if node in self.b.refuse:
            raise RuntimeError(f"{node}: daemon start failed\nrefusing to start: CRC mismatch")


def local_run(tmp_path: Path, refuse: set[str] = frozenset()) -> Any:
    roles = {"a": ["a1", "a2", "a3"], "b": ["b1", "b2", "b3", "b4", "b5"]}
    b = LocalNodes(tmp_path, roles, refuse)
    for n in b.nodes():
        (tmp_path / n / "data" / "wal").mkdir(parents=True)
        (tmp_path / n / "data" / "wal" / "0001.seg").write_bytes(bytes(range(1, 200)) + bytes(50))
        (tmp_path / n / "data" / "meta").write_bytes(b"meta")
    return SimpleNamespace(spec=SimpleNamespace(seed=3, nemesis_opts={}), db=FilesDB(b), backend=b)


def test_stopped_mode_kills_damages_starts_and_records_it(tmp_path: Path) -> None:
    test = local_run(tmp_path)
    nem = FileCorruptNemesis("file-bitflip").setup(test)
    op = nem.invoke(
        test,
        {
            "f": "file-bitflip",
            "type": "invoke",
            "process": "nemesis",
            "value": {"kind": "bitflip", "mode": "stopped", "subset": "minority", "targets": "all"},
        },
    )
    assert op["type"] == "ok"
    hits = op["value"]["damage"]
    nodes = [h["node"] for h in hits]
    # a fixed minority of each role: one of the three a's, two of the five b's
    assert sum(n.startswith("a") for n in nodes) == 1 and sum(n.startswith("b") for n in nodes) == 2
    for h in hits:
        assert h["file"] == str(tmp_path / h["node"] / "data" / "wal" / "0001.seg") and h["data_end"] == 199
        before = bytes(range(1, 200)) + bytes(50)
        assert Path(h["file"]).read_bytes() == damage_bytes(before, {"flips": h["flips"]}) != before
    assert test.backend.events == [e for n in nodes for e in (("kill", n), ("start", n))]
    # replayed from the same seed: the same nodes, files and offsets
    (tmp_path / "again").mkdir()
    again = local_run(tmp_path / "again")
    replay = FileCorruptNemesis("file-bitflip").setup(again).invoke(again, op)["value"]["damage"]
    assert [(h["node"], h["flips"]) for h in replay] == [(h["node"], h["flips"]) for h in hits]
    # `one` always hits the same node of the target, and `running` stops nothing
    test.backend.events.clear()
    for _ in range(3):
        one = nem.invoke(
            test,
            {
                "f": "file-bitflip",
                "value": {"kind": "zero", "mode": "running", "subset": "one", "targets": "all"},
            },
        )
        assert [h["node"] for h in one["value"]["damage"]] == [nodes[0]] and "zero" in one["value"]["damage"][
            0
        ]
    assert test.backend.events == []


def test_a_db_that_refuses_to_start_stays_down_and_the_op_says_why(tmp_path: Path) -> None:
    test = local_run(tmp_path, refuse={"a1", "a2", "a3"})
    nem = FileCorruptNemesis("file-zero").setup(test)
    op = nem.invoke(
        test,
        {"f": "file-zero", "value": {"kind": "zero", "mode": "stopped", "subset": "one", "targets": "all"}},
    )
    (hit,) = op["value"]["damage"]
    assert op["type"] == "ok" and hit["start_refused"] == "refusing to start: CRC mismatch"
    assert nem.stopped == set()
    nem.heal(test)  # nothing to bring back: the DB found the damage and stays down
    assert [e for e in test.backend.events if e[0] == "start"] == [("start", hit["node"])]


def test_a_node_stopped_by_an_op_that_failed_is_started_by_the_op_or_the_heal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test = local_run(tmp_path)
    nem = FileCorruptNemesis("file-zero").setup(test)
    value = {"kind": "zero", "mode": "stopped", "subset": "one", "targets": "all"}
    victim = nem._doomed(test)[0]
    real = nem._run

    def damage_fails(test: Any, node: str, req: Any) -> Any:
        if req["op"] == "damage":
            raise NemesisError(f"file-corrupt damage on {node} failed (exit 1): disk gone")
        return real(test, node, req)

    monkeypatch.setattr(nem, "_run", damage_fails)
    with pytest.raises(NemesisError, match="failed"):
        nem.invoke(test, {"f": "file-zero", "value": value})
    assert test.backend.events == [("kill", victim), ("start", victim)] and nem.stopped == set()
    nem.stopped.add(victim)  # as an op cut off between its kill and its start leaves it
    nem.heal(test)
    assert test.backend.events[-1] == ("start", victim) and nem.stopped == set()


def test_rollback_copies_an_earlier_copy_back(tmp_path: Path) -> None:
    test = local_run(tmp_path)
    nem = FileCorruptNemesis("file-rollback").setup(test)
    value = {"kind": "rollback", "mode": "stopped", "subset": "one", "targets": "all"}
    snap = nem.invoke(test, {"f": "file-rollback", "value": value})["value"]["damage"][0]
    assert snap["step"] == "snapshot" and test.backend.events == []  # taking the copy stops nothing
    path = Path(snap["file"])
    path.write_bytes(b"grown since" * 10)
    back = nem.invoke(test, {"f": "file-rollback", "value": value})["value"]["damage"][0]
    assert back["step"] == "restore" and back["file"] == snap["file"]
    assert path.read_bytes() == bytes(range(1, 200)) + bytes(50)
    assert (
        nem.invoke(test, {"f": "file-rollback", "value": value})["value"]["damage"][0]["step"] == "snapshot"
    )


# ------------------------------------------------------------------ the user's file glob


def test_a_file_glob_names_the_files_relative_to_the_data_dirs_or_absolute(tmp_path: Path) -> None:
    test = local_run(tmp_path)
    test.spec.nemesis_opts = {"file_glob": "met?"}
    nem = FileCorruptNemesis("file-zero").setup(test)
    value = {"kind": "zero", "mode": "running", "subset": "minority", "targets": "all"}
    hits = nem.invoke(test, {"f": "file-zero", "value": value})["value"]["damage"]
    assert hits and all(h["file"] == str(tmp_path / h["node"] / "data" / "meta") for h in hits)
    absolute = str(tmp_path / "b2" / "data" / "wal" / "*.seg")
    test.spec.nemesis_opts = {"file_glob": absolute}
    nem = FileCorruptNemesis("file-zero").setup(test)
    assert nem._globs(test, "a1") == [absolute]


@pytest.mark.parametrize("glob", ["nothing-*", "wal", "/nowhere/*.seg"])
def test_a_file_glob_that_matches_no_file_on_any_node_refuses_the_run_at_setup(
    tmp_path: Path, glob: str
) -> None:
    test = local_run(tmp_path)
    test.spec.nemesis_opts = {"file_glob": glob}
    with pytest.raises(
        UsageError, match=re.escape(f"file_glob={glob} matches no file on any of a1, a2, a3, b1")
    ) as exc:
        FileCorruptNemesis("file-bitflip").setup(test)
    assert "\n" not in str(exc.value) and test.backend.events == []  # nothing was stopped or damaged


def test_a_file_glob_that_matches_on_one_node_only_is_taken(tmp_path: Path) -> None:
    test = local_run(tmp_path)
    (tmp_path / "b4" / "data" / "only-here").write_bytes(b"x")
    test.spec.nemesis_opts = {"file_glob": "only-*"}
    assert FileCorruptNemesis("file-bitflip").setup(test).rng is not None


def test_nemesis_options_are_parsed_and_checked_when_the_test_is_built() -> None:
    spec = testspec.build_test(
        {"workload": "set", "nemesis": "file-zero,kill", "nemesis_opt": ["file_glob=0001"]}
    )
    assert spec.nemesis_opts == {"file_glob": "0001"} and spec.to_json()["nemesis_opts"] == {
        "file_glob": "0001"
    }
    assert testspec.build_test({"workload": "set"}).nemesis_opts == {}
    assert testspec.build_test(
        {"workload": "set", "nemesis": "file-corrupt", "nemesis_opt": {"file_glob": "/abs/*.seg"}}
    ).nemesis_opts == {"file_glob": "/abs/*.seg"}


@pytest.mark.parametrize(
    ("nemesis", "raw", "why"),
    [
        ("file-zero", ["file_glob"], "--nemesis-opt 'file_glob': use KEY=VALUE"),
        ("file-zero", ["file_glob="], "file_glob: must be a glob of files"),
        ("file-zero", ["file_glob=../../etc/*"], "stays inside the data directories"),
        ("file-zero", ["file_glob=wals/"], "not of directories"),
        ("file-zero", {"file_glob": 7}, "must be a glob of files"),
        ("file-zero", ["Glob=x"], "nemesis option 'Glob'"),
        (
            "file-zero",
            ["depth=3"],
            "--nemesis-opt depth: no nemesis of this run takes it; they take: file_glob",
        ),
        (
            "kill",
            ["file_glob=x"],
            "no nemesis of this run takes it (it is an option of file-bitflip, file-corrupt",
        ),
    ],
)
def test_a_bad_nemesis_option_is_one_line_of_usage_error(nemesis: str, raw: Any, why: str) -> None:
    with pytest.raises(UsageError) as exc:
        testspec.build_test({"workload": "set", "nemesis": nemesis, "nemesis_opt": raw})
    assert why in str(exc.value) and "\n" not in str(exc.value)


def test_a_campaign_takes_nemesis_options(tmp_path: Path) -> None:
    from faultline.controller.campaign import load

    path = tmp_path / "c.toml"
    path.write_text(
        '[campaign]\nname = "c"\n[[cell]]\nname = "x"\nworkload = "set"\nnemesis = ["file-zero"]\n'
        'expect = "valid"\nnemesis_opt = {file_glob = "wals/*/wal-*.seg"}\n'
    )
    assert load(path).runs[0].opts["nemesis_opt"] == {"file_glob": "wals/*/wal-*.seg"}


def test_a_glob_that_matches_nothing_is_refused_with_254_and_the_cluster_torn_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path on the fake cluster: built, brought up, the DB set up, the nemesis's setup lists the
    files on every node (here, for real, under a folder of this test) and refuses; the cluster goes down."""
    from faultline.controller import cli
    from faultline.dbs.store import fake

    downs: list[str] = []
    real_exec, real_down = fake.FakeRemote.exec, fake.FakeBackend.down

    def exec_files(self: Any, node: str, argv: Any, timeout: float) -> tuple[int, str, str]:
        if list(argv[1:2]) == ["-c"]:  # the file faults' node side: run it here
            p = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=timeout)
            return p.returncode, p.stdout, p.stderr
        return real_exec(self, node, argv, timeout)

    def down(self: Any) -> None:
        downs.append("down")
        real_down(self)

    monkeypatch.setattr(fake.FakeRemote, "exec", exec_files)
    monkeypatch.setattr(fake.FakeBackend, "down", down)
    monkeypatch.setattr(fake.FakeBackend, "node_dir", lambda self, node: str(tmp_path / "nodes" / node))
    code = cli.main(
        [
            "run",
            "--cluster",
            "fake",
            "--workload",
            "set",
            "--nemesis",
            "file-zero",
            "--nemesis-opt",
            "file_glob=wals/*/nothing-*.seg",
            "--time-limit",
            "5",
            "--store",
            str(tmp_path / "store"),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 254 and err.count("\n") == 0, err
    assert "file_glob=wals/*/nothing-*.seg matches no file on any of m1, m2, m3, t1" in err
    assert downs == ["down"]


# ------------------------------------------------------------------ refusals


def test_the_fault_names_are_the_registry_s(tmp_path: Path) -> None:
    from faultline.nemesis.registry import NEMESES

    assert {n for n in NEMESES if n.startswith("file-")} == FILE_CORRUPTION_FAULTS
    assert {"file-corrupt", *(f"file-{k}" for k in FILE_CORRUPTION_KINDS)} == FILE_CORRUPTION_FAULTS


class NoFilesStore(StoreDB):
    data_files: dict[str, tuple[str, ...]] = {"master": (), "tserver": ()}


class NoDataFilesAtAll:
    """A user's DB with no DataFiles capability: only what the refusal needs."""

    name = "plain"
    nemeses = None


def test_a_db_without_the_capability_is_told_which_it_lacks() -> None:
    from faultline.nemesis.registry import refusal

    assert "needs the DB capability DataFiles, Kill" in (refusal(NoDataFilesAtAll(), "file-corrupt") or "")
    assert "declares no data files" in (refusal(NoFilesStore(), "file-bitflip") or "")
    assert refusal(StoreDB(), "file-bitflip") is None


@pytest.mark.parametrize("nemesis", sorted(FILE_CORRUPTION_FAULTS))
def test_a_disk_fault_on_a_db_with_no_data_files_is_one_line_of_usage_error(nemesis: str) -> None:
    sys.modules[__name__].NoFilesStore = NoFilesStore  # importable by path (it is: this module)
    with pytest.raises(UsageError, match="declares no data files") as exc:
        testspec.build_test({"db": f"{__name__}:NoFilesStore", "workload": "set", "nemesis": nemesis})
    assert "\n" not in str(exc.value)


def test_the_cli_refuses_it_with_254(tmp_path: Path) -> None:
    # imported here: the run imports this module by its path, where tests/ is not on sys.path
    from cli_runs import run_module

    options = ("--cluster", "fake", "--db", "tests.test_nemesis_corruption:NoFilesStore", "--workload", "set")
    p = run_module(
        "faultline", "run", *options, "--nemesis", "file-zero", "--store", str(tmp_path), timeout=120
    )
    assert p.returncode == 254, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "declares no data files" in p.stderr, p.stderr


# ------------------------------------------------------------------ the store's no-wal-checksum bug


def _wal_with_writes(path: Path) -> Path:
    with Wal(path) as w:
        w.append_sync([Entry(1, i, EntryType.WRITE, encode_write([Op(PUT, i, i * 10)])) for i in range(1, 6)])
    (seg,) = sorted(path.glob("wal-*.seg"))
    return seg


def _flip_in_body(seg: Path, entry: int) -> None:
    """Flips a bit in the JSON body of the `entry`-th frame (1-based), leaving its header intact."""
    data = bytearray(seg.read_bytes())
    off = SEG_HEADER.size
    for _ in range(entry - 1):
        off += FRAME.size + FRAME.unpack_from(data, off)[0]
    data[off + FRAME.size + 2] ^= 0x04  # a byte of the body past its type byte
    seg.write_bytes(bytes(data))


def test_no_wal_checksum_is_a_registered_bug() -> None:
    assert "no-wal-checksum" in BUGS


def test_the_correct_wal_refuses_a_damaged_entry_and_the_buggy_one_hands_it_up(tmp_path: Path) -> None:
    seg = _wal_with_writes(tmp_path / "wal")
    _flip_in_body(seg, 3)
    with pytest.raises(WalCorruption, match="CRC mismatch"):
        Wal(tmp_path / "wal")
    with Wal(tmp_path / "wal", bugs=["no-wal-checksum"]) as w:
        got = w.entries()
    assert [e.index for e in got] == [1, 2, 3, 4, 5]
    assert got[2].payload != encode_write([Op(PUT, 3, 30)]) and got[1].payload == encode_write(
        [Op(PUT, 2, 20)]
    )


def test_a_read_under_a_running_wal_checks_the_crc_too(tmp_path: Path) -> None:
    seg = _wal_with_writes(tmp_path / "wal")
    with Wal(tmp_path / "wal") as w:
        _flip_in_body(seg, 2)
        with pytest.raises(WalCorruption, match=r"entry 2 .* damaged"):
            w.read_from(1)
    with Wal(tmp_path / "wal", bugs=["no-wal-checksum"]) as w:
        assert len(w.read_from(1)) == 5


def test_a_tablet_handed_a_damaged_entry_says_so(caplog: pytest.LogCaptureFixture) -> None:
    state = TabletState()
    with caplog.at_level(logging.ERROR, logger="faultline.tablet"):
        state.apply(1, 1, encode_write([Op(PUT, 1, 1)]))
        state.apply(2, 1, b"")  # a no-op entry: nothing to say
        state.apply(3, 1, b'{"t":"wr\x00te"}')  # damaged past the checksum
    assert [r.getMessage() for r in caplog.records] == [
        "damaged log entry 3 (term 1, 13 bytes) is not a valid write; skipping it"
    ]
    from faultline.dbs.store.db import LOG_PATTERNS

    (pat,) = [p for p in LOG_PATTERNS if p.name == "damaged-entry"]
    assert pat.expected_under == frozenset()
    import re

    assert re.search(pat.regex, caplog.records[0].getMessage())


def test_etcds_own_detection_of_a_flipped_bit_is_expected_under_the_fault() -> None:
    """The line etcd 3.4.23 wrote when its WAL had bits flipped while it was stopped (measured)."""
    from faultline.checkers.logs import LogPatternChecker
    from faultline.dbs.etcd import LOG_PATTERNS

    line = "2026-11-26 04:20:34.693188 C | etcdmain: walpb: crc mismatch"
    checker = LogPatternChecker(LOG_PATTERNS, {"e2": {"faultline/logs/etcd.log": [line]}})
    ran = [
        {"type": "invoke", "f": "file-bitflip", "process": "nemesis", "time": 1},
        {"type": "ok", "f": "file-bitflip", "process": "nemesis", "time": 2},
    ]
    got = checker.check({}, ran, {})
    assert got["valid"] is True and got["expected_matches"][0]["expected_under"] == ["file-bitflip"]
    assert checker.check({}, [], {})["valid"] is False  # the same line with no such fault: a finding


def test_a_running_replica_will_not_ship_a_damaged_wal_as_a_tablet_copy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A file damaged under a running tablet server (file-corrupt's `running` mode): a tablet copy that
    reads it back gets a clean DATA_LOSS error, and the log line is the store's detection."""
    import threading

    import grpc

    from faultline.dbs.store.db import LOG_PATTERNS
    from faultline.node.server.host import HostError, ReplicaHost

    def damaged(_index: int) -> list[Entry]:
        raise WalCorruption("wal-1.seg: entry 7 at byte 900 is damaged (CRC mismatch)")

    replica = SimpleNamespace(
        lock=threading.Lock(),
        tablet=SimpleNamespace(snapshot=lambda: (b"{}", 3, 1)),
        storage=SimpleNamespace(entries_after=damaged),
    )
    host = object.__new__(ReplicaHost)
    host.get = lambda tablet_id: replica  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="faultline.node.host"), pytest.raises(HostError) as exc:
        host.begin_copy_session("t1")
    assert exc.value.code == grpc.StatusCode.DATA_LOSS
    (pat,) = [p for p in LOG_PATTERNS if p.name == "damaged-wal-read"]
    import re

    assert (
        re.search(pat.regex, caplog.records[0].getMessage()) and pat.expected_under == FILE_CORRUPTION_FAULTS
    )
