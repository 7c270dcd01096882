"""Real databases in the chaos suite: the cells of campaigns/real.toml for the register, set and transactional
workloads, and two of the cells for Jepsen's workload library (CI's time is short; the campaign runs them
all, over five seeds where a fault must land in the right window; Redis's failover loss is already shown by
its set cell, so its queue cell, which needs its whole schedule, stays out), the cells expected valid shortened to
30 s (needs --chaos). A cell that must find an anomaly keeps its whole fault schedule: Redis's 30-s form
missed the loss once on a loaded CI machine (one cut-off window, and the failover came late).

Beyond each cell's expectation: every run heals without residue; the Redis and NATS cells' lost acknowledged
adds are counted in results.json and shown in the report (NATS's set cell under lose-unfsynced-all loses every
publish acknowledged before its first loss, 5 seeds of 5); PostgreSQL's repeatable read shows G2-item and
violates serializability but not snapshot isolation, and its read committed violates snapshot isolation;
MariaDB's repeatable read shows lost updates (or G-single) and violates snapshot isolation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chaos_cells import chaos_params

from faultline.controller.campaign import load

CAMPAIGN = Path(__file__).resolve().parent.parent / "campaigns" / "real.toml"
SHORT_S = 30
FIRST_WORKLOADS = {"register", "set", "list-append", "rw-register"}
LIBRARY_IN_CI = {"etcd-bank-partition-kill-pause", "postgres-queue-kill"}
RUNS = [
    r
    for r in load(CAMPAIGN).runs
    if r.opts.get("seed", 1) == 1 and (r.opts["workload"] in FIRST_WORKLOADS or r.cell in LIBRARY_IN_CI)
]


@pytest.mark.chaos
@pytest.mark.docker
@pytest.mark.timeout(900)
@pytest.mark.parametrize("planned", chaos_params(RUNS, [r.key.split("|")[0] for r in RUNS]))
def test_real_campaign_cell(planned, faultline_run) -> None:  # type: ignore[no-untyped-def]
    opts = {
        k: v for k, v in planned.opts.items() if k not in ("workload", "nemesis", "inject_bug", "cluster")
    }
    if planned.expect == "valid":  # a cell that must find a bug keeps its whole fault schedule
        opts["time_limit"] = min(float(opts.get("time_limit") or SHORT_S), SHORT_S)
    run = faultline_run(
        workload=planned.opts["workload"],
        nemesis=planned.opts["nemesis"].split(","),
        expect=planned.expect,
        **opts,
    )
    assert run.cut_short is None, run.describe()
    # a node that refused to start on a file a file fault damaged has found the damage: it stays down,
    # and the residue check lists it (docs/reliability.md); anything else left behind is a failure
    refused = _refused_to_start(run.run_dir)
    assert [
        r for r in run.results["residue"] if r not in {f"{n}: node process stopped" for n in refused}
    ] == [], run.results["residue"]
    isolation = (planned.opts.get("db_opt") or {}).get("isolation")
    if isolation:
        _check_isolation(planned.opts["db"], isolation, run.results["workload"])
    if (
        planned.opts.get("db") in ("redis-sentinel", "nats") and planned.expect == "invalid"
    ):  # the lost writes, listed
        lost = run.results["workload"]["lost_count"]
        assert lost > 0 and run.results["workload"]["lost"]
        assert run.run_dir is not None and str(lost) in (run.run_dir / "report.html").read_text()


def _check_isolation(db: str, isolation: str, wl: dict) -> None:  # type: ignore[type-arg]
    """What each DB documents of its levels, in Elle's terms: PostgreSQL's repeatable read is snapshot
    isolation (write skew, G2-item, only); InnoDB's is not (lost updates: Jepsen's MySQL 8.0.34 analysis)."""
    violated = set(wl.get("not", [])) | set(wl.get("also_not", []))
    anomalies = set(wl["anomaly_types"])
    if db == "mariadb" and isolation == "repeatable-read":
        assert "snapshot-isolation" in violated and anomalies & {
            "lost-update",
            "G-single",
            "G-single-item",
        }, wl
    elif isolation == "repeatable-read":
        assert "G2-item" in anomalies and "serializable" in violated, wl
        assert "snapshot-isolation" not in violated, wl
    if isolation == "read-committed":
        assert "snapshot-isolation" in violated, wl


def _refused_to_start(run_dir: Path | None) -> set[str]:
    """The nodes a file fault's completion records as refusing to start on the damaged file."""
    if run_dir is None:
        return set()
    ops = (json.loads(line) for line in (run_dir / "history.jsonl").open())
    return {
        d["node"]
        for op in ops
        if op.get("process") == "nemesis"
        and op["type"] == "ok"
        and str(op["f"]).startswith("file-")
        and isinstance(op.get("value"), dict)
        for d in op["value"].get("damage", [])
        if d.get("start_refused")
    }
