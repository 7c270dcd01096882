"""The pytest plugin: chaos tests are opt-in, and a failing run names its directory, verdict and anomaly."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CHAOS_TESTS = """
import pytest

FAST = dict(time_limit=1.5, concurrency=4, nemesis_interval=0.3, quiet_period=0.1)

@pytest.mark.chaos
def test_correct_store_is_valid(faultline_run):
    faultline_run(workload="register", nemesis=["partition"], expect="valid", **FAST)

@pytest.mark.chaos
def test_bug_is_reported(faultline_run):
    faultline_run(workload="register", nemesis=["partition"], bugs=["stale-leader-reads"], expect="valid", **FAST)
"""


def test_chaos_tests_are_deselected_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_chaos=CHAOS_TESTS)
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(deselected=2)


@pytest.mark.integration
def test_chaos_runs_pass_and_fail_with_a_useful_message(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_chaos=CHAOS_TESTS)
    store = pytester.path / "store"
    result = pytester.runpytest_subprocess(
        "-q",
        "-p",
        "no:cacheprovider",
        "--chaos",
        "--chaos-cluster",
        "fake",
        "--chaos-store",
        str(store),
        timeout=300,
    )
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "expected a valid history, got verdict False; run directory" in text
    assert str(store) in text
    assert "first anomaly at" in text and "report.html" in text
