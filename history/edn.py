"""A small EDN reader and writer, enough for Jepsen histories.

Jepsen, Knossos and elle-cli store histories as EDN (Clojure's data notation).
We read the subset those files use: nil/true/false, integers, floats, strings,
keywords (returned as plain strings without the colon, because our history
format names `f` and `type` as strings), symbols, vectors, lists, maps, sets
(returned as lists) and the tagged literals Jepsen histories hold: a record
(`#jepsen.history.Op{...}`, `#knossos.op.Op{...}`: a tag with a dot and no slash,
before a map), `#inst` and `#uuid` (before a string), and what Clojure's printer
writes for an exception or another object in an op (`#error {...}`, `#object [...]`);
the tag is dropped and the value kept. Any other tag (`#foo/bar 1`) is an error
naming it, since we cannot know what it means. `;` comments and commas are
whitespace. Errors carry the line number so a user can find the typo.

Speed: one compiled regular expression cuts each line into tokens (whitespace and
comments inside the match, so one list of strings per line), one loop turns the
tokens into values, and an atom's value is cached by its text (keywords repeat on
every line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

_TOKEN = re.compile(
    r"""(?:[\s,]++|;[^\n]*+)*+    # whitespace, commas and comments before the token
    (
        "[^"\\]*+(?:\\.[^"\\]*+)*+"   # a string
      | \#[{_]                        # a set, or discard the next value
      | \#[A-Za-z][\w.\-/]*+          # a tag
      | [\[\](){}]                    # brackets
      | [^\s,;()\[\]{}"]++            # an atom
      | .                             # a string that does not end on this line
      | \Z                            # the end (so a match never starts inside a comment)
    )""",
    re.VERBOSE | re.DOTALL,
)
_INT = re.compile(r"[+-]?\d+N?$")
_FLOAT = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?M?$")
_SYMBOLIC = {"##NaN": float("nan"), "##Inf": float("inf"), "##-Inf": float("-inf")}
# What the writer escapes: a raw carriage return would come back as a newline from a text-mode reader, and
# other control characters (NUL above all, which readers take for binary data) as \uXXXX.
_STRING_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        '"': '\\"',
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        **{chr(c): f"\\u{c:04x}" for c in (*range(0x20), 0x7F) if chr(c) not in "\n\r\t"},
    }
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f"}
# Tags and what must follow them (the opening token, or '"' for a string); records are tags with a dot.
_TAGS = {"#inst": '"', "#uuid": '"', "#error": "{", "#object": "["}
_FOLLOWER = {'"': "a string", "{": "a map", "[": "a vector"}
_CLOSES = {"[": "]", "(": ")", "{": "}", "#{": "}"}
_CACHE_MAX = 1 << 16  # distinct atoms remembered per read (keywords, small numbers; not every timestamp)
_MISSING = object()


class EdnError(ValueError):
    """Malformed EDN; `line` is 1-based."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class Keyword(str):
    """A keyword that must print back as `:name` (only used by the writer)."""


def _atom(text: str, line: int) -> Any:
    if text.isdecimal():
        return int(text)
    if text.startswith(":"):
        return text[1:]
    if text == "nil":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text in _SYMBOLIC:
        return _SYMBOLIC[text]
    if _INT.match(text):
        return int(text.rstrip("N"))
    if _FLOAT.match(text):
        return float(text.rstrip("M"))
    if text.startswith("\\"):
        return text[1:]
    if text.startswith("#"):
        raise EdnError(f"unknown EDN dispatch {text[:20]!r} (a tag needs a letter after #)", line)
    return text  # a symbol


def _string(text: str, line: int) -> str:
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
                try:
                    out.append(chr(int(body[i + 2 : i + 6], 16)))
                except ValueError:
                    raise EdnError(f"bad escape \\u{body[i + 2 : i + 6]} in a string", line) from None
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


def _tag_follower(tag: str, line: int) -> str:
    """The token that must follow `tag` (an opening bracket, or '"' for a string); unknown tags are errors."""
    if tag in _TAGS:
        return _TAGS[tag]
    if "." in tag and "/" not in tag:
        return "{"  # a Clojure record, e.g. #jepsen.history.Op{...}
    raise EdnError(
        f"unknown EDN tag {tag} (known: #inst, #uuid, records like #jepsen.history.Op{{...}}, "
        "#error, #object)",
        line,
    )


class _Reader:
    """The parser's state between lines: open collections, pending discards (#_) and a pending tag."""

    def __init__(self, spread: bool) -> None:
        self.stack: list[list[Any]] = []  # frames: [opener, items, start_line]; opener in "[", "(", "{", "#{"
        self.discards: list[int] = []  # depths at which the next complete value is discarded (#_)
        self.tag: tuple[str, str, int] | None = None  # (tag, the token that must follow, line)
        self.spread = spread
        self.spread_outer = False  # the outermost frame's items are handed out, not collected
        self.cache: dict[str, Any] = {}

    def feed(self, tokens: list[str], line: int, out: list[tuple[int, Any]]) -> None:
        """Consumes one line's tokens; appends each completed top-level value (or spread item) to `out`."""
        stack, discards, cache = self.stack, self.discards, self.cache
        cache_get = cache.get
        sink = self._sink()  # where the next value goes: the open collection's items, or None for `out`
        for tok in tokens:
            if self.tag is not None:
                self._check_tag(tok, line)
            value = cache_get(tok, _MISSING)
            if value is _MISSING:
                c = tok[0]
                if c in "[({" or tok == "#{":
                    if len(stack) >= MAX_DEPTH:
                        raise EdnError(f"nested deeper than {MAX_DEPTH} levels", line)
                    if not stack:
                        self.spread_outer = self.spread and c in "[(" and not discards
                    stack.append([tok, [], line])
                    sink = self._sink()
                    continue
                if c in "])}":
                    value = _close(stack, tok, line)
                    sink = self._sink()
                    if not stack and self.spread_outer:
                        continue  # the spread vector's items were handed out already
                elif c == '"':
                    value = _string(tok, line)
                elif tok == "#_":
                    discards.append(len(stack))
                    continue
                elif c == "#" and tok[1:2].isalpha():
                    self.tag = (tok, _tag_follower(tok, line), line)
                    continue
                else:
                    value = _atom(tok, line)
                    if len(cache) < _CACHE_MAX:
                        cache[tok] = value
            if discards and discards[-1] == len(stack):
                discards.pop()
            elif sink is not None:
                sink.append(value)
            else:
                out.append((line, value))

    def _sink(self) -> list[Any] | None:
        """The items of the innermost open collection, or None when values are handed out (at the top
        level, or as items of a spread outer vector)."""
        stack = self.stack
        if not stack or (self.spread_outer and len(stack) == 1):
            return None
        items: list[Any] = stack[-1][1]
        return items

    def _check_tag(self, tok: str, line: int) -> None:
        assert self.tag is not None
        tag, follower, _ = self.tag
        if not (tok == follower or (follower == '"' and tok[0] == '"' and len(tok) > 1)):
            raise EdnError(f"{tag} must be followed by {_FOLLOWER[follower]}, not {tok[:20]!r}", line)
        self.tag = None

    def finish(self, line: int) -> None:
        if self.stack:
            raise EdnError(f"{self.stack[-1][0]!r} opened on line {self.stack[-1][2]} is never closed", line)
        if self.tag is not None:
            raise EdnError(f"{self.tag[0]} with no value after it", self.tag[2])


def _split(chunks: Iterable[str]) -> Iterator[str]:
    """Whole lines (each with its newline, the last maybe without) from chunks of text cut anywhere."""
    rest = ""
    for chunk in chunks:
        if rest:
            chunk = rest + chunk
            rest = ""
        if chunk.find("\n") == len(chunk) - 1:
            yield chunk  # the usual case: a line of a file
            continue
        parts = chunk.split("\n")
        rest = parts.pop()
        for part in parts:
            yield part + "\n"
    if rest:
        yield rest


def iter_values(source: str | Iterable[str], spread: bool = False) -> Iterator[tuple[int, Any]]:
    """Yields (line, value) for each top-level value in `source`, a string or an iterable of chunks
    (lines of a file, so it streams). With `spread`, the items of a top-level vector or list are yielded
    one by one as they complete, so a history that is one big vector never sits whole in memory."""
    reader = _Reader(spread)
    findall = _TOKEN.findall
    out: list[tuple[int, Any]] = []
    line = 1  # the line the next text starts on
    pending, pending_line = "", 0  # the lines of a string that has not ended yet
    for text in _split([source] if isinstance(source, str) else source):
        start, nl = line, text.endswith("\n")
        line += nl
        if pending:
            pending += text
            if '"' not in text:
                continue  # still inside the string
            text, start = pending, pending_line
        tokens = findall(text)
        while tokens and not tokens[-1]:
            tokens.pop()  # the empty match at the end
        if '"' in tokens:  # a lone quote: a string that goes on on the next line
            pending, pending_line = text, start
            continue
        if pending:
            pending = ""
            _feed_lines(reader, text, start, out)
        else:
            reader.feed(tokens, start, out)
        if out:
            yield from out
            out.clear()
    if pending:
        raise EdnError("unterminated string", pending_line)
    reader.finish(line)


def _feed_lines(reader: _Reader, text: str, line: int, out: list[tuple[int, Any]]) -> None:
    """Feeds text of several lines (a string with newlines in it), each token with the line it starts on."""
    pos = 0
    group: list[str] = []
    for m in _TOKEN.finditer(text):
        if not m.group(1):
            break  # the end
        at = line + text.count("\n", pos, m.start(1))
        if at != line and group:
            reader.feed(group, line, out)
            group = []
        line, pos = at, m.start(1)
        group.append(m.group(1))
    if group:
        reader.feed(group, line, out)


def _close(stack: list[list[Any]], tok: str, line: int) -> Any:
    """The collection the closing `tok` ends."""
    if not stack:
        raise EdnError(f"unbalanced {tok!r}", line)
    opener, items, start = stack.pop()
    if tok != _CLOSES[opener]:
        raise EdnError(f"{tok!r} closes {opener!r} opened on line {start}", line)
    if opener == "{":
        if len(items) % 2:
            raise EdnError(f"map opened on line {start} has an odd number of forms", line)
        pairs = iter(items)
        try:
            return dict(zip(pairs, pairs, strict=True))
        except TypeError:  # a vector or map as a key
            return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    return items


def loads_all(text: str) -> list[Any]:
    """All top-level values in `text`."""
    return [v for _, v in iter_values(text)]


def _dump(v: Any, keyword_keys: bool, out: list[str]) -> None:
    t = type(v)
    if t is int:
        out.append(repr(v))
    elif t is str:
        out.append('"' + v.translate(_STRING_ESCAPES) + '"' if _NEEDS_ESCAPE(v) else '"' + v + '"')
    elif t is list or t is tuple:
        if set(map(type, v)) == _INTS:  # a read of a list-append history: often hundreds of them
            out.append("[" + " ".join(map(repr, v)) + "]")
            return
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(" ")
            _dump(x, keyword_keys, out)
        out.append("]")
    elif t is dict:
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
    else:
        _dump_other(v, keyword_keys, out)


_INTS = {int}
_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f]').search


def _dump_other(v: Any, keyword_keys: bool, out: list[str]) -> None:
    """Values of any other type (`_dump` writes the common ones without these tests)."""
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
    elif isinstance(v, dict | list | tuple | set | frozenset):
        _dump(dict(v) if isinstance(v, dict) else list(v), keyword_keys, out)
    else:
        out.append('"' + str(v).replace('"', '\\"') + '"')


def dumps(v: Any, keyword_keys: bool = True) -> str:
    """EDN text for `v`; string map keys become keywords (`{"f": ...}` -> `{:f ...}`)."""
    out: list[str] = []
    _dump(v, keyword_keys, out)
    return "".join(out)
