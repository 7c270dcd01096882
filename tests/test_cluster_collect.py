"""Copying node files into a run directory (cluster/collect.py): the content is exact, blocks of zeros
become holes, a tar stream is read as it arrives, and the data filter still guards the destination."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from faultline.cluster.collect import BLOCK, ChunkStream, copy_tree_sparse, extract_tar


def _preallocated_wal() -> bytes:
    """A WAL segment as etcd leaves it: a little data, then megabytes of preallocated zeros."""
    return b"entry-1\x00entry-2" + bytes(BLOCK - 15) + b"tail" + bytes(4 * 1024 * 1024)


def _tar(members: dict[str, bytes], compress: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw) if compress else raw


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.mark.parametrize("compress", [False, True])
def test_files_come_back_exact_and_zeros_take_no_space(tmp_path: Path, compress: bool) -> None:
    wal, log = _preallocated_wal(), b"2026-11-26 started\n"
    raw = _tar({"data/member/wal/0.wal": wal, "logs/etcd.log": log}, compress)
    chunks = [raw[i : i + 1000] for i in range(0, len(raw), 1000)]  # the docker API's small chunks
    extract_tar(ChunkStream(chunks) if not compress else io.BytesIO(raw), tmp_path, compressed=compress)
    out = tmp_path / "data/member/wal/0.wal"
    assert out.read_bytes() == wal and (tmp_path / "logs/etcd.log").read_bytes() == log
    assert out.stat().st_size == len(wal) and out.stat().st_mode & 0o777 == 0o600
    assert out.stat().st_mtime == 1_700_000_000
    assert _allocated(out) < len(wal) // 4  # the 4 MB of zeros are a hole


def test_a_file_ending_in_zeros_keeps_its_length(tmp_path: Path) -> None:
    data = b"x" + bytes(3 * BLOCK + 7)
    extract_tar(io.BytesIO(_tar({"f": data})), tmp_path)
    assert (tmp_path / "f").read_bytes() == data


@pytest.mark.parametrize("name", ["../outside", "a/../../outside"])
def test_the_data_filter_still_refuses_paths_out_of_the_destination(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "dest"
    with pytest.raises(tarfile.FilterError):
        extract_tar(io.BytesIO(_tar({name: b"x"})), dest)
    assert not (tmp_path / "outside").exists()


def test_an_absolute_name_lands_inside_the_destination(tmp_path: Path) -> None:
    extract_tar(io.BytesIO(_tar({"/etc/evil": b"x"})), tmp_path / "dest")
    assert (tmp_path / "dest/etc/evil").read_bytes() == b"x"


def test_a_local_copy_is_sparse_and_exact(tmp_path: Path) -> None:
    src = tmp_path / "node"
    (src / "wal").mkdir(parents=True)
    wal = _preallocated_wal()
    (src / "wal" / "0.wal").write_bytes(wal)
    (src / "link").symlink_to("wal/0.wal")
    dest = tmp_path / "copy"
    copy_tree_sparse(src, dest)
    assert (dest / "wal" / "0.wal").read_bytes() == wal and (dest / "link").is_symlink()
    assert _allocated(dest / "wal" / "0.wal") < len(wal) // 4
