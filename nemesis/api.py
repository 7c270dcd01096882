"""The nemesis protocol: a fault that is set up, invoked by ops and always healed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

Op = dict[str, Any]


class Nemesis(Protocol):
    fs: frozenset[str]  # the op names (`f`) this nemesis handles

    def setup(self, test: Mapping[str, Any]) -> Nemesis: ...

    def invoke(self, test: Mapping[str, Any], op: Op) -> Op: ...

    def heal(self, test: Mapping[str, Any]) -> None: ...


# A nemesis package is a dict: {"nemesis": Nemesis, "generator": ..., "final_generator": ...}
NemesisPackage = dict[str, Any]
