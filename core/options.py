"""Number options on the command line: argparse types that refuse what no option means.

Python's `float` reads "nan", "inf" and "-5" as numbers, and `int` takes "-5": a time limit of nan or a
memory limit of -5 MB would be taken silently. Every number option of every command (the controller's and
a DB plug-in's own, hence here in the leaf every layer shares) names one of these as its `type`; argparse
turns the refusal into one line and exit 254 (controller.cli.FaultlineParser). Standard library only.
"""

from __future__ import annotations

import argparse

from faultline.core.inputs import is_non_negative_number, is_positive_number


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number > 0 (a time limit, a memory limit, a timeout)."""
    value = _float(text)
    if not is_positive_number(value):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, not {text!r}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _float(text)
    if not is_non_negative_number(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number > 0 (a count of nodes, runs, workers)."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number > 0, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text!r}")
    return value


def integer(text: str) -> int:
    """Any whole number, negative too: a seed (campaign files take any integer seed as well)."""
    return _int(text)


def fraction(text: str) -> float:
    """A finite number between 0 and 1 (a rate)."""
    value = _float(text)
    if not (is_non_negative_number(value) and value <= 1):
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, not {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 0..65535 (0: the system picks a free one)."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number 0..65535, not {text!r}")
    return value


NUMBER_TYPES = (positive_float, non_negative_float, positive_int, non_negative_int, integer, fraction, port)
