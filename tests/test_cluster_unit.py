"""Fast tests of the cluster package that need no Docker and no root: parsing, specs, daemon management."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from faultline.cluster import backends, daemon, image
from faultline.cluster.base import ClusterError, ClusterSpec, NodeBackend, NodeInfo, RoleSpec, check_ip
from faultline.cluster.ssh_backend import SSHBackend, _check_removable, fit_spec, load_hosts
from faultline.controller.cli import main as cli_main
from faultline.dbs.store import StoreDB


def test_apt_sources_read_from_both_formats(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://mirror.example/debian bookworm main contrib\n"
        "deb http://other.example/x focal main\n"
    )
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://sec.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n"
    )
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
    # a DB's Debian and Python packages are inputs of the tag
    assert image.image_tag(["strace"]) != tag
    assert image.image_tag(python_packages=["grpcio"]) != tag
    assert image.image_tag(["python3"]) == tag  # already among the harness's own
    monkeypatch.setattr(image, "BASE_PACKAGES", (*image.BASE_PACKAGES, "strace"))
    assert image.image_tag() != tag


def test_spec_validation() -> None:
    s = StoreDB().cluster_spec("c1", {"masters": 3, "tservers": 5, "daemon": "placeholder"})
    assert [n for n, _, _ in s.node_names()] == ["m1", "m2", "m3", "t1", "t2", "t3", "t4", "t5"]
    assert s.dns_names() == ["master-1", "master-2", "master-3"]
    assert ClusterSpec.from_mapping(s.to_mapping()) == s  # plain data both ways (labels, state files)
    with pytest.raises(ValueError, match="cluster name"):
        ClusterSpec.from_mapping({"name": "Bad Name", "roles": [{"role": "a", "count": 1, "prefix": "a"}]})
    with pytest.raises(ValueError, match="unknown cluster spec keys"):
        ClusterSpec.from_mapping({"nmae": "x"})
    with pytest.raises(ValueError, match="at least one node"):
        ClusterSpec.from_mapping({"roles": [{"role": "a", "count": 0, "prefix": "a"}]})
    with pytest.raises(ValueError, match="at least one master"):
        StoreDB().cluster_spec("c1", {"masters": 0})
    assert s.role_of("m4") == "master" and s.role_of("t9") == "tserver"
    with pytest.raises(ClusterError, match="matches no role"):
        s.role_of("x1")
    with pytest.raises(ValueError):
        check_ip("10.0.0.1; rm -rf /")


class _Dry(NodeBackend):
    """A backend that only fills in templates (no hosts)."""

    def node_dir(self, node: str) -> str:
        return f"/d/{node}"

    def source_dir(self, node: str) -> str:
        return "/src"


def test_the_store_runs_the_same_processes_through_role_templates() -> None:
    spec = StoreDB().cluster_spec(
        "c1", {"masters": 3, "tservers": 2, "bugs": ["no-fsync"], "node_args": ["--fsync", "never"]}
    )
    b = _Dry(spec)
    for n, role, dns in spec.node_names():
        b.info[n] = NodeInfo(n, role, f"10.9.0.{len(b.info) + 2}", "", dns)
    masters = "master-1:7051,master-2:7051,master-3:7051"
    assert b.process_argv("m2") == [
        "python3",
        "-m",
        "faultline.node",
        "master",
        "--fs-dir",
        "/d/m2/data",
        "--rpc-bind",
        "0.0.0.0:7051",
        "--rpc-advertise",
        "master-2:7051",
        "--master-addresses",
        masters,
        "--fsync",
        "never",
        "--inject-bug",
        "no-fsync",
    ]
    assert b.process_argv("t1")[3:10] == [
        "tserver",
        "--fs-dir",
        "/d/t1/data",
        "--rpc-bind",
        "0.0.0.0:7050",
        "--rpc-advertise",
        "10.9.0.5:7050",
    ]
    assert b.expand("t2", spec.role("tserver").prepare) == [
        "python3",
        "-m",
        "faultline.node",
        "tool",
        "fs",
        "format",
        "--fs-dir",
        "/d/t2/data",
    ]
    spec.role("master").count = 1  # master-migrate grows the role; every process then names all masters
    assert b.process_argv("t1")[b.process_argv("t1").index("--master-addresses") + 1] == "master-1:7051"
    with pytest.raises(ClusterError, match="unknown placeholder"):
        b.expand("t1", ["{nope}"])
    none = _Dry(StoreDB().cluster_spec("c2", {"daemon": "none"}))
    none.info["m1"] = NodeInfo("m1", "master", "10.9.0.2")
    assert none.process_argv("m1") is None
    generic = _Dry(
        ClusterSpec.from_mapping({"roles": [RoleSpec("kv", 2, "n", 2379, argv=["kv", "{addresses:kv}"])]})
    )
    generic.info["n1"] = NodeInfo("n1", "kv", "10.9.0.2")
    assert generic.process_argv("n1") == ["kv", "n1:2379,n2:2379"]


def _daemon(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faultline.cluster.daemon", *args[:1], "--dir", str(tmp), *args[1:]],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_daemon_lifecycle(tmp_path: Path) -> None:
    r = _daemon(
        tmp_path,
        "start",
        "--name",
        "sleeper",
        "--env",
        "FOO=bar",
        "--",
        sys.executable,
        "-c",
        "import os,time; print(os.environ['FOO'], flush=True); time.sleep(60)",
    )
    assert r.returncode == 0, r.stderr
    try:
        assert daemon.status(tmp_path, "sleeper") == "running"
        assert (
            _daemon(tmp_path, "start", "--name", "sleeper", "--", "sleep", "60")
            .stdout.strip()
            .endswith("already running")
        )
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


_FORKS_A_SESSION_LEADER = """
import os, sys, time
child = os.fork()
if child == 0:
    os.setsid()   # as PostgreSQL's backends do: out of the postmaster's process group
    time.sleep(60)
    os._exit(0)
open(sys.argv[1], "w").write(str(child))
time.sleep(60)
"""


def _start_with_a_setsid_child(tmp: Path) -> int:
    pid_file = tmp / "child.pid"
    r = _daemon(
        tmp, "start", "--name", "pm", "--", sys.executable, "-c", _FORKS_A_SESSION_LEADER, str(pid_file)
    )
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the daemon never forked its child"
        time.sleep(0.02)
    return int(pid_file.read_text())


def _until(check: Callable[[], bool], why: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, why
        time.sleep(0.01)


def test_kill_takes_children_that_left_the_process_group(tmp_path: Path) -> None:
    child = _start_with_a_setsid_child(tmp_path)
    try:
        assert os.getpgid(child) != os.getpgid(daemon.read_pid(tmp_path, "pm") or 0)
        assert _daemon(tmp_path, "kill", "--name", "pm").returncode == 0
        # gone when kill returns, not later: what follows a kill must meet no writer
        assert daemon._state(child) in (None, "Z", "X")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_pause_and_resume_reach_children_that_left_the_process_group(tmp_path: Path) -> None:
    child = _start_with_a_setsid_child(tmp_path)
    try:
        assert _daemon(tmp_path, "pause", "--name", "pm").returncode == 0
        _until(
            lambda: daemon._state(child) == "T", "the child never stopped"
        )  # a signal lands when scheduled
        assert _daemon(tmp_path, "resume", "--name", "pm").returncode == 0
        _until(lambda: daemon._state(child) in ("S", "R"), "the child never resumed")
    finally:
        _daemon(tmp_path, "kill", "--name", "pm")
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_daemon_that_dies_at_once_is_reported(tmp_path: Path) -> None:
    r = _daemon(
        tmp_path, "start", "--name", "bad", "--", sys.executable, "-c", "import sys; sys.exit('boom')"
    )
    assert r.returncode == 5 and "boom" in r.stderr


def test_daemon_runs_under_faketime_offset(tmp_path: Path) -> None:
    if daemon.faketime_lib() is None:
        pytest.skip("libfaketime is not installed on this host")
    (tmp_path / "ft").write_text("+86400\n")
    out = tmp_path / "t.txt"
    # (no time.sleep: libfaketime 0.9.10 breaks CPython's clock_nanosleep, see ClusterSpec.faketime)
    code = f"import signal, time; open({str(out)!r}, 'w').write(str(time.time())); signal.pause()"
    assert (
        _daemon(
            tmp_path,
            "start",
            "--name",
            "c",
            "--faketime",
            str(tmp_path / "ft"),
            "--",
            sys.executable,
            "-c",
            code,
        ).returncode
        == 0
    )
    try:
        deadline = time.monotonic() + 10
        while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert float(out.read_text()) - time.time() > 86000
    finally:
        _daemon(tmp_path, "kill", "--name", "c")


def test_ssh_hosts_file(tmp_path: Path) -> None:
    f = tmp_path / "hosts.toml"
    f.write_text(
        '[ssh]\nuser = "ops"\nkey = "/k"\n\n[[node]]\nname = "m1"\naddress = "192.0.2.1"\n\n'
        '[[node]]\nname = "t1"\naddress = "192.0.2.2"\nport = 2222\n'
    )
    hosts = load_hosts(f)
    spec = StoreDB().cluster_spec("x", {"daemon": "none"})
    fit_spec(spec, hosts)
    assert [(h.name, h.role, h.user, h.port) for h in hosts] == [
        ("m1", "master", "ops", 22),
        ("t1", "tserver", "ops", 2222),
    ]
    assert [(r.role, r.count) for r in spec.roles] == [("master", 1), ("tserver", 1)]
    assert not hosts[0].accept_new_host_keys  # known_hosts is checked unless asked otherwise
    b = SSHBackend(spec, hosts)
    # not root: sudo -n, and argv is quoted, never spliced
    assert b.remote.command("m1", ["echo", "a b;c"]) == "sudo -n -- echo 'a b;c'"
    f.write_text('[[node]]\nname = "t1"\naddress = "a"\n')
    with pytest.raises(ValueError, match="no master"):
        fit_spec(StoreDB().cluster_spec("x", {}), load_hosts(f))
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

    from faultline.nemesis.base import wait_until

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faultline.testing.placeholder",
            "--name",
            "n1",
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
    )
    answers: list[bytes] = []

    def answered() -> bool:  # refused (raises) until the placeholder listens
        with socket.create_connection(("127.0.0.1", port), 1) as c:
            answers.append(c.recv(10))
        return True

    try:
        assert wait_until(answered, 10, 0.05, "the placeholder's port")
        assert answers == [b"n1\n"]
    finally:
        p.kill()
        p.wait(5)


def test_local_backend_without_root_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli_main(["cluster", "up", "--cluster", "local", "--daemon", "none"]) == 254
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs root" in err[0] and "--cluster docker" in err[0]


def test_nodes_import_the_package_from_a_folder_holding_faultline(tmp_path: Path) -> None:
    """What a node's PYTHONPATH gets: here a folder with a `faultline` link (the local backend), over SSH a
    tarball of the parts nodes run. Both import without this venv's site-packages (python -S)."""
    import io
    import tarfile

    from faultline.cluster.source import PACKAGE_DIR, host_pythonpath, node_tarball

    folder = Path(host_pythonpath())
    assert (folder / "faultline").resolve() == PACKAGE_DIR
    code = "import faultline.cluster.daemon, faultline.testing.placeholder as p; print(p.__file__)"
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.startswith(str(folder)), out.stderr
    (tmp_path / "src").mkdir()
    with tarfile.open(fileobj=io.BytesIO(node_tarball()), mode="r:gz") as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "src", filter="data")
    assert "faultline/__init__.py" in names and "faultline/node/__main__.py" in names
    assert not [
        n for n in names if n.startswith(("faultline/controller", "faultline/results", "faultline/checkers"))
    ]
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": str(tmp_path / "src")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and out.stdout.startswith(str(tmp_path / "src")), out.stderr


def test_host_pythonpath_is_safe_from_many_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local backend asks for every node at once; no caller may see the link missing."""
    from concurrent.futures import ThreadPoolExecutor

    from faultline.cluster import source

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source.host_pythonpath.cache_clear()
    try:
        with ThreadPoolExecutor(16) as pool:
            got = set(pool.map(lambda _: source.host_pythonpath(), range(64)))
        assert len(got) == 1 and (Path(got.pop()) / "faultline").resolve() == source.PACKAGE_DIR
    finally:
        source.host_pythonpath.cache_clear()


# ---------------------------------------------------------------- the backend registry


class _Double:
    """A backend double that only records what it was made with (registry tests never bring it up)."""

    def __init__(self, spec: ClusterSpec, hosts: str | None, seed: int) -> None:
        self.spec, self.hosts, self.seed = spec, hosts, seed


def _double(spec: ClusterSpec, hosts: str | None, *, seed: int = 0) -> Any:
    return _Double(spec, hosts, seed)


_SPEC = {"name": "c1", "roles": [{"role": "server", "count": 1, "prefix": "s"}]}


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names registered by a test, unregistered after it."""
    names: list[str] = []
    yield names
    for n in names:
        backends.unregister(n)


def test_builtin_backends_are_registered_in_order() -> None:
    assert backends.kinds()[:3] == ("docker", "local", "ssh")
    docker = backends.kind("docker")
    assert docker.attach is not None and not docker.hidden and docker.default_quiet_period_s == 5.0
    assert docker.runs("etcd") and docker.dbs is None


def test_a_registered_kind_is_made_by_name(registered: list[str]) -> None:
    registered.append("double-a")
    k = backends.register(backends.BackendKind("double-a", _double, dbs=frozenset({"store"})))
    assert backends.kind("double-a") is k and "double-a" in backends.kinds()
    b = backends.make_backend("double-a", _SPEC, hosts="h.toml", seed=7)
    assert isinstance(b, _Double) and (b.spec.name, b.hosts, b.seed) == ("c1", "h.toml", 7)
    assert k.runs("store") and not k.runs("etcd")
    with pytest.raises(ClusterError, match="none to attach to"):
        backends.attach("double-a", "c1")


def test_a_name_is_registered_once(registered: list[str]) -> None:
    with pytest.raises(ClusterError, match="'docker' is already registered"):
        backends.register(backends.BackendKind("docker", _double))
    assert backends.kind("docker").make is not _double
    with pytest.raises(ClusterError, match="use lowercase"):
        backends.register(backends.BackendKind("Bad Name", _double))


def test_a_hidden_kind_is_not_listed_but_can_be_made(registered: list[str]) -> None:
    registered.append("double-h")
    backends.register(backends.BackendKind("double-h", _double, hidden=True, default_quiet_period_s=0.2))
    assert "double-h" not in backends.kinds()
    assert "double-h" in backends.kinds(include_hidden=True)
    assert backends.kind("double-h").default_quiet_period_s == 0.2
    assert isinstance(backends.make_backend("double-h", _SPEC), _Double)


def test_an_unknown_kind_names_the_valid_ones(registered: list[str]) -> None:
    registered.append("double-h")
    backends.register(backends.BackendKind("double-h", _double, hidden=True))
    for call in (
        lambda: backends.kind("nope"),
        lambda: backends.make_backend("nope", _SPEC),
        lambda: backends.attach("nope", "c1"),
    ):
        with pytest.raises(ClusterError) as exc:
            call()
        msg = str(exc.value)
        assert "unknown cluster backend 'nope'" in msg and "docker, local, ssh" in msg
        assert "double-h" not in msg


def test_ssh_needs_a_hosts_file() -> None:
    with pytest.raises(ClusterError, match="needs --hosts FILE"):
        backends.make_backend("ssh", _SPEC)


def test_a_cluster_network_racing_another_for_a_subnet_takes_the_next() -> None:
    """Two clusters coming up at once pick the same free /24; Docker refuses the second with an overlap
    error, and that one moves to the next free subnet instead of failing the run."""
    import docker.errors

    from faultline.cluster.docker_backend import DockerBackend

    class Networks:
        def __init__(self) -> None:
            self.created: list[str] = []

        def create(self, name: str, ipam: Any, **kw: Any) -> None:
            self.created.append(ipam["Config"][0]["Subnet"])
            if len(self.created) == 1:  # another cluster took the first free subnet a moment ago
                raise docker.errors.APIError("Pool overlaps with other one on this address space")

    class Api:
        def networks(self) -> list[dict[str, Any]]:
            return []

    class Client:
        api = Api()
        networks = Networks()

    b = DockerBackend(
        ClusterSpec.from_mapping({"name": "race", "roles": [{"role": "a", "count": 1, "prefix": "a"}]}),
        client=Client(),
        image="x",
    )
    b._create_network()
    first, second = Client.networks.created
    assert str(b.subnet) == second and second != first


def test_image_for_every_db_and_for_one_db_at_once_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["cluster", "image", "--every-db", "--db", "etcd"]) == 254
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--every-db" in err


class _VanishingEngine:
    """The Docker engine's low-level API as the SDK sees it: two containers are listed, and one of them is
    removed (by another run's teardown) before the SDK inspects it."""

    def __init__(self) -> None:
        self.live = ["gone", "kept"]
        self.removed: list[str] = []

    def containers(self, **_: Any) -> list[dict[str, str]]:
        return [{"Id": cid} for cid in self.live]

    def inspect_container(self, cid: str) -> dict[str, Any]:
        import docker.errors

        if cid == "gone":
            self.live.remove("gone")
            raise docker.errors.NotFound("No such container: gone")
        return {
            "Id": cid,
            "Name": "/fl-other-n1",
            "Config": {"Labels": {"org.faultline.managed": "1", "org.faultline.cluster": "fl-other"}},
        }

    def remove_container(self, cid: str, **_: Any) -> None:
        self.live.remove(cid)
        self.removed.append(cid)


class _Networks:
    def list(self, **_: Any) -> list:
        return []


def test_a_container_removed_while_listed_is_left_out_not_a_crash() -> None:
    """`cluster down --name A` lists every Faultline cluster to find A; another run removing its own
    containers at that moment crashed it with the SDK's NotFound (seen in a CI rehearsal)."""
    from docker.models.containers import ContainerCollection

    from faultline.cluster.docker_backend import list_clusters, remove_cluster

    class Client:
        api = _VanishingEngine()
        networks = _Networks()

    client = Client()
    client.containers = ContainerCollection(client=client)
    assert list_clusters(client) == ["fl-other"]
    client.api.live.insert(0, "gone")  # and again while the cluster is removed
    assert remove_cluster(client, "fl-other", attempts=1) == 1
    assert client.api.removed == ["kept"]
