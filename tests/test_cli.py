"""The CLI skeleton: help, version, exit codes for bad use, and the generated gRPC stubs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from faultline import __version__
from faultline.controller.cli import COMMANDS, main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "faultline", *args], capture_output=True, text=True, timeout=120)


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
