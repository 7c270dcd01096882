"""The error every layer raises for a user's mistake, and the exit codes the CLI turns results into.

Here, in the leaf every layer shares, so a DB plug-in's own command (the store's `faultline sim`) refuses
bad input the same way the controller does, without importing the controller."""


class UsageError(Exception):
    """A user mistake (bad option, missing file, malformed input): one clear line, exit 254."""


EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_INPUT = 254
EXIT_CRASH = 255
