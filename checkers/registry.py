"""Checker names -> factories, for `faultline check --checker` and for workloads built from config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from faultline.checkers.api import Checker


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


def _catalog(**kw: Any) -> Checker:
    from faultline.checkers.catalog import CatalogChecker

    return CatalogChecker(**kw)


def _stats(**kw: Any) -> Checker:
    from faultline.checkers.stats import Stats

    return Stats(**kw)


def _availability(**kw: Any) -> Checker:
    from faultline.checkers.availability import Availability

    return Availability(**kw)


CHECKERS: dict[str, Callable[..., Checker]] = {
    "linearizable": _lin,
    "set": _set,
    "bank": _bank,
    "counter": _counter,
    "unique-ids": _unique,
    "catalog": _catalog,
    "stats": _stats,
    "availability": _availability,
}


def make(name: str, **kwargs: Any) -> Checker:
    """A checker by name; unknown names raise ValueError listing the known ones."""
    try:
        factory = CHECKERS[name]
    except KeyError:
        raise ValueError(f"unknown checker {name!r}; choose one of {', '.join(sorted(CHECKERS))}") from None
    return factory(**kwargs)
