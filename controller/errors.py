"""Errors that the CLI turns into exit codes instead of tracebacks."""


class UsageError(Exception):
    """A user mistake (bad option, missing file, malformed input): one clear line, exit 254."""


EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_INPUT = 254
EXIT_CRASH = 255


def exit_code_for(valid: object) -> int:
    """Jepsen's convention: 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
