"""Checkers by name: `CHECKERS[name]` is an `Entry` (name, help, factory) and `get(name, **kwargs)` builds
the checker, for `faultline check --checker` and for workloads, which name their checker. The same shape
as workloads.registry and nemesis.registry. Each factory imports its checker's module when called."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultline.checkers.api import Checker


@dataclass(frozen=True)
class Entry:
    """One checker: the name users type, a line for `--help`, and what builds it from keyword options."""

    name: str
    help: str
    factory: Callable[..., Checker]


def _lin(**kw: Any) -> Checker:
    from faultline.checkers.linearizability import Linearizable

    return Linearizable(**kw)


def _set(**kw: Any) -> Checker:
    from faultline.checkers.set import SetChecker

    return SetChecker(**kw)


def _bank(**kw: Any) -> Checker:
    from faultline.checkers.bank import BankChecker

    return BankChecker(**kw)


def _counter(**kw: Any) -> Checker:
    from faultline.checkers.counter import CounterChecker

    return CounterChecker(**kw)


def _unique(**kw: Any) -> Checker:
    from faultline.checkers.unique_ids import UniqueIds

    return UniqueIds(**kw)


def _queue(**kw: Any) -> Checker:
    from faultline.checkers.queue import TotalQueue

    return TotalQueue(**kw)


def _catalog(**kw: Any) -> Checker:
    from faultline.checkers.catalog import CatalogChecker

    return CatalogChecker(**kw)


def _stats(**kw: Any) -> Checker:
    from faultline.checkers.stats import Stats

    return Stats(**kw)


def _availability(**kw: Any) -> Checker:
    from faultline.checkers.availability import Availability

    return Availability(**kw)


def _long_fork(**kw: Any) -> Checker:
    from faultline.checkers.long_fork import LongForkChecker

    return LongForkChecker(**kw)


def _elle_append(**kw: Any) -> Checker:
    from faultline.checkers.elle.checker import ElleListAppend

    return ElleListAppend(**kw)


def _elle_register(**kw: Any) -> Checker:
    from faultline.checkers.elle.checker import ElleRwRegister

    return ElleRwRegister(**kw)


CHECKERS: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry("linearizable", "linearizability against a sequential model", _lin),
        Entry(
            "set", "set-full: acknowledged adds never lost from later reads, none unexpected or doubled", _set
        ),
        Entry("bank", "every read sees the same total and no negative balance", _bank),
        Entry("counter", "each read between the adds that must and may have happened", _counter),
        Entry("unique-ids", "every acknowledged generate returned a distinct id", _unique),
        Entry(
            "total-queue",
            "every acknowledged enqueue dequeued once, nothing dequeued that was never enqueued",
            _queue,
        ),
        Entry(
            "catalog",
            "created tables visible once, deleted ones gone, schema versions never regress",
            _catalog,
        ),
        Entry("stats", "completions by operation and type, invalid when nothing succeeded", _stats),
        Entry("availability", "service during the run and recovery after each heal", _availability),
        Entry("long-fork", "reads of write-once keys see the writes in one order (no long fork)", _long_fork),
        Entry(
            "elle-list-append",
            "transactional anomalies (G0..G2, realtime) of list-append transactions, Elle-style",
            _elle_append,
        ),
        Entry(
            "elle-rw-register",
            "transactional anomalies of read-write register transactions, Elle-style",
            _elle_register,
        ),
    )
}


def get(name: str, **kwargs: Any) -> Checker:
    """The checker `name` built with `kwargs`; an unknown name raises ValueError naming the valid ones."""
    entry = CHECKERS.get(name)
    if entry is None:
        raise ValueError(f"unknown checker {name!r}; valid: {', '.join(CHECKERS)}")
    return entry.factory(**kwargs)
