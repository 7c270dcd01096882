"""Linearizability checker vs Porcupine's published figures on the same reference histories.

    python benchmarks/bench_checkers.py [--engine auto|python] [--repeat 3] [--anchors ../shared/anchors]

For each file: parse once (not timed), then time `checkers.linearizability.check` alone (wall and CPU
of this process), best of --repeat runs; then one more run under tracemalloc for the peak memory the
check allocates (the C core allocates through Python's allocator, so it is counted). Prints a summary
and the slowest files; the figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Porcupine (Go, 2 cores) on the same files, from ../shared/FIELD-NOTES.md.
PORCUPINE = {"etcd total (102 files)": 0.57, "etcd slowest": 0.21, "kv c50-ok": 0.21, "kv c50-bad": 0.05}


def _measure(lh, use_c: bool | None, repeat: int) -> dict:  # type: ignore[no-untyped-def]
    from faultline.checkers.linearizability import check

    best_wall = best_cpu = float("inf")
    res: dict = {}
    for _ in range(repeat):
        c0 = time.process_time()
        res = check(lh.ops, model=lh.model, semantics=lh.semantics, init=lh.init, use_c=use_c)
        cpu = time.process_time() - c0
        best_wall = min(best_wall, res["elapsed_s"])
        best_cpu = min(best_cpu, cpu)
    tracemalloc.start()
    check(lh.ops, model=lh.model, semantics=lh.semantics, init=lh.init, use_c=use_c)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "valid": res["valid"],
        "wall": best_wall,
        "cpu": best_cpu,
        "peak": peak,
        "steps": res["steps"],
        "engine": res["engine"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchors", default=str(ROOT.parent / "shared" / "anchors"))
    ap.add_argument("--engine", choices=["auto", "python"], default="auto")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from faultline import history

    base = Path(args.anchors) / "porcupine"
    if not (base / "VERDICTS.tsv").is_file():
        print(f"no reference histories at {base}", file=sys.stderr)
        return 1
    with open(base / "VERDICTS.tsv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    use_c = None if args.engine == "auto" else False
    results = {}
    wrong = []
    for r in rows:
        lh = history.load(base / r["file"])
        m = _measure(lh, use_c, args.repeat)
        results[r["file"]] = m
        if str(m["valid"]).lower() != r["expected_linearizable"]:
            wrong.append(r["file"])
    etcd = {k: v for k, v in results.items() if k.startswith("etcd/")}
    kv = {k: v for k, v in results.items() if k.startswith("kv/")}
    engine = next(iter(results.values()))["engine"]
    load1 = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"engine: {engine}; repeat: best of {args.repeat}; load average at the end: {load1}")
    slow = max(etcd.items(), key=lambda kv_: kv_[1]["wall"])
    slow_cpu = max(etcd.items(), key=lambda kv_: kv_[1]["cpu"])
    print(
        f"etcd: {len(etcd)} files, total wall {sum(v['wall'] for v in etcd.values()) * 1e3:.1f} ms, "
        f"total cpu {sum(v['cpu'] for v in etcd.values()) * 1e3:.1f} ms; slowest wall {slow[1]['wall'] * 1e3:.2f} ms "
        f"({slow[0]}), slowest cpu {slow_cpu[1]['cpu'] * 1e3:.2f} ms ({slow_cpu[0]}); "
        f"peak traced memory max {max(v['peak'] for v in etcd.values()) / 2**20:.1f} MiB"
    )
    for name, v in sorted(kv.items()):
        print(
            f"{name}: {v['valid']}, wall {v['wall'] * 1e3:.1f} ms, cpu {v['cpu'] * 1e3:.1f} ms, steps {v['steps']}, "
            f"peak {v['peak'] / 2**20:.1f} MiB"
        )
    over = [k for k, v in results.items() if v["wall"] > 1.0]
    print(f"files over 1 s: {over or 'none'}; wrong verdicts: {wrong or 'none'}")
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print("Porcupine (Go, 2 cores, same files): " + ", ".join(f"{k} {v} s" for k, v in PORCUPINE.items()))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
