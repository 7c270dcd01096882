"""The project's own chaos suite: every run of campaigns/ci.toml, and the cells of campaigns/disk.toml it lacks,
as chaos tests (needs --chaos).

Written with the public plugin, as users write theirs: each planned run of the campaign becomes one
test that brings up a real cluster, runs the cell and checks its expectation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_cells import chaos_params

from faultline.controller.campaign import load

CAMPAIGNS = Path(__file__).resolve().parent.parent / "campaigns"
CI_RUNS = load(CAMPAIGNS / "ci.toml").runs
# the disk cells (campaigns/disk.toml: what each DB documents of its durability under lose-unfsynced and
# kill) that ci.toml does not already hold
RUNS = CI_RUNS + [r for r in load(CAMPAIGNS / "disk.toml").runs if r.cell not in {c.cell for c in CI_RUNS}]


@pytest.mark.chaos
@pytest.mark.docker
@pytest.mark.parametrize("planned", chaos_params(RUNS, [r.key for r in RUNS]))
def test_ci_campaign_cell(planned, faultline_run) -> None:  # type: ignore[no-untyped-def]
    opts = {
        k: v for k, v in planned.opts.items() if k not in ("workload", "nemesis", "inject_bug", "cluster")
    }
    faultline_run(
        workload=planned.opts["workload"],
        nemesis=planned.opts["nemesis"].split(","),
        bugs=[b for b in planned.opts["inject_bug"].split(",") if b],
        expect=planned.expect,
        **opts,
    )
