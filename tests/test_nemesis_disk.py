"""The `lose-unfsynced` nemesis against an in-memory backend: every victim is killed before any loses its
writes, the completion records what was lost, a failed restart is healed, and a DB without data files, a
backend without FUSE or the ssh backend is refused (exit 254) before anything starts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from faultline.controller.errors import UsageError
from faultline.dbs import get_db
from faultline.nemesis import registry
from faultline.nemesis.disk import LoseUnfsyncedNemesis


class Backend:
    """Three nodes with a disk layer each (and one without); records every step in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.fail_start: set[str] = set()

    def nodes(self, role: str | None = None) -> list[str]:
        return ["n1", "n2", "n3", "x1"]

    def disk_layers(self, node: str) -> list[str]:
        return [] if node == "x1" else ["/var/lib/faultline/data"]

    def lose_unfsynced(self, node: str) -> dict[str, Any]:
        self.steps.append(("lose", node))
        return {"files": ["wal"], "bytes": 10}

    def disk_checkpoint(self, node: str) -> dict[str, Any]:
        self.steps.append(("checkpoint", node))
        return {"files": [], "bytes": 0}


class DB:
    def __init__(self, b: Backend) -> None:
        self.b = b

    def kill(self, test: Any, node: str) -> None:
        self.b.steps.append(("kill", node))

    def start(self, test: Any, node: str) -> None:
        if node in self.b.fail_start:
            raise RuntimeError("would not start")
        self.b.steps.append(("start", node))


def make_test() -> Any:
    b = Backend()
    return SimpleNamespace(backend=b, db=DB(b), spec=SimpleNamespace(seed=7))


def test_all_are_killed_before_any_loses_and_the_history_says_what_was_lost() -> None:
    test = make_test()
    n = LoseUnfsyncedNemesis().setup(test)
    assert test.backend.steps == [("checkpoint", "n1"), ("checkpoint", "n2"), ("checkpoint", "n3")]
    test.backend.steps.clear()
    op = n.invoke(test, {"f": "lose-unfsynced", "value": {"subset": "all"}, "process": "nemesis"})
    kinds = [k for k, _ in test.backend.steps]
    assert kinds == ["kill"] * 3 + ["lose"] * 3 + ["start"] * 3
    assert op["type"] == "ok" and op["value"]["nodes"] == ["n1", "n2", "n3"]  # x1 has no layer
    assert op["value"]["lost"]["n2"] == {"files": ["wal"], "bytes": 10} and op["value"]["bytes"] == 30


def test_a_failed_restart_is_left_to_heal() -> None:
    test = make_test()
    n = LoseUnfsyncedNemesis().setup(test)
    test.backend.fail_start = {"n1", "n2", "n3"}
    with pytest.raises(RuntimeError, match="could not restart"):
        n.invoke(test, {"f": "lose-unfsynced", "value": {"subset": "one"}, "process": "nemesis"})
    test.backend.fail_start = set()
    n.heal(test)
    assert sum(1 for k, _ in test.backend.steps if k == "start") == 1
    assert not n.down


def test_registry_needs_data_files_and_mounts_only_for_disk_faults() -> None:
    etcd = get_db("etcd")
    assert registry.disk_dirs(["kill"], etcd) == {}
    assert registry.disk_dirs(["kill", "lose-unfsynced"], etcd) == {"etcd": ["{dir}/data"]}
    no_files = SimpleNamespace(
        name="nofiles", nemeses=None, nemesis_notes={}, kill=lambda t, n: None, start=lambda t, n: None
    )
    assert "DataFiles" in (registry.refusal(no_files, "lose-unfsynced") or "")


def test_a_machine_without_fuse_or_the_layer_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from faultline.cluster import disklayer
    from faultline.controller.testspec import disk_layer_dirs

    etcd = get_db("etcd")
    built = tmp_path / "faultline-disk"
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    monkeypatch.setenv("FAULTLINE_DISK_LAYER", str(built))
    # the ssh backend's hosts are asked for FUSE when it comes up (test_ssh_hosts_without_fuse_...): here
    # only the layer must be built
    assert disk_layer_dirs(["lose-unfsynced"], etcd, "ssh") == {"etcd": ["{dir}/data"]}
    monkeypatch.setenv("FAULTLINE_DISK_LAYER", str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="the disk layer is not built"):
        disk_layer_dirs(["lose-unfsynced"], etcd, "ssh")
    with pytest.raises(UsageError, match="--cluster fake cannot mount"):
        disk_layer_dirs(["lose-unfsynced"], etcd, "fake")
    monkeypatch.setattr(disklayer, "unavailable", lambda mounts_here=True: "this machine has no /dev/fuse")
    with pytest.raises(UsageError, match="no /dev/fuse"):
        disk_layer_dirs(["lose-unfsynced"], etcd, "docker")
    assert disk_layer_dirs(["kill"], etcd, "ssh") == {}


def test_ssh_hosts_without_fuse_are_refused_before_anything_reaches_them(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSHBackend.up asks every host for FUSE first: one lacking it refuses the run (UsageError: one line,
    exit 254) before any upload, process or mount."""
    from faultline.cluster.ssh_backend import SSHBackend, SSHHost

    built = tmp_path / "faultline-disk"
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    monkeypatch.setenv("FAULTLINE_DISK_LAYER", str(built))
    spec = get_db("etcd").cluster_spec("tfuse", {})
    spec.disk_dirs = {"etcd": ["{dir}/data"]}
    hosts = [SSHHost(name=f"n{i}", address=f"192.0.2.{i}", role="etcd") for i in (1, 2, 3)]
    b = SSHBackend(spec, hosts)
    calls: list[tuple[str, list[str]]] = []

    def exec_(node: str, argv: list[str], timeout: float) -> tuple[int, str, str]:
        calls.append((node, list(argv)))
        if node == "n2":
            return 3, "it has no /dev/fuse (the disk layer is a FUSE file system)\n", ""
        return 0, "", ""

    b.remote.exec = exec_  # type: ignore[method-assign]
    b.remote.put = lambda *a: calls.append(("put", list(a)))  # type: ignore[method-assign]
    with pytest.raises(UsageError) as exc:
        b.up()
    assert str(exc.value) == (
        "--cluster ssh cannot mount the disk layer a disk fault needs on n2 (192.0.2.2): "
        "it has no /dev/fuse (the disk layer is a FUSE file system)"
    )
    assert sorted(n for n, _ in calls) == ["n1", "n2", "n3"] and all(a[:2] == ["sh", "-c"] for _, a in calls)
    spec.disk_dirs = {}
    calls.clear()
    b.check_fuse()  # a run without a disk fault asks nothing
    assert calls == []
