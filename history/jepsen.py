"""Jepsen's EDN histories: a vector or list of op maps, or one map per line (a Jepsen store directory's
history.edn, and Porcupine's kv files, which are EDN too). `files` reads the store directory around one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from faultline.history import edn
from faultline.history.reading import HistoryFormatError, _Collector

_KEYWORD_FIELDS = frozenset({"type", "f", "process", "error"})  # a string there is a keyword in Jepsen's EDN


def to_edn(ops: Iterable[Mapping[str, Any]]) -> str:
    """Jepsen-style EDN (one op map per line inside a vector) for Jepsen's own tools."""
    lines = []
    names: dict[str, str] = {}  # our field name -> EDN's (underscores become dashes)
    keywords: dict[str, edn.Keyword] = {}
    dumps = edn.dumps
    for op in ops:
        m: dict[Any, Any] = {}
        for k, v in op.items():
            if k in _KEYWORD_FIELDS and isinstance(v, str):
                v = keywords.get(v) or keywords.setdefault(v, edn.Keyword(v))
            name = names.get(k)
            if name is None:
                name = names[k] = k.replace("_", "-")
            m[name] = v
        lines.append(dumps(m))
    return "[" + "\n ".join(lines) + "]\n"


def _parse_edn(lines: Iterable[tuple[int, str]], col: _Collector) -> None:
    """Jepsen EDN: a vector or list of op maps, or one map per line, read as a stream."""
    try:
        for line, value in edn.iter_values((text for _, text in lines), spread=True):
            for item in value if isinstance(value, list) else [value]:
                col.add(item, line)
    except edn.EdnError as exc:
        raise HistoryFormatError(col.path, exc.line, f"malformed EDN: {str(exc).split(': ', 1)[1]}") from None
