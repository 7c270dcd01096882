"""Per-run metrics, per-key verdicts and per-group aggregates, as plain pandas functions.

The same functions run on Spark executors (through `applyInPandas`, see results/spark.py) and in a single
process (the pandas baseline, `score_pandas`), so the two always compute the same numbers, and the
verdicts are those of `checkers.linearizability.check`, the in-process checker.

Definitions (docs/results.md):
- latency: completion time minus invocation time of the same process's op, for ok ops, in ms.
- throughput: ok completions per second of run time.
- fault windows: from a nemesis op that starts a fault (`start-X`, `kill`, `pause`, `partition`, ...) to
  the op that heals it (`stop-X`, `start`, `resume`, `heal`), using completion times.
- outage: a gap longer than `OUTAGE_GAP_S` between consecutive ok completions during which clients did
  get failures or timeouts; availability is 1 - outage time / run time.
- time to recover: from each heal to the first ok completion of an op invoked after it.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from faultline.checkers.api import Valid
    from faultline.core import Op

NS = 1_000_000_000
OUTAGE_GAP_S = 1.0
RESULT_JSON_LIMIT = 200_000

# nemesis op names: what starts a fault (-> its kind) and what heals which kinds
_START_PLAIN = {
    "kill": "kill",
    "pause": "pause",
    "partition": "partition",
    "crash": "kill",
    "isolate": "partition",
    "clock-skew": "clock",
    "bump-clock": "clock",
    "strobe-clock": "clock",
}
_HEALS = {"start": {"kill"}, "restart": {"kill"}, "resume": {"pause"}, "heal": None, "reset-clock": {"clock"}}

RUN_SCHEMA = (
    "run_id string, events long, client_ops long, ok long, fail long, info long, open_ops long, ok_rate double, "
    "lat_p50_ms double, lat_p95_ms double, lat_p99_ms double, lat_max_ms double, throughput double, "
    "duration_s double, counts_json string, faults_json string, outages_json string, outages long, "
    "outage_s double, availability double, recover_json string, recover_max_s double, recover_mean_s double, "
    "unrecovered long"
)
KEY_SCHEMA = "run_id string, key string, valid string, anomaly_s double, ops long, elapsed_s double, result_json string"
GROUP_SCHEMA = (
    "workload string, nemesis string, bug string, runs long, valid long, invalid long, unknown long, "
    "detection_rate double, median_first_anomaly_s double, availability double, ok_rate double, "
    "lat_p99_ms double, recover_max_s double, warnings long"
)
NO_KEY = "\x00no-key"


def fault_windows(nem: pd.DataFrame, end_ns: int) -> list[dict[str, Any]]:
    """Fault intervals [start_s, end_s, kind, start_f] from the nemesis rows; an unhealed fault ends at end_ns."""
    rows = nem[nem["type"] != "invoke"] if (nem["type"] != "invoke").any() else nem
    open_: list[tuple[str, int, str]] = []
    out: list[dict[str, Any]] = []
    for f, t in zip(rows["f"].tolist(), rows["time"].tolist(), strict=True):
        if f is None or t is None or (isinstance(t, float) and math.isnan(t)):
            continue
        t = int(t)
        kind = None
        if f.startswith("start-"):
            kind = f[6:]
        elif f in _START_PLAIN:
            kind = _START_PLAIN[f]
        if kind is not None:
            open_.append((kind, t, f))
            continue
        if f.startswith("stop-"):
            heals: set[str] | None = {f[5:]}
        elif f in _HEALS:
            heals = _HEALS[f]
        else:
            continue
        keep = []
        for k, st, sf in open_:
            if heals is None or k in heals:
                out.append({"start_s": st / NS, "end_s": t / NS, "kind": k, "f": sf, "healed": True})
            else:
                keep.append((k, st, sf))
        open_ = keep
    for k, st, sf in open_:
        out.append({"start_s": st / NS, "end_s": end_ns / NS, "kind": k, "f": sf, "healed": False})
    out.sort(key=lambda w: w["start_s"])
    return out


def pair_latencies(cl: pd.DataFrame) -> pd.DataFrame:
    """Completion rows with the invocation time of their op (same process, previous row)."""
    cl = cl.sort_values(["process", "index"], kind="stable")
    prev_type = cl["type"].shift(1)
    prev_proc = cl["process"].shift(1)
    prev_time = cl["time"].shift(1)
    done = cl[(cl["type"] != "invoke") & (prev_type == "invoke") & (prev_proc == cl["process"])].copy()
    done["invoke_time"] = prev_time[done.index]
    done["latency_ns"] = done["time"] - done["invoke_time"]
    return done


# a run with no timed events: its every number
_EMPTY_RUN = dict(
    client_ops=0,
    ok=0,
    fail=0,
    info=0,
    open_ops=0,
    ok_rate=None,
    duration_s=0.0,
    counts_json="{}",
    faults_json="[]",
    outages_json="[]",
    outages=0,
    outage_s=0.0,
    availability=None,
    recover_json="[]",
    recover_max_s=None,
    recover_mean_s=None,
    unrecovered=0,
    throughput=None,
    lat_p50_ms=None,
    lat_p95_ms=None,
    lat_p99_ms=None,
    lat_max_ms=None,
)


def run_metrics(df: pd.DataFrame, run_id: str, gap_s: float = OUTAGE_GAP_S) -> dict[str, Any]:
    """Every per-run number of the scorecard, from one run's history rows (history.parquet.SCHEMA)."""
    df = df[df["time"].notna()].sort_values("index", kind="stable")  # Spark gives a group's rows in any order
    events = len(df)
    out: dict[str, Any] = {"run_id": run_id, "events": events}
    if events == 0:
        out.update(_EMPTY_RUN)
        return out
    t0, t1 = int(df["time"].min()), int(df["time"].max())
    duration_s = (t1 - t0) / NS
    nem_mask = df["is_nemesis"].fillna(False).astype(bool) | df["process"].isna()
    cl = df[~nem_mask]
    nem = df[nem_mask & df["f"].notna()]
    ok = _op_counts(cl, duration_s, out)
    done = pair_latencies(cl)
    lat = done.loc[done["type"] == "ok", "latency_ns"].to_numpy(dtype="float64") / 1e6
    if len(lat):
        p50, p95, p99 = np.percentile(lat, [50, 95, 99])
        out.update(
            lat_p50_ms=float(p50), lat_p95_ms=float(p95), lat_p99_ms=float(p99), lat_max_ms=float(lat.max())
        )
    else:
        out.update(lat_p50_ms=None, lat_p95_ms=None, lat_p99_ms=None, lat_max_ms=None)
    out["throughput"] = ok / duration_s if duration_s > 0 else None
    out.update(_outages(cl, t0, t1, gap_s, duration_s))
    out.update(_recovery(fault_windows(nem, t1) if len(nem) else [], done))
    return out


def _op_counts(cl: pd.DataFrame, duration_s: float, out: dict[str, Any]) -> int:
    """Adds the client op counts (by f and type, and in all) to `out`; returns the ok count."""
    counts: dict[str, dict[str, int]] = {}
    for (f, ty), n in cl.groupby(["f", "type"], dropna=False).size().items():
        counts.setdefault(str(f), {})[str(ty)] = int(n)
    types = cl["type"].value_counts()
    ok, fail, info = (int(types.get(k, 0)) for k in ("ok", "fail", "info"))
    invokes = int(types.get("invoke", 0))
    completions = ok + fail + info
    out.update(
        client_ops=completions,
        ok=ok,
        fail=fail,
        info=info,
        open_ops=max(0, invokes - completions),
        ok_rate=(ok / completions) if completions else None,
        duration_s=duration_s,
        counts_json=json.dumps(counts, sort_keys=True),
    )
    return ok


def _outages(cl: pd.DataFrame, t0: int, t1: int, gap_s: float, duration_s: float) -> dict[str, Any]:
    """Long gaps between ok completions while clients saw failures or timeouts, and the availability."""
    ok_times = np.sort(cl.loc[cl["type"] == "ok", "time"].to_numpy(dtype="int64"))
    bad_times = np.sort(cl.loc[cl["type"].isin(["fail", "info"]), "time"].to_numpy(dtype="int64"))
    bounds = np.concatenate([[t0], ok_times, [t1]])
    gaps = np.diff(bounds)
    outages = []
    for g in np.nonzero(gaps > gap_s * NS)[0]:
        a, b = int(bounds[g]), int(bounds[g + 1])
        lo, hi = np.searchsorted(bad_times, [a, b])
        if hi > lo:
            outages.append([a / NS, b / NS])
    outage_s = float(sum(b - a for a, b in outages))
    return dict(
        outages_json=json.dumps(outages),
        outages=len(outages),
        outage_s=outage_s,
        availability=(1.0 - outage_s / duration_s) if duration_s > 0 else None,
    )


def _recovery(faults: list[dict[str, Any]], done: pd.DataFrame) -> dict[str, Any]:
    """The fault windows, each healed one with its time to recover: from the heal to the first ok
    completion of an op invoked after it."""
    ok_done = done[done["type"] == "ok"]
    ok_inv = ok_done["invoke_time"].to_numpy(dtype="int64")
    ok_end = ok_done["time"].to_numpy(dtype="int64")
    order = np.argsort(ok_inv, kind="stable")
    ok_inv, ok_end = ok_inv[order], ok_end[order]
    # for "first ok completion among ops invoked at or after h": suffix minimum of completion times
    suffix_min = np.minimum.accumulate(ok_end[::-1])[::-1] if len(ok_end) else ok_end
    recovers: list[float | None] = []
    for w in faults:
        if not w["healed"]:
            continue
        h = round(w["end_s"] * NS)
        i = int(np.searchsorted(ok_inv, h))
        recovers.append(float(suffix_min[i] - h) / NS if i < len(suffix_min) else None)
        w["recover_s"] = recovers[-1]
    got = [r for r in recovers if r is not None]
    return dict(
        faults_json=json.dumps(faults),
        recover_json=json.dumps(recovers),
        recover_max_s=max(got) if got else None,
        recover_mean_s=(sum(got) / len(got)) if got else None,
        unrecovered=len(recovers) - len(got),
    )


def key_verdict(
    ops: list[Op],
    run_id: str,
    key: str | None,
    model: str,
    time_limit: float | None,
    semantics: str = "jepsen",
) -> dict[str, Any]:
    """One (run, key) group through the in-process checker; the anomaly time is the blocked op's completion."""
    from faultline.checkers.linearizability import check

    times = {op.get("index"): op.get("time") for op in ops}
    try:
        res = check(ops, model=model, time_limit=time_limit, semantics=semantics)
    except Exception as exc:  # a malformed group is "unknown" with the reason, never a crashed job
        res = {"valid": "unknown", "error": f"{type(exc).__name__}: {exc}"}
    valid = res.get("valid", "unknown")
    anomaly_s = None
    if valid is False:
        op = (res.get("failure") or {}).get("op") or {}
        t = times.get(op.get("complete_index")) or times.get(op.get("invoke_index"))
        if t is not None:
            anomaly_s = t / NS
    text = json.dumps(res, default=str) if valid is not True else None
    if text is not None and len(text) > RESULT_JSON_LIMIT:
        text = json.dumps(
            {"valid": res.get("valid"), "truncated": True, "failure_op": (res.get("failure") or {}).get("op")}
        )
    return {
        "run_id": run_id,
        "key": NO_KEY if key is None else key,
        "valid": valid_text(valid),
        "anomaly_s": anomaly_s,
        "ops": len(ops),
        "elapsed_s": float(res.get("elapsed_s") or 0.0),
        "result_json": text,
    }


def valid_text(v: Any) -> str:
    return "true" if v is True else ("false" if v is False else "unknown")


def text_valid(s: Any) -> Valid:
    return True if s == "true" else (False if s == "false" else "unknown")


def merge_key_verdicts(kv: pd.DataFrame) -> pd.DataFrame:
    """Per run: verdict (False > unknown > True over its keys), first anomaly time, checker seconds."""

    def one(g: pd.DataFrame) -> pd.Series:
        vals = set(g["valid"])
        verdict = "false" if "false" in vals else ("unknown" if "unknown" in vals else "true")
        an = g["anomaly_s"].dropna()
        return pd.Series(
            {
                "verdict": verdict,
                "first_anomaly_s": float(an.min()) if len(an) else None,
                "keys": len(g),
                "invalid_keys": int((g["valid"] == "false").sum()),
                "check_s": float(g["elapsed_s"].sum()),
            }
        )

    if kv.empty:
        return pd.DataFrame(
            columns=["run_id", "verdict", "first_anomaly_s", "keys", "invalid_keys", "check_s"]
        )
    return kv.groupby("run_id", sort=True).apply(one, include_groups=False).reset_index()


def aggregate_group(g: pd.DataFrame) -> dict[str, Any]:
    """One (workload, nemesis, bug) row from its runs' scores."""
    n = len(g)
    verdicts = g["verdict"].fillna("unknown")
    valid = int((verdicts == "true").sum())
    invalid = int((verdicts == "false").sum())
    fa = g["first_anomaly_s"].dropna()

    def mean(col: str) -> float | None:
        s = g[col].dropna()
        return float(s.mean()) if len(s) else None

    def mx(col: str) -> float | None:
        s = g[col].dropna()
        return float(s.max()) if len(s) else None

    row = {
        "workload": g["workload"].iloc[0],
        "nemesis": g["nemesis"].iloc[0],
        "bug": g["bug"].iloc[0],
        "runs": n,
        "valid": valid,
        "invalid": invalid,
        "unknown": n - valid - invalid,
        "detection_rate": invalid / n if n else None,
        "median_first_anomaly_s": float(fa.median()) if len(fa) else None,
        "availability": mean("availability"),
        "ok_rate": mean("ok_rate"),
        "lat_p99_ms": mean("lat_p99_ms"),
        "recover_max_s": mx("recover_max_s"),
        "warnings": int((g["warning"].fillna("") != "").sum()),
    }
    return row
