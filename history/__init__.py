"""History readers and writers: our JSONL, Jepsen EDN, Porcupine logs, elle-cli JSON.

Every reader returns ops in the project's history format (docs/architecture.md):
`{"index", "time"?, "type", "process", "f", "key"?, "value"}` with `type` in
invoke/ok/fail/info and `process` an int or "nemesis". The reader also says which
*semantics* the source assumes (see docs/checkers.md), because Porcupine's and
Knossos's reference data disagree on what `fail` means, and which model and
initial value the format implies.

A leaf package: it imports nothing else of Faultline but core's `Op`, the type of what it reads, so the
recorder, the checkers' callers, the pages and the results all read and write histories the same way. `edn`
is the EDN codec; `jsoncodec` the JSON one (msgspec, with json's meaning); `files` reads a Jepsen store
directory and the test map beside a history.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
import warnings
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from faultline.core import Op
from faultline.core.native import extension
from faultline.history import edn, jsoncodec

JSONL_ABI = 1  # the calling convention of _jsonl.c this module speaks
_jsonl = extension("faultline.history._jsonl", JSONL_ABI)  # None: the Python loop reads every line

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

    ops: list[Op]
    format: str
    semantics: str  # "jepsen" | "porcupine" | "knossos"
    model: str | None = None  # the model the format implies, if any
    init: Any = None  # the model's initial value the format implies
    path: str | None = None
    warnings: list[str] = field(default_factory=list)
    lines: Sequence[int] = ()  # the line each op came from (for error messages)
    independent: bool = False  # Jepsen `[k v]` values were split into key and value


# ---------------------------------------------------------------- normalising


def _norm_process(p: Any) -> Any:
    if isinstance(p, str) and p.lstrip("-").isdigit():
        return int(p)
    return p


_TYPES = {t: sys.intern(t) for t in ("invoke", "ok", "fail", "info")}


def _norm_op(raw: Any, path: str | os.PathLike[str], line: int, index: int, str_keys: bool = False) -> Op:
    """The op in the history format, normalised in place: `raw` is a map its reader just made. Its keys are
    shared strings already (the JSON decoder's and the EDN reader's caches), which a long history repeats
    millions of times; another key (an EDN number) becomes its text. `str_keys`: the reader's maps have
    only string keys (JSON's)."""
    if type(raw) is not dict:
        raise HistoryFormatError(path, line, f"expected an operation map, got {type(raw).__name__}")
    op = raw
    if not str_keys:
        for k in raw:
            if type(k) is not str:
                op = {k if isinstance(k, str) else str(k): v for k, v in raw.items()}
                break
    typ = op.get("type")
    t = _TYPES.get(typ) if type(typ) is str else None
    if t is None:
        raise HistoryFormatError(path, line, f"operation has type {typ!r}; expected invoke, ok, fail or info")
    op["type"] = t
    p = op.get("process")
    if type(p) is not int:
        op["process"] = _norm_process(p)
    f = op.setdefault("f", None)
    if type(f) is str:
        op["f"] = sys.intern(f)
    if "value" not in op:
        op["value"] = None
    if not isinstance(op.get("index"), int):
        op["index"] = index  # formats without indexes get their position
    return cast(Op, op)  # checked above: an op of the history format (keys of its own source may remain)


# ---------------------------------------------------------------- JSONL (ours)


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


MAX_LINE = 16 * 2**20  # characters in one line (one op): longer is not a history
MAX_DEPTH = 100  # nesting of one op: deeper is not a history (and would exhaust the recursion limit)
_CHUNK = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8's continuation bytes: the rest are one per character


@contextmanager
def _gc_paused(keep_frozen: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off while a history is parsed: the parsed ops hold no cycles, and each
    collection would walk every op made so far (most of the time reading took, before). At the end the new
    objects go straight to the oldest generation (`gc.freeze()` then `gc.unfreeze()`: no walk), else the
    next young collection would walk them all, and the next middle one again. With `keep_frozen` they
    stay frozen (`frozen_reads`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if not keep_frozen:
            gc.unfreeze()
        if was:
            gc.enable()


def frozen_reads() -> AbstractContextManager[None]:
    """Around the reads of a process that keeps what it reads to its end (`faultline check`): no collection
    while reading, then `gc.freeze()`, so that no later collection walks the ops again (a full one walks
    every op: seconds for a million). Not for a process that reads and drops histories for long: frozen
    objects are still freed by reference counting, but a cycle among them would never be."""
    return _gc_paused(keep_frozen=True)


def _os_error(path: str | os.PathLike[str], exc: OSError) -> HistoryFormatError:
    if isinstance(exc, FileNotFoundError):
        return HistoryFormatError(path, None, "no such file")
    if isinstance(exc, IsADirectoryError):
        return HistoryFormatError(path, None, "is a directory, not a history file")
    return HistoryFormatError(path, None, f"cannot read: {exc.strerror or exc}")


def _open(path: str | os.PathLike[str]) -> IO[str]:
    try:
        return open(path, encoding="utf-8")  # the caller closes it
    except OSError as exc:
        raise _os_error(path, exc) from None


def _open_bytes(path: str | os.PathLike[str]) -> IO[bytes]:
    try:
        return open(path, "rb")  # the caller closes it
    except OSError as exc:
        raise _os_error(path, exc) from None


def _read(fh: IO[str], path: str | os.PathLike[str], n: int, line: int | None, limit: int = -1) -> str:
    """`fh.read(n)` or `fh.readline(limit)` (n < 0), with decoding, OS errors and NUL bytes as format errors."""
    try:
        text = fh.readline(limit) if n < 0 else fh.read(n)
    except UnicodeDecodeError as exc:
        raise HistoryFormatError(path, line, f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise _os_error(path, exc) from None
    if "\x00" in text:
        raise HistoryFormatError(path, line, "binary data (NUL bytes), not a history")
    return text


def _utf8(raw: bytes, path: str | os.PathLike[str], line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HistoryFormatError(path, line, f"not UTF-8 text ({exc.reason})") from None


def _lines(fh: IO[str], path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) one at a time; a line longer than MAX_LINE is an error, not a read."""
    n = 0
    while True:
        line = _read(fh, path, -1, n + 1, MAX_LINE)
        if not line:
            return
        n += 1
        if len(line) >= MAX_LINE and not line.endswith("\n"):
            raise HistoryFormatError(
                path, n, f"a line longer than {MAX_LINE // 2**20} Mi characters; not a history"
            )
        yield n, line


class _ByteLines:
    """The lines of a file as bytes, a chunk of complete lines at a time, split as the text readers split
    them (universal newlines: \\r\\n and a lone \\r end a line too), without their newlines.

    At the end, `last` is the last line if no newline ends it, and `nul` the count of NUL bytes that end
    the file after it (what a crash in the middle of a write leaves; the caller judges both). A NUL byte
    anywhere else, or a line longer than MAX_LINE characters, is an error on its line, raised after the
    lines before it were handed out (so the first error in the file is the one reported)."""

    def __init__(self, fh: IO[bytes], path: str | os.PathLike[str]) -> None:
        self.fh, self.path = fh, path
        self.line = 0  # lines handed out so far
        self.last = b""
        self.nul = 0

    def _read(self) -> bytes:
        try:
            return self.fh.read(_CHUNK)
        except OSError as exc:
            raise _os_error(self.path, exc) from None

    def _nul_tail(self, chunk: bytes) -> bool:
        """Whether `chunk`, which starts with a NUL, and the rest of the file are all NUL bytes (counted)."""
        while chunk:
            if chunk.count(0) != len(chunk):
                return False
            self.nul += len(chunk)
            chunk = self._read()
        return True

    def _check_length(self, line: bytes, n: int) -> None:
        if len(line) >= MAX_LINE and len(line.translate(None, _CONTINUATION)) >= MAX_LINE:
            _utf8(line, self.path, n)  # text that is not UTF-8 is the first error, as in the text readers
            raise HistoryFormatError(
                self.path, n, f"a line longer than {MAX_LINE // 2**20} Mi characters; not a history"
            )

    def blocks(self) -> Iterator[list[bytes]]:
        rest, cr, bad_nul = b"", b"", False
        while True:
            chunk = self._read()
            end = not chunk
            nul = chunk.find(0)
            if nul >= 0:
                bad_nul = not self._nul_tail(chunk[nul:])
                chunk, end = chunk[:nul], True
            chunk = cr + chunk
            cr = b""
            if b"\r" in chunk:
                if chunk.endswith(b"\r") and not end:
                    chunk, cr = chunk[:-1], b"\r"  # a \r\n may straddle two chunks
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if lines:
                self._check_length(lines[0], self.line + 1)
                yield lines
                self.line += len(lines)
            self._check_length(rest, self.line + 1)
            if end:
                break
        if bad_nul:
            raise HistoryFormatError(self.path, self.line + 1, "binary data (NUL bytes), not a history")
        self.last = rest


def _head(path: str | os.PathLike[str]) -> str:
    """The first characters of the file, enough to tell its format (up to a NUL byte)."""
    with _open_bytes(path) as fh:
        try:
            raw = fh.read(4096)
        except OSError as exc:
            raise _os_error(path, exc) from None
    nul = raw.find(0)
    # NUL bytes and text that is not UTF-8 are the reader's to judge, with their line
    return (raw if nul < 0 else raw[:nul]).decode("utf-8", "ignore")


def _may_nest(text: str) -> bool:
    """Whether JSON `text` has brackets enough to nest deeper than MAX_DEPTH (a cheap test before the walk)."""
    return text.count("[") + text.count("{") > MAX_DEPTH


def _too_deep(v: Any) -> bool:
    """True if `v` nests lists or maps deeper than MAX_DEPTH (iterative: no recursion limit)."""
    stack = [(v, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, dict):
            x = list(x.values())
        if isinstance(x, list | tuple):
            if d > MAX_DEPTH:
                return True
            stack.extend((y, d + 1) for y in x if isinstance(y, list | tuple | dict))
    return False


class _Collector:
    """Normalised ops and the line each came from, filled while the file streams by."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.ops: list[Op] = []
        self.lines = array("l")
        self.notes: list[str] = []

    def add(self, raw: Any, line: int, may_nest: bool = False) -> None:
        """`may_nest`: the op's parser does not bound nesting itself (EDN's does) and its text has more
        brackets than MAX_DEPTH (`_may_nest`), so it is walked."""
        if may_nest and _too_deep(raw):
            raise HistoryFormatError(self.path, line, f"a value nested deeper than {MAX_DEPTH} levels")
        self.ops.append(_norm_op(raw, self.path, line, len(self.ops)))
        self.lines.append(line)

    def warn(self, msg: str) -> None:
        self.notes.append(msg)


# ---------------------------------------------------------------- EDN (Jepsen)


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


# ---------------------------------------------------------------- Porcupine etcd logs

_ETCD_LINE = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\S+)\s+:(\w+)\s+:(\w+)\s+(.*?)\s*$")


def _parse_etcd(lines: Iterable[tuple[int, str]], col: _Collector) -> None:
    path = col.path
    for i, line in lines:
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
        op: dict[str, Any] = {"index": len(col.ops), "type": typ, "process": _norm_process(proc), "f": f}
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
        col.add(op, i)


# ---------------------------------------------------------------- elle-cli JSON


class _Stream:
    """A window on a text file for incremental JSON decoding, counting lines as it moves on."""

    def __init__(self, fh: IO[str], path: str | os.PathLike[str]) -> None:
        self.fh, self.path = fh, path
        self.text, self.pos, self.line, self.eof = "", 0, 1, False

    def fill(self) -> bool:
        """Reads the next chunk; False at the end of the file or when one op would outgrow MAX_LINE."""
        if self.eof or len(self.text) - self.pos > MAX_LINE:
            return False
        chunk = _read(self.fh, self.path, _CHUNK, self.line)
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        self.eof = not chunk
        return bool(chunk)

    def advance(self, to: int) -> None:
        self.line += self.text.count("\n", self.pos, to)
        self.pos = to

    def peek(self) -> str | None:
        """The next non-blank character (not consumed), or None at the end."""
        while True:
            m = _BLANK.match(self.text, self.pos)
            assert m is not None  # `\s*` matches anywhere, if only the empty string
            self.advance(m.end())
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.fill():
                return None

    def decode(self) -> tuple[Any, int, str]:
        """The JSON value at the current position, its line and its text, reading on while it is incomplete."""
        fast = self._decode_line()
        if fast is not None:
            return fast
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.fill():
                    continue
                line = self.line + self.text.count("\n", self.pos, exc.pos)
                raise HistoryFormatError(self.path, line, f"not valid JSON ({exc.msg})") from None
            except RecursionError:
                raise HistoryFormatError(
                    self.path, self.line, f"a value nested deeper than {MAX_DEPTH} levels"
                ) from None
            line, start = self.line, self.pos
            self.advance(end)
            return value, line, self.text[start:end]

    def _decode_line(self) -> tuple[Any, int, str] | None:
        """The usual case, one op on the rest of its line before a ',' or ']': decoded by msgspec, which
        decodes only a whole value (so that is the value json would find there). None otherwise."""
        end = self.text.find("\n", self.pos)
        if end < 0:
            return None
        stop = len(self.text[self.pos : end].rstrip()) + self.pos
        if stop > self.pos and self.text[stop - 1] in ",]":
            stop -= 1
        try:
            value = jsoncodec.decode_fast(self.text[self.pos : stop])
        except jsoncodec.FAST_ERRORS:
            return None
        line, start = self.line, self.pos
        self.pos = stop  # no newline before it
        return value, line, self.text[start:stop]


_BLANK = re.compile(r"\s*")
_DECODER = json.JSONDecoder()


def _parse_json_array(fh: IO[str], col: _Collector) -> None:
    """elle-cli JSON: an array of op objects (or `{"history": [...]}`), decoded one op at a time."""
    s = _Stream(fh, col.path)
    if s.peek() == "{":
        doc, line, _ = s.decode()
        if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
            raise HistoryFormatError(col.path, line, "expected a JSON array of operations")
        for raw in doc["history"]:
            col.add(raw, line, True)
        return
    if s.peek() != "[":
        raise HistoryFormatError(col.path, s.line, "expected a JSON array of operations")
    s.advance(s.pos + 1)
    first = True
    while True:
        c = s.peek()
        if c is None:
            raise HistoryFormatError(col.path, s.line, "the JSON array is never closed")
        if c == "]":
            s.advance(s.pos + 1)
            break
        if not first:
            if c != ",":
                raise HistoryFormatError(col.path, s.line, "expected ',' or ']' between operations")
            s.advance(s.pos + 1)
            s.peek()
        raw, line, text = s.decode()
        col.add(raw, line, _may_nest(text))
        first = False
    if s.peek() is not None:
        raise HistoryFormatError(col.path, s.line, "text after the end of the JSON array")


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


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def check_pairs(ops: Sequence[Mapping[str, Any]], lines: Sequence[int], path: str | os.PathLike[str]) -> None:
    """Every client completion follows an invocation of its process with the same f and key, and a process
    invokes only when idle: anything else is a history no checker can judge (HistoryFormatError). The
    compiled loop (history/_jsonl.c) answers for a history that pairs well; the loop here finds and names
    any problem (and does it all when that is not built)."""
    if _jsonl is not None and type(ops) is list and _jsonl.pairs(ops) is not None:
        return
    busy: dict[Any, int] = {}  # process -> position of its open invocation
    busy_get, busy_pop = busy.get, busy.pop
    for i, op in enumerate(ops):
        proc = op.get("process")
        if type(proc) is not int:
            if proc == "nemesis":
                continue
            if not _hashable(proc):
                raise HistoryFormatError(path, lines[i], f"process {proc!r} is neither a number nor a name")
        if op["type"] == "invoke":
            j = busy_get(proc)
            if j is not None:
                raise HistoryFormatError(
                    path,
                    lines[i],
                    f"process {proc!r} invokes {op.get('f')!r} while its "
                    f"{ops[j].get('f')!r} invoked on line {lines[j]} has not completed",
                )
            busy[proc] = i
            continue
        j = busy_pop(proc, None)
        if j is None:
            raise HistoryFormatError(
                path, lines[i], f"a completion (type {op['type']}) of process {proc!r} without an invocation"
            )
        inv = ops[j]
        a, b = inv.get("f"), op.get("f")
        if a is not b and a is not None and b is not None and a != b:
            _mismatch(path, lines, i, j, "f", a, b)
        a, b = inv.get("key"), op.get("key")
        if a is not None and b is not None and a != b:
            _mismatch(path, lines, i, j, "key", a, b)


def _mismatch(
    path: str | os.PathLike[str], lines: Sequence[int], i: int, j: int, k: str, a: Any, b: Any
) -> None:
    raise HistoryFormatError(
        path, lines[i], f"a completion with {k} {b!r} for an invocation with {k} {a!r} on line {lines[j]}"
    )


def _key_like(v: Any) -> bool:
    return isinstance(v, int | str) and not isinstance(v, bool)


def split_independent(ops: list[Op]) -> bool:
    """Jepsen's independent histories carry `[k v]` as every client op's value (a cas's `v` is `[old new]`);
    splits them into `key` and `value` so that each key is checked alone. Returns whether it did."""
    any_client = False
    for op in ops:
        if op.get("process") == "nemesis":
            continue
        any_client = True
        v = op.get("value")
        if "key" in op or not (isinstance(v, list) and len(v) == 2 and _key_like(v[0])):
            return False  # most histories: at their first client op
        if op.get("f") == "cas" and not (isinstance(v[1], list) and len(v[1]) == 2):
            return False
    for op in ops:
        if op.get("process") != "nemesis":
            op["key"], op["value"] = op["value"]
    return any_client


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
