"""Fast tests of the cluster package that need no Docker and no root: parsing, specs, daemon management."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faultline.cluster import daemon, image
from faultline.cluster.base import ClusterSpec, check_ip, role_of
from faultline.cluster.ssh_backend import SSHBackend, _check_removable, load_hosts
from faultline.controller.cli import main as cli_main


def test_apt_sources_read_from_both_formats(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://mirror.example/debian bookworm main contrib\n"
        "deb http://other.example/x focal main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n")
    assert image.apt_sources(tmp_path) == [
        "deb http://mirror.example/debian bookworm main",
        "deb http://deb.example/debian bookworm main",
        "deb http://deb.example/debian bookworm-updates main",
        "deb http://sec.example/debian-security bookworm-security main",
    ]


def test_apt_sources_missing_names_the_step(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://x.example/ubuntu jammy main\n")
    with pytest.raises(image.ImageBuildError, match="step 'read apt sources'"):
        image.apt_sources(tmp_path)


def test_image_tag_is_a_hash_of_the_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    tag = image.image_tag()
    assert tag.startswith("faultline-node:") and len(tag.split(":")[1]) == 16
    assert image.image_tag() == tag
    monkeypatch.setattr(image, "PACKAGES", (*image.PACKAGES, "strace"))
    assert image.image_tag() != tag


def test_spec_validation() -> None:
    s = ClusterSpec.from_mapping({"name": "c1", "masters": 3, "tservers": 5, "daemon": "placeholder"})
    assert [n for n, _ in s.node_names()] == ["m1", "m2", "m3", "t1", "t2", "t3", "t4", "t5"]
    with pytest.raises(ValueError, match="cluster name"):
        ClusterSpec.from_mapping({"name": "Bad Name"})
    with pytest.raises(ValueError, match="unknown cluster spec keys"):
        ClusterSpec.from_mapping({"nmae": "x"})
    with pytest.raises(ValueError, match="at least one master"):
        ClusterSpec.from_mapping({"masters": 0})
    assert role_of("m4") == "master" and role_of("t9") == "tserver"
    with pytest.raises(ValueError):
        check_ip("10.0.0.1; rm -rf /")


def _daemon(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultline.cluster.daemon", *args[:1], "--dir", str(tmp), *args[1:]],
                          capture_output=True, text=True, timeout=30)


def test_daemon_lifecycle(tmp_path: Path) -> None:
    r = _daemon(tmp_path, "start", "--name", "sleeper", "--env", "FOO=bar", "--",
                sys.executable, "-c", "import os,time; print(os.environ['FOO'], flush=True); time.sleep(60)")
    assert r.returncode == 0, r.stderr
    try:
        assert daemon.status(tmp_path, "sleeper") == "running"
        assert _daemon(tmp_path, "start", "--name", "sleeper", "--", "sleep", "60").stdout.strip().endswith(
            "already running")
        assert _daemon(tmp_path, "pause", "--name", "sleeper").returncode == 0
        assert daemon.status(tmp_path, "sleeper") == "paused"
        assert _daemon(tmp_path, "resume", "--name", "sleeper").returncode == 0
        assert daemon.status(tmp_path, "sleeper") == "running"
        # a paused daemon still stops (SIGCONT before SIGTERM)
        _daemon(tmp_path, "pause", "--name", "sleeper")
        assert _daemon(tmp_path, "stop", "--name", "sleeper", "--grace", "5").returncode == 0
        assert daemon.status(tmp_path, "sleeper") == "stopped"
        assert "bar" in (tmp_path / "logs" / "sleeper.log").read_text()
    finally:
        _daemon(tmp_path, "kill", "--name", "sleeper")


def test_daemon_kill_and_stale_pidfile(tmp_path: Path) -> None:
    assert _daemon(tmp_path, "start", "--name", "s", "--", "sleep", "60").returncode == 0
    pid = daemon.read_pid(tmp_path, "s")
    assert pid is not None
    assert _daemon(tmp_path, "kill", "--name", "s").returncode == 0
    assert daemon.read_pid(tmp_path, "s") is None
    # a pid file naming a live process with another start time (a recycled pid) is not ours
    (tmp_path / "run" / "s.pid").write_text(f"{os.getpid()} 1\n")
    assert daemon.status(tmp_path, "s") == "stopped"


def test_daemon_that_dies_at_once_is_reported(tmp_path: Path) -> None:
    r = _daemon(tmp_path, "start", "--name", "bad", "--", sys.executable, "-c", "import sys; sys.exit('boom')")
    assert r.returncode == 5 and "boom" in r.stderr


def test_daemon_runs_under_faketime_offset(tmp_path: Path) -> None:
    if daemon.faketime_lib() is None:
        pytest.skip("libfaketime is not installed on this host")
    (tmp_path / "ft").write_text("+86400\n")
    out = tmp_path / "t.txt"
    # (no time.sleep: libfaketime 0.9.10 breaks CPython's clock_nanosleep, see ClusterSpec.faketime)
    code = f"import signal, time; open({str(out)!r}, 'w').write(str(time.time())); signal.pause()"
    assert _daemon(tmp_path, "start", "--name", "c", "--faketime", str(tmp_path / "ft"), "--",
                   sys.executable, "-c", code).returncode == 0
    try:
        deadline = time.monotonic() + 10
        while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert float(out.read_text()) - time.time() > 86000
    finally:
        _daemon(tmp_path, "kill", "--name", "c")


def test_ssh_hosts_file(tmp_path: Path) -> None:
    f = tmp_path / "hosts.toml"
    f.write_text('[ssh]\nuser = "ops"\nkey = "/k"\n\n[[node]]\nname = "m1"\naddress = "192.0.2.1"\n\n'
                 '[[node]]\nname = "t1"\naddress = "192.0.2.2"\nport = 2222\n')
    hosts = load_hosts(f)
    assert [(h.name, h.role, h.user, h.port) for h in hosts] == [("m1", "master", "ops", 22),
                                                                 ("t1", "tserver", "ops", 2222)]
    assert not hosts[0].accept_new_host_keys  # known_hosts is checked unless asked otherwise
    b = SSHBackend(ClusterSpec(name="x", masters=1, tservers=1, daemon="none"), hosts)
    # not root: sudo -n, and argv is quoted, never spliced
    assert b.remote.command("m1", ["echo", "a b;c"]) == "sudo -n -- echo 'a b;c'"
    f.write_text('[[node]]\nname = "t1"\naddress = "a"\n')
    with pytest.raises(ValueError, match="no master"):
        load_hosts(f)
    f.write_text('[[node]]\nname = "m1"\naddress = "a"\ncolour = "red"\n')
    with pytest.raises(ValueError, match="unknown keys colour"):
        load_hosts(f)
    for bad in ("/", "/usr", "relative/dir"):
        with pytest.raises(Exception, match="refusing"):
            _check_removable(bad)
    _check_removable("/var/lib/faultline")


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_main(["cluster", "up", "--cluster", "ssh"]) == 254
    assert "needs --hosts" in capsys.readouterr().err
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    assert cli_main(["cluster", "up", "--daemon", "none", "--name", "nodocker"]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Docker engine" in err[0] and "--cluster local" in err[0]


def test_placeholder_answers_with_its_name() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "faultline.cluster.placeholder", "--name", "n1", "--bind", "127.0.0.1",
                          "--port", str(port)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), 1) as c:
                    assert c.recv(10) == b"n1\n"
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        p.kill()
        p.wait(5)


def test_local_backend_without_root_says_so(monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli_main(["cluster", "up", "--cluster", "local", "--daemon", "none"]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs root" in err[0] and "--cluster docker" in err[0]
