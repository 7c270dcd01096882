"""The campaign file the campaign tests share: two register cells on the in-memory fake cluster, one that
must stay valid and one with a bug that must be caught."""

from __future__ import annotations

CELLS = """
[[cell]]
name = "good"
workload = "register"
nemesis = ["partition"]
expect = "valid"

[[cell]]
name = "stale"
workload = "register"
nemesis = ["partition"]
bugs = ["stale-leader-reads"]
expect = "invalid"
"""


def fake_campaign(name: str, seeds: list[int], time_limit: float, concurrency: int) -> str:
    """The TOML of campaign `name`: the good and the stale cell, each run once per seed."""
    return f"""
[campaign]
name = "{name}"
cluster = "fake"
seeds = {seeds}
time_limit = {time_limit}
concurrency = {concurrency}
nemesis_interval = 0.3
quiet_period = 0.1
{CELLS}"""
