"""`faultline run` on the generic in-memory fake (`--cluster kvfake`, testing/kvfake.py) in a subprocess, for
the tests that signal a run part way through."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KVFAKE = "faultline.testing.kvfake:KVFakeDB"  # testing.kvfake.DB_PATH, without importing it here


def start_kvfake_run(store: Path, nemesis: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """A 60 s register run (seed 4) into `store` with faults every 0.3 s, unbuffered; `env` is added to the
    environment."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "faultline",
            "run",
            "--db",
            KVFAKE,
            "--cluster",
            "kvfake",
            "--workload",
            "register",
            "--nemesis",
            nemesis,
            "--nemesis-interval",
            "0.3",
            "--time-limit",
            "60",
            "--seed",
            "4",
            "--store",
            str(store),
            "--quiet",
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )


def wait_for_history(store: Path, min_lines: int, timeout: float = 60) -> Path:
    """The run directory in `store` once its history has `min_lines` lines, so a signal lands mid-run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for h in store.glob("*/*/history.jsonl"):
            if len(h.read_text().splitlines()) >= min_lines:
                return h.parent
        time.sleep(0.1)
    raise AssertionError("the run never wrote its history")
