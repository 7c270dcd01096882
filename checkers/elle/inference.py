"""What an inference pass hands to the checker: edges, proven non-cycle anomalies, and an explainer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faultline.checkers.elle.graph import Edges


class Init:
    """The initial (empty or nil) version of every key."""

    def __repr__(self) -> str:
        return "init"


INIT = Init()

Explainer = Callable[[int, int, int], dict[str, Any] | None]


@dataclass
class Inference:
    """Data dependencies and the anomalies found without cycles.

    `anomalies` maps an anomaly name to its cases (JSON-ready dicts). `unknown` lists reasons the
    history cannot be called valid even if nothing is found (e.g. duplicate appends break the mapping
    from versions to writers). `explain(a, b, bit)` justifies one data edge a -> b, or returns None."""

    edges: Edges
    explain: Explainer
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    unknown: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, case: dict[str, Any]) -> None:
        """Records one case of anomaly `name`."""
        self.anomalies.setdefault(name, []).append(case)


def plain(v: Any) -> Any:
    """A version for JSON: the initial version is None."""
    return None if v is INIT else v
