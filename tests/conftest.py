"""Markers and shared fixtures.

Requirement markers (`docker`, `spark`, `root`, `chromium`): outside CI a test
whose requirement is missing is skipped with a one-line reason; with CI=true it
is an error, so CI can never go green by skipping the cluster tests.
`slow` tests run only with `--slow`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

# the shared checks' failures show their values, as a test's own asserts do
pytest.register_assert_rewrite("cluster_checks")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


@functools.cache
def docker_missing() -> str | None:
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:
        return f"no Docker engine reachable ({type(exc).__name__})"
    return None


@functools.cache
def spark_missing() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed"
    return None


@functools.cache
def root_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"ip netns unusable: {probe.stderr.strip()}"
    return None


@functools.cache
def chromium_missing() -> str | None:
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "headless chromium is not installed (apt-get install chromium)"
    return None


REQUIREMENTS = {
    "docker": docker_missing,
    "spark": spark_missing,
    "root": root_missing,
    "chromium": chromium_missing,
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the leak check runs after every test that could leave a container, network or namespace behind
    items.sort(key=lambda item: "test_cluster_zz_leftovers" in item.nodeid)
    if config.getoption("--slow"):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("slow") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name, probe in REQUIREMENTS.items():
        if item.get_closest_marker(name) is None:
            continue
        reason = probe()
        if reason is None:
            continue
        if IN_CI:
            pytest.fail(f"CI=true and requirement '{name}' is missing: {reason}", pytrace=False)
        pytest.skip(f"{name}: {reason}")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the checkout: reference histories and seeds. Required in CI."""
    if not SHARED.is_dir():
        if IN_CI:
            pytest.fail(f"CI=true but {SHARED} is missing", pytrace=False)
        pytest.skip(f"{SHARED} is absent")
    return SHARED


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession for the whole test session (UI off, few shuffle partitions)."""
    reason = spark_missing()
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true and Spark is missing: {reason}", pytrace=False)
        pytest.skip(f"spark: {reason}")
    from faultline.results.spark_session import get_session

    session = get_session("local[2]", app_name="faultline-tests", shuffle_partitions=4)
    yield session
    session.stop()
