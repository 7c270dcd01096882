"""The history survives a host crash: the recorder fsyncs it periodically, at each phase's end and on close."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from faultline.controller import recorder as recorder_mod
from faultline.controller.recorder import SYNC_EVERY_S, Recorder


class FsyncSpy:
    """Counts os.fsync calls on one file (by inode), still calling the real fsync."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        self.path, self.calls = path, 0
        real = os.fsync

        def spy(fd: int) -> None:
            if self.path.exists() and os.fstat(fd).st_ino == self.path.stat().st_ino:
                self.calls += 1
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def op(i: int) -> dict[str, Any]:
    return {"process": i % 3, "type": "invoke", "f": "read"}


def test_the_recorder_fsyncs_every_few_seconds_while_ops_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0]
    path = tmp_path / "history.jsonl"
    rec = Recorder(path, clock=lambda: now[0])
    spy = FsyncSpy(monkeypatch, path)
    step = int(SYNC_EVERY_S * 1e9) // 4
    for i in range(3):  # 0, 0.5, 1 s: not yet due
        rec.record(op(i))
        now[0] += step
    assert spy.calls == 0
    rec.record(op(3))  # 1.5 s
    now[0] += step
    rec.record(op(4))  # 2 s: the tick is due
    assert spy.calls == 1
    for i in range(5, 8):  # the next tick is counted from the last sync
        now[0] += step
        rec.record(op(i))
    assert spy.calls == 1
    now[0] += step
    rec.record(op(8))
    assert spy.calls == 2
    rec.record(op(9))
    rec.close()
    assert spy.calls == 3  # close syncs what came after the last tick
    assert len(path.read_text().splitlines()) == 10


def test_close_and_a_phase_end_fsync_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "history.jsonl"
    rec = Recorder(path, clock=lambda: 0)
    spy = FsyncSpy(monkeypatch, path)
    rec.sync()
    assert spy.calls == 0  # nothing written yet: nothing to sync
    rec.record(op(0))
    rec.sync()
    assert spy.calls == 1
    rec.sync()
    assert spy.calls == 1  # nothing new since
    rec.record(op(1))
    rec.close()
    assert spy.calls == 2
    assert [json.loads(x)["index"] for x in path.read_text().splitlines()] == [0, 1]


def test_a_run_fsyncs_its_history_at_each_phase_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_controller_runner import make_test, run_fake

    synced: list[str] = []
    real = recorder_mod.Recorder.sync

    def spy(self: Recorder) -> None:
        synced.append(f"{len(self.ops)}")
        real(self)

    monkeypatch.setattr(recorder_mod.Recorder, "sync", spy)
    out, _ = run_fake(tmp_path, make_test(workload="set"))
    assert out.valid is True, out.results
    # cluster, setup, main, heal, quiet, final, healing: each phase's start syncs the one before
    assert len(synced) == 7
    assert (
        synced[2] == "0" and int(synced[-1]) >= int(synced[3]) > 0
    )  # the main phase's ops, synced as the heal began
