"""A history with the files beside it: a Jepsen store directory, and the test map next to a history file.

A Jepsen store directory holds `history.edn` (one op map per line) and `test.edn` (the test map); the
test's `:consistency-models`, when present, is what the system under test claims. The test map beside any
history (our `test.json`, else a Jepsen `test.edn`) is what `checkers.inference` reads first.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline import history
from faultline.core import Op
from faultline.history import edn, jsoncodec


@dataclass
class Source:
    """A loaded history and what its files say about checking it."""

    ops: list[Op]
    format: str
    consistency_models: list[str] | None = None
    warnings: list[str] = field(default_factory=list)
    path: str | None = None  # the history file itself (a store directory's history.edn)
    lines: Sequence[int] = ()  # the line each op came from (for error messages)


def _test_map(path: Path) -> tuple[list[str] | None, list[str]]:
    """The consistency models a Jepsen test.edn names, and warnings (an unreadable file is not fatal)."""
    if not path.is_file():
        return None, [f"{path}: no test.edn; checking against the default consistency models"]
    try:
        values = edn.loads_all(path.read_text(encoding="utf-8"))
    except (edn.EdnError, UnicodeDecodeError, OSError) as exc:
        return None, [f"{path}: unreadable ({exc}); checking against the default consistency models"]
    test = values[0] if values and isinstance(values[0], dict) else {}
    models = test.get("consistency-models") or test.get("consistency_models")
    if isinstance(models, str):
        models = [models]
    if isinstance(models, list) and all(isinstance(m, str) for m in models):
        return list(models), []
    return None, []


def from_loaded(loaded: history.LoadedHistory) -> Source:
    """A Source from a history `history.load` already read."""
    return Source(
        ops=loaded.ops,
        format=loaded.format,
        warnings=list(loaded.warnings),
        path=loaded.path,
        lines=loaded.lines,
    )


def load(path: str | os.PathLike[str], fmt: str = "auto", strict: bool = True) -> Source:
    """Reads a history file or a Jepsen store directory; raises history.HistoryFormatError if malformed
    (with `strict`, also if a completion has no invocation: history.load)."""
    p = Path(path)
    models: list[str] | None = None
    notes: list[str] = []
    if p.is_dir():
        hist = p / "history.edn"
        if not hist.is_file():
            raise history.HistoryFormatError(p, None, "a directory must be a Jepsen store with history.edn")
        loaded = history.load(hist, "jepsen-edn" if fmt == "auto" else fmt, strict=strict)
        models, notes = _test_map(p / "test.edn")
    else:
        loaded = history.load(p, fmt, strict=strict)
    return Source(
        ops=loaded.ops,
        format=loaded.format,
        consistency_models=models,
        warnings=[*loaded.warnings, *notes],
        path=loaded.path,
        lines=loaded.lines,
    )


def test_map(history_path: str | Path) -> dict[str, Any] | None:
    """The test map beside a history file (test.json, else test.edn), or None if there is none or it is
    unreadable (the history is still checkable with flags)."""
    folder = Path(history_path).parent
    try:
        js = folder / "test.json"
        if js.is_file():
            data = jsoncodec.loads(js.read_bytes())
            return data if isinstance(data, dict) else None
        te = folder / "test.edn"
        if te.is_file():
            values = edn.loads_all(te.read_text(encoding="utf-8"))
            return values[0] if values and isinstance(values[0], dict) else None
    except (OSError, ValueError, RecursionError):
        return None
    return None
