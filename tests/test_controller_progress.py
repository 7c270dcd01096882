"""The live progress line and the fault tracker behind it."""

from __future__ import annotations

import io
from contextlib import redirect_stderr

from faultline.controller.progress import Progress
from faultline.controller.recorder import Recorder
from faultline.controller.runner import FaultTracker


def test_fault_tracker_follows_start_and_stop() -> None:
    f = FaultTracker()
    f({"type": "invoke", "f": "start-partition"})
    f({"type": "ok", "f": "start-partition", "value": "ring"})
    f({"type": "invoke", "f": "replace-master"})
    assert f.describe() == "partition ring, replace-master…"
    f({"type": "ok", "f": "replace-master"})
    f({"type": "ok", "f": "stop-partition"})
    assert f.describe() == "none" and f.count == 1


def test_progress_line_shows_counts_rate_and_faults() -> None:
    clock = iter(range(0, 10**12, 10**8))
    rec = Recorder(None, clock=lambda: next(clock))
    for i in range(4):
        rec.record({"type": "invoke", "process": i, "f": "read"})
        rec.record({"type": "ok" if i < 3 else "info", "process": i, "f": "read"})
    faults = FaultTracker()
    faults({"type": "ok", "f": "start-kill", "value": "t1"})
    p = Progress(time_limit=30, live=False, interval_s=0.05)
    buf = io.StringIO()
    with redirect_stderr(buf):
        p.phase("main")
        p.attach(rec, faults)
        line = p.line()
        p.stop()
    assert "ok 3" in line and "info 1" in line and "fail 0" in line
    assert "/30 s" in line and "kill t1" in line and "ok/s" in line


def test_progress_names_every_phase_after_main_and_never_counts_past_the_limit() -> None:
    rec = Recorder(None)
    p = Progress(time_limit=0.01, live=False, interval_s=60)
    buf = io.StringIO()
    with redirect_stderr(buf):
        p.attach(rec, FaultTracker())
        p.phase("main")
        import time

        time.sleep(0.05)  # the main phase outlasts its limit: the display stops at the limit
        assert "0.0/0.01 s" in p.line()
        for phase in ("heal", "quiet", "final", "healing", "checking", "writing", "teardown"):
            p.phase(phase)
        p.stop()
    out = buf.getvalue()
    for words in (
        "heal: healing the faults",
        "quiet: waiting for recovery",
        "final reads",
        "healing: stopping the workers",
        "checking the history",
        "writing results and report",
        "teardown: taking the cluster down",
    ):
        assert f"faultline run: {words}" in out, out
    assert (
        "ok/s" not in out.split("healing the faults")[1]
    )  # later phases show their own clock, not the main's


def test_tables_keep_120_columns_when_not_a_terminal() -> None:
    from faultline.controller.progress import console

    assert console().width >= 120  # pytest captures stdout: not a terminal
