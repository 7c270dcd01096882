"""The SSH backend driving containers that run sshd (started by the Docker backend).

Checks key auth, known_hosts (refused by default, accepted only when asked), command deadlines, large
stdout+stderr without deadlock, reconnect after a dropped session, and the same up/partition/heal.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_checks import assert_pause_kill_start, brought_up

from faultline.cluster.base import ClusterError, NodeInfo, RemoteTimeout
from faultline.dbs.store import StoreDB
from faultline.dbs.store.layout import MASTER_PORT, TSERVER_PORT

# light (sshd containers and placeholder daemons): `make test` runs these beside the real DBs' cells
pytestmark = [pytest.mark.docker, pytest.mark.paired]

HOSTS = ("m1", "m2", "t1")


@contextlib.contextmanager
def sshd_containers(tmp: Path, hosts: tuple[str, ...], fuse: bool = False) -> Iterator[object]:
    """sshd containers `h<name>` (Docker's, on a cluster of their own) and `tmp/hosts.toml` naming them:
    hosts for the SSH backend. With `fuse` they are hosts with FUSE (docs/reliability.md)."""
    import paramiko

    from faultline.cluster.docker_backend import DockerBackend
    from faultline.cluster.image import ensure_image_for

    key = paramiko.RSAKey.generate(2048)
    key.write_private_key_file(str(tmp / "id"))
    spec = StoreDB().cluster_spec(
        f"tsshd-{secrets.token_hex(3)}", {"masters": 1, "tservers": 0, "daemon": "none"}
    )
    docker = DockerBackend(spec, image=ensure_image_for(StoreDB().cluster_spec("image", {})))
    try:
        docker.up()
        for h in hosts:
            docker.add_sshd_node(f"h{h}", f"{key.get_name()} {key.get_base64()}\n", fuse=fuse)
        entries = [f'[[node]]\nname = "{h}"\naddress = "{docker.info["h" + h].address}"\n' for h in hosts]
        (tmp / "hosts.toml").write_text(
            f'[ssh]\nuser = "root"\nkey = "{tmp}/id"\nknown_hosts = "{tmp}/known_hosts"\n'
            'python = "/opt/venv/bin/python3"\nconnect_timeout = 5\n'
            # the container's own daemon manager (sshd) keeps its files in /var/lib/faultline: not ours
            'workdir = "/var/lib/faultline-ssh"\n\n' + "\n".join(entries)
        )
        yield docker
    finally:
        docker.down()


@pytest.fixture(scope="module")
def sshd_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    tmp = tmp_path_factory.mktemp("ssh")
    with sshd_containers(tmp, HOSTS) as docker:
        yield tmp, docker


@pytest.fixture(scope="module")
def cluster(sshd_hosts) -> Iterator:
    from faultline.cluster.ssh_backend import SSHBackend

    tmp, _ = sshd_hosts
    text = (tmp / "hosts.toml").read_text().replace("[ssh]\n", "[ssh]\naccept_new_host_keys = true\n", 1)
    (tmp / "hosts-accept.toml").write_text(text)
    b = SSHBackend.from_hosts_file(
        tmp / "hosts-accept.toml",
        StoreDB().cluster_spec(f"tssh-{secrets.token_hex(3)}", {"daemon": "placeholder"}),
    )
    with brought_up(b):
        yield b


def test_unknown_host_key_is_refused_by_default(sshd_hosts, tmp_path: Path) -> None:
    from faultline.cluster.ssh_backend import SSHBackend

    tmp, _ = sshd_hosts
    text = (tmp / "hosts.toml").read_text().replace(f"{tmp}/known_hosts", f"{tmp_path}/empty_known_hosts")
    (tmp_path / "hosts.toml").write_text(text)
    b = SSHBackend.from_hosts_file(
        tmp_path / "hosts.toml", StoreDB().cluster_spec("refused", {"daemon": "none"})
    )
    b.info["m1"] = NodeInfo("m1", "master", b.hosts["m1"].address, b.hosts["m1"].address)
    with pytest.raises(ClusterError, match=r"not in .*known_hosts"):
        b.remote.exec("m1", ["true"], 5)


def test_up_runs_daemons_and_dns(cluster) -> None:
    assert cluster.nodes() == list(HOSTS)
    assert all(cluster.daemon_status(n) == "running" for n in cluster.nodes())
    assert cluster.run("t1", ["getent", "hosts", "master-2"])[1].split()[0] == cluster.info["m2"].address
    assert cluster.can_connect("t1", "master-1", MASTER_PORT)


def test_cut_and_heal(cluster) -> None:
    try:
        cluster.cut("m1", "t1")
        assert not cluster.can_connect("m1", "t1", TSERVER_PORT, 1) and not cluster.can_connect(
            "t1", "m1", MASTER_PORT, 1
        )
        assert cluster.can_connect("m2", "t1", TSERVER_PORT) and cluster.can_connect("m1", "m2", MASTER_PORT)
    finally:
        cluster.heal_network()
    assert cluster.can_connect("m1", "t1", TSERVER_PORT) and cluster.can_connect("t1", "m1", MASTER_PORT)
    assert "FL-PART" not in cluster.run("t1", [cluster.iptables("t1"), "-w", "-S"])[1]


def test_large_output_timeout_and_reconnect(cluster) -> None:
    rc, out, err = cluster.remote.exec(
        "t1",
        ["sh", "-c", "head -c 4000000 /dev/zero | tr '\\0' a; head -c 4000000 /dev/zero | tr '\\0' b >&2"],
        60,
    )
    assert rc == 0 and len(out) == 4_000_000 and len(err) == 4_000_000
    t0 = time.monotonic()
    with pytest.raises(RemoteTimeout):
        cluster.remote.exec("t1", ["sleep", "30"], 1)
    assert time.monotonic() - t0 < 20  # 1 s plus ssh round trips on a loaded machine
    # a dropped session is reopened on the next command
    cluster.remote.client("t1").get_transport().close()
    assert cluster.remote.exec("t1", ["echo", "back"], 10)[1] == "back\n"
    cluster.remote.put("t1", "/var/lib/faultline/up.bin", bytes(range(256)) * 100)
    assert cluster.remote.get("t1", "/var/lib/faultline/up.bin") == bytes(range(256)) * 100


SHORT_TAIL_RUNS = int(os.environ.get("FAULTLINE_SSH_TAIL_RUNS", "25"))


def test_both_streams_read_to_their_end_every_time(cluster) -> None:
    """Both streams large, then an immediate exit: the exit status can reach us before the last data, so a
    reader that stops at the status loses a tail now and then. Run it many times: every byte, every time."""
    script = (
        "head -c 1500000 /dev/zero | tr '\\0' a & head -c 1500000 /dev/zero | tr '\\0' b >&2; wait; "
        "printf END; printf END >&2"
    )
    for attempt in range(SHORT_TAIL_RUNS):
        rc, out, err = cluster.remote.exec_bytes("t1", ["sh", "-c", script], 60)
        assert (rc, len(out), len(err)) == (0, 1_500_003, 1_500_003), f"run {attempt}"
        assert out.endswith(b"aEND") and err.endswith(b"bEND"), f"run {attempt}"


def test_move_master_name_and_lifecycle(cluster) -> None:
    try:
        cluster.set_dns("master-1", "m2")
        assert cluster.run("t1", ["getent", "hosts", "master-1"])[1].split()[0] == cluster.info["m2"].address
    finally:
        cluster.set_dns("master-1", "m1")
    assert_pause_kill_start(cluster, "t1", probe_from="m1", port=TSERVER_PORT)


def test_down_keeps_a_directory_faultline_did_not_create(sshd_hosts) -> None:
    """A hosts file naming the container's own /var/lib/faultline (the sshd's daemon files are in it) is
    refused at up, and that directory survives the cleanup."""
    from faultline.cluster.ssh_backend import SSHBackend

    tmp, docker = sshd_hosts
    text = (
        (tmp / "hosts.toml")
        .read_text()
        .replace('workdir = "/var/lib/faultline-ssh"', 'workdir = "/var/lib/faultline"')
    )
    (tmp / "hosts-theirs.toml").write_text(text.replace("[ssh]\n", "[ssh]\naccept_new_host_keys = true\n", 1))
    b = SSHBackend.from_hosts_file(
        tmp / "hosts-theirs.toml",
        StoreDB().cluster_spec(f"tssh-{secrets.token_hex(3)}", {"daemon": "placeholder"}),
    )
    with pytest.raises(ClusterError, match="Faultline did not create it"):
        b.up()
    for h in HOSTS:
        rc, out, _ = docker.run(f"h{h}", ["ls", "-A", "/var/lib/faultline"], 10)
        assert rc == 0 and out.strip(), f"h{h}: /var/lib/faultline was emptied or removed"


def test_the_disk_layer_on_a_host_with_fuse(tmp_path: Path) -> None:
    """An SSH cluster on a host with FUSE: the layer is mounted at the data directory on the host; a write
    never fsynced is gone after `lose`, one fsynced survives it; `down` leaves no mount and no layer process."""
    from faultline.cluster.ssh_backend import SSHBackend

    with sshd_containers(tmp_path, ("m1",), fuse=True) as docker:
        text = (
            (tmp_path / "hosts.toml")
            .read_text()
            .replace("[ssh]\n", "[ssh]\naccept_new_host_keys = true\n", 1)
        )
        (tmp_path / "hosts-accept.toml").write_text(text)
        spec = StoreDB().cluster_spec(
            f"tsshfuse-{secrets.token_hex(3)}", {"masters": 1, "tservers": 0, "daemon": "none"}
        )
        spec.disk_dirs = {"master": ["{dir}/data"]}
        b = SSHBackend.from_hosts_file(tmp_path / "hosts-accept.toml", spec)
        data = "/var/lib/faultline-ssh/data"
        write = (
            "import os, sys\nwith open(sys.argv[1], 'w') as f:\n    f.write(sys.argv[2])\n    f.flush()\n"
            "    if sys.argv[3] == 'fsync':\n        os.fsync(f.fileno())\n"
        )
        try:
            b.up()
            assert b.disk_layers("m1") == [data]
            assert f"faultline-disk {data} fuse" in b.run("m1", ["cat", "/proc/mounts"])[1]
            b.run("m1", [b.python("m1"), "-c", write, f"{data}/synced", "kept", "fsync"])
            b.run("m1", [b.python("m1"), "-c", write, f"{data}/unsynced", "lost", "no"])
            assert b.run("m1", ["cat", f"{data}/unsynced"])[1] == "lost"  # held by the layer, visible
            lost = b.lose_unfsynced("m1")
            assert lost["files"] == ["unsynced"] and lost["bytes"] == 4, lost
            assert b.run("m1", ["cat", f"{data}/synced"])[1] == "kept"
            assert b.run("m1", ["cat", f"{data}/unsynced"])[1] == ""  # created, its data gone
            assert b.disk_checkpoint("m1") == {"files": [], "bytes": 0}
        finally:
            b.down()
        look = (
            "import glob\nprint([m for m in open('/proc/mounts') if 'faultline-disk' in m],\n"
            "      [p for p in glob.glob('/proc/[0-9]*/comm') if open(p).read().strip() == 'faultline-disk'])"
        )
        left = docker.run("hm1", ["/opt/venv/bin/python3", "-c", look], 20)
        assert left[1].strip() == "[] []", left
        assert (
            docker.run("hm1", ["ls", "-A", "/var/lib/faultline-ssh"], 10, check=False)[0] != 0
        )  # workdir gone


def test_hosts_without_fuse_refuse_the_disk_layer_before_anything_reaches_them(
    sshd_hosts, tmp_path: Path
) -> None:
    from faultline.cluster.ssh_backend import SSHBackend
    from faultline.controller.errors import UsageError

    tmp, docker = sshd_hosts
    text = (tmp / "hosts.toml").read_text().replace("[ssh]\n", "[ssh]\naccept_new_host_keys = true\n", 1)
    (tmp_path / "hosts.toml").write_text(text.replace("/var/lib/faultline-ssh", "/var/lib/faultline-nofuse"))
    spec = StoreDB().cluster_spec(f"tsshnofuse-{secrets.token_hex(3)}", {"daemon": "placeholder"})
    spec.disk_dirs = {"master": ["{dir}/data"], "tserver": ["{dir}/data"]}
    b = SSHBackend.from_hosts_file(tmp_path / "hosts.toml", spec)
    with pytest.raises(
        UsageError, match=r"cannot mount the disk layer a disk fault needs on m1 .*no /dev/fuse"
    ):
        b.up()
    for h in HOSTS:
        assert docker.run(f"h{h}", ["ls", "/var/lib/faultline-nofuse"], 10, check=False)[0] != 0
