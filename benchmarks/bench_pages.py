"""Benchmark the run pages: writing timeline.html for a large run, and drawing it in headless Chromium.

    .venv/bin/python benchmarks/bench_pages.py [--ops 100000] [--seed 5]

Synthesizes one run of --ops operations into a temporary store, writes its timeline, loads it in headless
Chromium at 1280 px (whole run, then one second at the end) and prints the size of the page, the time to
write it and the draw time the page's own script measured (`data-draw-ms`), as a Markdown table for
docs/benchmarks.md. Needs Debian's `chromium`.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from faultline.pages.timeline import write_timeline
from faultline.results.store import RunDir
from faultline.results.synth import synth_store


def draw(page: Path, fragment: str, profile: Path) -> dict[str, str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless chromium is not installed (apt-get install chromium)"
    out = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--window-size=1280,900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    tag = re.search(r'<div class="lanes" id="chart"([^>]*)>', out.stdout)
    assert tag, out.stderr[-2000:]
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', tag.group(1)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="faultline-bench-pages-") as tmp:
        (path,) = synth_store(
            Path(tmp) / "store", runs=1, ops=args.ops, anomaly_rate=0.0, seed=args.seed, jobs=1
        )
        run = RunDir(path)
        history = run.history()
        started = time.monotonic()
        page = write_timeline(history, Path(tmp) / "timeline.html", test=run.load_test())
        took = time.monotonic() - started
        end = history[-1]["time"] / 1e9
        print("| ops | page MB | write s | view | ops drawn | draw ms |")
        print("|---|---|---|---|---|---|")
        for view, fragment in (("whole run", ""), ("last second", f"#t={end - 1},{end}")):
            attrs = draw(page, fragment, Path(tmp) / "profile")
            print(
                f"| {args.ops:,} | {page.stat().st_size / 1e6:.1f} | {took:.2f} | {view} | {int(attrs['drawn']):,} "
                f"| {attrs['draw-ms']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
