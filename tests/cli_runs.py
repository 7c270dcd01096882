"""The command lines the tests run as a user would: `python -m MODULE ARGS` from the checkout's root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_module(
    module: str, *args: str, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS` in the checkout's root, its output captured as text; `env` is added to the
    environment."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env is not None else None,
    )


def remove_cluster(name: str) -> None:
    """`faultline cluster down --name NAME`: whatever the run left of cluster `name` is removed."""
    run_module("faultline", "cluster", "down", "--name", name, timeout=300)
