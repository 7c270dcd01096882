"""elle-cli's JSON histories: an array of op objects (or `{"history": [...]}`), decoded one op at a time
from a window on the file, so that a long history is never held whole as text."""

from __future__ import annotations

import json
import os
import re
from typing import IO, Any

from faultline.history import jsoncodec
from faultline.history.reading import (
    _CHUNK,
    MAX_DEPTH,
    MAX_LINE,
    HistoryFormatError,
    _Collector,
    _may_nest,
    _read,
)


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
