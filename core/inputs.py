"""The files a user hands Faultline (campaign files, SSH hosts files): bytes to a TOML table, and the value
rules their schemas share. Every mistake is a ValueError of one line; the CLI makes it exit 254.
Standard library only.
"""

from __future__ import annotations

import codecs
import math
import re
import tomllib
from pathlib import Path
from typing import Any

# a name that becomes part of a path: no separator, no `..`, nothing a shell or a URL treats specially
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The TOML table in `path`. A UTF-8 byte-order mark is skipped (some editors write one); bytes that
    are not UTF-8 are refused with their offset, as TOML is UTF-8 only."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {what} {str(p)!r}: {exc.strerror or exc}") from None
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {p} is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x}); "
            "TOML files are UTF-8: save it as UTF-8"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{what} {p}: not valid TOML: {exc}") from None


def is_number(value: Any) -> bool:
    """An int or a float, finite (TOML has inf and nan), and not a bool (a bool is an int in Python)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_positive_number(value: Any) -> bool:
    return is_number(value) and value > 0


def is_non_negative_number(value: Any) -> bool:
    return is_number(value) and value >= 0


def is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def is_safe_name(value: Any) -> bool:
    return isinstance(value, str) and bool(SAFE_NAME.match(value)) and ".." not in value
