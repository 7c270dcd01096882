"""The run store, Parquet round trip, synthetic runs and per-run reports (no Spark here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from faultline.history import parquet
from faultline.results import metrics
from faultline.results.publish import publish
from faultline.results.store import STAMP_RE, RunDir, Store, StoreError, open_run
from faultline.results.synth import synth_run, synth_store

TEST = {
    "workload": "register",
    "nemesis": ["partition", "kill"],
    "bugs": ["stale-leader-reads"],
    "seed": 42,
    "time_limit": 10,
    "concurrency": 3,
    "cluster": "local",
    "masters": 3,
    "tservers": 3,
    "start_time": "2026-11-21T07:00:00Z",
}
OPS = [
    {"index": 0, "time": 10, "type": "invoke", "process": 0, "f": "write", "key": "k1", "value": 1},
    {"index": 1, "time": 20, "type": "invoke", "process": "nemesis", "f": "start-partition", "value": None},
    {"index": 2, "time": 30, "type": "ok", "process": 0, "f": "write", "key": "k1", "value": 1, "node": "t1"},
    {
        "index": 3,
        "time": 40,
        "type": "info",
        "process": "nemesis",
        "f": "start-partition",
        "value": {"t1": ["t2"]},
    },
    {"index": 4, "time": 50, "type": "invoke", "process": 1, "f": "cas", "key": "k1", "value": [1, 2]},
    {
        "index": 5,
        "time": 60,
        "type": "info",
        "process": 1,
        "f": "cas",
        "key": "k1",
        "value": [1, 2],
        "error": "timeout",
    },
]


def _write_history(run: RunDir, ops: list[dict], tail: str = "") -> None:
    with open(run.history_path, "w") as fh:
        for op in ops:
            fh.write(json.dumps(op) + "\n")
        fh.write(tail)


def test_create_run_layout_latest_links_and_index(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    a = store.create_run("register-partition", TEST)
    b = store.create_run("register-partition", TEST)
    assert a.path != b.path and STAMP_RE.match(a.path.name) and STAMP_RE.match(b.path.name)
    assert a.path.parent == store.root / "register-partition"
    assert json.loads(a.test_path.read_text())["name"] == "register-partition"
    assert (store.root / "latest").resolve() == b.path.resolve()
    assert (store.root / "register-partition" / "latest").resolve() == b.path.resolve()
    _write_history(a, OPS)
    info = a.finish({"valid": False, "linearizable": {"valid": False}})
    assert info.verdict is False and info.ops == len(OPS) and info.duration_s == pytest.approx(50e-9)
    assert parquet.read_history_parquet(a.parquet_path) == OPS
    runs = store.runs()
    assert [r.run_id for r in runs] == [b.run_id, a.run_id]  # newest first
    assert runs[0].status == "incomplete" and runs[0].verdict is None
    assert runs[1].workload == "register" and runs[1].nemesis == ["partition", "kill"]
    assert (
        runs[1].bugs == ["stale-leader-reads"] and runs[1].seed == 42 and runs[1].verdict_label == "invalid"
    )
    # the index answers without the run's files: remove test.json, the index still knows the run
    a.test_path.unlink()
    assert store.runs()[1].workload == "register"
    assert store.rebuild_index() == 2
    assert store.runs()[1].status == "damaged"


def test_store_refuses_bad_names_and_escapes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for bad in ("../x", "a/b", "", "latest", ".hidden"):
        with pytest.raises(StoreError):
            store.create_run(bad, TEST)
    for bad in ("../etc/20260101T000000.000Z", "x/../../y", "x", "x/20260101T000000.000Z/.."):
        with pytest.raises(StoreError):
            store.run(bad)
    with pytest.raises(StoreError):
        Store(tmp_path / "missing", create=False)
    with pytest.raises(StoreError):
        open_run(tmp_path / "nope")


def test_publish_writes_report_and_open_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = store.create_run("t", TEST)
    _write_history(run, OPS)
    run.finish(
        {"valid": False, "linearizable": {"valid": False, "failure": {"op": {"f": "<script>x</script>"}}}}
    )
    assert not run.report_path.exists()  # storing a verdict publishes nothing
    publish(run)
    page = run.report_path.read_text()
    assert "id='verdict'" in page and ">invalid<" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x" not in page  # evidence is escaped
    assert "What was wrong" in page and "start-partition" in page
    again = open_run(store.root / "latest")
    assert again.path == run.path.resolve() and again.store is not None
    assert again.history() == OPS


def test_truncated_tail_is_dropped_with_a_warning(tmp_path: Path) -> None:
    run = Store(tmp_path).create_run("t", TEST)
    _write_history(run, OPS, tail='{"index": 6, "time": 70, "type": "inv')
    with pytest.warns(UserWarning, match="truncated last line"):
        ops = run.history()
    assert ops == OPS
    with pytest.raises(ValueError):
        parquet.read_jsonl(run.history_path, strict=True)


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
    max_leaves=8,
)
OP = st.fixed_dictionaries(
    {"index": st.integers(0, 10**9), "type": st.sampled_from(["invoke", "ok", "fail", "info"])},
    # the whole int64 range: past 2**53 a float64 column (plain pandas, when a column holds a null) rounds
    optional={
        "time": st.integers(0, 2**63 - 1) | st.none(),
        "process": st.integers(-5, 50) | st.just("nemesis") | JSON_VALUES,
        "f": st.text(max_size=6),
        "key": JSON_VALUES,
        "value": JSON_VALUES,
        "node": JSON_VALUES,
        "error": JSON_VALUES,
        "extra": JSON_VALUES,
    },
)


@settings(max_examples=60, deadline=None)
@given(st.lists(OP, max_size=12))
@example([{"index": 0, "type": "invoke"}, {"index": 0, "type": "invoke", "time": 9007199254740993}])
@example(
    [{"index": 2**53 + 1, "type": "ok", "value": 2**63 - 1, "time": 2**63 - 1}, {"index": 1, "type": "ok"}]
)
def test_parquet_round_trip_is_exact(ops: list[dict]) -> None:
    table = parquet.ops_to_table(ops)
    assert table.schema.equals(parquet.SCHEMA, check_metadata=False)
    back = parquet.table_to_ops(table)
    assert json.dumps(back, sort_keys=True) == json.dumps(ops, sort_keys=True)
    for a, b in zip(ops, back, strict=True):
        assert {k: type(v) for k, v in a.items()} == {k: type(v) for k, v in b.items()}
    frame = parquet.frame_to_ops(parquet.table_to_frame(table))
    assert json.dumps(frame, sort_keys=True) == json.dumps(ops, sort_keys=True)


def test_a_history_frame_that_rounded_its_integers_is_refused() -> None:
    """A frame read with plain `to_pandas()` holds a null time as NaN and so the column as float64:
    2**53 + 1 comes back as 2**53. frame_to_ops refuses it instead of returning a different history."""
    ops = [{"index": 0, "type": "invoke"}, {"index": 1, "type": "ok", "time": 2**53 + 1}]
    table = parquet.ops_to_table(ops)
    with pytest.raises(ValueError, match="lost precision"):
        parquet.frame_to_ops(table.to_pandas())
    assert parquet.frame_to_ops(parquet.table_to_frame(table)) == ops
    small = [{"index": 0, "type": "invoke"}, {"index": 1, "type": "ok", "time": 2**53 - 1}]
    assert (
        parquet.frame_to_ops(parquet.ops_to_table(small).to_pandas()) == small
    )  # below 2**53 float64 is exact


def test_parquet_file_round_trip_and_typed_columns(tmp_path: Path) -> None:
    src = tmp_path / "h.jsonl"
    src.write_text("".join(json.dumps(op) + "\n" for op in OPS))
    stats = parquet.write_history_parquet(src, tmp_path / "h.parquet")
    assert stats.rows == len(OPS) and stats.dropped_lines == 0
    assert parquet.read_history_parquet(tmp_path / "h.parquet") == OPS
    df = parquet.read_history_frame(tmp_path / "h.parquet")
    assert df["is_nemesis"].tolist() == [False, True, False, True, False, False]
    assert df["value_int"].isna().tolist()[:3] == [False, True, False] and df["value_int"].iloc[2] == 1
    assert df["value_json"].tolist()[3] == '{"t1": ["t2"]}'
    assert df["key"].tolist()[0] == "k1" and df["error"].tolist()[5] == "timeout"


def _check_format(history: list[dict]) -> None:
    assert [op["index"] for op in history] == list(range(len(history)))
    times = [op["time"] for op in history]
    assert times == sorted(times)
    outstanding: dict = {}
    retired = set()
    for op in history:
        p = op["process"]
        if p == "nemesis":
            continue
        assert p not in retired
        if op["type"] == "invoke":
            assert p not in outstanding, "two outstanding invocations"
            outstanding[p] = op
        else:
            inv = outstanding.pop(p)
            assert (inv["f"], inv["key"]) == (op["f"], op["key"])
            if op["type"] == "info":
                retired.add(p)


def test_synth_history_is_well_formed_and_linearizable_unless_injected() -> None:
    import random

    from faultline.checkers.linearizability import check

    clean, injected, kinds = synth_run(
        random.Random(7), 1500, concurrency=4, keys=3, nemesis=["partition", "kill"]
    )
    _check_format(clean)
    assert injected == [] and kinds == ["partition", "kill"]
    fs = {op["f"] for op in clean if op["process"] == "nemesis"}
    assert {"start-partition", "stop-partition"} <= fs or {"kill", "start"} <= fs
    assert {op["type"] for op in clean} == {"invoke", "ok", "fail", "info"}
    assert check(clean, model="cas-register")["valid"] is True
    bad, injected, _ = synth_run(
        random.Random(7), 1500, concurrency=4, keys=3, nemesis=["partition"], anomalies=2
    )
    _check_format(bad)
    assert len(injected) == 2 and all(a["kind"] == "stale-read" for a in injected)
    res = check(bad, model="cas-register")
    assert res["valid"] is False
    assert res["failure"]["key"] in {a["key"] for a in injected}


def test_synth_store_is_deterministic_and_indexed(tmp_path: Path) -> None:
    a = synth_store(tmp_path / "a", runs=6, ops=300, anomaly_rate=0.5, seed=3, jobs=2)
    b = synth_store(tmp_path / "b", runs=6, ops=300, anomaly_rate=0.5, seed=3, jobs=1)
    assert [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    for pa, pb in zip(a, b, strict=True):
        assert (pa / "history.jsonl").read_bytes() == (pb / "history.jsonl").read_bytes()
        assert (
            parquet.read_history_parquet(pa / "history.parquet")
            == parquet.read_jsonl(pa / "history.jsonl").ops
        )
    runs = Store(tmp_path / "a").runs()
    assert len(runs) == 6 and all(r.status == "finished" and r.verdict is None for r in runs)
    bugged = [r for r in runs if r.bugs]
    assert len(bugged) == 3 and all(r.bugs == ["stale-leader-reads"] for r in bugged)
    tests = [json.loads((p / "test.json").read_text()) for p in a]
    assert sum(bool(t["synthetic"]["anomalies"]) for t in tests) == 3
    assert {t["workload"] for t in tests} == {"register"}


def test_run_metrics_outages_and_recovery() -> None:
    s = 1_000_000_000
    ops = []
    i = 0

    def add(t: float, ty: str, p: object, f: str, **kw: object) -> None:
        nonlocal i
        ops.append({"index": i, "time": int(t * s), "type": ty, "process": p, "f": f, **kw})
        i += 1

    for k in range(10):  # 0-1 s: ok reads every 0.1 s, 10 ms each
        add(k * 0.1, "invoke", 0, "read", key="a")
        add(k * 0.1 + 0.01, "ok", 0, "read", key="a", value=None)
    add(1.0, "invoke", "nemesis", "start-partition")
    add(1.0, "info", "nemesis", "start-partition")
    add(1.05, "invoke", 0, "read", key="a")
    add(2.05, "info", 0, "read", key="a", error="timeout")
    add(2.5, "invoke", "nemesis", "stop-partition")
    add(2.5, "info", "nemesis", "stop-partition")
    add(2.6, "invoke", 1, "write", key="a", value=1)
    add(2.9, "ok", 1, "write", key="a", value=1)
    df = parquet.ops_to_table(ops).to_pandas()
    m = metrics.run_metrics(df, "r")
    assert m["ok"] == 11 and m["info"] == 1 and m["client_ops"] == 12
    assert m["lat_max_ms"] == pytest.approx(300.0)
    assert json.loads(m["outages_json"]) == [[pytest.approx(0.91), pytest.approx(2.9)]]
    faults = json.loads(m["faults_json"])
    assert len(faults) == 1 and faults[0]["kind"] == "partition" and faults[0]["end_s"] == pytest.approx(2.5)
    assert m["recover_max_s"] == pytest.approx(0.4)
    assert m["availability"] == pytest.approx(1 - 1.99 / 2.9)
    assert json.loads(m["counts_json"])["read"] == {"invoke": 11, "ok": 10, "info": 1}


def test_synth_cli(tmp_path: Path) -> None:
    env = dict(os.environ)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "faultline",
            "synth",
            str(tmp_path / "s"),
            "--runs",
            "3",
            "--ops",
            "50",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "3/3 runs" in out.stderr and len(Store(tmp_path / "s").runs()) == 3
    bad = subprocess.run(
        [sys.executable, "-m", "faultline", "synth", str(tmp_path / "s"), "--runs", "0", "--ops", "5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 254 and "must be a whole number > 0" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_store_made_by_another_writer_between_the_check_and_the_mkdir_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two shards opening one fresh shared store at once: the second finds it made after it looked."""
    root = tmp_path / "shared"
    root.mkdir()
    real_exists = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: False if p == root else real_exists(p))
    assert Store(root).root == root
    monkeypatch.setattr(Path, "exists", real_exists)
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="is not a directory"):
        Store(tmp_path / "file")
