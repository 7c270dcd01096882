"""JSON for history files: msgspec's speed with the standard library's meaning.

msgspec parses and prints JSON in C, several times as fast as the json module on a history, and unlike
orjson it keeps integers beyond 64 bits exact. Where it differs from json, json's answer is the one a
history has always had, so each difference falls back to json:

- reading: msgspec refuses what json reads beyond strict JSON (NaN, Infinity, numbers beyond a double,
  lone surrogates); `loads` then asks json.loads, so exactly what json accepts is accepted, with json's
  error message for the rest;
- writing: msgspec prints NaN and the infinities as null and a bool or None map key as "True"/"None";
  `dumps` checks the value whenever the text holds a null or such a key and prints it with json.dumps if
  the value is not plain JSON (it also does so when msgspec cannot print it: surrogates, a tuple key).

Sets and tuples are written as arrays; an object of another type as its str() (json's `default`), except
the types msgspec writes itself (a datetime, a UUID, a dataclass, bytes...), which no history value is.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
decode_fast = _decoder.decode  # raises FAST_ERRORS for anything json might still read (see `loads`)
FAST_ERRORS = (msgspec.DecodeError, ValueError, RecursionError)


def default(v: Any) -> Any:
    """What a value of no JSON type is written as (json's `default`)."""
    if isinstance(v, set | frozenset | tuple):
        return list(v)
    return str(v)


_encode = msgspec.json.Encoder(enc_hook=default).encode
_SCALARS = frozenset({str, int, bool, type(None)})
_SEQUENCES = frozenset({list, tuple, set, frozenset})


def loads(data: bytes | str) -> Any:
    """json.loads, through msgspec when it can (module docstring); json's errors otherwise."""
    try:
        return decode_fast(data)
    except FAST_ERRORS:
        pass
    return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)


def _plain(v: Any) -> bool:
    """Whether msgspec's text for `v` means what json.dumps's does: JSON types, finite floats, str or int
    keys (iterative, so any depth)."""
    stack = [v]
    while stack:
        x = stack.pop()
        t = type(x)
        if t in _SCALARS:
            continue
        if t is float:
            if x - x != 0.0:  # NaN or an infinity
                return False
            continue
        if t is dict:
            if any(type(k) is not str and type(k) is not int for k in x):
                return False
            x = x.values()
        elif t not in _SEQUENCES:
            return False
        if not set(map(type, x)) <= _SCALARS:
            stack.extend(x)
    return True


def _std(v: Any) -> bytes:
    return json.dumps(v, separators=(",", ":"), default=default).encode()


def dumps(v: Any) -> bytes:
    """Compact JSON for `v` (one history line without its newline), as json.dumps means it."""
    try:
        out = _encode(v)
    except (TypeError, ValueError, OverflowError):
        return _std(v)
    doubtful = b"null" in out or b'"True":' in out or b'"False":' in out or b'"None":' in out
    if doubtful and not _plain(v):
        return _std(v)
    return out
