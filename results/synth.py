"""Synthetic runs: realistic histories without a cluster, for tests, benchmarks and the notebook.

Each run simulates `concurrency` clients doing reads, writes and compare-and-sets on independent keys of
a linearizable register, while a nemesis opens fault windows (partition, kill, pause). Every applied
operation takes effect at a random instant between its invocation and completion and the register is
replayed in that order, so an untouched history is linearizable by construction. During an outage
operations fail fast or time out (`info`, after which the process is retired and a fresh one takes its
place, as the history format requires); a timed-out write may or may not have taken effect.

A chosen fraction of runs gets injected anomalies: an ok read that returns a value already overwritten by
a write that completed before the read began (a stale read, what the `stale-leader-reads` bug causes).
Written values are unique per key, so such a read is provably not linearizable. The injected anomalies
are listed in test.json under `synthetic`, so scoring can be checked against the truth.
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
import multiprocessing
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from faultline.history import parquet
from faultline.results.publish import publish
from faultline.results.store import RunDir, Store, now_stamp

NS = 1_000_000_000
MS = 1_000_000
NEMESIS_MIXES = [["partition"], ["kill"], ["pause"], ["partition", "kill"]]
FAULT_OPS = {
    "partition": ("start-partition", "stop-partition"),
    "kill": ("kill", "start"),
    "pause": ("pause", "resume"),
}
TIMEOUT_NS = 1 * NS
_ENCODER = json.JSONEncoder(separators=(", ", ": "))


@dataclass
class SynthRun:
    test: dict[str, Any]
    ops: list[dict[str, Any]]
    anomalies: list[dict[str, Any]]


@dataclass
class _Op:
    process: int
    f: str
    key: str
    invoke: int
    complete: int
    type: str = "ok"
    value: Any = None  # invocation value
    result: Any = None  # completion value
    lin: int | None = None  # when it took effect; None if it never did
    error: str | None = None


def _fault_windows(
    rng: random.Random, kinds: list[str], horizon: int
) -> list[tuple[int, int, str, int, int]]:
    """(start, end, kind, outage_end_after_start, outage_end_after_heal) until `horizon` ns."""
    out = []
    t = int(rng.uniform(1.5, 4) * NS)
    while t < horizon:
        kind = rng.choice(kinds)
        length = int(rng.uniform(2, 5) * NS)
        end = t + length
        if kind == "pause":
            out_start, out_heal = end, end + int(rng.uniform(0.2, 1.0) * NS)
        elif kind == "kill":
            out_start, out_heal = t + int(rng.uniform(0.8, 2.0) * NS), end + int(rng.uniform(0, 0.3) * NS)
        else:
            out_start, out_heal = t + int(rng.uniform(1.0, 2.5) * NS), end + int(rng.uniform(0.1, 0.8) * NS)
        out.append((t, end, kind, min(out_start, end), out_heal))
        t = end + int(rng.uniform(3, 8) * NS)
    return out


def synth_run(
    rng: random.Random,
    n_ops: int,
    *,
    concurrency: int = 5,
    keys: int = 8,
    nemesis: list[str] | None = None,
    anomalies: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """One run's history (op dicts in order), its injected anomalies and its nemesis names."""
    kinds = nemesis if nemesis is not None else rng.choice(NEMESIS_MIXES)
    key_names = [f"k{i}" for i in range(keys)]
    # rough duration: ~8 ms per op cycle per client; windows are generated with a margin
    horizon = int(n_ops / concurrency * 0.012 * NS) + 10 * NS
    windows = _fault_windows(rng, kinds, horizon) if kinds else []
    ops = _client_ops(rng, n_ops, concurrency, key_names, _outage_test(windows))
    writers = _replay(ops, key_names)
    injected = _inject_stale_reads(rng, ops, writers, anomalies)
    # the run ends with its clients: later windows never opened; one still open is healed at the end
    last = max(op.complete for op in ops)
    windows = [(a, min(b, last + 5 * MS), k, c, d) for a, b, k, c, d in windows if a < last]
    return _events(rng, ops, windows), injected, kinds


def _outage_test(windows: list[tuple[int, int, str, int, int]]) -> Callable[[int], bool]:
    """Whether clients see an outage at a time: after a fault starts, and again just after its heal."""
    outages: list[tuple[int, int]] = []
    for start, end, _kind, out_start_end, out_heal_end in windows:
        outages.append((start, out_start_end))
        outages.append((end, out_heal_end))
    outages = sorted((a, b) for a, b in outages if b > a)
    out_starts = [a for a, _ in outages]

    def in_outage(t: int) -> bool:
        i = bisect.bisect_right(out_starts, t) - 1
        return i >= 0 and t < outages[i][1]

    return in_outage


def _client_ops(
    rng: random.Random, n_ops: int, concurrency: int, key_names: list[str], in_outage: Callable[[int], bool]
) -> list[_Op]:
    """`n_ops` operations of `concurrency` clients, each client's next invoked a while after its last
    completed; a client whose op timed out is replaced by a fresh process."""
    rand, expo = rng.random, rng.expovariate
    next_value = dict.fromkeys(key_names, 0)
    last_value: dict[str, int | None] = dict.fromkeys(key_names, None)
    ops: list[_Op] = []
    heap = [(int(expo(1 / (2 * MS))), slot, slot) for slot in range(concurrency)]
    next_pid = concurrency
    value: Any  # an invocation's: None for a read, the new value for a write, [old, new] for a cas
    while len(ops) < n_ops:
        t, slot, pid = heapq.heappop(heap)
        key = key_names[int(rand() * len(key_names))]
        r = rand()
        if r < 0.5:
            f, value = "read", None
        elif r < 0.8:
            next_value[key] += 1
            f, value = "write", next_value[key]
            last_value[key] = value
        else:
            next_value[key] += 1
            f, value = "cas", [last_value[key] if last_value[key] is not None else 0, next_value[key]]
            last_value[key] = next_value[key]
        op = _Op(pid, f, key, t, 0, value=value)
        _complete(rng, op, in_outage(t))
        ops.append(op)
        if op.type == "info":
            pid = next_pid
            next_pid += 1
        heapq.heappush(heap, (op.complete + int(expo(1 / (4 * MS))) + 100_000, slot, pid))
    return ops


def _complete(rng: random.Random, op: _Op, outage: bool) -> None:
    """How `op` ends (ok, fail or timed out), when, and when it took effect if it did."""
    rand, lognorm, t, f = rng.random, rng.lognormvariate, op.invoke, op.f
    if outage:
        if rand() < (0.6 if f == "read" else 0.4):
            op.type, op.error = "fail", rng.choice(("not-leader", "unavailable"))
            op.complete = t + int(lognorm(1.5, 0.8) * MS)
        else:
            op.type, op.error = "info", "timeout"
            op.complete = t + TIMEOUT_NS
            if f != "read" and rand() < 0.3:
                op.lin = t + int(rand() * TIMEOUT_NS)
    else:
        op.complete = t + int(lognorm(1.0, 0.6) * MS) + 200_000
        if rand() < 0.0005:
            op.type, op.error = "info", "timeout"
            op.complete = t + TIMEOUT_NS
            op.lin = t + int(rand() * TIMEOUT_NS) if f != "read" and rand() < 0.5 else None
        else:
            op.lin = op.invoke + int(rand() * (op.complete - op.invoke))


def _replay(ops: list[_Op], key_names: list[str]) -> dict[str, list[_Op]]:
    """Replays each key's register in linearization order to fill in reads and cas outcomes; returns
    per key the ok ops that wrote a value."""
    by_key: dict[str, list[_Op]] = {k: [] for k in key_names}
    for op in ops:
        if op.lin is not None:
            by_key[op.key].append(op)
    writers: dict[str, list[_Op]] = {k: [] for k in key_names}
    for k, kops in by_key.items():
        kops.sort(key=lambda o: o.lin)  # type: ignore[arg-type, return-value]
        state: int | None = None
        for op in kops:
            if op.f == "read":
                op.result = state
            elif op.f == "write":
                state = op.value
                op.result = op.value
                if op.type == "ok":
                    writers[k].append(op)
            else:
                old, new = op.value
                if state == old:
                    state = new
                    if op.type == "ok":
                        writers[k].append(op)
                elif op.type == "ok":
                    op.type = "fail"  # a definite cas failure: the value did not match
                op.result = op.value
    return writers


def _inject_stale_reads(
    rng: random.Random, ops: list[_Op], writers: dict[str, list[_Op]], count: int
) -> list[dict[str, Any]]:
    """Makes `count` ok reads return a value that two completed writes ago was already overwritten."""
    injected: list[dict[str, Any]] = []
    if count <= 0:
        return injected
    reads = [o for o in ops if o.f == "read" and o.type == "ok"]
    rng.shuffle(reads)
    by_complete = {k: sorted(w, key=lambda o: o.complete) for k, w in writers.items()}
    for r in reads:
        if len(injected) >= count:
            break
        ws = by_complete[r.key]
        # w2: the last write that completed before r began; w1: a write that completed before w2 began
        before = [w for w in ws if w.complete < r.invoke]
        if len(before) < 2:
            continue
        w2 = before[-1]
        older = [w for w in before if w.complete < w2.invoke]
        if not older:
            continue
        w1 = older[-1]
        stale = w1.value if w1.f == "write" else w1.value[1]
        if stale == r.result:
            continue
        r.result = stale
        injected.append(
            {
                "kind": "stale-read",
                "key": r.key,
                "process": r.process,
                "invoke_time": r.invoke,
                "time": r.complete,
                "value": stale,
                "overwritten_by": w2.value,
            }
        )
    return injected


def _events(
    rng: random.Random, ops: list[_Op], windows: list[tuple[int, int, str, int, int]]
) -> list[dict[str, Any]]:
    events: list[tuple[int, int, dict[str, Any]]] = []
    seq = 0
    for op in ops:
        events.append(
            (
                op.invoke,
                seq,
                {"type": "invoke", "process": op.process, "f": op.f, "key": op.key, "value": op.value},
            )
        )
        done: dict[str, Any] = {
            "type": op.type,
            "process": op.process,
            "f": op.f,
            "key": op.key,
            "value": op.result if op.type == "ok" else (op.value if op.f != "read" else None),
        }
        if op.error:
            done["error"] = op.error
        events.append((op.complete, seq + 1, done))
        seq += 2
    for start, end, kind, _a, _b in windows:
        begin_f, end_f = FAULT_OPS[kind]
        if kind == "partition":
            target: Any = {"isolated": [f"t{rng.randint(1, 5)}"], "from": ["m1", "m2", "m3"]}
        else:
            target = [f"t{rng.randint(1, 5)}"]
        for t, f, val in ((start, begin_f, target), (end, end_f, target if kind != "partition" else None)):
            events.append((t, seq, {"type": "invoke", "process": "nemesis", "f": f, "value": val}))
            events.append(
                (
                    t + int(rng.uniform(1, 20) * MS),
                    seq + 1,
                    {"type": "info", "process": "nemesis", "f": f, "value": val},
                )
            )
            seq += 2
    events.sort(key=lambda e: (e[0], e[1]))
    out = []
    for i, (t, _s, body) in enumerate(events):
        out.append({"index": i, "time": t, **body})
    return out


def _jsonl(ops: list[dict[str, Any]]) -> str:
    encode = _ENCODER.encode
    return "".join([encode(op) + "\n" for op in ops])


def _write_run(job: tuple[str, int, int, int, int, int, list[str], bool, int, int, str]) -> str:
    """Generates one run into its (already created) directory; runs in a worker process."""
    path, i, run_seed, ops, concurrency, keys, kinds, bad, store_seed, _n, started_iso = job
    rng = random.Random(run_seed)
    n_anom = rng.randint(1, 3) if bad else 0
    history, injected, kinds = synth_run(
        rng, ops, concurrency=concurrency, keys=keys, nemesis=kinds, anomalies=n_anom
    )
    duration = history[-1]["time"] / NS if history else 0.0
    test = {
        "name": Path(path).parent.name,
        "workload": "register",
        "nemesis": kinds,
        "bugs": ["stale-leader-reads"] if injected else [],
        "seed": run_seed,
        "time_limit": math.ceil(duration),
        "concurrency": concurrency,
        "cluster": "synthetic",
        "db": "store",
        "db_opts": {"masters": 3, "tservers": 5},
        "start_time": started_iso,
        "synthetic": {
            "generator": "faultline synth",
            "store_seed": store_seed,
            "run": i,
            "keys": keys,
            "anomalies": injected,
        },
    }
    run = Path(path)
    (run / "history.jsonl").write_text(_jsonl(history), encoding="utf-8")
    parquet.write_table(parquet.ops_to_table(history), run / "history.parquet")
    results = {
        "valid": "unknown",
        "unchecked": True,
        "_run": {"ops": len(history), "duration_s": duration, "synthetic": True},
    }
    (run / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp = run / ".test.json.tmp"
    tmp.write_text(json.dumps(test, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(run / "test.json")
    return path


def synth_store(
    root: Path | str,
    *,
    runs: int,
    ops: int,
    anomaly_rate: float = 0.2,
    seed: int = 0,
    concurrency: int = 5,
    keys: int = 8,
    reports: bool = False,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Path]:
    """Writes `runs` synthetic runs into the store at `root` (in `jobs` worker processes; default: one
    per CPU) and returns their directories. The same seed gives the same store."""
    if runs < 0 or ops < 1:
        raise ValueError("runs must be >= 0 and ops >= 1")
    if not 0.0 <= anomaly_rate <= 1.0:
        raise ValueError("anomaly rate must be between 0 and 1")
    if concurrency < 1 or keys < 1:
        raise ValueError("concurrency and keys must be >= 1")
    store = Store(root)
    master = random.Random(seed)
    n_bad = round(runs * anomaly_rate)
    bad = set(master.sample(range(runs), n_bad)) if n_bad else set()
    base = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=master.randrange(10**7))
    work = []
    for i in range(runs):
        run_seed = master.randrange(2**31)
        kinds = NEMESIS_MIXES[i % len(NEMESIS_MIXES)]
        started = base + timedelta(minutes=5 * i, milliseconds=i)
        started_iso = started.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        name = f"register-{'-'.join(kinds)}"
        run = store.create_run(
            name,
            {
                "name": name,
                "workload": "register",
                "nemesis": kinds,
                "seed": run_seed,
                "start_time": started_iso,
            },
            stamp=now_stamp(started),
        )
        work.append(
            (str(run.path), i, run_seed, ops, concurrency, keys, kinds, i in bad, seed, runs, started_iso)
        )
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(work) or 1))
    paths: list[Path] = []
    if jobs == 1:
        done_iter: Any = map(_write_run, work)
    else:
        ctx = multiprocessing.get_context("fork")
        pool = ctx.Pool(jobs)
        done_iter = pool.imap(_write_run, work)
    try:
        for n, path in enumerate(done_iter, 1):
            paths.append(Path(path))
            if progress:
                progress(n, runs)
    finally:
        if jobs > 1:
            pool.close()
            pool.join()
    for path in paths:
        run = RunDir(path, store)
        if reports:
            publish(run)
        store.record(run.info())
    return paths
