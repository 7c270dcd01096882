"""Which format a history file is in (by its content), and `load`, which reads a file in any of them and says
what the format implies about checking it (semantics, model, initial value)."""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

from faultline.history import jsoncodec
from faultline.history.elle import _parse_json_array
from faultline.history.jepsen import _parse_edn
from faultline.history.jsonl import _parse_jsonl
from faultline.history.pairing import check_pairs, split_independent
from faultline.history.porcupine import _ETCD_LINE, _parse_etcd
from faultline.history.reading import (
    LoadedHistory,
    _ByteLines,
    _Collector,
    _gc_paused,
    _head,
    _lines,
    _may_nest,
    _open,
    _open_bytes,
)

FORMATS = ("jsonl", "jepsen-edn", "porcupine-etcd", "porcupine-kv", "elle-json")

_KV_HINT = re.compile(r":f\s+:(get|put|append)\b")


def detect_format(text: str, path: str | os.PathLike[str] = "") -> str:
    """Guesses the format from content (the file name only breaks ties)."""
    head = text.lstrip()[:4096]
    if not head:
        return "jsonl"
    if head.startswith("INFO") or _ETCD_LINE.match(head.split("\n", 1)[0]):
        return "porcupine-etcd"
    if head.startswith("{"):
        first = head.split("\n", 1)[0].strip()
        try:
            jsoncodec.loads(first)
            return "jsonl"
        except (ValueError, RecursionError):
            # a JSON object cut by the window, or nested too deep to parse here: the reader judges it
            if ("\n" not in head or _may_nest(first)) and first[1:].lstrip().startswith('"'):
                return "jsonl"
    if head.startswith("["):
        stripped = head[1:].lstrip()
        if (stripped.startswith("{") and stripped[1:].lstrip().startswith('"')) or stripped.startswith("]"):
            return "elle-json"
    if str(path).endswith(".jsonl"):
        return "jsonl"
    if _KV_HINT.search(head) and ":key" in head:
        return "porcupine-kv"
    return "jepsen-edn"


_FORMAT_DEFAULTS: dict[str, tuple[str, str | None, Any]] = {
    # format: (semantics, model, init)
    "jsonl": ("jepsen", None, None),
    "jepsen-edn": ("knossos", "cas-register", 0),
    "porcupine-etcd": ("porcupine", "cas-register", None),
    "porcupine-kv": ("porcupine", "kv", ""),
    "elle-json": ("knossos", "cas-register", 0),
}


def load(path: str | os.PathLike[str], fmt: str = "auto", strict: bool = True) -> LoadedHistory:
    """Reads a history file in any supported format (`fmt="auto"` guesses by content), as a stream.

    Jepsen's independent `[k v]` values are split into `key` and `value`. With `strict`, a completion
    without an invocation, a second invocation of a busy process, or a completion whose f or key is not
    its invocation's is a HistoryFormatError naming the line (`check_pairs`)."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown history format {fmt!r}; choose one of auto, {', '.join(FORMATS)}")
    head = _head(path)
    if fmt == "auto":
        fmt = detect_format(head, path)
    col = _Collector(path)
    with _gc_paused():
        if fmt == "jsonl":
            with _open_bytes(path) as bfh:
                _parse_jsonl(_ByteLines(bfh, path), col)
        else:
            with _open(path) as fh:
                if fmt in ("jepsen-edn", "porcupine-kv"):
                    _parse_edn(_lines(fh, path), col)
                elif fmt == "porcupine-etcd":
                    _parse_etcd(_lines(fh, path), col)
                else:
                    _parse_json_array(fh, col)
        for msg in col.notes:
            warnings.warn(msg, stacklevel=2)
        independent = split_independent(col.ops)
        if strict:
            check_pairs(col.ops, col.lines, path)
    semantics, model, init = _FORMAT_DEFAULTS[fmt]
    if fmt in ("jepsen-edn", "elle-json") and any(op.get("f") == "txn" for op in col.ops):
        model, init = "multi-register", 0
    return LoadedHistory(
        ops=col.ops,
        format=fmt,
        semantics=semantics,
        model=model,
        init=init,
        path=str(path),
        warnings=col.notes,
        lines=col.lines,
        independent=independent,
    )
