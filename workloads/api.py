"""The client protocol, the shape of a workload, the registry's entry for one, and the capability of a
DB that offers workloads of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from faultline.core import Op, Run

if TYPE_CHECKING:
    from faultline.checkers.api import Checker
    from faultline.gen import Gen


class Client(Protocol):
    """One per worker process. `invoke` returns the completion: type ok, fail or info.

    A timeout or lost connection on a write is `info` (indeterminate), never `fail`.
    """

    def setup(self, test: Run) -> None:
        """Once per run, before any worker opens its client (e.g. create the workload's table)."""
        ...

    def open(self, test: Run, node: str) -> Client: ...

    def invoke(self, test: Run, op: Op) -> Op: ...

    def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class Workload:
    """What a workload gives the runner: a client to open per worker, the main phase's generator, the
    reads after healing (None: none) and the checker of the whole history. Frozen so a built workload
    can be shared by the runner and analysis without one changing what the other sees."""

    client: Client
    generator: Gen | None
    final_generator: Gen | None = None
    checker: Checker


@dataclass(frozen=True)
class Entry:
    """One workload: the name users type, a line for `--help`, what builds it from its options, and the
    DB that offers it (None: a generic workload, run through a DB's client for it)."""

    name: str
    help: str
    factory: Callable[[Mapping[str, Any]], Workload]
    db: str | None = None


@runtime_checkable
class OffersWorkloads(Protocol):
    """A DB with workloads of its own (the store: its catalog under master failover), listed beside the
    generic ones for runs of that DB."""

    def workload_entries(self) -> Sequence[Entry]: ...
