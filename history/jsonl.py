"""Our JSONL history: one op object per line, written by the recorder as the run goes (`JsonlWriter`) and
read as a stream, with the compiled loop of history/_jsonl.c for the usual line when it is built."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, cast

from faultline.core import Op
from faultline.core.native import extension
from faultline.history import jsoncodec
from faultline.history.reading import (
    _TYPES,
    MAX_DEPTH,
    HistoryFormatError,
    _ByteLines,
    _Collector,
    _gc_paused,
    _norm_op,
    _open_bytes,
    _too_deep,
    _utf8,
)

JSONL_ABI = 1  # the calling convention of _jsonl.c this module speaks
_jsonl = extension("faultline.history._jsonl", JSONL_ABI)  # None: the Python loop reads every line


class JsonlWriter:
    """Streams ops to a JSONL file, one object per line, flushed per line.

    A crash can at worst leave a partial last line, or a tail of NUL bytes where the file system had
    grown the file but not yet written it, which `read_jsonl` tolerates; every complete line already
    written stays valid.
    """

    def __init__(self, path: str | os.PathLike[str], fsync: bool = False, append: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] | None = open(self.path, "ab" if append else "wb")  # noqa: SIM115
        self._fsync = fsync
        self.count = 0

    def write(self, op: Mapping[str, Any]) -> None:
        if self._fh is None:
            raise ValueError(f"{self.path}: writer is closed")
        # One write call per line, so a concurrent crash never interleaves half-objects.
        self._fh.write(jsoncodec.dumps(op) + b"\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())
        self.count += 1

    def sync(self) -> None:
        """Flushes and fsyncs what was written so far, so a host crash cannot lose it."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_jsonl(ops: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Writes a whole history (truncating the file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    dumps = jsoncodec.dumps
    with open(p, "wb") as fh:
        batch: list[bytes] = []
        for op in ops:
            batch.append(dumps(op))
            if len(batch) >= 4096:
                fh.write(b"\n".join(batch) + b"\n")
                batch.clear()
        if batch:
            fh.write(b"\n".join(batch) + b"\n")
    return p


_BLANK_LINE = object()  # what `_json_line` says of a blank line


def _json_line(raw: bytes, n: int, col: _Collector) -> Any:
    """One line that msgspec refused, as json reads it (NaN, Infinity, ...), or its error; _BLANK_LINE for a
    blank line."""
    text = _utf8(raw, col.path, n)
    if not text.strip():
        return _BLANK_LINE
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryFormatError(col.path, n, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise HistoryFormatError(col.path, n, f"a value nested deeper than {MAX_DEPTH} levels") from None


def _parse_jsonl(src: _ByteLines, col: _Collector, tolerate_truncated_tail: bool = True) -> None:
    """Our JSONL, a chunk of lines at a time. Only a cut last line (no newline, the start of an object,
    after valid lines) and NUL bytes that pad the end of the file after valid lines are dropped, with one
    warning: any other unreadable line is an error.

    The compiled `take` (history/_jsonl.c) reads the usual lines of a block, equal numbers and names in
    their values shared (`seen`: half the memory of a list-append history); each line it leaves (an op to
    normalise, an error...) goes through the loop here, which reads them all when it is not built."""
    decode, fast_errors, types, intern = jsoncodec.decode_fast, jsoncodec.FAST_ERRORS, _TYPES, sys.intern
    path, ops, lines, norm = col.path, col.ops, col.lines, _norm_op
    take = _jsonl.take if _jsonl is not None else None
    seen: dict[Any, Any] = {}
    for block in src.blocks():
        n = src.line
        i, end = 0, len(block)
        while i < end:
            if take is not None:
                k = take(block, i, decode, types, ops, MAX_DEPTH, seen)
                lines.extend(range(n + 1, n + k + 1))
                n, i = n + k, i + k
                if i == end:
                    break
            raw = block[i]
            i += 1
            n += 1
            try:
                op = decode(raw)
            except fast_errors:
                op = _json_line(raw, n, col)
                if op is _BLANK_LINE:
                    continue
            # a value nested deeper than MAX_DEPTH has more brackets, and twice as many characters
            if len(raw) > 2 * MAX_DEPTH and raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _too_deep(op):
                raise HistoryFormatError(path, n, f"a value nested deeper than {MAX_DEPTH} levels")
            lines.append(n)
            if type(op) is dict:  # the usual op, normalised here (`_norm_op` does the rest)
                t, f = op.get("type"), op.get("f")
                if (
                    type(t) is str
                    and type(f) is str
                    and type(op.get("process")) is int
                    and "value" in op
                    and type(op.get("index")) is int
                    and t in types
                ):
                    op["type"], op["f"] = types[t], intern(f)
                    ops.append(cast(Op, op))  # checked above: an op of the history format
                    continue
            ops.append(norm(op, path, n, len(ops), True))
    _jsonl_end(src, col, tolerate_truncated_tail)


def _jsonl_end(src: _ByteLines, col: _Collector, tolerate: bool) -> None:
    """The last line when it has no newline, and NUL bytes after it: what a crash leaves (class docstring
    of JsonlWriter) is dropped with a warning when valid lines came before; anything else is an error."""
    n, last, nul = src.line + 1, src.last, src.nul
    if nul and not tolerate:
        raise HistoryFormatError(col.path, n, "binary data (NUL bytes), not a history")
    cut = False
    if last.strip():
        try:
            op = jsoncodec.decode_fast(last)
        except jsoncodec.FAST_ERRORS:
            cut = tolerate and bool(col.ops) and _utf8(last, col.path, n).lstrip().startswith("{")
            op = None if cut else _json_line(last, n, col)
        if not cut and op is not _BLANK_LINE:
            col.add(op, n, last.count(b"[") + last.count(b"{") > MAX_DEPTH)
    crash = "the run probably crashed while writing"
    if nul:
        if not col.ops:
            raise HistoryFormatError(col.path, n, "binary data (NUL bytes), not a history")
        what = "a truncated last line and the" if cut else "the"
        col.warn(f"{col.path}:{n}: ignoring {what} {nul} NUL bytes that end the file ({crash})")
    elif cut:
        col.warn(f"{col.path}:{n}: ignoring a truncated last line ({crash})")


def read_jsonl(path: str | os.PathLike[str], tolerate_truncated_tail: bool = True) -> list[Op]:
    """Reads our history.jsonl as a stream; a partial last line or a NUL-padded end (crashed run) is dropped
    with a warning."""
    col = _Collector(path)
    with _open_bytes(path) as fh, _gc_paused():
        _parse_jsonl(_ByteLines(fh, path), col, tolerate_truncated_tail)
    for msg in col.notes:
        warnings.warn(msg, stacklevel=2)
    return col.ops


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[Op]:
    """Lazily yields ops from a (possibly still growing) JSONL file, skipping a partial tail."""
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                return
            if line.strip():
                try:
                    yield jsoncodec.loads(line)
                except json.JSONDecodeError as exc:
                    raise HistoryFormatError(path, i, f"not valid JSON ({exc.msg})") from None
