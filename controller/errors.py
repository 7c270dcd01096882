"""Errors that the CLI turns into exit codes instead of tracebacks (faultline.core.errors holds them, so
every layer can raise them), and Jepsen's mapping of a verdict to an exit code."""

from faultline.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    UsageError,
)

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CRASH",
    "EXIT_INVALID",
    "EXIT_UNKNOWN",
    "EXIT_VALID",
    "UsageError",
    "exit_code_for",
]


def exit_code_for(valid: object) -> int:
    """Jepsen's convention: 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
