"""The runner end to end against the generic in-memory fake (testing/kvfake.py): verdicts, healing, crashes,
Ctrl-C, analyze."""

from __future__ import annotations

import dataclasses
import itertools
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runs import run_module
from kvfake_runs import start_kvfake_run, wait_for_history
from spec_refusals import assert_refused

from faultline import gen
from faultline.controller import testspec
from faultline.controller.analysis import reanalyze
from faultline.controller.runner import run_once, run_test
from faultline.core import TestSpec
from faultline.dbs import get_db
from faultline.nemesis.api import NemesisPackage
from faultline.nemesis.registry import compose
from faultline.results.store import Store
from faultline.testing.kvfake import DB_PATH, KVFakeBackend
from faultline.workloads.api import Workload
from faultline.workloads.registry import get as get_workload

FAKE = {"db": DB_PATH, "cluster": "kvfake"}  # the generic fake: the runner needs no particular DB


def fake_test(**options: Any) -> TestSpec:
    """The test of `options` on the generic fake, a register workload unless they name another; unstamped."""
    return testspec.build_test({**FAKE, "workload": "register", **options})


def make_test(**kw: Any) -> TestSpec:
    opts = {
        "nemesis": "partition,kill",
        "time_limit": 1.5,
        "nemesis_interval": 0.2,
        "concurrency": 6,
        "seed": 7,
        **kw,
    }
    return testspec.stamp(fake_test(**opts))


def run_fake(
    tmp_path: Path,
    test: TestSpec,
    workload: Workload | None = None,
    nemesis_pkg: NemesisPackage | None = None,
) -> tuple[Any, KVFakeBackend]:
    backend = KVFakeBackend(seed=test.seed)
    wl = workload or get_workload(test.workload, get_db(DB_PATH), test.workload_opts)
    pkg = nemesis_pkg or compose(list(test.nemesis), get_db(DB_PATH), test.nemesis_interval)
    run_dir = Store(tmp_path / "store").create_run(test.name, test.to_json())
    out = run_test(testspec.start_run(test, backend), wl, pkg, run_dir, install_signals=False)
    return out, backend


def history(out: Any) -> list[dict]:
    return [json.loads(line) for line in (Path(out.run_dir) / "history.jsonl").read_text().splitlines()]


def test_correct_fake_is_valid_and_healed(tmp_path: Path) -> None:
    # 4 s rather than 1.5: both kinds of fault must start, and a loaded machine (a CI pass over both
    # cores) once fitted only partitions into the shorter run
    out, backend = run_fake(tmp_path, make_test(time_limit=4))
    assert out.valid is True, out.results
    assert out.cut_short is None
    h = history(out)
    assert [o["index"] for o in h] == list(range(len(h)))
    assert all(a["time"] <= b["time"] for a, b in itertools.pairwise(h))
    nem = [o for o in h if o["process"] == "nemesis"]
    assert any(o["f"] == "start-partition" and o["type"] == "ok" for o in nem)
    assert any(o["f"] == "start-kill" and o["type"] == "ok" for o in nem)
    # the final generator stopped every fault that was started
    assert nem[-1]["f"].startswith("stop-") and nem[-1]["type"] == "ok"
    assert backend.residue() == [] and out.results["residue"] == []
    assert ("down", "") in backend.events
    results = json.loads((Path(out.run_dir) / "results.json").read_text())
    assert results["valid"] is True and results["workload"]["model"] == "cas-register"
    assert (Path(out.run_dir) / "faultline.log").read_text().count("phase: main") == 1


def test_a_process_never_has_two_outstanding_ops_and_info_retires_it(tmp_path: Path) -> None:
    out, _ = run_fake(tmp_path, make_test(seed=3))
    h = history(out)
    open_: dict = {}
    retired: set = set()
    infos = 0
    for o in h:
        p = o["process"]
        if o["type"] == "invoke":
            assert p not in open_, f"process {p} has two outstanding ops"
            assert p not in retired, f"process {p} reused after info"
            open_[p] = o
        else:
            assert open_.pop(p)["f"] == o["f"]
            if o["type"] == "info" and p != "nemesis":
                retired.add(p)
                infos += 1
    assert infos > 0  # the fake's faults produce indeterminate writes, so retirement was exercised
    assert max(o["process"] for o in h if isinstance(o["process"], int)) >= 6


def test_buggy_fake_is_flagged_invalid(tmp_path: Path) -> None:
    test = make_test(inject_bug=["stale-reads"], nemesis="partition", seed=2, time_limit=2)
    backend = KVFakeBackend(seed=2)
    run_dir = Store(tmp_path / "s").create_run("bug", {})
    out = run_test(
        testspec.start_run(test, backend),
        get_workload("register", get_db(DB_PATH), test.workload_opts),
        compose(["partition"], get_db(DB_PATH), 0.2),
        run_dir,
        install_signals=False,
    )
    assert out.valid is False
    failure = out.results["workload"]["failure"]
    assert failure["op"]["f"] == "read"


class CrashingClient:
    def __init__(self, after: int = 20) -> None:
        self.after = after
        self.n = 0

    def setup(self, test: Any) -> None:
        pass

    def open(self, test: Any, node: str) -> CrashingClient:
        return self

    def invoke(self, test: Any, op: dict) -> dict:
        self.n += 1
        if self.n > self.after:
            raise RuntimeError("client exploded")
        return {**op, "type": "ok", "value": None if op["f"] == "read" else op.get("value")}

    def close(self) -> None:
        pass


def test_crashed_client_cuts_short_but_heals_and_checks(tmp_path: Path) -> None:
    test = make_test(time_limit=5)
    wl = get_workload("register", get_db(DB_PATH), test.workload_opts)
    wl = dataclasses.replace(wl, client=CrashingClient())
    t0 = time.monotonic()
    out, backend = run_fake(tmp_path, test, workload=wl)
    assert time.monotonic() - t0 < 5
    assert out.cut_short and "client" in out.cut_short and "exploded" in out.cut_short
    assert backend.residue() == []
    assert "workload" in out.results and out.results["cut_short"] == out.cut_short
    crash = [o for o in history(out) if "exploded" in str(o.get("error", ""))]
    assert crash and crash[0]["type"] == "info"


class CrashingNemesis:
    fs = frozenset({"start-partition", "stop-partition"})

    def __init__(self) -> None:
        self.healed = 0

    def setup(self, test: Any) -> CrashingNemesis:
        return self

    def invoke(self, test: Any, op: dict) -> dict:
        test.backend.partition({"n1": {"n2"}})
        raise OSError("nemesis exploded")

    def heal(self, test: Any) -> None:
        self.healed += 1
        test.backend.heal_network()


def test_crashed_nemesis_cuts_short_and_still_heals(tmp_path: Path) -> None:
    nem = CrashingNemesis()
    pkg = NemesisPackage(nemesis=nem, generator=gen.seq(gen.sleep(0.2), {"f": "start-partition"}))
    out, backend = run_fake(tmp_path, make_test(time_limit=5), nemesis_pkg=pkg)
    assert out.cut_short and "nemesis" in out.cut_short
    assert nem.healed >= 1 and backend.residue() == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"workload": "regster"}, "valid: register, set, bank, catalog"),
        ({"nemesis": "partition,chaos"}, "partition-ring"),
        ({"inject_bug": ["stale-reads"]}, "stale-leader-reads"),
        ({"time_limit": "-3"}, "positive"),
        ({"concurrency": "many"}, "number"),
        ({"nemesis": "master-migrate"}, "--db-opt masters=1"),
        ({"rate": "fast"}, "--rate must be a number"),
        ({"cluster": "kubernetes"}, "docker, local, ssh"),
        ({"op_timeout": "0"}, "--op-timeout must be positive"),
    ],
)
def test_validation_names_the_choices(options: dict[str, Any], match: str) -> None:
    assert_refused(match, **options)


def test_op_timeout_reaches_the_client() -> None:
    """--op-timeout (campaign key op_timeout) sets the real client's default timeout; 5 s by default."""
    from faultline.node.client import KuduClient

    assert testspec.build_test({}).op_timeout_s == 5.0
    test = testspec.build_test({"op_timeout": "30"})

    class Backend:
        def addresses(self, role: str) -> list[str]:
            return ["master-1:7051"]

    client = testspec.start_run(test, Backend()).connect()
    try:
        assert isinstance(client, KuduClient) and client.default_timeout_s == 30.0
    finally:
        client.close()


def test_run_once_and_reanalyze(tmp_path: Path) -> None:
    test = fake_test(nemesis="pause,clock", time_limit=1, nemesis_interval=0.2, concurrency=4, seed=5)
    out = run_once(test, tmp_path / "store")
    assert out.valid is True
    (Path(out.run_dir) / "results.json").unlink()
    again = reanalyze(out.run_dir)
    assert again["valid"] is True and again["reanalyzed"] is True
    assert "did not finish" in again["cut_short"]


@pytest.mark.integration
@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_heals_keeps_history_and_analyze_works(tmp_path: Path, presses: int) -> None:
    store = tmp_path / "store"
    proc = start_kvfake_run(store, "partition,kill", {"FAULTLINE_FAKE_HEAL_DELAY": "1.5"})
    try:
        run_dir = wait_for_history(store, 500)
        proc.send_signal(signal.SIGINT)
        if presses == 2:
            time.sleep(0.5)  # the first press is being handled: the fake's heal takes 1.5 s
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 2, (out, err)
    assert "cut short: interrupted" in out
    results = json.loads((run_dir / "results.json").read_text())
    assert results["cut_short"].startswith("interrupted")
    assert results["residue"] == []  # healed: no grudge, no killed node left
    lines = (run_dir / "history.jsonl").read_text().splitlines()
    assert len(lines) >= 500
    if presses == 2:
        assert results["valid"] == "unknown" and "checking skipped" in results["skipped"]
    ana = run_module("faultline", "analyze", "--json", str(run_dir), timeout=120)
    assert ana.returncode == 2, ana.stderr  # cut short: as `faultline run` says it
    again = json.loads(ana.stdout)
    assert again["valid"] is True and again["cut_short"].startswith("interrupted")
    kept = json.loads((run_dir / "results.json").read_text())  # the run's own record survives re-checking
    assert kept["residue"] == [] and kept["faults"] == results["faults"] and kept["reanalyzed"] is True
    assert "skipped" not in kept


def test_cli_rejects_bad_options_before_starting(tmp_path: Path) -> None:
    p = run_module(
        "faultline",
        "run",
        "--db",
        DB_PATH,
        "--cluster",
        "kvfake",
        "--nemesis",
        "bogus",
        "--store",
        str(tmp_path / "s"),
        timeout=60,
    )
    assert p.returncode == 254
    assert "unknown nemesis 'bogus'; valid:" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "s").exists()
    p = run_module("faultline", "analyze", str(tmp_path), timeout=60)
    assert p.returncode == 254 and "not a run directory" in p.stderr


@pytest.mark.integration
def test_analyze_prints_a_summary_and_refuses_a_test_json_that_is_no_test(tmp_path: Path) -> None:
    test = fake_test(nemesis="partition", time_limit=1, nemesis_interval=0.2, concurrency=3, seed=2)
    run_dir = Path(run_once(test, tmp_path / "store").run_dir)
    before = json.loads((run_dir / "results.json").read_text())
    ana = run_module("faultline", "analyze", str(run_dir), timeout=120)
    assert ana.returncode == 0, ana.stderr
    lines = ana.stdout.splitlines()
    assert lines[0] == f"{run_dir}: valid" and len(ana.stdout) < 2000
    assert any(line.startswith("  availability: ") for line in lines)
    assert f"  faults injected: {before['faults']}; left after healing: none" in lines
    assert lines[-1] == f"  report: {run_dir / 'report.html'}"
    after = json.loads((run_dir / "results.json").read_text())
    assert after["faults"] == before["faults"] and after["residue"] == before["residue"] == []
    for body, needle in (
        ("[1, 2]", "is not a JSON object"),
        ('{"name": "x"}', "names no workload"),
        ('{"name": "x", "workload": 5}', "names no workload"),
        ("{oops", "is not valid JSON"),
    ):
        (run_dir / "test.json").write_text(body)
        p = run_module("faultline", "analyze", str(run_dir), timeout=60)
        assert p.returncode == 254 and needle in p.stderr, (body, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("workload, quiet", [("register", 0.0), ("set", 0.7)])
def test_the_quiet_period_precedes_final_reads_only(tmp_path: Path, workload: str, quiet: float) -> None:
    """register has no final reads, so its run idles through no quiet period, and test.json says so; set
    keeps the one it was given."""
    test = fake_test(
        workload=workload,
        nemesis="partition",
        time_limit=1,
        nemesis_interval=0.3,
        concurrency=2,
        seed=3,
        quiet_period=0.7,
    )
    out = run_once(test, tmp_path / "store")
    assert out.valid is True
    assert json.loads((Path(out.run_dir) / "test.json").read_text())["quiet_period"] == quiet
    assert ("phase: quiet" in (Path(out.run_dir) / "faultline.log").read_text()) == bool(quiet)
