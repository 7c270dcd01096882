"""The disk layer's semantics, mounted on the host in a temporary folder (needs root and /dev/fuse):
writes are held until fsync, `lose` drops them, `checkpoint` writes them through, metadata goes through at
once, and unmounting leaves no mount and no process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultline.cluster import disklayer

# light (one mount in a temporary folder): `make test` runs these beside the real DBs' cells
pytestmark = [pytest.mark.root, pytest.mark.paired]


@pytest.fixture
def layer(tmp_path: Path) -> Iterator[disklayer.Layer]:
    why = disklayer.unavailable()
    if why:
        pytest.fail(why) if os.environ.get("CI") else pytest.skip(why)
    mounted = disklayer.mount(tmp_path / "layer")
    try:
        yield mounted
    finally:
        disklayer.unmount(mounted)
    assert not disklayer.is_mounted(mounted.mountpoint)
    assert disklayer._layer_pid(mounted) is None


def write(path: Path, data: bytes, offset: int = 0, sync: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, offset)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_data_survives_a_loss_and_unsynced_data_does_not(layer: disklayer.Layer) -> None:
    m = layer.mountpoint
    write(m / "wal", b"committed", sync=True)
    write(m / "wal", b"-pending", offset=9)
    write(m / "other", b"never synced")
    assert (m / "wal").read_bytes() == b"committed-pending"  # reads see the held writes
    assert (layer.backing / "wal").read_bytes() == b"committed"
    lost = layer.command("lose")
    assert lost == {"files": ["other", "wal"], "bytes": len(b"-pending") + len(b"never synced")}
    assert (m / "wal").read_bytes() == b"committed"
    assert (m / "other").exists() and (m / "other").read_bytes() == b""  # a create is metadata: kept
    assert layer.command("stats") == {"files": [], "bytes": 0}


def test_partial_page_writes_keep_the_rest_of_the_page(layer: disklayer.Layer) -> None:
    m = layer.mountpoint
    base = bytes(range(256)) * 40  # 10240 bytes: two full pages and a partial one
    write(m / "f", base, sync=True)
    write(m / "f", b"XY", offset=4095)  # across a page boundary
    expect = base[:4095] + b"XY" + base[4097:]
    assert (m / "f").read_bytes() == expect
    write(m / "f", b"tail", offset=len(base) + 100)  # past the end: a hole of zeros
    assert (m / "f").stat().st_size == len(base) + 104
    assert (m / "f").read_bytes() == expect + bytes(100) + b"tail"
    fd = os.open(m / "f", os.O_RDONLY)
    os.fdatasync(fd)
    os.close(fd)
    assert (layer.backing / "f").read_bytes() == expect + bytes(100) + b"tail"


def test_checkpoint_writes_everything_through(layer: disklayer.Layer) -> None:
    m = layer.mountpoint
    (m / "d").mkdir()
    write(m / "d" / "a", b"one")
    write(m / "b", b"two")
    assert layer.command("checkpoint")["files"] == ["b", "d/a"]
    assert layer.command("lose") == {"files": [], "bytes": 0}
    assert (m / "d" / "a").read_bytes() == b"one" and (m / "b").read_bytes() == b"two"


def test_rename_unlink_and_truncate(layer: disklayer.Layer) -> None:
    m = layer.mountpoint
    write(m / "tmp", b"held")
    os.rename(m / "tmp", m / "final")  # the held data follows its inode
    assert (m / "final").read_bytes() == b"held"
    write(m / "gone", b"x" * 5000)
    os.unlink(m / "gone")
    write(m / "t", b"0123456789")
    os.truncate(m / "t", 4)  # a truncate writes the file's held data through first
    assert (layer.backing / "t").read_bytes() == b"0123"
    layer.command("lose")
    assert not (m / "tmp").exists() and not (m / "gone").exists()
    assert (m / "final").read_bytes() == b""  # renamed at once, its data never fsynced
    assert (m / "t").read_bytes() == b"0123"


def test_directories_modes_and_owners_reach_the_backing_folder(layer: disklayer.Layer) -> None:
    m = layer.mountpoint
    (m / "a" / "b").mkdir(parents=True)
    os.chmod(m / "a", 0o700)
    os.chown(m / "a" / "b", 1234, 1234)
    os.symlink("b", m / "a" / "link")
    assert sorted(os.listdir(m / "a")) == ["b", "link"]
    assert os.readlink(m / "a" / "link") == "b"
    assert (layer.backing / "a").stat().st_mode & 0o777 == 0o700
    assert (layer.backing / "a" / "b").stat().st_uid == 1234
    (m / "a" / "b").rmdir()
    assert not (layer.backing / "a" / "b").exists()


def test_mount_and_unmount_of_a_node_leave_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    why = disklayer.unavailable()
    if why:
        pytest.fail(why) if os.environ.get("CI") else pytest.skip(why)
    monkeypatch.setenv("FAULTLINE_RUN_DIR", str(tmp_path / "run"))
    target = tmp_path / "data"
    try:
        layers = disklayer.mount_node("local", "tdisk", "n1", [target])
        write(target / "x", b"unsynced")
        assert disklayer.lose("local", "tdisk", "n1") == {"files": ["x"], "bytes": 8}
        assert str(target) in disklayer.leftovers()
        os.kill(int(layers[0].pidfile.read_text()), 9)  # a layer killed: its mount is left dangling
    finally:
        disklayer.unmount_cluster("local", "tdisk")
    assert not disklayer.is_mounted(target) and str(target) not in disklayer.leftovers()
    assert disklayer.residue("local", "tdisk") == []
    assert not disklayer.layer_root("local", "tdisk").exists()
