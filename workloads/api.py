"""The client protocol and the shape of a workload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from faultline.core import Run

if TYPE_CHECKING:
    from faultline.checkers.api import Checker
    from faultline.gen import Gen

Op = dict[str, Any]


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
