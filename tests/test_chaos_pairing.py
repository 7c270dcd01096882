"""`make test` runs the `paired` chaos cells three at a time: never a store cell (it keeps both cores busy),
never a cell whose anomaly needs a timed window, and the names kept alone must still exist."""

from __future__ import annotations

from pathlib import Path

from chaos_cells import TIMING_BOUND, chaos_params

from faultline.controller.campaign import load

CAMPAIGNS = Path(__file__).resolve().parent.parent / "campaigns"


def _runs() -> list:  # type: ignore[type-arg]
    return [r for name in ("ci.toml", "real.toml") for r in load(CAMPAIGNS / name).runs]


def test_only_real_database_cells_share_the_machine() -> None:
    runs = _runs()
    params = chaos_params(runs, [r.key for r in runs])
    paired = {p.values[0].cell for p in params if any(m.name == "paired" for m in p.marks)}
    dbs = {r.cell: r.opts.get("db", "store") for r in runs}
    assert paired and all(dbs[c] != "store" for c in paired)
    assert not paired & TIMING_BOUND
    assert any(db == "store" for db in dbs.values())  # the store's cells exist, and run alone


def test_every_cell_kept_alone_for_its_timing_exists() -> None:
    assert {r.cell for r in _runs()} >= TIMING_BOUND
