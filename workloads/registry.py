"""Workloads by name: `WORKLOADS[name]` is an `Entry` (name, help, factory) and `get(name, opts)` builds
the `Workload`. The same shape as nemesis.registry and checkers.registry, so the CLI lists and validates
all three alike. A workload's module is imported when it is built, not when the names are listed.

`WORKLOADS` holds the generic workloads; a DB may offer workloads of its own (workloads.api.OffersWorkloads:
the store's catalog workload), which `entries_for(db)` adds for runs of that DB."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from faultline.db.api import DB, Offers
from faultline.workloads.api import Entry, OffersWorkloads, Workload


def _module(path: str) -> Callable[[Mapping[str, Any]], Workload]:
    """The `workload(opts)` function of module `path`, imported on first call."""

    def build(opts: Mapping[str, Any]) -> Workload:
        return importlib.import_module(path).workload(opts)

    return build


WORKLOADS: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(
            "register",
            "read/write/cas registers, linearizable per key",
            _module("faultline.workloads.register"),
        ),
        Entry(
            "set",
            "unique adds and reads while faults run (set-full), nothing lost or duplicated",
            _module("faultline.workloads.set"),
        ),
        Entry(
            "bank",
            "transfers that keep the total and every balance non-negative",
            _module("faultline.workloads.bank"),
        ),
        Entry(
            "queue",
            "enqueues and dequeues, then a drain: nothing acknowledged lost, nothing dequeued twice "
            "(total-queue)",
            _module("faultline.workloads.queue"),
        ),
        Entry(
            "lock",
            "acquire, hold and release of named locks, checked against the mutex model",
            _module("faultline.workloads.lock"),
        ),
        Entry(
            "counter",
            "increments and reads of one counter: every read between what must and may have been added",
            _module("faultline.workloads.counter"),
        ),
        Entry(
            "unique-ids",
            "generate ids from the DB: no id handed out twice",
            _module("faultline.workloads.unique_ids"),
        ),
        Entry(
            "long-fork",
            "write-once keys and reads of key groups: no two reads see writes in opposite orders",
            _module("faultline.workloads.long_fork"),
        ),
        Entry(
            "list-append",
            "transactions appending to and reading lists, checked for isolation anomalies (Elle)",
            lambda opts: _txn("list-append", opts),
        ),
        Entry(
            "rw-register",
            "transactions writing and reading registers, checked for isolation anomalies (Elle)",
            lambda opts: _txn("rw-register", opts),
        ),
    )
}


def _txn(kind: str, opts: Mapping[str, Any]) -> Workload:
    from faultline.workloads.txn import workload_for

    return workload_for(kind, opts)


# the generic workloads beside each DB's own (OffersWorkloads)
_OFFERS = Offers(WORKLOADS, lambda db: db.workload_entries() if isinstance(db, OffersWorkloads) else ())
offered = _OFFERS.offered
entries_for = _OFFERS.entries_for
all_entries = _OFFERS.all_entries


def supported(db: DB) -> list[str]:
    """The workloads a run of `db` can run: the generic ones it has clients for, and its own."""
    return [n for n in WORKLOADS if n in getattr(db, "workloads", ())] + list(offered(db))


# the workloads every DB offers, by name, for a hint that a workload exists but belongs to another DB
Elsewhere = Callable[[], Mapping[str, Entry]]


def refusal(db: DB, name: str, elsewhere: Elsewhere | None = None) -> str | None:
    """Why a run of `db` cannot run workload `name` (None: it can); `elsewhere` lists every DB's workloads,
    to say which DB offers one that this DB lacks."""
    if name in offered(db) or (name in WORKLOADS and name in getattr(db, "workloads", ())):
        return None
    other = (elsewhere() if elsewhere is not None else WORKLOADS).get(name)
    if other is None:
        return f"unknown workload {name!r}"
    if other.db:
        return f"{name} is a workload of the {other.db} DB ({other.help})"
    return f"the {db.name} DB has no client for workload {name!r}"


def validate(name: str, db: DB, elsewhere: Elsewhere | None = None) -> str:
    """Returns `name`, or raises ValueError saying why `db` cannot run it and what it can run."""
    why = refusal(db, name, elsewhere)
    if why:
        choices = "valid:" if why.startswith("unknown") else f"the {db.name} DB runs"
        raise ValueError(f"{why}; {choices} {', '.join(supported(db))}")
    return name


def get(name: str, db: DB, opts: Mapping[str, Any] | None = None) -> Workload:
    """The workload `name` built from `opts`, for a run of `db`; a name it cannot run
    raises ValueError naming the valid ones. The DB's `workload_opts` for the workload, if it declares any
    (what its semantics promise: NATS's queue delivers at least once), come first; `opts` override them."""
    entries = entries_for(db)
    entry = entries.get(name)
    if entry is None:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(entries)}")
    defaults = getattr(db, "workload_opts", {}).get(name, {})
    return entry.factory({**defaults, **dict(opts or {})})
