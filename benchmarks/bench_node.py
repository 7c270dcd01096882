"""Node benchmark: write throughput and latency on one tablet at replication 3, and the time from
killing the tablet's leader to the next acknowledged write. Real processes on loopback.

    .venv/bin/python benchmarks/bench_node.py [--seconds 5] [--fsync always|never] [--kills 3]

Prints a Markdown table (paste it into docs/benchmarks.md, "Node" section) and a JSON line.
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

from node.client import IndeterminateError, UnavailableError
from node.protos import node_pb2 as pb
from node.protos import node_pb2_grpc as pbg
from node.testing import MiniCluster


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

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    wall = time.monotonic() - t0
    all_lat = [x for xs in lat for x in xs]
    return {"clients": n, "ops": len(all_lat), "ops_per_s": len(all_lat) / wall, "p50_ms": pct(all_lat, 50) * 1000,
            "p99_ms": pct(all_lat, 99) * 1000, "errors": sum(errors)}


def leader_node(c: MiniCluster, client, tablet_id: str) -> str | None:
    for name, n in c.nodes.items():
        if n.kind != "tserver" or not n.alive():
            continue
        try:
            resp = pbg.ConsensusStub(client.pool.get(n.advertise)).ListReplicas(
                pb.ListTabletsRequest(tablet_id=tablet_id), timeout=2)
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--fsync", choices=["always", "never"], default="always")
    ap.add_argument("--kills", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-node-"))
    load = os.getloadavg()[0]
    with MiniCluster(base, num_masters=1, num_tservers=3, fsync=args.fsync, heartbeat_ms=200,
                     election_ms=1000) as c:
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
        print(f"| {r['clients']} | {r['ops_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['errors']} |")
    print(f"kill leader -> next acked write: {', '.join(f'{k:.2f}' for k in kills)} s "
          f"(median {statistics.median(kills):.2f} s)")
    print(json.dumps({"fsync": args.fsync, "load": load, "writes": results, "kill_to_ack_s": kills}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
