"""The time to detection a run's checkers recorded reaches the scores (pandas engine; Spark shares
`finish_scores`)."""

from __future__ import annotations

import json
from pathlib import Path

from faultline.results.scoring import score_pandas
from faultline.results.store import Store

S = 1_000_000_000


def test_recorded_time_to_detection_is_the_runs_first_anomaly(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    ops = [
        {"index": 0, "time": 0, "type": "invoke", "process": 0, "f": "add", "value": 1},
        {"index": 1, "time": 1 * S, "type": "ok", "process": 0, "f": "add", "value": 1},
        {"index": 2, "time": 9 * S, "type": "invoke", "process": 1, "f": "read", "value": None},
        {"index": 3, "time": 10 * S, "type": "ok", "process": 1, "f": "read", "value": []},
    ]
    for name, results in (
        ("set-lost", {"valid": False, "time_to_detection_s": 10.0}),
        ("set-ok", {"valid": True}),
    ):
        run = store.create_run(name, {"workload": "set", "nemesis": ["kill"], "seed": 1})
        run.history_path.write_text("".join(json.dumps(o) + "\n" for o in ops))
        run.finish(results)
    result = score_pandas(store.root, tmp_path / "out")
    runs = result.runs.set_index("test_name")
    assert runs.loc["set-lost", "verdict"] == "false" and runs.loc["set-lost", "first_anomaly_s"] == 10.0
    assert runs.loc["set-ok", "verdict"] == "true" and runs["first_anomaly_s"].isna()["set-ok"]
    group = result.groups.iloc[0]
    assert group["median_first_anomaly_s"] == 10.0 and "recorded_anomaly_s" not in result.runs.columns
