"""Campaign files: validation before anything runs, expectations, resume without repeats, the CLI.

Runs use the in-memory fake cluster (testing/fake.py) so the campaign machinery is tested quickly;
the real-cluster chaos suite is tests/test_chaos_ci.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from campaign_files import fake_campaign
from cli_runs import run_module

from faultline.controller import campaign as cp
from faultline.controller.errors import UsageError
from faultline.controller.runner import run_once
from faultline.core import TestSpec

FAKE_CAMPAIGN = fake_campaign("t", [1, 2], 1.5, 4)


def campaign_cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> CompletedProcess[str]:
    """`faultline campaign ARGS` as a user runs it; `env` is added to the environment."""
    return run_module("faultline", "campaign", *args, timeout=timeout, env=env)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("snippet", "needle"),
    [
        ('workload = "regster"', "workload 'regster' is unknown; valid: register"),
        ('workload = "register"\nnemesis = ["partishun"]', "nemesis 'partishun' is unknown; valid:"),
        ('workload = "register"\nbugs = ["nope"]', "bug 'nope' is unknown; valid:"),
        ('workload = "register"\nconcurrency = "ten"', "concurrency must be int"),
        ('workload = "register"\ncolour = 3', "unknown key 'colour'; valid keys:"),
        ('workload = "register"\nexpect = "maybe"', "expect 'maybe' is unknown; valid: valid, invalid"),
    ],
)
def test_typos_are_rejected_before_anything_runs(tmp_path: Path, snippet: str, needle: str) -> None:
    body = "[campaign]\nname = 'x'\ncluster = 'fake'\n[[cell]]\n" + snippet + "\n"
    if "expect" not in snippet:
        body += 'expect = "valid"\n'
    with pytest.raises(UsageError) as exc:
        cp.load(write(tmp_path, body))
    assert needle in str(exc.value)


def test_matrix_expands_to_product_of_alternatives_seeds_and_limits(tmp_path: Path) -> None:
    camp = cp.load(
        write(
            tmp_path,
            """
[campaign]
cluster = "fake"
seeds = [1, 2, 3]
time_limits = [5, 10]
[[cell]]
name = "m"
workloads = ["register", "set"]
nemeses = [["partition"], ["kill", "pause"]]
expect = "valid"
""",
        )
    )
    assert len(camp.runs) == 2 * 2 * 3 * 2
    assert len({r.key for r in camp.runs}) == len(camp.runs)
    assert {r.opts["nemesis"] for r in camp.runs} == {"partition", "kill,pause"}


@pytest.mark.integration
def test_campaign_meets_expectations_and_resumes_without_repeating(tmp_path: Path) -> None:
    camp = cp.load(write(tmp_path, FAKE_CAMPAIGN), store_override=tmp_path / "store")
    assert len(camp.runs) == 4
    calls: list[str] = []

    def flaky(test: TestSpec, store: Path) -> object:
        calls.append(test.name)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during the third run
        return run_once(test, store, quiet=True, install_signals=False)

    with pytest.raises(KeyboardInterrupt):
        cp.execute(camp, flaky)
    saved = cp.load_state(camp)
    assert len(saved) == 2  # the interrupted run is not recorded

    resumed: list[str] = []

    def counting(test: TestSpec, store: Path) -> object:
        resumed.append(f"{test.name}|{test.seed}")
        return run_once(test, store, quiet=True, install_signals=False)

    records = cp.execute(camp, counting)
    assert len(resumed) == 2  # only the unfinished runs ran again
    assert len(records) == 4
    summary = {s.cell: s for s in cp.summarize(camp, records)}
    assert summary["good"].valid == 2 and summary["good"].ok
    assert summary["stale"].invalid == 2 and summary["stale"].ok
    assert summary["stale"].median_detection_s is not None
    for rec in records.values():
        assert Path(rec.run_dir, "results.json").exists()


@pytest.mark.integration
def test_cli_dry_run_and_bad_file_exit_codes(tmp_path: Path) -> None:
    path = write(tmp_path, FAKE_CAMPAIGN)
    out = campaign_cli(str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "good|seed=1|t=1.5\texpect valid" in out.stdout
    bad = write(tmp_path, FAKE_CAMPAIGN.replace('workload = "register"', 'workload = "regster"', 1))
    out = campaign_cli(str(bad))
    assert out.returncode == 254
    assert "valid: register" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.integration
def test_select_narrows_cells_and_overrides_seeds_keeping_keys(tmp_path: Path) -> None:
    camp = cp.load(write(tmp_path, FAKE_CAMPAIGN))
    only = cp.select(camp, cells=["st*"])
    assert [r.key for r in only.runs] == ["stale|seed=1|t=1.5", "stale|seed=2|t=1.5"]
    reseeded = cp.select(camp, seeds=[7, 8, 9])
    assert [(r.cell, r.seed, r.opts["seed"]) for r in reseeded.runs] == [
        ("good", 7, 7),
        ("good", 8, 8),
        ("good", 9, 9),
        ("stale", 7, 7),
        ("stale", 8, 8),
        ("stale", 9, 9),
    ]
    assert reseeded.runs[3].opts["inject_bug"] == "stale-leader-reads"
    with pytest.raises(UsageError, match="no cell matches nope; cells: good, stale"):
        cp.select(camp, cells=["nope"])
    out = campaign_cli(str(tmp_path / "c.toml"), "--dry-run", "--cell", "good", "--seeds", "4,5")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:2] == [
        "good|seed=4|t=1.5\texpect valid",
        "good|seed=5|t=1.5\texpect valid",
    ]
    out = campaign_cli(str(tmp_path / "c.toml"), "--dry-run", "--seeds", "x")
    assert out.returncode == 254 and "--seeds wants integers" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.spark
def test_cli_campaign_runs_scores_and_fails_on_unmet_expectation(tmp_path: Path) -> None:
    # "good" with the bug injected cannot be valid: its expectation must fail the campaign (exit 1)
    text = FAKE_CAMPAIGN.replace("seeds = [1, 2]", "seeds = [1]").replace(
        'name = "good"\nworkload = "register"\nnemesis = ["partition"]',
        'name = "good"\nworkload = "register"\nnemesis = ["partition"]\nbugs = ["stale-leader-reads"]',
    )
    path = write(tmp_path, text)
    store = tmp_path / "store"
    out = campaign_cli(str(path), "--store", str(store), "--quiet", "--engine", "spark", timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "expectation not met: good|seed=1" in out.stdout
    assert (store / "_score" / "scorecard.html").exists()
    # the JVM's own warnings go to a log beside the scores, not to the terminal
    for noise in ("WARN", "log4j", "incubator", "setLogLevel"):
        assert noise not in out.stderr and noise not in out.stdout, noise
    assert (
        "log4j" in (store / "_score" / "spark.log").read_text()
        or "WARN" in (store / "_score" / "spark.log").read_text()
    )
    assert "1/2 expectations met" in out.stdout
    state = json.loads((store / "campaign.json").read_text())
    assert {r["cell"] for r in state["runs"]} == {"good", "stale"}


def test_a_run_cut_short_never_meets_a_valid_expectation(tmp_path: Path) -> None:
    """Its final checks never ran: a valid verdict on the partial history proves nothing; an invalid one
    still shows the bug."""
    from faultline.controller.runner import Outcome

    camp = cp.load(write(tmp_path, FAKE_CAMPAIGN), store_override=tmp_path / "store")

    def crashed(test: TestSpec, store: Path) -> object:
        valid = "good" in test.name  # the good cell's partial history is valid, the buggy one's not
        return Outcome(valid, {"valid": valid}, None, "nemesis crashed on replace-master: NemesisError", 10)

    records = cp.execute(camp, crashed)
    met = {r.cell: r.expectation_met for r in records.values()}
    assert met == {"good": False, "stale": True}
    assert {r.cell: r.valid for r in records.values()} == {"good": True, "stale": False}


@pytest.mark.integration
def test_summary_piped_keeps_full_cell_names_and_says_what_was_met_and_what_next(tmp_path: Path) -> None:
    """Output that is not a terminal (a CI log, `| cat`) keeps the table at 120 columns or more."""
    text = (
        FAKE_CAMPAIGN.replace("seeds = [1, 2]", "seeds = [1]")
        .replace('name = "good"', 'name = "register-partition-expected-valid-long-name"')
        .replace('name = "stale"', 'name = "register-stale-leader-reads-expected-invalid"')
    )
    store = tmp_path / "store"
    out = campaign_cli(
        str(write(tmp_path, text)), "--store", str(store), "--no-score", timeout=600, env={"COLUMNS": "80"}
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "register-partition-expected-valid-long-name" in out.stdout
    assert "register-stale-leader-reads-expected-invalid" in out.stdout and "…" not in out.stdout
    assert "2/2 expectations met" in out.stdout
    reports = [line for line in out.stdout.splitlines() if line.endswith("/report.html")]
    assert len(reports) == 2 and all(Path(line.rsplit(": ", 1)[1]).is_file() for line in reports)
    assert f"serve {store}" in out.stdout and "next:" in out.stdout
    # result lines read as words, not Python reprs
    assert "valid=True" not in out.stderr and "valid (expected valid): expectation met in" in out.stderr
    assert "invalid (expected invalid): expectation met in" in out.stderr


HEAD = "[campaign]\nname = 'x'\ncluster = 'fake'\n"
CELL = '[[cell]]\nworkload = "register"\nexpect = "valid"\n'


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("cell = [1, 2]\n" + HEAD, "cell #1 must be a [[cell]] table, not 1"),
        ('cell = "register"\n' + HEAD, "no [[cell]] tables"),
        (
            HEAD + '[[cell]]\nworkloads = []\nexpect = "valid"\n',
            "workloads must be a non-empty list of workload names",
        ),
        (HEAD + CELL + "nemeses = []\n", "nemeses must be a non-empty list of nemesis lists"),
        (HEAD + CELL + "nemeses = ['kill']\n", "nemeses must be a non-empty list of nemesis lists"),
        (HEAD + CELL + "bug_sets = []\n", "bug_sets must be a non-empty list of bug lists"),
        (
            "[campaign]\nname = 'x'\ncluster = 'fake'\ntime_limit = inf\n" + CELL,
            "time_limit must be a finite number > 0, not inf",
        ),
        (HEAD + CELL + "nemesis_interval = nan\n", "nemesis_interval must be a finite number > 0, not nan"),
        (HEAD + CELL + "quiet_period = -100\n", "quiet_period must be a finite number >= 0, not -100"),
        (HEAD + CELL + "rate = -inf\n", "rate must be a finite number > 0"),
        (HEAD + CELL + "op_timeout = 0\n", "op_timeout must be a finite number > 0, not 0"),
        (HEAD + CELL + "concurrency = 0\n", "concurrency must be a whole number > 0, not 0"),
        (
            HEAD + CELL + "time_limits = [10, nan]\n",
            "time_limits must be a non-empty list of finite numbers > 0",
        ),
        (HEAD + CELL + "seeds = []\n", "seeds must be a non-empty list of integers"),
        (HEAD + CELL + "nodes = [1, 2]\n", "nodes must be str (the ssh backend's hosts file"),
        ("[campaign]\nname = '../escape'\ncluster = 'fake'\n" + CELL, "name must be letters, digits"),
        ("[campaign]\nname = '/tmp/x'\ncluster = 'fake'\n" + CELL, "name must be letters, digits"),
        (
            HEAD + '[[cell]]\nname = "../../up"\nworkload = "register"\nexpect = "valid"\n',
            "name must be letters, digits",
        ),
    ],
)
def test_every_campaign_value_is_checked_against_the_schema(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(UsageError) as exc:
        cp.load(write(tmp_path, body))
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_quiet_period_may_be_zero_and_the_store_stays_inside_store(tmp_path: Path) -> None:
    camp = cp.load(write(tmp_path, HEAD + CELL + "quiet_period = 0\n"))
    assert camp.store == Path("store") / "campaign-x"
    assert camp.runs[0].opts["quiet_period"] == 0
    bad = tmp_path / "a b.toml"
    bad.write_text("[campaign]\ncluster = 'fake'\n" + CELL)
    with pytest.raises(UsageError, match="cannot name a store directory; set name"):
        cp.load(bad)


def test_a_byte_order_mark_is_skipped_and_other_encodings_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b"\xef\xbb\xbf" + (HEAD + CELL).encode())
    assert len(cp.load(path).runs) == 1
    path.write_bytes((HEAD + "# caf\xe9\n" + CELL).encode("latin-1"))
    with pytest.raises(UsageError, match=r"is not UTF-8 text \(byte 44 is 0xe9\)"):
        cp.load(path)
    out = campaign_cli(str(path), "--dry-run")
    assert out.returncode == 254 and "not UTF-8" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
