"""History readers and writers: our JSONL, Jepsen EDN, Porcupine logs, elle-cli JSON.

Every reader returns ops in the project's history format (docs/architecture.md):
`{"index", "time"?, "type", "process", "f", "key"?, "value"}` with `type` in
invoke/ok/fail/info and `process` an int or "nemesis". The reader also says which
*semantics* the source assumes (see docs/checkers.md), because Porcupine's and
Knossos's reference data disagree on what `fail` means, and which model and
initial value the format implies.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from faultline.checkers import edn

FORMATS = ("jsonl", "jepsen-edn", "porcupine-etcd", "porcupine-kv", "elle-json")


class HistoryFormatError(ValueError):
    """A malformed history file; the message names the file and the line."""

    def __init__(self, path: str | os.PathLike[str], line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


@dataclass
class LoadedHistory:
    """A parsed history plus what its source format implies about checking it."""

    ops: list[dict[str, Any]]
    format: str
    semantics: str  # "jepsen" | "porcupine" | "knossos"
    model: str | None = None  # the model the format implies, if any
    init: Any = None  # the model's initial value the format implies
    path: str | None = None
    warnings: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- normalising


def _norm_process(p: Any) -> Any:
    if isinstance(p, str) and p.lstrip("-").isdigit():
        return int(p)
    return p


def _norm_value(v: Any) -> Any:
    """EDN maps come back with hashable keys; keep JSON-compatible shapes."""
    if isinstance(v, dict):
        return {k: _norm_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm_value(x) for x in v]
    return v


def _norm_op(raw: Any, path: str | os.PathLike[str], line: int, index: int) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise HistoryFormatError(path, line, f"expected an operation map, got {type(raw).__name__}")
    op = {str(k): _norm_value(v) for k, v in raw.items()}
    typ = op.get("type")
    if typ not in ("invoke", "ok", "fail", "info"):
        raise HistoryFormatError(path, line, f"operation has type {typ!r}; expected invoke, ok, fail or info")
    if "process" not in op:
        op["process"] = None
    op["process"] = _norm_process(op["process"])
    op.setdefault("f", None)
    op.setdefault("value", None)
    if not isinstance(op.get("index"), int):
        op["index"] = index  # formats without indexes get their position
    return op


# ---------------------------------------------------------------- JSONL (ours)


class JsonlWriter:
    """Streams ops to a JSONL file, one object per line, flushed per line.

    A crash can at worst leave a partial last line, which `read_jsonl` tolerates;
    every complete line already written stays valid.
    """

    def __init__(self, path: str | os.PathLike[str], fsync: bool = False, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] | None = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
        self._fsync = fsync
        self.count = 0

    def write(self, op: dict[str, Any]) -> None:
        if self._fh is None:
            raise ValueError(f"{self.path}: writer is closed")
        # One write call per line, so a concurrent crash never interleaves half-objects.
        self._fh.write(json.dumps(op, separators=(",", ":"), default=_json_default) + "\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())
        self.count += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json_default(v: Any) -> Any:
    if isinstance(v, set | frozenset | tuple):
        return list(v)
    return str(v)


def write_jsonl(ops: Iterable[dict[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Writes a whole history (truncating the file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8") as fh:
        for op in ops:
            fh.write(json.dumps(op, separators=(",", ":"), default=_json_default) + "\n")
    return p


def _parse_jsonl_text(
    text: str, path: str | os.PathLike[str], tolerate_truncated_tail: bool, notes: list[str] | None = None
) -> list[dict[str, Any]]:
    lines = text.split("\n")
    # A file that ends with a newline has an empty last element; a crashed writer leaves no newline.
    last_complete = text.endswith("\n")
    ops: list[dict[str, Any]] = []
    n = len(lines)
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            is_tail = i == n and not last_complete
            if is_tail and tolerate_truncated_tail:
                msg = f"{path}:{i}: ignoring a truncated last line (the run probably crashed while writing)"
                warnings.warn(msg, stacklevel=3)
                if notes is not None:
                    notes.append(msg)
                break
            raise HistoryFormatError(path, i, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        ops.append(_norm_op(raw, path, i, len(ops)))
    return ops


def read_jsonl(path: str | os.PathLike[str], tolerate_truncated_tail: bool = True) -> list[dict[str, Any]]:
    """Reads our history.jsonl; a partial last line (crashed run) is dropped with a warning."""
    text = _read_text(path)
    return _parse_jsonl_text(text, path, tolerate_truncated_tail)


def _read_text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise HistoryFormatError(path, None, "no such file") from None
    except IsADirectoryError:
        raise HistoryFormatError(path, None, "is a directory, not a history file") from None
    except UnicodeDecodeError as exc:
        raise HistoryFormatError(path, None, f"not UTF-8 text ({exc.reason})") from None


# ---------------------------------------------------------------- EDN (Jepsen)


def to_edn(ops: Iterable[dict[str, Any]]) -> str:
    """Jepsen-style EDN (one op map per line inside a vector) for Jepsen's own tools."""
    lines = []
    for op in ops:
        m: dict[Any, Any] = {}
        for k, v in op.items():
            if (
                (k in ("type", "f") and isinstance(v, str))
                or (k == "process" and isinstance(v, str))
                or (k == "error" and isinstance(v, str))
            ):
                v = edn.Keyword(v)
            m[k.replace("_", "-")] = v
        lines.append(edn.dumps(m))
    return "[" + "\n ".join(lines) + "]\n"


def _parse_edn_ops(text: str, path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    try:
        for line, value in edn.iter_values(text):
            items = value if isinstance(value, list) else [value]
            for item in items:
                ops.append(_norm_op(item, path, line, len(ops)))
    except edn.EdnError as exc:
        raise HistoryFormatError(path, exc.line, f"malformed EDN: {str(exc).split(': ', 1)[1]}") from None
    return ops


# ---------------------------------------------------------------- Porcupine etcd logs

_ETCD_LINE = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\S+)\s+:(\w+)\s+:(\w+)\s+(.*?)\s*$")


def _parse_etcd(text: str, path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for i, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        m = _ETCD_LINE.match(line)
        if m is None:
            raise HistoryFormatError(
                path, i, "not a Jepsen etcd log line (INFO jepsen.util - P :type :f value)"
            )
        proc, typ, f, raw = m.groups()
        if typ not in ("invoke", "ok", "fail", "info"):
            raise HistoryFormatError(path, i, f"unknown operation type :{typ}")
        op: dict[str, Any] = {"index": len(ops), "type": typ, "process": _norm_process(proc), "f": f}
        if raw == ":timed-out":
            op["value"] = None
            op["error"] = "timed-out"
        else:
            try:
                vals = edn.loads_all(raw)
            except edn.EdnError as exc:
                raise HistoryFormatError(path, i, f"bad value {raw!r}: {exc}") from None
            if len(vals) != 1:
                raise HistoryFormatError(path, i, f"bad value {raw!r}")
            op["value"] = vals[0]
        ops.append(op)
    return ops


# ---------------------------------------------------------------- elle-cli JSON


def _parse_json_array(text: str, path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryFormatError(path, exc.lineno, f"not valid JSON ({exc.msg})") from None
    if isinstance(data, dict) and "history" in data:
        data = data["history"]
    if not isinstance(data, list):
        raise HistoryFormatError(path, 1, "expected a JSON array of operations")
    # Line numbers: elle-cli writes one op per line, so report the op's line when we can.
    ops = []
    for i, raw in enumerate(data):
        ops.append(_norm_op(raw, path, i + 1, i))
    return ops


# ---------------------------------------------------------------- detection and load

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
            json.loads(first)
            return "jsonl"
        except json.JSONDecodeError:
            pass
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


def load(path: str | os.PathLike[str], fmt: str = "auto") -> LoadedHistory:
    """Reads a history file in any supported format (`fmt="auto"` guesses by content)."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown history format {fmt!r}; choose one of auto, {', '.join(FORMATS)}")
    text = _read_text(path)
    if fmt == "auto":
        fmt = detect_format(text, path)
    notes: list[str] = []
    if fmt == "jsonl":
        ops = _parse_jsonl_text(text, path, True, notes)
    elif fmt in ("jepsen-edn", "porcupine-kv"):
        ops = _parse_edn_ops(text, path)
    elif fmt == "porcupine-etcd":
        ops = _parse_etcd(text, path)
    else:
        ops = _parse_json_array(text, path)
    semantics, model, init = _FORMAT_DEFAULTS[fmt]
    if fmt in ("jepsen-edn", "elle-json") and any(op.get("f") == "txn" for op in ops):
        model, init = "multi-register", 0
    return LoadedHistory(
        ops=ops, format=fmt, semantics=semantics, model=model, init=init, path=str(path), warnings=notes
    )


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Lazily yields ops from a (possibly still growing) JSONL file, skipping a partial tail."""
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                return
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise HistoryFormatError(path, i, f"not valid JSON ({exc.msg})") from None
