"""Transactional histories from files: any format `checkers.history` reads, or a Jepsen store directory.

A Jepsen store directory holds `history.edn` (one op map per line) and `test.edn` (the test map); the
test's `:consistency-models`, when present, is what the system under test claims.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultline.checkers import edn, history
from faultline.checkers.elle.txns import detect_kind


@dataclass
class Source:
    """A loaded transactional history and what its files say about checking it."""

    ops: list[dict[str, Any]]
    format: str
    kind: str | None  # "list-append", "rw-register", or None (not an Elle-style history)
    consistency_models: list[str] | None = None
    warnings: list[str] = field(default_factory=list)


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
    """A Source from a history `checkers.history.load` already read."""
    return Source(ops=loaded.ops, format=loaded.format, kind=detect_kind(loaded.ops), warnings=list(loaded.warnings))


def load(path: str | os.PathLike[str], fmt: str = "auto") -> Source:
    """Reads a history file or a Jepsen store directory; raises history.HistoryFormatError if malformed."""
    p = Path(path)
    models: list[str] | None = None
    notes: list[str] = []
    if p.is_dir():
        hist = p / "history.edn"
        if not hist.is_file():
            raise history.HistoryFormatError(p, None, "a directory must be a Jepsen store with history.edn")
        loaded = history.load(hist, "jepsen-edn" if fmt == "auto" else fmt)
        models, notes = _test_map(p / "test.edn")
    else:
        loaded = history.load(p, fmt)
    return Source(ops=loaded.ops, format=loaded.format, kind=detect_kind(loaded.ops), consistency_models=models,
                  warnings=[*loaded.warnings, *notes])


KINDS = {"elle-list-append": "list-append", "elle-rw-register": "rw-register"}


def check_source(path: str, src: Source, checker: str | None = None, consistency_models: list[str] | None = None,
                 cycle_search_timeout: float = 1.0, html_dir: str | None = None) -> dict[str, Any]:
    """The `faultline check` line for one history: verdict, anomalies by kind (cycles without drawings),
    and with `html_dir` a page with each cycle drawn. Raises ValueError for a history it cannot check."""
    from faultline.checkers.elle import checker as elle

    kind = KINDS.get(checker or "") or src.kind
    if kind is None:
        raise ValueError("no Elle-style transactions (f txn, micro-ops [append|r|w k v]) in the history")
    models = consistency_models or src.consistency_models
    res = elle.check(src.ops, kind, models, cycle_search_timeout)
    evidence = {k: v for k, v in res.items() if k not in ("valid", "elapsed_s")}
    evidence["anomalies"] = {name: [{k: v for k, v in case.items() if k != "svg"} for case in cases]
                             for name, cases in res["anomalies"].items()}
    out: dict[str, Any] = {"file": path, "valid": res["valid"], "model": res["checker"], "format": src.format,
                           "ops": len(src.ops), "elapsed_s": res["elapsed_s"], "evidence": evidence}
    if src.warnings:
        out["warnings"] = src.warnings
    if html_dir and res["valid"] is not True:
        from faultline.checkers.elle.report import write

        name = Path(path).name or "history"
        out["counterexample"] = str(write(res, Path(html_dir) / f"{name}.html", f"{res['checker']}: {path}"))
    return out
