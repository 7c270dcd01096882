"""Which chaos cells may share the machine with others, for `make test`'s paired pass.

A store cell keeps both cores busy (eight node processes and the clients), so it runs alone. A real
database's cell runs one to three daemons written in C or Go and leaves most of a core idle, so three of
them run side by side (`pytest -n 3 -m paired`), which cuts their part of CI's wall time to a third. A cell
whose anomaly depends on a fault landing in a timed window (a failover racing the cut-off primary's
acknowledgements) still runs alone: under a doubled load its window may close before the failover.
"""

from __future__ import annotations

from typing import Any

import pytest

# cells that must find an anomaly through timing; they keep the machine to themselves
TIMING_BOUND = {"redis-set-partition-primary"}


def chaos_params(runs: list[Any], ids: list[str]) -> list[Any]:
    """Each planned run as a pytest parameter, marked `paired` when it may share the machine."""
    return [
        pytest.param(r, id=i, marks=[pytest.mark.paired] if _shares(r) else [])
        for r, i in zip(runs, ids, strict=True)
    ]


def _shares(planned: Any) -> bool:
    return planned.opts.get("db", "store") != "store" and planned.cell not in TIMING_BOUND
