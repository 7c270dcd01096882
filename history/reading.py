"""What every history reader shares: the error and result types, the bounds on a line and on nesting, the
op normalisation, reading a file as lines (text or bytes), the collector of ops and their lines, and the
garbage collector paused while a history is parsed.

The underscored names are the history package's internals, shared by its readers (jsonl, jepsen,
porcupine, elle, detect); the rest is re-exported by `faultline.history`.
"""

from __future__ import annotations

import gc
import os
import sys
from array import array
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, cast

from faultline.core import Op

MAX_LINE = 16 * 2**20  # characters in one line (one op): longer is not a history
MAX_DEPTH = 100  # nesting of one op: deeper is not a history (and would exhaust the recursion limit)
_CHUNK = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8's continuation bytes: the rest are one per character


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


# ---------------------------------------------------------------- reading files


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
