"""Workloads by name: `WORKLOADS[name]` is an `Entry` (name, help, factory) and `get(name, opts)` builds
the `Workload`. The same shape as nemesis.registry and checkers.registry, so the CLI lists and validates
all three alike. A workload's module is imported when it is built, not when the names are listed."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from faultline.workloads.api import Workload


@dataclass(frozen=True)
class Entry:
    """One workload: the name users type, a line for `--help`, and what builds it from its options."""

    name: str
    help: str
    factory: Callable[[Mapping[str, Any]], Workload]


def _module(path: str) -> Callable[[Mapping[str, Any]], Workload]:
    """The `workload(opts)` function of module `path`, imported on first call."""

    def build(opts: Mapping[str, Any]) -> Workload:
        return importlib.import_module(path).workload(opts)

    return build


WORKLOADS: dict[str, Entry] = {e.name: e for e in (
    Entry("register", "read/write/cas registers, linearizable per key",
          _module("faultline.workloads.register")),
    Entry("set", "unique adds and reads while faults run (set-full), nothing lost or duplicated",
          _module("faultline.workloads.set")),
    Entry("bank", "transfers that keep the total and every balance non-negative",
          _module("faultline.workloads.bank")),
    Entry("catalog", "create, delete, alter and list tables while the masters fail over",
          _module("faultline.workloads.catalog")),
    Entry("list-append", "transactions appending to and reading lists, checked for isolation anomalies (Elle)",
          lambda opts: _txn("list-append", opts)),
    Entry("rw-register", "transactions writing and reading registers, checked for isolation anomalies (Elle)",
          lambda opts: _txn("rw-register", opts)),
)}


def _txn(kind: str, opts: Mapping[str, Any]) -> Workload:
    from faultline.workloads.txn import workload_for

    return workload_for(kind, opts)


def get(name: str, opts: Mapping[str, Any] | None = None) -> Workload:
    """The workload `name` built from `opts`; an unknown name raises ValueError naming the valid ones."""
    entry = WORKLOADS.get(name)
    if entry is None:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    return entry.factory(dict(opts or {}))
