"""The `faultline` command line.

Each subcommand lives in its own module under `controller/commands/` exposing
`HELP` (one line), `add_arguments(parser)` and `run(args) -> int`. Only modules
that exist are offered, so `--help` never lists a command that does nothing.
Heavy imports belong inside `run`, so `faultline --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from faultline import __version__
from faultline.controller.errors import EXIT_BAD_INPUT, EXIT_CRASH, UsageError

# (subcommand, module) in the order --help lists them.
COMMANDS: list[tuple[str, str]] = [
    ("run", "faultline.controller.commands.run"),
    ("check", "faultline.controller.commands.check"),
    ("analyze", "faultline.controller.commands.analyze"),
    ("campaign", "faultline.controller.commands.campaign"),
    ("score", "faultline.controller.commands.score"),
    ("synth", "faultline.controller.commands.synth"),
    ("serve", "faultline.controller.commands.serve"),
    ("cluster", "faultline.controller.commands.cluster"),
    ("sim", "faultline.dbs.store.sim_command"),  # the store's Raft core, simulated
]


class FaultlineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (bad input always is: core.errors) and exits 254 (Jepsen's
    'bad arguments') instead of 2. Number options take core.options' types, which refuse nan, inf and
    values out of range here."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(only: str | None = None) -> FaultlineParser:
    """The whole command line, or with `only` (a subcommand's name) that subcommand alone: each module and
    its `add_arguments` import what their options list (checkers, nemeses, the store's catalog), a quarter
    of a second that `faultline check` would otherwise spend before reading its first line."""
    parser = FaultlineParser(
        prog="faultline",
        description="Jepsen-style fault injection against a replicated Kudu-like store: "
        "run workloads under faults, record histories, check them, score campaigns.",
        epilog="Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 crash.",
    )
    parser.add_argument("--version", action="version", version=f"faultline {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=FaultlineParser)
    for name, module_name in COMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(module_name)
        cmd = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", module.HELP))
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def _named_command(argv: list[str]) -> str | None:
    """The subcommand `argv` starts with, if it names one: its parser alone is then enough (anything
    else, such as `--help` or a misspelt name, gets the whole parser and its messages)."""
    if argv and argv[0] in {name for name, _ in COMMANDS}:
        return argv[0]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(_named_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(args._run(args) or 0)
    except UsageError as exc:
        print(f"faultline {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"faultline {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:
        traceback.print_exc()
        print(
            f"faultline {args.command}: crashed (a bug in faultline; the traceback is above)", file=sys.stderr
        )
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(main())
