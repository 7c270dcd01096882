"""Workloads by name: `get(name, opts)` builds the dict {client, generator, final_generator, checker}."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

WORKLOADS: dict[str, str] = {
    "register": "faultline.workloads.register",
    "set": "faultline.workloads.set",
    "bank": "faultline.workloads.bank",
    "catalog": "faultline.workloads.catalog",
}


def get(name: str, opts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    return importlib.import_module(WORKLOADS[name]).workload(dict(opts or {}))
