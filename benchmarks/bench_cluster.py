"""Cluster benchmark: node image build (cold and warm) and `up`/`down` of 8 nodes (3 masters + 5 tservers).

    .venv/bin/python benchmarks/bench_cluster.py [--cold] [--repeat 3] [--cluster docker|local]
                                                 [--daemon node|placeholder]

`--cold` rebuilds the image from scratch (mmdebstrap + wheels install + docker import; the wheel
download is cached on the host); without it only the warm path (a hash lookup) is timed. Each repeat
brings a fresh cluster up (until every node process runs) and takes it down again. The load average is
printed with the figures: the machine is shared, so note it in docs/benchmarks.md.

Prints a Markdown table (paste it into docs/benchmarks.md, "Cluster" section) and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cold", action="store_true", help="also time a cold image build (about a minute)")
    p.add_argument("--repeat", type=int, default=3, help="up/down cycles (default 3)")
    p.add_argument("--cluster", choices=["docker", "local"], default="docker")
    p.add_argument("--daemon", choices=["node", "placeholder"], default="node")
    a = p.parse_args(argv)

    from faultline.cluster.backends import make_backend
    from faultline.cluster.image import build_image
    from faultline.dbs.store import StoreDB

    store = StoreDB().cluster_spec("image", {})

    rows: list[tuple[str, float]] = []
    result: dict[str, object] = {"load_before": os.getloadavg()}
    if a.cluster == "docker":
        if a.cold:
            rep = build_image(
                store.packages, store.python_packages, rebuild=True, log=lambda s: print(s, file=sys.stderr)
            )
            rows.append(("image build, cold", rep.seconds))
            result["cold_steps"] = rep.steps
        rep = build_image(store.packages, store.python_packages)
        rows.append(("image build, warm (cached)", rep.seconds))
    ups, downs = [], []
    for i in range(a.repeat):
        b = make_backend(
            a.cluster,
            StoreDB().cluster_spec(
                f"bench-{secrets.token_hex(2)}", {"masters": 3, "tservers": 5, "daemon": a.daemon}
            ),
        )
        t0 = time.monotonic()
        try:
            b.up()
            ups.append(time.monotonic() - t0)
        finally:
            t1 = time.monotonic()
            b.down()
            downs.append(time.monotonic() - t1)
        print(f"  cycle {i + 1}: up {ups[-1]:.1f} s, down {downs[-1]:.1f} s", file=sys.stderr)
    rows.append((f"up, 8 nodes ({a.cluster}, {a.daemon}), median of {a.repeat}", statistics.median(ups)))
    rows.append((f"down, 8 nodes ({a.cluster}), median of {a.repeat}", statistics.median(downs)))
    result.update(
        {
            "up_s": ups,
            "down_s": downs,
            "load_after": os.getloadavg(),
            "cluster": a.cluster,
            "daemon": a.daemon,
            "rows": rows,
        }
    )
    print("| measure | seconds |\n|---|---|")
    for name, secs in rows:
        print(f"| {name} | {secs:.2f} |")
    print(f"load average before {result['load_before'][0]:.1f}, after {result['load_after'][0]:.1f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
