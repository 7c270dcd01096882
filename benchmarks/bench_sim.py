"""Simulator benchmark: simulated ticks/s, messages/s and seeds/s of `faultline sim`.

    .venv/bin/python benchmarks/bench_sim.py [--seeds 200] [--nodes 5]

Runs the same seeds `faultline sim --seeds N` runs, in this process, and reports the rates. A "step"
is one tick of simulated time: every replica ticks, every message due is delivered, and all invariants
are checked. Prints a Markdown table and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

from faultline.node.consensus.sim import SimOptions, simulate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=5)
    args = parser.parse_args()
    ticks = messages = failures = 0
    t0 = time.monotonic()
    cpu0 = time.process_time()
    for seed in range(args.seeds):
        r = simulate(seed, SimOptions(nodes=args.nodes))
        ticks += r.ticks
        messages += r.messages
        failures += not r.ok
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    row = {
        "seeds": args.seeds,
        "nodes": args.nodes,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": ticks / wall,
        "messages_per_s": messages / wall,
        "seeds_per_s": args.seeds / wall,
        "projected_2000_seeds_s": 2000 * wall / args.seeds,
        "failures": failures,
    }
    print("| seeds | nodes | steps/s | messages/s | seeds/s | 2000 seeds (projected) | CPU/wall |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {args.seeds} | {args.nodes} | {row['steps_per_s']:,.0f} | {row['messages_per_s']:,.0f} | "
        f"{row['seeds_per_s']:.1f} | {row['projected_2000_seeds_s']:.0f} s | {cpu / wall:.2f} |"
    )
    print(json.dumps({"bench": "sim", **row}))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
