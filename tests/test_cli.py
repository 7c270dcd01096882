"""The CLI skeleton: help, version, exit codes for bad use, and the generated gRPC stubs."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from faultline import __version__
from faultline.controller.cli import COMMANDS, main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faultline", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_command() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    assert "Exit codes" in out.stdout
    for name, _ in COMMANDS:
        assert name in out.stdout


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"faultline {__version__}"


@pytest.mark.parametrize("argv", [["no-such-command"], ["--no-such-option"], []])
def test_bad_use_exits_254(argv: list[str]) -> None:
    out = run_cli(*argv)
    assert out.returncode == 254
    assert "Traceback" not in out.stderr


def test_every_registered_command_module_has_the_protocol() -> None:
    import importlib

    for _, module_name in COMMANDS:
        module = importlib.import_module(module_name)
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.add_arguments) and callable(module.run)
    assert len({name for name, _ in COMMANDS}) == len(COMMANDS)


def test_bad_option_of_a_subcommand_exits_254() -> None:
    name = COMMANDS[0][0]
    with pytest.raises(SystemExit) as exc:
        main([name, "--definitely-not-an-option"])
    assert exc.value.code == 254


def test_generated_grpc_stubs_import() -> None:
    from faultline.node.protos import common_pb2, common_pb2_grpc

    msg = common_pb2.ServerIdentity(uuid="u1", host="h", port=7051)
    assert common_pb2.ServerIdentity.FromString(msg.SerializeToString()).port == 7051
    assert hasattr(common_pb2_grpc, "GenericStub")


def _typed_options(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """(the subcommand's words, the option) for every option with a type, in every (nested) subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _typed_options(sub, (*path, name))
        elif action.option_strings and action.type is not None:
            yield path, action


def test_every_number_option_refuses_nan_infinity_and_negatives(capsys: pytest.CaptureFixture[str]) -> None:
    """`check --time-limit nan` and `--max-memory -5` were once taken silently: every number option of every
    command takes one of core.options' types, and each refusal is one line and 254."""
    from faultline.controller.cli import build_parser
    from faultline.core import options

    found = list(_typed_options(build_parser()))
    assert {
        (("check",), "--time-limit"),
        (("check",), "--max-memory"),
        (("sim",), "--steps"),
        (("cluster", "up"), "--masters"),
    } <= {(p, a.option_strings[0]) for p, a in found}
    for path, action in found:
        assert action.type not in (float, int), (path, action.option_strings)  # unchecked: nan, -5 pass
        if action.type not in options.NUMBER_TYPES:
            continue
        bad = ["nan", "inf", "1e400"] + ([] if action.type is options.integer else ["-5"])
        for value in bad:
            with pytest.raises(SystemExit) as exc:
                main([*path, action.option_strings[0], value])
            err = capsys.readouterr().err.strip().splitlines()
            assert exc.value.code == 254 and len(err) == 1, (path, action.option_strings, value, err)
            assert f"argument {action.option_strings[0]}" in err[0] and value in err[0]
