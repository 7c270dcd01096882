"""Inputs validated at the edge: the SSH hosts file's schema, what `down` may delete, run options that
must be finite, and `cluster status` when Docker cannot be reached (campaign files: tests/test_campaign.py;
node flags: tests/test_node_units.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from faultline.cluster.base import ClusterError, NodeInfo
from faultline.cluster.ssh_backend import MARKER, SSHBackend, _check_removable, load_hosts
from faultline.controller import testspec
from faultline.controller.cli import main as cli_main
from faultline.controller.errors import UsageError
from faultline.core import inputs
from faultline.dbs.store import StoreDB

NODE = '[[node]]\nname = "m1"\naddress = "192.0.2.1"\n'


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[node]]\nname = 1\naddress = "a"\n', "name must be a node name"),
        ("node = [1]\n", "node must be [[node]] tables, not [1]"),
        ("ssh = 5\n" + NODE, "ssh must be a table ([ssh] with the defaults), not 5"),
        ('[ssh]\nport = "22"\n' + NODE, "port must be a port number (1-65535), not '22'"),
        (NODE + "port = 70000\n", "port must be a port number (1-65535), not 70000"),
        (NODE + "connect_timeout = inf\n", "connect_timeout must be a finite number of seconds > 0, not inf"),
        (NODE + "accept_new_host_keys = 1\n", "accept_new_host_keys must be true or false"),
        (NODE + 'workdir = "relative/dir"\n', "workdir must be an absolute path"),
        (NODE + 'dns = "m1.example"\n', "dns must be a list of DNS names"),
        ('[[node]]\nname = "../m1"\naddress = "a"\n', "name must be a node name"),
        (NODE + NODE, "node names must be unique"),
        ("colour = 'red'\n" + NODE, "unknown key 'colour'; valid: [ssh], [[node]]"),
    ],
)
def test_the_hosts_file_is_checked_against_its_schema(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "hosts.toml"
    f.write_text(text)
    with pytest.raises(ValueError) as exc:
        load_hosts(f)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_bad_hosts_file_is_one_line_and_exit_254(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "hosts.toml"
    for text in (b"node = [1]\n", b"ssh = 5\n", b'[[node]]\nname = "m1"\naddress = "caf\xe9"\n'):
        f.write_bytes(text)
        assert cli_main(["cluster", "up", "--cluster", "ssh", "--hosts", str(f), "--daemon", "none"]) == 254
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "hosts file" in err[0] and "Traceback" not in err[0]


class LocalShell:
    """Stands in for the SSH session: runs the backend's `sh -c` scripts on this machine."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def __call__(
        self, node: str, argv: Sequence[str], timeout: float = 30, check: bool = True, step: str = ""
    ) -> tuple[int, str, str]:
        self.argvs.append(list(argv))
        if argv[0] != "sh":
            raise ClusterError("no daemon here")
        r = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise ClusterError(f"{node}: {step} failed: {r.stderr.strip()}")
        return r.returncode, r.stdout, r.stderr


def ssh_backend(tmp_path: Path, workdir: Path, source_dir: Path) -> tuple[SSHBackend, LocalShell]:
    f = tmp_path / "hosts.toml"
    f.write_text(
        f'[ssh]\nworkdir = "{workdir}"\nsource_dir = "{source_dir}"\n'
        + NODE
        + '[[node]]\nname = "t1"\naddress = "192.0.2.2"\n'
    )
    b = SSHBackend.from_hosts_file(f, StoreDB().cluster_spec("inputs-test", {"daemon": "none"}))
    b.info = {"m1": NodeInfo("m1", "master", "192.0.2.1", "192.0.2.1", [])}
    shell = LocalShell()
    b.run = shell  # type: ignore[method-assign]
    b.remote.put = lambda node, path, data: Path(path).write_bytes(data)  # type: ignore[method-assign]
    return b, shell


def test_down_deletes_only_directories_faultline_created(tmp_path: Path) -> None:
    """A hosts file naming someone's directory (here a stand-in for /usr/bin or a home directory) can
    neither be used nor deleted; the directories Faultline made and marked are deleted by down."""
    theirs = tmp_path / "home" / "alice"
    theirs.mkdir(parents=True)
    (theirs / "thesis.tex").write_text("years of work")
    b, _ = ssh_backend(tmp_path, theirs, tmp_path / "src")
    with pytest.raises(ClusterError, match="exists and Faultline did not create it"):
        b.upload_source("m1")
    assert (theirs / "thesis.tex").exists() and not (tmp_path / "src").exists()
    b.down()
    assert (theirs / "thesis.tex").read_text() == "years of work"

    ours, src = tmp_path / "var" / "faultline", tmp_path / "opt" / "faultline-src"
    ours.mkdir(parents=True)  # an empty directory (an image's mount point) is taken over
    b, shell = ssh_backend(tmp_path, ours, src)
    b.upload_source("m1")
    assert (ours / MARKER).exists() and (src / MARKER).exists() and (src / "faultline").is_dir()
    b.upload_source("m1")  # a second upload replaces the source it made itself
    (ours / "data").write_text("node data")
    b.down()
    assert not ours.exists() and not src.exists()
    assert not any(argv[:2] == ["rm", "-rf"] for argv in shell.argvs)  # never a bare rm -rf


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/usr",
        "/usr/bin",
        "/etc/ssh",
        "/home/alice",
        "/root",
        "relative/dir",
        "/var/lib",
        "/usr/bin/../..",
    ],
)
def test_system_and_home_directories_are_refused_before_the_marker_check(path: str) -> None:
    with pytest.raises(ClusterError, match="refusing"):
        _check_removable(path)


@pytest.mark.parametrize("path", ["/var/lib/faultline", "/opt/faultline-src", "/home/alice/faultline"])
def test_dedicated_directories_pass_the_first_guard(path: str) -> None:
    _check_removable(path)


@pytest.mark.parametrize(
    ("opts", "needle"),
    [
        ({"time_limit": "inf"}, "--time-limit must be positive and finite, not 'inf'"),
        ({"nemesis_interval": float("nan")}, "--nemesis-interval must be positive and finite"),
        ({"rate": "-inf"}, "--rate must be positive and finite"),
        ({"quiet_period": -100}, "--quiet-period must be a finite number >= 0, not -100"),
        ({"quiet_period": "nan"}, "--quiet-period must be a finite number >= 0"),
    ],
)
def test_run_options_are_finite(opts: dict, needle: str) -> None:
    with pytest.raises(UsageError) as exc:
        testspec.build_test({"cluster": "fake", **opts})
    assert needle in str(exc.value)
    assert testspec.build_test({"cluster": "fake", "quiet_period": 0}).quiet_period == 0


def test_read_toml_names_the_file_and_the_problem(tmp_path: Path) -> None:
    f = tmp_path / "x.toml"
    f.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert inputs.read_toml(f, "thing") == {"a": 1}
    f.write_bytes(b"a = '\xff'\n")
    with pytest.raises(ValueError, match=r"thing .*x.toml is not UTF-8 text \(byte 5 is 0xff\)"):
        inputs.read_toml(f, "thing")
    with pytest.raises(ValueError, match="cannot read thing"):
        inputs.read_toml(tmp_path, "thing")
    f.write_text("a = \n")
    with pytest.raises(ValueError, match="not valid TOML"):
        inputs.read_toml(f, "thing")


def test_cluster_status_without_docker_says_it_cannot_reach_docker(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    monkeypatch.setenv("FAULTLINE_RUN_DIR", str(tmp_path / "run"))  # no local or ssh cluster either
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for argv in (
        ["cluster", "status"],
        ["cluster", "status", "--cluster", "docker"],
        ["cluster", "logs", "m1"],
    ):
        assert cli_main(argv) == 254
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot reach the Docker engine" in err[0] and "no cluster" not in err[0], (
            err
        )


def test_a_run_on_ssh_checks_its_hosts_file_before_starting(tmp_path: Path) -> None:
    f = tmp_path / "hosts.toml"
    f.write_text("ssh = 5\n" + NODE)
    with pytest.raises(UsageError, match="ssh must be a table"):
        testspec.build_test({"cluster": "ssh", "nodes": str(f)})
    with pytest.raises(UsageError, match="cannot read hosts file"):
        testspec.build_test({"cluster": "ssh", "nodes": str(tmp_path / "missing.toml")})
