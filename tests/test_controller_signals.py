"""Stop signals during a run: SIGINT, SIGTERM and SIGHUP alike lead to an orderly stop that lets the fault
in flight land, heals after it, keeps the history and writes results.json; a third signal gives up
healing and the results name what was not healed. On the generic in-memory fake (`--cluster kvfake`,
testing/kvfake.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from kvfake_runs import KVFAKE, start_kvfake_run, wait_for_history

pytestmark = pytest.mark.integration  # real runs in subprocesses, signalled


def interrupt(proc: subprocess.Popen[str], sigs: list[int], gap_s: float = 0.3) -> tuple[str, str]:
    try:
        for i, sig in enumerate(sigs):
            if i:
                time.sleep(gap_s)
            proc.send_signal(sig)
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_like_ctrl_c(tmp_path: Path, sig: int) -> None:
    store = tmp_path / "store"
    proc = start_kvfake_run(store, "partition,kill", {})
    run_dir = wait_for_history(store, 300)
    out, err = interrupt(proc, [sig])
    assert proc.returncode == 2, (out, err)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["cut_short"] == f"interrupted ({signal.Signals(sig).name})"
    assert results["residue"] == [] and "not_healed" not in results
    assert results["valid"] is True  # checked: the history so far is linearizable


def test_the_heal_comes_after_the_fault_in_flight(tmp_path: Path) -> None:
    """Each pause takes 2 s to land. Two signals just after one is invoked: the heal waits for it, so when
    the pause would have landed no node is paused (healing first, the pause lands after the heal, and a
    residue check made at once still sees a clean cluster)."""
    import threading

    from faultline.controller import testspec
    from faultline.controller.runner import run_test
    from faultline.nemesis.registry import compose
    from faultline.testing.kvfake import KVFakeBackend
    from faultline.workloads.registry import get as get_workload

    test = testspec.stamp(
        testspec.build_test(
            {
                "db": KVFAKE,
                "cluster": "kvfake",
                "workload": "register",
                "nemesis": "pause",
                "nemesis_interval": 0.3,
                "time_limit": 30,
                "seed": 4,
                "quiet_period": 0,
            }
        )
    )
    backend = KVFakeBackend(seed=4)
    backend.pause_delay_s = 2.0
    run = testspec.start_run(test, backend)
    landed: list[str] = []
    real_pause = backend.pause

    def pause_then_interrupt(node: str) -> None:
        if not landed:  # the first pause: two signals while it is in flight
            for delay in (0.2, 0.4):
                threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()
        real_pause(node)
        landed.append(node)

    backend.pause = pause_then_interrupt  # type: ignore[method-assign]
    out = run_test(
        run,
        get_workload("register", run.db, test.workload_opts),
        compose(["pause"], run.db, 0.3),
        None,
    )
    time.sleep(2.5)  # any pause still in flight has landed by now
    assert landed, "the run was interrupted before a pause landed"
    assert out.results["residue"] == [] and backend.residue() == [], backend.residue()
    assert str(out.cut_short).startswith("interrupted (SIGINT x2")


def test_a_third_signal_gives_up_healing_and_says_what_was_not_healed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = start_kvfake_run(store, "partition", {"FAULTLINE_FAKE_HEAL_DELAY": "3"})
    run_dir = wait_for_history(store, 300)
    out, err = interrupt(proc, [signal.SIGTERM, signal.SIGTERM, signal.SIGTERM], gap_s=0.5)
    assert proc.returncode == 2, (out, err)
    assert "Traceback" not in err
    results = json.loads((run_dir / "results.json").read_text())
    assert results["cut_short"].startswith("interrupted (SIGTERM x3)")
    assert "network heal" in results["not_healed"], results
    assert results["valid"] == "unknown"
    from faultline.history import read_jsonl

    assert len(read_jsonl(run_dir / "history.jsonl")) >= 300  # closed and readable
