"""Campaign scoring on Spark: verdicts equal the in-process checker's, metrics equal the pandas baseline's,
malformed and partial runs are scored with a warning, and a missing store is a clean error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from faultline.checkers.linearizability import check
from faultline.history import parquet
from faultline.results.scoring import score_pandas
from faultline.results.spark import score
from faultline.results.store import Store
from faultline.results.synth import synth_store

ROOT = Path(__file__).resolve().parent.parent


def make_store(root: Path) -> Path:
    """Six synthetic runs (half with stale reads) plus a crashed run, a broken one and one with no history."""
    synth_store(root, runs=6, ops=400, anomaly_rate=0.5, seed=11, keys=3, jobs=1)
    store = Store(root)
    crashed = store.create_run("register-crashed", {"workload": "register", "nemesis": ["kill"], "seed": 1})
    src = sorted((root / "register-partition").glob("2*/history.jsonl"))[0]
    lines = src.read_text().splitlines(keepends=True)
    crashed.history_path.write_text("".join(lines[:300]) + lines[300][:25])  # torn last line, no results.json
    broken = store.create_run("register-broken", {"workload": "register"})
    broken.test_path.write_text("{not json")
    broken.history_path.write_text("".join(lines[:40]) + "garbage line\n" + "".join(lines[40:80]))
    store.create_run("register-empty", {"workload": "register", "nemesis": [], "seed": 2})
    return root


@pytest.fixture(scope="module")
def scored(spark: object, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, object]:
    root = make_store(tmp_path_factory.mktemp("score") / "store")
    result = score(spark, root, root / "_score")  # plan "runs": one task per run
    baseline = score_pandas(root, root / "_baseline")
    grouped = score(spark, root, root / "_groups", plan="groups")  # groupBy(run, key).applyInPandas
    return root, result, baseline, grouped


@pytest.mark.spark
def test_spark_verdicts_equal_in_process_checker(scored: tuple) -> None:
    root, result, _, _ = scored
    runs = result.runs.set_index("run_id")
    checked = 0
    for run_dir in Store(root).run_dirs():
        if not run_dir.parquet_path.exists() or pd.isna(runs.loc[run_dir.run_id, "model"]):
            continue
        checked += 1
        ops = [op for op in run_dir.history() if op.get("process") != "nemesis"]
        expected = check(ops, model="cas-register")["valid"]
        got = runs.loc[run_dir.run_id, "verdict"]
        assert got == {True: "true", False: "false"}.get(expected, "unknown"), run_dir.run_id
    assert checked == 7  # six synthetic runs and the crashed one
    # and they find exactly the runs with injected anomalies
    for run_dir in Store(root).run_dirs():
        test = (
            json.loads(run_dir.test_path.read_text())
            if run_dir.path.parent.name.startswith("register-p")
            or run_dir.path.parent.name.startswith("register-k")
            else None
        )
        if test and "synthetic" in test:
            want = "false" if test["synthetic"]["anomalies"] else "true"
            assert runs.loc[run_dir.run_id, "verdict"] == want
            if test["synthetic"]["anomalies"]:
                first = min(a["time"] for a in test["synthetic"]["anomalies"]) / 1e9
                assert runs.loc[run_dir.run_id, "first_anomaly_s"] <= first + 1e-9


@pytest.mark.spark
def test_spark_metrics_equal_pandas_baseline(scored: tuple) -> None:
    _, result, baseline, grouped = scored
    b = baseline.runs.set_index("run_id").sort_index()
    for spark_result in (result, grouped):
        a = spark_result.runs.set_index("run_id").sort_index()
        assert list(a.index) == list(b.index)
        for col in (
            "events",
            "ok",
            "fail",
            "info",
            "ok_rate",
            "lat_p50_ms",
            "lat_p99_ms",
            "lat_max_ms",
            "throughput",
            "outage_s",
            "availability",
            "recover_max_s",
            "verdict",
            "first_anomaly_s",
            "counts_json",
            "faults_json",
            "outages_json",
            "recover_json",
            "warning",
        ):
            pd.testing.assert_series_equal(
                a[col].astype(object).where(a[col].notna(), None),
                b[col].astype(object).where(b[col].notna(), None),
                check_dtype=False,
                check_names=False,
                obj=col,
            )
        pd.testing.assert_frame_equal(
            spark_result.groups.reset_index(drop=True),
            baseline.groups.reset_index(drop=True),
            check_dtype=False,
        )


@pytest.mark.spark
def test_partial_and_malformed_runs_are_scored_with_warnings(scored: tuple) -> None:
    _root, result, _, _ = scored
    runs = result.runs.set_index("run_id")
    crashed = next(r for r in runs.index if r.startswith("register-crashed/"))
    broken = next(r for r in runs.index if r.startswith("register-broken/"))
    empty = next(r for r in runs.index if r.startswith("register-empty/"))
    assert (
        "truncated last line" in runs.loc[crashed, "warning"]
        and "did not finish" in runs.loc[crashed, "warning"]
    )
    assert runs.loc[crashed, "events"] == 300 and runs.loc[crashed, "verdict"] in ("true", "false", "unknown")
    assert "test.json" in runs.loc[broken, "warning"] and "malformed line" in runs.loc[broken, "warning"]
    assert (
        runs.loc[broken, "events"] == 80 and runs.loc[broken, "verdict"] == "unknown"
    )  # no workload: no model
    assert "no history" in runs.loc[empty, "warning"] and runs.loc[empty, "verdict"] == "unknown"
    assert any(w.startswith(crashed) for w in result.warnings)


@pytest.mark.spark
def test_scorecard_outputs(scored: tuple) -> None:
    root, _result, _, _ = scored
    out = root / "_score"
    scores = pd.read_parquet(out / "scores.parquet")
    assert len(scores) == 9 and set(scores["verdict"]) <= {"true", "false", "unknown"}
    card = json.loads((out / "scorecard.json").read_text())
    assert card["runs"] == 9 and card["verdict"] == "false"
    groups = {(g["workload"], g["nemesis"], g["bug"]): g for g in card["groups"]}
    bugged = [g for k, g in groups.items() if k[2] == "stale-leader-reads"]
    assert bugged and all(g["detection_rate"] == 1.0 and g["median_first_anomaly_s"] > 0 for g in bugged)
    clean = [g for k, g in groups.items() if k[0] == "register" and k[2] == "none" and k[1] != "none"]
    assert all(g["invalid"] == 0 for g in clean if g["warnings"] == 0)
    assert sum(g["runs"] for g in card["groups"]) == 9
    assert all(0 <= g["availability"] <= 1 for g in card["groups"] if g["availability"] is not None)
    page = (out / "scorecard.html").read_text()
    assert "stale-leader-reads" in page and "<script" not in page


def test_score_cli_errors_and_pandas_engine(tmp_path: Path) -> None:
    env = dict(os.environ)
    cli = [sys.executable, "-m", "faultline", "score"]
    missing = subprocess.run(
        [*cli, str(tmp_path / "nope")], capture_output=True, text=True, env=env, timeout=60
    )
    assert (
        missing.returncode == 254 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    )
    bad = subprocess.run(
        [*cli, str(tmp_path), "--master", "mesos://x"], capture_output=True, text=True, env=env, timeout=60
    )
    assert bad.returncode == 254 and "--master" in bad.stderr
    empty = subprocess.run([*cli, str(tmp_path)], capture_output=True, text=True, env=env, timeout=60)
    assert empty.returncode == 254 and "has no runs" in empty.stderr
    synth_store(tmp_path / "s", runs=2, ops=200, anomaly_rate=0.5, seed=5, jobs=1)
    out = subprocess.run(
        [*cli, str(tmp_path / "s"), "--engine", "pandas", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr  # one run has a stale read: invalid
    assert "1 valid, 1 invalid" in out.stderr
    assert (tmp_path / "o" / "scorecard.html").exists()
    assert parquet.SCHEMA  # the module imports without Spark


@pytest.mark.spark
def test_several_stores_scored_together_by_both_plans_equal_pandas(spark: object, tmp_path: Path) -> None:
    """Two hosts' stores, the same folder name on each: run ids keep their store, numbers match pandas."""
    stores = [tmp_path / "h1" / "store", tmp_path / "h2" / "store"]
    synth_store(stores[0], runs=2, ops=300, anomaly_rate=0.5, seed=21, keys=3, jobs=1)
    synth_store(stores[1], runs=2, ops=300, anomaly_rate=0.5, seed=22, keys=3, jobs=1)
    baseline = score_pandas(stores, tmp_path / "pandas")
    ids = sorted(baseline.runs["run_id"])
    assert len(ids) == 4 and {i.split("/")[0] for i in ids} == {"h1-store", "h2-store"}
    for plan in ("runs", "groups"):
        result = score(spark, stores, tmp_path / plan, plan=plan)
        a = result.runs.set_index("run_id").sort_index()
        b = baseline.runs.set_index("run_id").sort_index()
        assert list(a.index) == ids
        for col in ("events", "verdict", "first_anomaly_s", "lat_p99_ms", "availability", "keys"):
            assert (
                a[col].astype(object).where(a[col].notna(), None).tolist()
                == b[col].astype(object).where(b[col].notna(), None).tolist()
            ), (plan, col)
        card = json.loads((tmp_path / plan / "scorecard.json").read_text())
        assert [s["label"] for s in card["stores"]] == ["h1-store", "h2-store"] and card["store"] is None
