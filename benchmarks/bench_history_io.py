"""History I/O: reading, checking and writing large histories in every format.

    python benchmarks/bench_history_io.py [--txns 100000] [--register-events 1000000] [--edn-events 200000]
                                          [--repeat 1] [--keep DIR] [--seed 0] [--skip-check]

Generates, from --seed and without the code under test (stdlib json and a small EDN printer of its own, so
the same files come out of any version of Faultline): a list-append history of --txns transactions (the
simulated store of bench_elle.py, 2 events each) in our JSONL and as elle-cli JSON; a register history of
--register-events events (results.synth's simulated register: 1,000 independent keys, 5 clients,
partition and kill windows) in our JSONL and its first --edn-events events as Jepsen EDN. With --keep DIR
the histories are written there once and reused by later runs (to compare two checkouts on the same
files); else into a temporary directory. Then, each in a fresh process (best of --repeat):

- read: `history.load(FILE)` (reading, validation, pairing), wall and CPU seconds, events per second;
- check: `faultline check FILE` end to end, start-up, reading and inference included (wall and CPU of
  the subprocess), and the check's own `elapsed_s` from its JSON line;
- write: `history.write_jsonl`, `history.to_edn`, Parquet (`ops_to_table` + `write_table`) and the
  recorder (`Recorder.record` per op, flushed per line, as a run writes) for the same ops.

Prints a table; the figures go into docs/benchmarks.md by hand. Run it with PYTHONPATH naming another
checkout to measure that one (the generated files are the same).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

READ = r"""
import sys, time, warnings
from faultline import history
warnings.simplefilter("ignore")
t, c = time.perf_counter(), time.process_time()
h = history.load(sys.argv[1], sys.argv[2])
print(f"{time.perf_counter() - t:.4f} {time.process_time() - c:.4f} {len(h.ops)}")
"""

WRITE = r"""
import gc, sys, time, warnings
from pathlib import Path
from faultline import history
warnings.simplefilter("ignore")
kind, src, dest = sys.argv[1:4]
ops = history.load(src, "auto").ops
gc.collect()
gc.freeze()  # the ops to write are not the writer's garbage to walk (in a run, they come one at a time)
t, c = time.perf_counter(), time.process_time()
if kind == "jsonl":
    history.write_jsonl(ops, dest)
elif kind == "edn":
    Path(dest).write_text(history.to_edn(ops), encoding="utf-8")
elif kind == "parquet":
    from faultline.history import parquet
    parquet.write_table(parquet.ops_to_table(ops), dest)
else:
    from faultline.controller.recorder import Recorder
    rec = Recorder(dest)
    for op in ops:
        rec.record({k: v for k, v in op.items() if k not in ("index", "time")})
    rec.close()
print(f"{time.perf_counter() - t:.4f} {time.process_time() - c:.4f} {len(ops)}")
"""


def _dumps(op: dict[str, Any]) -> str:
    return json.dumps(op, separators=(",", ":"))


def _edn(v: Any, keyword: bool = False) -> str:
    """EDN text of a history value (keywords for the names Jepsen writes as keywords)."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return ":" + v if keyword else json.dumps(v)
    if isinstance(v, list):
        return "[" + " ".join(_edn(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_edn(k, True)} {_edn(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v).__name__)


def _edn_op(op: dict[str, Any]) -> str:
    parts = []
    for k, v in op.items():
        kw = k in ("type", "f", "error") or (k == "process" and isinstance(v, str))
        parts.append(f":{k} {_edn(v, kw)}")
    return "{" + ", ".join(parts) + "}"


NAMES = ("list-append.jsonl", "list-append.json", "register.jsonl", "register.edn")


def generate(folder: Path, txns: int, register_events: int, edn_events: int, seed: int) -> dict[str, Path]:
    """The benchmark's histories (module docstring), written once into `folder`."""
    sys.path.insert(0, str(HERE))
    from bench_elle import generate as list_append

    from faultline.results.synth import synth_run

    files = {}
    la = list_append(txns, seed=seed)
    files["list-append.jsonl"] = folder / "list-append.jsonl"
    files["list-append.json"] = folder / "list-append.json"
    files["list-append.jsonl"].write_text("".join(_dumps(op) + "\n" for op in la), encoding="utf-8")
    files["list-append.json"].write_text("[" + ",\n".join(_dumps(op) for op in la) + "]\n", encoding="utf-8")
    del la
    # 1,000 keys: with results.synth's default 8, the linearizability search of each key's ~60,000 ops and
    # its open (info) ops outgrows the checker's memory limit (docs/benchmarks.md)
    reg, _, _ = synth_run(random.Random(seed), register_events // 2, keys=1000, nemesis=["partition", "kill"])
    files["register.jsonl"] = folder / "register.jsonl"
    files["register.edn"] = folder / "register.edn"
    files["register.jsonl"].write_text("".join(_dumps(op) + "\n" for op in reg), encoding="utf-8")
    files["register.edn"].write_text(
        "[" + "\n ".join(_edn_op(op) for op in reg[:edn_events]) + "]\n", encoding="utf-8"
    )
    return files


def _child(code: str, *args: str, timeout: float = 1800) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=timeout,
        check=True,
    )
    return out.stdout.split()


def _best(repeat: int, fn: Any) -> Any:
    runs = [fn() for _ in range(repeat)]
    return min(runs, key=lambda r: r[0])


def _cpu_of_children() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _check(path: Path) -> tuple[float, float, float, str]:
    """Wall and CPU seconds of `faultline check PATH`, the check's own elapsed_s, and its verdict."""
    t, c = time.perf_counter(), _cpu_of_children()
    proc = subprocess.run(
        [sys.executable, "-m", "faultline", "check", str(path)],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=3600,
    )
    wall, cpu = time.perf_counter() - t, _cpu_of_children() - c
    if proc.returncode not in (0, 1, 2):
        raise RuntimeError(f"faultline check {path} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    line = json.loads(proc.stdout.splitlines()[-1])
    return wall, cpu, float(line["elapsed_s"]), str(line["valid"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--txns", type=int, default=100_000, help="list-append transactions (2 events each)")
    ap.add_argument("--register-events", type=int, default=1_000_000)
    ap.add_argument("--edn-events", type=int, default=200_000, help="events of the register history as EDN")
    ap.add_argument("--repeat", type=int, default=1, help="best of N for read and write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--keep",
        metavar="DIR",
        default=None,
        help="write the histories into DIR once and reuse them (delete DIR to make new ones; "
        "default: a temporary directory)",
    )
    ap.add_argument("--skip-check", action="store_true", help="time reading and writing only")
    args = ap.parse_args()
    import faultline

    print(
        f"faultline from {Path(faultline.__file__).parent}; load average {os.getloadavg()[0]:.2f}", flush=True
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        files = {name: folder / name for name in NAMES}
        if not all(p.exists() for p in files.values()):
            files = generate(folder, args.txns, args.register_events, args.edn_events, args.seed)
            print(f"generated in {time.perf_counter() - t:.1f} s", flush=True)
        print(
            f"{'history':18} {'events':>9} {'MB':>6} {'read s':>7} {'cpu':>6} {'events/s':>10} {'check s':>8} "
            f"{'cpu':>6} {'(check)':>8} {'verdict':>7}",
            flush=True,
        )
        for name, path in files.items():
            secs, cpu, n = _best(
                args.repeat, lambda p=path: tuple(float(x) for x in _child(READ, str(p), "auto"))
            )
            row = (
                f"{name:18} {int(n):>9,} {path.stat().st_size / 2**20:>6.1f} {secs:>7.2f} {cpu:>6.2f} "
                f"{n / secs:>10,.0f}"
            )
            if not args.skip_check and name in ("list-append.jsonl", "register.jsonl", "register.edn"):
                wall, ccpu, elapsed, valid = _check(path)
                row += f" {wall:>8.2f} {ccpu:>6.2f} {elapsed:>8.2f} {valid:>7}"
            print(row, flush=True)
        print(f"\n{'write':32} {'events':>9} {'s':>7} {'cpu':>6} {'events/s':>10}", flush=True)
        for kind, src in (
            ("jsonl", "list-append.jsonl"),
            ("jsonl", "register.jsonl"),
            ("edn", "register.edn"),
            ("parquet", "register.jsonl"),
            ("recorder", "list-append.jsonl"),
        ):
            dest = Path(tmp) / f"out.{kind}"
            secs, cpu, n = _best(
                args.repeat,
                lambda k=kind, s=src, d=dest: tuple(
                    float(x) for x in _child(WRITE, k, str(files[s]), str(d))
                ),
            )
            print(
                f"{kind + ' (' + src + ')':32} {int(n):>9,} {secs:>7.2f} {cpu:>6.2f} {n / secs:>10,.0f}",
                flush=True,
            )
            dest.unlink(missing_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
