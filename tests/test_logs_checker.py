"""The log checker (checkers/logs.py): each DB's patterns, the verdict on planted lines, and `faultline
analyze` reading a stored run's node logs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from faultline.checkers.logs import LogPatternChecker, faults_that_ran, line_time
from faultline.controller import testspec
from faultline.controller.analysis import describe, reanalyze
from faultline.controller.runner import run_once
from faultline.db.api import FILE_CORRUPTION_FAULTS, LogPattern, LogPatterns
from faultline.dbs import get_db

ETCD_PATTERNS = get_db("etcd").log_patterns()  # type: ignore[attr-defined]
STORE_PATTERNS = get_db("store").log_patterns()  # type: ignore[attr-defined]

# a line in each vendor's documented format that each pattern must catch (dbs/*.py cite the formats)
SAMPLES: dict[str, dict[str, str]] = {
    "etcd": {
        "go-panic": "panic: runtime error: invalid memory address or nil pointer dereference",
        "go-fatal-error": "fatal error: concurrent map writes",
        "capnslog-critical": "2024-05-01 10:00:00.123456 C | etcdserver: read wal error (wal: crc mismatch)",
        "zap-panic-or-fatal": '{"level":"panic","ts":"2024-05-01T10:00:00.123Z","caller":"etcdserver/raft.go:1","msg":"x"}',
        "crc-mismatch": "2024-05-01 10:00:00.123456 E | wal: crc mismatch",
        "wal-record-refused": "2026-11-26 08:02:59.185381 C | etcdmain: wal: max entry size limit exceeded",
        "mvcc-unmarshal": "2026-11-26 07:40:01.000000 C | mvcc: cannot unmarshal event: proto: illegal wireType 7",
        "raft-log-lost": "raft2026/11/28 14:06:29 tocommit(8369) is out of range [lastIndex(5739)]. Was the raft "
        "log corrupted, truncated, or lost?",
    },
    "postgres": {
        "panic": '2024-05-01 10:00:00.123 UTC [42] PANIC:  could not write to file "pg_wal/xlogtemp.42": '
        "No space left on device",
        "backend-crash": "2024-05-01 10:00:00.123 UTC [1] LOG:  server process (PID 77) was terminated by signal "
        "11: Segmentation fault",
        "invalid-page": "2024-05-01 10:00:00.123 UTC [55] ERROR:  invalid page in block 3 of relation base/5/16384",
    },
    "mariadb": {
        "fatal-signal": "2026-11-26  7:50:00 0 [ERROR] /usr/sbin/mariadbd got signal 11 ;",
        "innodb-assertion": "2026-11-26  7:50:00 0x7f3a5c1ff6c0  InnoDB: Assertion failure in file "
        "./storage/innobase/trx/trx0roll.cc line 869",
        "innodb-fatal": "2026-11-26  7:50:00 0 [ERROR] [FATAL] InnoDB: Unable to read page [page id: space=5, "
        "page number=3] into the buffer pool after 100.",
        "corruption": "2026-11-26  7:50:00 0 [ERROR] InnoDB: Corrupted page [page id: space=5, page number=3] of "
        "datafile './faultline/txn_list_append.ibd' could not be found in the doublewrite buffer.",
    },
    "redis-sentinel": {
        "bug-report": "=== REDIS BUG REPORT START: Cut & paste starting from here ===",
        "assertion": "7:M 01 May 2024 10:00:00.123 # === ASSERTION FAILED ===",
        "panic": "7:M 01 May 2024 10:00:00.123 # Guru Meditation: Unknown encoding type #object.c:123",
        "bad-aof": "7:M 01 May 2024 10:00:00.123 # Bad file format reading the append only file appendonly.aof.1.incr"
        ".aof: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>",
        "bad-rdb": "7:M 01 May 2024 10:00:00.123 # Wrong RDB checksum expected: (1) got (2). Aborting now.",
    },
    "nats": {
        "go-panic": "panic: runtime error: invalid memory address or nil pointer dereference",
        "go-fatal-error": "fatal error: concurrent map read and map write",
        "nats-fatal": "[1] 2026/11/26 07:29:05.484231 [FTL] Can't start JetStream: could not create storage directory",
        # measured: the first start after a lose-unfsynced-all that dropped the unfsynced meta.inf
        "corrupt-data": '[85] 2026/11/26 07:29:14.388722 [WRN]   Stream metafile "/var/lib/faultline/data/jetstream/'
        '$G/streams/faultline-set-120701/meta.inf": checksums do not match "" vs "d42f5edf1c0179b9"',
    },
    "store": {
        "traceback": "Traceback (most recent call last):",
        "consensus-invariant": "faultline.node.consensus.core.ConsensusInvariantError: u1: truncating committed entry 5",
        "replica-stopped": "2024-05-01 10:00:00,123 tserver ERROR faultline.node.replica: abc: consensus core "
        "failed; stopping this replica",
        "corrupt-metadata": "tserver: refusing to start: corrupt or foreign metadata: cmeta bad header",
        "damaged-wal-read": "2026-11-26 04:08:34,203 tserver ERROR faultline.node.host: tablet 5b61: refusing to be "
        "a tablet copy source, its WAL is damaged: wal-1.seg: entry 7 at byte 900 is damaged",
        "damaged-entry": "2026-11-26 04:08:34,203 master ERROR faultline.tablet: damaged log entry 5 (term 1, "
        "1271 bytes) is not a valid write; skipping it",
    },
}
# everyday lines no pattern may catch
BENIGN = [
    "2024-05-01 10:00:00.123456 I | etcdserver: published {Name:e1} to cluster",
    '{"level":"warn","ts":"2024-05-01T10:00:00.123Z","msg":"slow fdatasync"}',
    "2024-05-01 10:00:00.123 UTC [1] LOG:  database system is ready to accept connections",
    "2024-05-01 10:00:00.123 UTC [9] FATAL:  the database system is starting up",
    "7:M 01 May 2024 10:00:00.123 * Ready to accept connections tcp",
    "2026-11-26  7:50:00 0 [Note] InnoDB: Starting crash recovery from checkpoint LSN=46846",
    "2026-11-26  7:50:01 0 [Note] /usr/sbin/mariadbd: ready for connections.",
    "[41] 2026/11/26 07:30:08.171290 [INF]   Restored 0 messages for stream '$G > faultline-set-367c75'",
    "[17] 2026/11/26 07:28:57.883687 [ERR] Error trying to connect to route (attempt 1): dial tcp 10.210.1.4:6222: "
    "connect: connection refused",
    '[15] 2026/11/26 07:26:59.661621 [WRN] Healthcheck failed: "JetStream has not established contact with a meta '
    'leader"',
    "2024-05-01 10:00:00,123 tserver ERROR faultline.node.replica: abc: fault injection: crashing right after x",
]


@pytest.mark.parametrize("db_name", sorted(SAMPLES))
def test_every_bundled_db_declares_patterns_that_catch_its_own_crash_lines(db_name: str) -> None:
    db = get_db(db_name)
    assert isinstance(db, LogPatterns)
    patterns = {p.name: p for p in db.log_patterns()}
    assert set(patterns) == set(SAMPLES[db_name])
    for name, line in SAMPLES[db_name].items():
        assert re.search(patterns[name].regex, line), (db_name, name)
    for line in BENIGN:
        assert not any(re.search(p.regex, line) for p in patterns.values()), (db_name, line)
    # only a DB's own detection of damage is ever expected, and only under the faults that damage files
    for p in patterns.values():
        assert p.expected_under in (frozenset(), FILE_CORRUPTION_FAULTS)


def nemesis(f: str, type_: str = "ok") -> list[dict[str, Any]]:
    return [
        {"type": "invoke", "f": f, "process": "nemesis", "value": None},
        {"type": type_, "f": f, "process": "nemesis", "value": None},
    ]


def test_a_panic_is_invalid_with_node_file_line_and_time() -> None:
    logs = {
        "e1": {
            "etcd/logs/etcd.log": [
                "2024-05-01 10:00:00.100000 I | etcdmain: etcd Version: 3.4.23\n",
                "2024-05-01 10:00:01.250000 I | raft: became leader\n",
                "panic: runtime error: index out of range [3] with length 3\n",
                "goroutine 1 [running]:\n",
            ]
        },
        "e2": {"etcd/logs/etcd.log": ["2024-05-01 10:00:00.100000 I | etcdmain: etcd Version: 3.4.23\n"]},
    }
    r = LogPatternChecker(ETCD_PATTERNS, logs).check({}, [], {})
    assert r["valid"] is False and r["files"] == 2 and r["lines"] == 5
    assert r["unexpected_match_count"] == 1 and r["expected_match_count"] == 0
    m = r["unexpected_matches"][0]
    assert (m["node"], m["file"], m["line"], m["patterns"]) == ("e1", "etcd/logs/etcd.log", 3, ["go-panic"])
    assert m["text"].startswith("panic: runtime error") and "time" not in m
    assert m["after"] == "2024-05-01T10:00:01.250000" and "became leader" in m["after_text"]


def test_a_crc_error_is_expected_only_under_a_fault_that_damaged_files() -> None:
    line = "2024-05-01 10:00:02.000000 E | wal: crc mismatch"
    logs = {"e3": {"etcd/logs/etcd.log": [line]}}
    checker = LogPatternChecker(ETCD_PATTERNS, logs)
    ok = checker.check({}, nemesis("start-file-corrupt"), {})
    assert ok["valid"] is True and ok["expected_match_count"] == 1 and ok["unexpected_matches"] == []
    assert ok["expected_matches"][0]["expected_under"] == ["file-corrupt"]
    assert ok["expected_matches"][0]["time"] == "2024-05-01T10:00:02.000000"
    for history in ([], nemesis("start-kill"), nemesis("start-file-corrupt", "fail")):
        r = checker.check({}, history, {})
        assert r["valid"] is False and r["unexpected_match_count"] == 1, history
    # a line that several patterns catch is explained when one of them is expected
    crit = "2024-05-01 10:00:02.000000 C | etcdserver: open wal error: wal: crc mismatch"
    both = LogPatternChecker(ETCD_PATTERNS, {"e1": {"l.log": [crit]}}).check({}, nemesis("file-corrupt"), {})
    assert both["valid"] is True and both["expected_matches"][0]["patterns"] == [
        "capnslog-critical",
        "crc-mismatch",
    ]
    # a backend file (member/snap/db) damaged: etcd refuses the record at start, which is detection too
    bolt = "2026-11-26 07:40:01.000000 C | mvcc: cannot unmarshal event: proto: illegal wireType 7"
    damaged = LogPatternChecker(ETCD_PATTERNS, {"e2": {"l.log": [bolt]}})
    assert damaged.check({}, nemesis("file-zero"), {})["valid"] is True
    assert damaged.check({}, nemesis("start-kill"), {})["valid"] is False
    flipped = "2026-11-26 08:02:59.185381 C | etcdmain: wal: max entry size limit exceeded"
    length = LogPatternChecker(ETCD_PATTERNS, {"e2": {"l.log": [flipped]}})
    assert length.check({}, nemesis("file-bitflip"), {})["valid"] is True
    assert length.check({}, [], {})["valid"] is False
    # a flip that reaches the record's protobuf decoder (a CI run's e2, etcd 3.4.23, file-bitflip)
    for record in (
        "2026-11-29 04:19:17.299138 C | etcdmain: proto: Record: illegal tag 0 (wire type 0)",
        "2026-11-29 04:28:56.995822 C | etcdmain: proto: illegal wireType 7",
    ):
        decoded = LogPatternChecker(ETCD_PATTERNS, {"e2": {"l.log": [record]}})
        under = decoded.check({}, nemesis("file-bitflip"), {})
        assert under["valid"] is True and under["expected_matches"][0]["patterns"] == [
            "capnslog-critical",
            "wal-record-refused",
        ]
        assert decoded.check({}, nemesis("start-kill"), {})["valid"] is False
    # a flip taken for a torn write: the WAL is cut there, and Raft panics at the leader's commit index (a CI
    # run's e2, etcd 3.4.23): detection under a file fault, a finding under any other
    lost = [
        "raft2026/11/28 14:06:29 tocommit(8369) is out of range [lastIndex(5739)]. Was the raft log "
        "corrupted, truncated, or lost?",
        "panic: tocommit(8369) is out of range [lastIndex(5739)]. Was the raft log corrupted, truncated, or lost?",
    ]
    cut = LogPatternChecker(ETCD_PATTERNS, {"e2": {"l.log": lost}})
    under_flip = cut.check({}, nemesis("file-bitflip"), {})
    assert under_flip["valid"] is True and under_flip["expected_match_count"] == 2
    assert under_flip["expected_matches"][1]["patterns"] == ["go-panic", "raft-log-lost"]
    for history in ([], nemesis("start-kill")):
        assert cut.check({}, history, {})["valid"] is False
    other_panic = LogPatternChecker(
        ETCD_PATTERNS, {"e2": {"l.log": ["panic: runtime error: index out of range"]}}
    )
    assert other_panic.check({}, nemesis("file-bitflip"), {})["valid"] is False


def test_clean_logs_are_valid_and_no_logs_are_unknown() -> None:
    clean = LogPatternChecker(STORE_PATTERNS, {"t1": {"faultline/logs/tserver.log": ["x\n"] * 3}}).check(
        {}, [], {}
    )
    assert clean["valid"] is True and clean["lines"] == 3 and clean["unexpected_matches"] == []
    none = LogPatternChecker(STORE_PATTERNS, {}).check({}, [], {})
    assert none["valid"] == "unknown" and "no node logs" in none["note"]


def test_bad_patterns_are_refused_and_long_lines_truncated() -> None:
    with pytest.raises(ValueError, match="bad regular expression"):
        LogPatternChecker([LogPattern("x", "(", "m")], {})
    with pytest.raises(ValueError, match="duplicate"):
        LogPatternChecker([LogPattern("x", "a", "m"), LogPattern("x", "b", "m")], {})
    r = LogPatternChecker(STORE_PATTERNS, {"t1": {"a.log": ["ConsensusInvariantError " + "y" * 1000]}}).check(
        {}, [], {}
    )
    assert len(r["unexpected_matches"][0]["text"]) == 303


def test_line_times_and_faults_that_ran() -> None:
    assert line_time("2026-11-26 01:09:37,782 tserver INFO x") == "2026-11-26T01:09:37.782"
    assert line_time("7:M 01 May 2024 10:00:00.123 # x") == "2024-05-01T10:00:00.123"
    assert line_time('{"level":"fatal","ts":"2024-05-01T10:00:00.5Z"}') == "2024-05-01T10:00:00.5"
    assert line_time("panic: x") is None
    ran = faults_that_ran(
        [
            *nemesis("start-partition"),
            *nemesis("stop-partition"),
            *nemesis("kill", "fail"),
            {"type": "invoke", "f": "start-pause", "process": "nemesis"},
        ]
    )
    assert ran == {"start-partition", "partition", "stop-partition", "start-pause", "pause"}


# --- `faultline analyze` on a stored run ---------------------------------------------------------------


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the fake cluster (the store's DB), valid, with its nodes' logs collected."""
    test = testspec.build_test(
        {
            "cluster": "fake",
            "workload": "register",
            "nemesis": "partition",
            "time_limit": 1,
            "nemesis_interval": 0.2,
            "concurrency": 3,
            "seed": 3,
        }
    )
    out = run_once(test, tmp_path_factory.mktemp("logs") / "store")
    assert out.valid is True and out.results["logs"]["valid"] is True, out.results.get("logs")
    return Path(out.run_dir)


def copy_run(stored: Path, tmp_path: Path, db: str | None = None) -> Path:
    run = Path(shutil.copytree(stored, tmp_path / "run"))
    if db is not None:
        test = json.loads((run / "test.json").read_text())
        (run / "test.json").write_text(json.dumps({**test, "db": db}))
        shutil.rmtree(run / "nodes")
    return run


def plant(run: Path, node: str, rel: str, lines: list[str]) -> None:
    f = run / "nodes" / node / rel
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("".join(line + "\n" for line in lines))


def add_nemesis_ops(run: Path, f: str) -> None:
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    t = ops[-1]["time"]
    for i, op in enumerate(nemesis(f)):
        ops.append({**op, "index": len(ops), "time": t + i + 1})
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))


def test_analyze_finds_a_panic_in_an_etcd_node_log(stored: Path, tmp_path: Path) -> None:
    run = copy_run(stored, tmp_path, db="etcd")
    plant(
        run,
        "e2",
        "etcd/logs/etcd.log",
        [
            "2024-05-01 10:00:00.100000 I | etcdmain: etcd Version: 3.4.23",
            "panic: runtime error: slice bounds out of range",
        ],
    )
    plant(run, "e1", "etcd/logs/etcd.log", ["2024-05-01 10:00:00.100000 I | etcdmain: etcd Version: 3.4.23"])
    results = reanalyze(run)
    assert results["valid"] is False and results["workload"]["valid"] is True
    logs = results["logs"]
    assert logs["valid"] is False and logs["files"] == 2
    m = logs["unexpected_matches"][0]
    assert (m["node"], m["file"], m["line"]) == ("e2", "etcd/logs/etcd.log", 2)
    stored_results = json.loads((run / "results.json").read_text())
    assert stored_results["valid"] is False and stored_results["logs"]["unexpected_match_count"] == 1
    summary = "\n".join(describe(results, run))
    assert "logs: 1 unexpected and 0 expected" in summary and "e2 etcd/logs/etcd.log:2: panic:" in summary
    report = (run / "report.html").read_text()
    assert "evidence-logs" in report and "line(s) in the nodes&#x27; logs mean a crash" in report


def test_analyze_keeps_a_run_valid_when_the_crc_error_follows_a_file_corruption(
    stored: Path, tmp_path: Path
) -> None:
    run = copy_run(stored, tmp_path, db="etcd")
    plant(
        run,
        "e1",
        "etcd/logs/etcd.log",
        ["2024-05-01 10:00:05.000000 C | etcdserver: open wal: wal: crc mismatch"],
    )
    assert reanalyze(run)["valid"] is False  # no fault damaged a file: etcd's error is unexplained
    add_nemesis_ops(run, "start-file-corrupt")
    results = reanalyze(run)
    assert results["valid"] is True, results["logs"]
    assert results["logs"]["expected_match_count"] == 1
    assert results["logs"]["expected_matches"][0]["expected_under"] == ["file-corrupt"]


def test_analyze_of_a_store_run_with_a_traceback_clean_logs_and_no_logs(stored: Path, tmp_path: Path) -> None:
    run = copy_run(stored, tmp_path)
    assert reanalyze(run)["valid"] is True  # the fake nodes' own logs are clean
    node = sorted(p.name for p in (run / "nodes").iterdir())[0]
    with open(run / "nodes" / node / "node.log", "a") as f:
        f.write('Traceback (most recent call last):\n  File "x.py", line 1\nKeyError: 3\n')
    bad = reanalyze(run)
    assert bad["valid"] is False and bad["logs"]["unexpected_matches"][0]["node"] == node
    shutil.rmtree(run / "nodes")
    none = reanalyze(run)
    assert none["valid"] is True and none["logs"]["valid"] == "unknown"
