"""Faultline's pytest plugin (loaded automatically once faultline is installed).

Write a chaos test in a few lines:

    import pytest

    @pytest.mark.chaos
    def test_register_survives_partitions(faultline_run):
        faultline_run(workload="register", nemesis=["partition", "kill"], time_limit=30).assert_valid()

Chaos tests run only with `--chaos` (they bring up real clusters). Options: `--chaos-cluster`
(docker, local, ssh; default docker) and `--chaos-store` (where runs are kept; default a temporary
directory per session). A failing run names its run directory, its verdict and the first anomaly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class ChaosRun:
    """The outcome of one run inside a chaos test."""

    valid: Any
    run_dir: Path | None
    results: dict[str, Any]
    cut_short: str | None
    ops: int
    first_anomaly: str | None
    detection_s: float | None

    def describe(self) -> str:
        text = f"verdict {self.valid!r}; run directory {self.run_dir}"
        if self.run_dir:
            text += f" (report {self.run_dir / 'report.html'})"
        if self.first_anomaly:
            text += f"; first anomaly at {self.detection_s}s: {self.first_anomaly}"
        if self.cut_short:
            text += f"; cut short: {self.cut_short}"
        return text

    def assert_valid(self) -> ChaosRun:
        if self.valid is not True:
            pytest.fail(f"expected a valid history, got {self.describe()}", pytrace=False)
        return self

    def assert_invalid(self) -> ChaosRun:
        if self.valid is not False:
            pytest.fail(f"expected the checkers to find an anomaly, got {self.describe()}", pytrace=False)
        return self

    def assert_expected(self, expect: str) -> ChaosRun:
        return self.assert_valid() if expect == "valid" else self.assert_invalid()


def pytest_addoption(parser: pytest.Parser) -> None:
    from faultline.cluster.backends import DEFAULT

    group = parser.getgroup("faultline", "Faultline chaos tests")
    group.addoption(
        "--chaos", action="store_true", default=False, help="run tests marked chaos (real clusters)"
    )
    group.addoption(
        "--chaos-cluster",
        default=DEFAULT,
        help=f"cluster backend for chaos runs (default {DEFAULT}; local, ssh, or a backend a DB plug-in "
        "registers, such as the store's in-memory fake)",
    )
    group.addoption(
        "--chaos-store", default=None, help="store directory for chaos runs (default: a temporary one)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a Faultline chaos test; runs only with --chaos")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--chaos"):
        return
    chaos = [i for i in items if i.get_closest_marker("chaos")]
    if chaos:
        config.hook.pytest_deselected(items=chaos)
        items[:] = [i for i in items if not i.get_closest_marker("chaos")]


@pytest.fixture(scope="session")
def faultline_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where chaos runs are stored (`--chaos-store`, else a session temporary directory)."""
    chosen = request.config.getoption("--chaos-store")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("faultline-store")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def faultline_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A cluster brought up once for the session (the default DB at its default size), torn down at the end,
    for tests that talk to the cluster directly. Runs made with `faultline_run` bring up their own."""
    from faultline.controller import testspec

    test = testspec.build_test(
        {
            "cluster": request.config.getoption("--chaos-cluster"),
            "cluster_name": "fl-pytest",
            "workload": "register",
        }
    )
    backend = testspec.make_backend(testspec.stamp(test))
    try:
        backend.up(test.cluster_spec)
        yield backend
    finally:
        backend.down()


@pytest.fixture
def faultline_run(request: pytest.FixtureRequest, faultline_store: Path) -> Callable[..., ChaosRun]:
    """`faultline_run(workload=..., nemesis=[...], bugs=[...], time_limit=..., seed=..., expect=None, **opts)`
    runs one test on a fresh cluster and returns a ChaosRun; with `expect` ("valid" or "invalid") it
    also fails the test, naming the run directory, the verdict and the first anomaly."""
    from faultline.controller import testspec
    from faultline.controller.campaign import first_anomaly, history_times
    from faultline.controller.runner import run_once

    cluster = request.config.getoption("--chaos-cluster")

    def run(
        workload: str = "register",
        nemesis: Sequence[str] | str = ("partition",),
        bugs: Sequence[str] | str = (),
        expect: str | None = None,
        **opts: Any,
    ) -> ChaosRun:
        names = [nemesis] if isinstance(nemesis, str) else list(nemesis)
        bug_list = [bugs] if isinstance(bugs, str) else list(bugs)
        spec = {
            "cluster": cluster,
            "workload": workload,
            "nemesis": ",".join(names),
            "inject_bug": ",".join(bug_list),
            **opts,
        }
        test = testspec.build_test(spec)
        outcome = run_once(test, faultline_store, quiet=True, install_signals=False)
        detection, anomaly = (
            first_anomaly(outcome.results, history_times(outcome.run_dir))
            if outcome.valid is False
            else (None, None)
        )
        result = ChaosRun(
            outcome.valid,
            Path(outcome.run_dir) if outcome.run_dir else None,
            outcome.results,
            outcome.cut_short,
            outcome.ops,
            anomaly,
            detection,
        )
        request.node.user_properties.append(
            (
                "faultline_run",
                json.dumps(
                    {"run_dir": str(result.run_dir), "valid": result.valid, "first_anomaly": anomaly},
                    default=str,
                ),
            )
        )
        if expect is not None:
            result.assert_expected(expect)
        return result

    return run
