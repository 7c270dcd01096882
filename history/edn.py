"""A small EDN reader and writer, enough for Jepsen histories.

Jepsen, Knossos and elle-cli store histories as EDN (Clojure's data notation).
We read the subset those files use: nil/true/false, integers, floats, strings,
keywords (returned as plain strings without the colon, because our history
format names `f` and `type` as strings), symbols, vectors, lists, maps, sets
(returned as lists) and tagged literals (the tag is dropped). `;` comments and
commas are whitespace. Errors carry the line number so a user can find the typo.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

_TOKEN = re.compile(
    r"""
    (?P<ws>[\s,]+|;[^\n]*)
  | (?P<open>\#\{|[\[({])
  | (?P<close>[\])}])
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][\w.\-/]*)
  | (?P<atom>[^\s,;()\[\]{}"]+)
    """,
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_SYMBOLIC = {"##NaN": float("nan"), "##Inf": float("inf"), "##-Inf": float("-inf")}
# What the writer escapes: a raw carriage return would come back as a newline from a text-mode reader.
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f"}


class EdnError(ValueError):
    """Malformed EDN; `line` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class Keyword(str):
    """A keyword that must print back as `:name` (only used by the writer)."""


def _atom(text: str, line: int) -> Any:
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith(":"):
        return text[1:]
    if text in _SYMBOLIC:
        return _SYMBOLIC[text]
    if _INT.match(text):
        return int(text.rstrip("N"))
    if _FLOAT.match(text):
        return float(text.rstrip("M"))
    if text.startswith("\\"):
        return text[1:]
    return text  # a symbol


def _string(text: str) -> str:
    body = text[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "u" and i + 5 < len(body) + 1:
                out.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((repr(k), _hashable(x)) for k, x in v.items()))
    return v


MAX_DEPTH = 100  # nesting deeper than this is not data we read (and would exhaust recursion elsewhere)


def iter_values(source: str | Iterable[str], spread: bool = False) -> Iterator[tuple[int, Any]]:
    """Yields (line, value) for each top-level value in `source`, a string or an iterable of chunks
    (lines of a file, so it streams). With `spread`, the items of a top-level vector or list are yielded
    one by one as they complete, so a history that is one big vector never sits whole in memory."""
    chunks = [source] if isinstance(source, str) else source
    line = 1
    # Stack frames: [kind, items, start_line]; kind in "[", "(", "{", "#{".
    stack: list[list[Any]] = []
    discard_stack: list[int] = []  # depths at which the next complete value is discarded (#_)
    spread_outer = False  # the outermost frame's items are yielded, not collected
    match = _TOKEN.match
    text = ""
    for chunk in itertools.chain(chunks, [None]):
        final = chunk is None
        text += chunk or ""
        pos, n = 0, len(text)
        while pos < n:
            m = match(text, pos)
            if m is None:
                if text[pos] == '"' and not final:
                    break  # a string that goes on in the next chunk
                raise EdnError("unterminated string" if text[pos] == '"' else f"unexpected character {text[pos]!r}",
                               line)
            kind = m.lastgroup
            tok = m.group()
            if kind == "atom" and m.end() == n and not final:
                break  # an atom may go on in the next chunk
            tok_line = line
            line += tok.count("\n")
            pos = m.end()
            if kind == "ws" or kind == "tag":
                continue
            if kind == "discard":
                discard_stack.append(len(stack))
                continue
            if kind == "open":
                if len(stack) >= MAX_DEPTH:
                    raise EdnError(f"nested deeper than {MAX_DEPTH} levels", tok_line)
                if not stack:
                    spread_outer = spread and tok in ("[", "(") and not discard_stack
                stack.append([tok, [], tok_line])
                continue
            if kind == "close":
                value = _close(stack, tok, tok_line)
                if not stack and spread_outer:
                    continue  # the spread vector's items were yielded already
            elif kind == "str":
                value = _string(tok)
            else:
                value = _atom(tok, tok_line)
            if discard_stack and discard_stack[-1] == len(stack):
                discard_stack.pop()
                continue
            if len(stack) == 1 and spread_outer:
                yield tok_line, value
            elif stack:
                stack[-1][1].append(value)
            else:
                yield tok_line, value
        text = text[pos:]
    if stack:
        raise EdnError(f"{stack[-1][0]!r} opened on line {stack[-1][2]} is never closed", line)


def _close(stack: list[list[Any]], tok: str, line: int) -> Any:
    """The collection the closing `tok` ends."""
    if not stack:
        raise EdnError(f"unbalanced {tok!r}", line)
    opener, items, start = stack.pop()
    expected = {"[": "]", "(": ")", "{": "}", "#{": "}"}[opener]
    if tok != expected:
        raise EdnError(f"{tok!r} closes {opener!r} opened on line {start}", line)
    if opener == "{":
        if len(items) % 2:
            raise EdnError(f"map opened on line {start} has an odd number of forms", line)
        return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    return items


def loads_all(text: str) -> list[Any]:
    """All top-level values in `text`."""
    return [v for _, v in iter_values(text)]


def _dump(v: Any, keyword_keys: bool, out: list[str]) -> None:
    if v is None:
        out.append("nil")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, Keyword):
        out.append(":" + v)
    elif isinstance(v, str):
        out.append('"' + v.translate(_STRING_ESCAPES) + '"')
    elif isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        out.append("##NaN" if v != v else ("##Inf" if v > 0 else "##-Inf"))
    elif isinstance(v, int | float):
        out.append(repr(v))
    elif isinstance(v, dict):
        out.append("{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(", ")
            first = False
            if isinstance(k, str) and keyword_keys and not isinstance(k, Keyword):
                out.append(":" + k)
            else:
                _dump(k, keyword_keys, out)
            out.append(" ")
            _dump(x, keyword_keys, out)
        out.append("}")
    elif isinstance(v, list | tuple | set | frozenset):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(" ")
            _dump(x, keyword_keys, out)
        out.append("]")
    else:
        out.append('"' + str(v).replace('"', '\\"') + '"')


def dumps(v: Any, keyword_keys: bool = True) -> str:
    """EDN text for `v`; string map keys become keywords (`{"f": ...}` -> `{:f ...}`)."""
    out: list[str] = []
    _dump(v, keyword_keys, out)
    return "".join(out)
