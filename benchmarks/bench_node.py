"""Node benchmark: write throughput and latency on one tablet at replication 3, and the time from
killing the tablet's leader to the next acknowledged write. Real processes on loopback.

    .venv/bin/python benchmarks/bench_node.py [--seconds 5] [--fsync always|never] [--kills 3]

Prints a Markdown table (paste it into docs/benchmarks.md, "Node" section) and a JSON line.

    .venv/bin/python benchmarks/bench_node.py --register [--workers 10] [--seconds 20] [--profile DIR]

measures instead the tablet servers' CPU time per operation of a register-like load (read / write / cas on
one key per worker, 3 tablets at replication 3, 1 master + 3 tablet servers), and also the client's (this
process's) CPU per operation and the tablet servers' thread switches per operation. CPU time, read from
/proc/<pid>/stat, is steadier than throughput on a shared machine. `--profile DIR` has each tablet server
write a cProfile of all its threads to DIR/<name>.prof when it stops (node/server/profiling.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from faultline.dbs.store.minicluster import MiniCluster
from faultline.node.client import IndeterminateError, UnavailableError
from faultline.node.protos import node_pb2 as pb
from faultline.node.protos import node_pb2_grpc as pbg


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def run_writers(client, table: str, n: int, seconds: float) -> dict:
    lat: list[list[float]] = [[] for _ in range(n)]
    errors = [0] * n
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        k = 0
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                client.put(table, f"w{i}-{k % 100}", k, timeout=5)
                lat[i].append(time.perf_counter() - t0)
            except (UnavailableError, IndeterminateError):
                errors[i] += 1
            k += 1

    wall = run_workers(worker, n)
    all_lat = [x for xs in lat for x in xs]
    return {
        "clients": n,
        "ops": len(all_lat),
        "ops_per_s": len(all_lat) / wall,
        "p50_ms": pct(all_lat, 50) * 1000,
        "p99_ms": pct(all_lat, 99) * 1000,
        "errors": sum(errors),
    }


def leader_node(c: MiniCluster, client, tablet_id: str) -> str | None:
    for name, n in c.nodes.items():
        if n.kind != "tserver" or not n.alive():
            continue
        try:
            resp = pbg.ConsensusStub(client.pool.get(n.advertise)).ListReplicas(
                pb.ListTabletsRequest(tablet_id=tablet_id), timeout=2
            )
        except Exception:
            continue
        if any(r.role == "LEADER" for r in resp.replicas):
            return name
    return None


def kill_leader_once(c: MiniCluster, client, table: str, tablet_id: str) -> float:
    victim = c.wait_for(lambda: leader_node(c, client, tablet_id), 30, "a tablet leader")
    client.put(table, "probe", 0, timeout=10)
    c.kill(victim)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        try:
            client.put(table, "probe", 1, timeout=5)
            took = time.monotonic() - t0
            break
        except (UnavailableError, IndeterminateError):
            continue
    else:
        took = float("nan")
    c.start(victim)
    c.wait_for(lambda: c.tool("cluster", "ksck", c.masters_arg()).returncode == 0, 60, "ksck clean")
    return took


def run_workers(worker, n: int) -> float:
    """Runs worker(0..n-1) on n threads at once; the wall time until the last one finished."""
    ths = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return time.monotonic() - t0


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (its threads included) from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_switches(pid: int) -> int:
    """Context switches (voluntary and not) of a process's live threads, from /proc/<pid>/task/*/status."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line:
                    n += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return n


def run_register(client, table: str, n: int, seconds: float) -> dict:
    """n workers, each on its own key, doing read / write / cas like workloads/register.py."""
    import random

    from faultline.node.client import KuduError

    counts = {"read": 0, "write": 0, "cas": 0, "errors": 0}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        rng = random.Random(i)
        key = f"r{i}"
        mine = {"read": 0, "write": 0, "cas": 0, "errors": 0}
        while time.monotonic() < stop:
            f = rng.choice(("read", "write", "cas"))
            try:
                if f == "read":
                    client.get(table, key, timeout=5)
                elif f == "write":
                    client.put(table, key, rng.randrange(5), timeout=5)
                else:
                    client.cas(table, key, rng.randrange(5), rng.randrange(5), timeout=5)
                mine[f] += 1
            except KuduError:
                mine["errors"] += 1
        with lock:
            for k, v in mine.items():
                counts[k] += v

    wall = run_workers(worker, n)
    ops = counts["read"] + counts["write"] + counts["cas"]
    return {**counts, "ops": ops, "wall_s": wall, "ops_per_s": ops / wall}


def register_cpu(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="bench-node-reg-"))
    with MiniCluster(
        base, num_masters=1, num_tservers=3, fsync=args.fsync, heartbeat_ms=500, election_ms=1500
    ) as c:
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            for name, n in c.nodes.items():
                if n.kind == "tserver":
                    n.env["FAULTLINE_PROFILE"] = str(Path(args.profile).resolve() / f"{name}.prof")
        c.start_all()
        client = c.client(timeout=30)
        client.create_table("register", 3, 3, timeout=60)
        run_register(client, "register", args.workers, 2.0)  # warm up: leaders, caches, channels
        ts = {name: n.proc.pid for name, n in c.nodes.items() if n.kind == "tserver" and n.proc is not None}
        idle0 = sum(proc_cpu_s(pid) for pid in ts.values())
        time.sleep(args.idle_seconds)  # background CPU (ticks, heartbeats to the master) with no load
        idle_rate = (sum(proc_cpu_s(pid) for pid in ts.values()) - idle0) / args.idle_seconds
        load0 = os.getloadavg()[0]
        cpu0 = {name: proc_cpu_s(pid) for name, pid in ts.items()}
        own0 = proc_cpu_s(os.getpid())
        sw0 = sum(proc_switches(pid) for pid in ts.values())
        r = run_register(client, "register", args.workers, args.seconds)
        own1 = proc_cpu_s(os.getpid())
        sw1 = sum(proc_switches(pid) for pid in ts.values())
        cpu1 = {name: proc_cpu_s(pid) for name, pid in ts.items()}
        load1 = os.getloadavg()[0]
        client.close()
        if args.profile:
            import signal

            for name in ts:
                c.kill(name, signal.SIGTERM)
    cpu = {name: cpu1[name] - cpu0[name] for name in ts}
    total = sum(cpu.values())
    net = max(0.0, total - idle_rate * r["wall_s"])
    r.update(
        {
            "tserver_cpu_s": total,
            "cpu_ms_per_op": 1000 * total / max(1, r["ops"]),
            "idle_cpu_s_per_s": idle_rate,
            "net_cpu_ms_per_op": 1000 * net / max(1, r["ops"]),
            "cpu_by_tserver_s": cpu,
            "client_cpu_ms_per_op": 1000 * (own1 - own0) / max(1, r["ops"]),
            "tserver_switches_per_op": (sw1 - sw0) / max(1, r["ops"]),
            "load": [load0, load1],
            "workers": args.workers,
            "fsync": args.fsync,
        }
    )
    print(
        f"{r['ops']} ops in {r['wall_s']:.1f} s ({r['ops_per_s']:.0f}/s; read {r['read']}, write {r['write']}, "
        f"cas {r['cas']}, errors {r['errors']}); tablet servers used {total:.2f} CPU s = "
        f"{r['cpu_ms_per_op']:.2f} ms per op ({r['net_cpu_ms_per_op']:.2f} ms above the idle "
        f"{idle_rate * 1000:.0f} ms/s); the client (this process) {r['client_cpu_ms_per_op']:.2f} ms per op; "
        f"{r['tserver_switches_per_op']:.1f} tablet-server thread switches per op; load {load0:.1f} -> {load1:.1f}"
    )
    print(json.dumps(r))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--fsync", choices=["always", "never"], default="always")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument(
        "--register", action="store_true", help="tablet-server CPU per op of a register-like load"
    )
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument(
        "--idle-seconds", type=float, default=5.0, help="with --register: idle CPU measured first"
    )
    ap.add_argument("--profile", default="", help="with --register: directory for per-tserver cProfile files")
    args = ap.parse_args()
    if args.register:
        return register_cpu(args)
    base = Path(tempfile.mkdtemp(prefix="bench-node-"))
    load = os.getloadavg()[0]
    with MiniCluster(
        base, num_masters=1, num_tservers=3, fsync=args.fsync, heartbeat_ms=200, election_ms=1000
    ) as c:
        c.start_all()
        client = c.client(timeout=30)
        client.create_table("bench", 1, 3, timeout=60)
        tablet_id = client.table_locations("bench").tablets[0].tablet_id
        results = [run_writers(client, "bench", n, args.seconds) for n in (1, 16)]
        kills = [kill_leader_once(c, client, "bench", tablet_id) for _ in range(args.kills)]
        client.close()
    print(f"fsync={args.fsync}, {args.seconds:.0f} s per run, 1-minute load average at start {load:.2f}")
    print("| clients | writes/s | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['clients']} | {r['ops_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} |"
        )
    print(
        f"kill leader -> next acked write: {', '.join(f'{k:.2f}' for k in kills)} s "
        f"(median {statistics.median(kills):.2f} s)"
    )
    print(json.dumps({"fsync": args.fsync, "load": load, "writes": results, "kill_to_ack_s": kills}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
