"""Command-line checks shared by the node's daemons and tools: bad flags stop at the parser.

A misuse exits 254 (the exit code Faultline gives every bad argument) with usage and one `error:` line;
numbers are checked by the `type=` functions below, so a negative interval or tablet count never
reaches a server or a protobuf.
"""

from __future__ import annotations

import argparse
import math
import sys

EXIT_BAD_INPUT = 254


class NodeParser(argparse.ArgumentParser):
    """argparse whose usage errors exit 254 instead of 2 (its sub-parsers inherit the class)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def positive_int(text: str) -> int:
    """A whole number > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (float() accepts 'inf' and 'nan': they are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, not {text}")
    return value


def port_or_off(text: str) -> int | None:
    """A TCP port (0: any free one), or `off` (None)."""
    if text == "off":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a port number nor `off`") from None
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"port must be in 0..65535, not {value}")
    return value
