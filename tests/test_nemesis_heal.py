"""Heals that restore what a fault left, even when the fault's own worker never got to: a staged election
cut off mid-stage is restored by the heal (servers started, flags back, crash points disarmed)."""

from __future__ import annotations

from typing import Any

import pytest

from faultline.dbs.store.fake import fake_run, store_spec
from faultline.dbs.store.faults import elections


def test_a_stage_cut_off_mid_way_is_restored_by_the_heal(monkeypatch: pytest.MonkeyPatch) -> None:
    restored: list[tuple[str, list[str]]] = []

    class RecordingStage:
        def __init__(
            self, test: Any, client: Any, tablet: str, addrs: list[str], steps: list[str], wait_s: float
        ) -> None:
            self.tablet, self.addrs = tablet, addrs

        def restore(self) -> None:
            restored.append((self.tablet, self.addrs))

    monkeypatch.setattr(elections, "_Stage", RecordingStage)
    run = fake_run()
    run.backend.up(store_spec())
    nem = elections.VoteCrashNemesis().setup(run)
    nem.unrestored["tablet-1"] = ["t1:7050", "t2:7050", "t3:7050"]  # as invoke leaves it, mid-stage
    nem.heal(run)
    assert restored == [("tablet-1", ["t1:7050", "t2:7050", "t3:7050"])]
    assert nem.unrestored == {}
    nem.heal(run)  # nothing pending: nothing more to restore
    assert len(restored) == 1
