"""Elle-class checkers on synthetic histories: transactions per second and scaling.

    python benchmarks/bench_elle.py [--sizes 10000,30000,100000] [--info 0.1] [--repeat 3] [--profile]
                                    [--kind list-append|rw-register] [--anomalies N]

Histories come from a simulated strict-serializable database (each transaction applies atomically at a
random moment between its invocation and completion), `--concurrency` processes, transactions of 1-5
micro-ops over a sliding window of keys (about 100 appends per key, as Elle's generator does), a
fraction `--info` of transactions indeterminate (half of them applied) and 5 % failed. Such a history
is valid; `--anomalies N` plants N G-single (read skew) anomalies to time the cycle search too.
Generation is not timed; the check (parse, inference, graph, SCCs, cycle tests, search) is, best of
--repeat runs. The figures go into docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class _Db:
    """Keys are lists (or registers); a sliding window of live keys, each retired after ~100 writes."""

    def __init__(
        self, rng: random.Random, kind: str = "list-append", window: int = 10, per_key: int = 100
    ) -> None:
        self.rng = rng
        self.kind = kind
        self.writes: dict[int, int] = {}
        self.lists: dict[int, Any] = {}
        self.live = list(range(window))
        self.next_key = window
        self.per_key = per_key
        self.next_value = 0

    def txn(self) -> list[list[Any]]:
        """A fresh transaction: reads have value None until applied."""
        mops: list[list[Any]] = []
        for _ in range(self.rng.randint(1, 5)):
            k = self.rng.choice(self.live)
            if self.rng.random() < 0.5:
                mops.append(["r", k, None])
            else:
                self.next_value += 1
                mops.append(["append" if self.kind == "list-append" else "w", k, self.next_value])
        return mops

    def apply(self, mops: list[list[Any]]) -> list[list[Any]]:
        """Runs a transaction atomically; returns the completed micro-ops (reads filled in)."""
        out = []
        for f, k, v in mops:
            if f == "r":
                cur = self.lists.get(k)
                out.append([f, k, list(cur or []) if self.kind == "list-append" else cur])
            else:
                if self.kind == "list-append":
                    self.lists.setdefault(k, []).append(v)
                else:
                    self.lists[k] = v
                out.append([f, k, v])
                self.writes[k] = self.writes.get(k, 0) + 1
                if self.writes[k] >= self.per_key and k in self.live:
                    self.live[self.live.index(k)] = self.next_key
                    self.next_key += 1
        return out


def generate(
    n: int,
    concurrency: int = 10,
    info: float = 0.1,
    fail: float = 0.05,
    seed: int = 0,
    kind: str = "list-append",
) -> list[dict]:
    """A valid history of `n` transactions (module docstring)."""
    rng = random.Random(seed)
    db = _Db(rng, kind)
    hist: list[dict] = []
    active: dict[int, dict[str, Any]] = {}  # process -> {mops, done, fate}
    idle = list(range(concurrency))
    next_process = concurrency
    started = 0
    while started < n or active:
        if idle and started < n and (not active or rng.random() < 0.5):
            p = idle.pop(rng.randrange(len(idle)))
            mops = db.txn()
            r = rng.random()
            fate = "info" if r < info else "fail" if r < info + fail else "ok"
            active[p] = {"mops": mops, "out": None, "fate": fate}
            hist.append(
                {
                    "index": len(hist),
                    "time": len(hist),
                    "type": "invoke",
                    "process": p,
                    "f": "txn",
                    "value": mops,
                }
            )
            started += 1
            continue
        p = rng.choice(list(active))
        a = active[p]
        applies = a["fate"] == "ok" or (a["fate"] == "info" and rng.random() < 0.5)
        if a["out"] is None and applies:
            a["out"] = db.apply(a["mops"])
            continue
        del active[p]
        value = a["out"] if a["fate"] == "ok" else a["mops"]
        hist.append(
            {
                "index": len(hist),
                "time": len(hist),
                "type": a["fate"],
                "process": p,
                "f": "txn",
                "value": value,
            }
        )
        if a["fate"] == "info":
            idle.append(next_process)
            next_process += 1
        else:
            idle.append(p)
    return hist


def plant_read_skew(hist: list[dict], count: int, seed: int = 1) -> list[dict]:
    """Appends `count` G-single cycles on fresh keys, each three sequential transactions on new processes."""
    out = list(hist)
    base = 10**9
    for i in range(count):
        x, y = base + 2 * i, base + 2 * i + 1
        txns = [
            [["append", x, 1], ["append", y, 1]],
            [["r", x, [1]], ["append", x, 2], ["r", y, [1]], ["append", y, 2]],
            [["r", x, [1, 2]], ["r", y, [1]]],  # saw the second txn's x but not its y: read skew
        ]
        p = 10**6 + i
        for mops in txns:
            out.append(
                {
                    "index": len(out),
                    "type": "invoke",
                    "process": p,
                    "f": "txn",
                    "value": [[f, k, None if f == "r" else v] for f, k, v in mops],
                }
            )
            out.append({"index": len(out), "type": "ok", "process": p, "f": "txn", "value": mops})
    return out


def _time_check(hist: list[dict], repeat: int, kind: str) -> tuple[float, float, dict]:
    from faultline.checkers.elle.checker import check

    best = best_cpu = float("inf")
    res: dict = {}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = check(hist, kind)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--info", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--anomalies", type=int, default=0, help="list-append only")
    ap.add_argument("--kind", choices=["list-append", "rw-register"], default="list-append")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print a cProfile summary of the largest size")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'txns':>8} {'wall s':>8} {'cpu s':>7} {'txns/s':>9}  verdict  anomalies")
    bad = False
    hist: list[dict] = []
    for n in sizes:
        hist = plant_read_skew(generate(n, args.concurrency, args.info, kind=args.kind), args.anomalies)
        secs, cpu, res = _time_check(hist, args.repeat, args.kind)
        expect = not args.anomalies
        bad |= res["valid"] is not expect
        print(
            f"{n:>8} {secs:>8.3f} {cpu:>7.3f} {n / secs:>9.0f}  {res['valid']!s:7}  {res['counts']}",
            flush=True,
        )
    load1 = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(
        f"{args.kind}, concurrency {args.concurrency}, info {args.info:.0%}, best of {args.repeat}; "
        f"load average: {load1}"
    )
    if args.profile:
        import cProfile
        import pstats

        from faultline.checkers.elle.checker import check

        prof = cProfile.Profile()
        prof.enable()
        check(hist, args.kind)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    if bad:
        print("unexpected verdict", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
