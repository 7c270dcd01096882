"""`faultline campaign --seeds`: explicit lists and fresh seeds drawn at random, recorded in the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from faultline.controller import campaign as cp
from faultline.controller.errors import UsageError

CAMPAIGN = """
[campaign]
name = "seeds"
cluster = "fake"
seeds = [1]
time_limit = 0.5
concurrency = 2
quiet_period = 0.1

[[cell]]
name = "good"
workload = "register"
nemesis = ["none"]
expect = "valid"
"""


def test_parse_seeds_lists_and_random_draws() -> None:
    assert cp.parse_seeds("1,2, 3") == ([1, 2, 3], False)
    drawn, is_drawn = cp.parse_seeds("random:5")
    assert is_drawn and len(set(drawn)) == 5 and all(isinstance(s, int) and 0 < s < 2**31 for s in drawn)
    # fresh every time: two draws of 5 from 2**31 agree only by a vanishing chance
    assert cp.parse_seeds("random:5")[0] != drawn
    for bad, msg in (
        ("random:0", "from 1 to"),
        ("random:x", "whole number"),
        ("random:", "whole number"),
        ("random:-2", "whole number"),
        ("1,x", "integers"),
        ("", "empty"),
        ("3,3", "twice"),
        (f"random:{cp.MAX_DRAWN_SEEDS + 1}", "from 1 to"),
    ):
        with pytest.raises(UsageError, match=msg):
            cp.parse_seeds(bad)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faultline", "campaign", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.integration
def test_random_seeds_run_and_are_recorded_in_store_and_summary(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN)
    store = tmp_path / "store"
    out = _cli(str(path), "--store", str(store), "--seeds", "random:2", "--no-score", "--quiet")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("seeds drawn at random: "))
    seeds = [int(s) for s in line.split(": ")[1].split(",")]
    assert len(set(seeds)) == 2 and 1 not in seeds
    state = json.loads((store / "campaign.json").read_text())
    assert state["drawn_seeds"] == seeds and sorted(r["seed"] for r in state["runs"]) == sorted(seeds)
    recorded = sorted(json.loads(p.read_text())["seed"] for p in store.glob("*/2*/test.json"))
    assert recorded == sorted(seeds)
    # a second draw adds its seeds to the store's record, the first ones kept
    out = _cli(str(path), "--store", str(store), "--seeds", "random:1", "--no-score", "--quiet")
    assert out.returncode == 0, out.stderr
    state = json.loads((store / "campaign.json").read_text())
    assert state["drawn_seeds"][:2] == seeds and len(state["drawn_seeds"]) == 3 and len(state["runs"]) == 3


@pytest.mark.integration
def test_bad_seeds_are_one_line_and_exit_254(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN)
    for bad in ("random:0", "random:lots", "1,,x"):
        out = _cli(str(path), "--dry-run", "--seeds", bad)
        assert out.returncode == 254 and len(out.stderr.strip().splitlines()) == 1, (bad, out.stderr)
        assert "--seeds" in out.stderr and "Traceback" not in out.stderr
    out = _cli(str(path), "--dry-run", "--seeds", "random:3")
    assert out.returncode == 0 and out.stdout.count("expect valid") == 3, out.stderr
