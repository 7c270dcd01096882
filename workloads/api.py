"""The client protocol and the shape of a workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

Op = dict[str, Any]


class Client(Protocol):
    """One per worker process. `invoke` returns the completion: type ok, fail or info.

    A timeout or lost connection on a write is `info` (indeterminate), never `fail`.
    """

    def open(self, test: Mapping[str, Any], node: str) -> Client: ...

    def invoke(self, test: Mapping[str, Any], op: Op) -> Op: ...

    def close(self) -> None: ...


# A workload is a dict: {"client": Client, "generator": ..., "final_generator": ..., "checker": Checker}
Workload = dict[str, Any]
