"""The project's own chaos suite: every run of campaigns/ci.toml as a chaos test (needs --chaos).

Written with the public plugin, as users write theirs: each planned run of the campaign becomes one
test that brings up a real cluster, runs the cell and checks its expectation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_cells import chaos_params

from faultline.controller.campaign import load

CAMPAIGN = Path(__file__).resolve().parent.parent / "campaigns" / "ci.toml"
RUNS = load(CAMPAIGN).runs


@pytest.mark.chaos
@pytest.mark.docker
@pytest.mark.parametrize("planned", chaos_params(RUNS, [r.key for r in RUNS]))
def test_ci_campaign_cell(planned, faultline_run) -> None:  # type: ignore[no-untyped-def]
    opts = {k: v for k, v in planned.opts.items() if k not in ("workload", "nemesis", "inject_bug", "cluster")}
    faultline_run(workload=planned.opts["workload"], nemesis=planned.opts["nemesis"].split(","),
                  bugs=[b for b in planned.opts["inject_bug"].split(",") if b], expect=planned.expect, **opts)
