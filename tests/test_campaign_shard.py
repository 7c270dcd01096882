"""`faultline campaign --shard I/N` and scoring several stores together: N hosts split a campaign, into
their own stores or one shared store, and the scorecard of the shards equals the one-host scorecard.

Runs are synthetic (deterministic per cell and seed, so whole scorecards can be compared) or on the
in-memory fake cluster (the CLI end to end, verdicts compared); the standalone Spark cluster test starts a
master and two workers on this machine.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from campaign_files import fake_campaign

from faultline.controller import campaign as cp
from faultline.controller.errors import UsageError
from faultline.controller.runner import Outcome
from faultline.core import TestSpec
from faultline.results.engines import AUTO_SPARK_EVENTS, score_store
from faultline.results.store import Store
from faultline.results.synth import synth_run

CAMPAIGN = fake_campaign("t", [1, 2, 3], 1.0, 4)
# what differs between two scorings of the same runs: when and where they ran, and the runs' directories
WALL_CLOCK = ("generated", "seconds", "store", "stores")


def write(tmp_path: Path, text: str = CAMPAIGN, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "faultline", *args], capture_output=True, text=True, timeout=600, env=env
    )


# ---- the split ----------------------------------------------------------------------------------------


@pytest.mark.integration
def test_shard_specs_parse_and_bad_ones_are_one_line_254(tmp_path: Path) -> None:
    assert cp.parse_shard("2/3") == cp.Shard(2, 3) and cp.parse_shard(" 1 / 1 ") == cp.Shard(1, 1)
    for bad, needle in (
        ("0/2", "I must be from 1 to 2"),
        ("3/2", "I must be from 1 to 2"),
        ("x", "wants I/N"),
        ("1/0", "at least 1"),
        ("1/2/3", "wants I/N"),
        ("-1/2", "wants I/N"),
        ("", "wants I/N"),
    ):
        with pytest.raises(UsageError, match=needle):
            cp.parse_shard(bad)
    path = write(tmp_path)
    for bad in ("0/2", "3/2", "x", "1/0"):
        out = cli("campaign", str(path), "--dry-run", "--shard", bad)
        assert out.returncode == 254, (bad, out.stderr)
        assert (
            len(out.stderr.strip().splitlines()) == 1
            and "--shard" in out.stderr
            and "Traceback" not in out.stderr
        )
    # more shards than runs: a shard with nothing to do is refused rather than silently idle
    out = cli("campaign", str(path), "--dry-run", "--shard", "7/7")
    assert out.returncode == 254 and "plans only 6 run(s)" in out.stderr


def test_shards_split_the_runs_the_same_way_whatever_the_order_or_host(tmp_path: Path) -> None:
    camp = cp.load(write(tmp_path, CAMPAIGN.replace("time_limit = 1.0", "time_limits = [1.0, 2.0]")))
    keys = [r.key for r in camp.runs]
    assert len(keys) == 12
    for n in range(1, 8):
        shares = [[r.key for r in cp.shard_runs(camp.runs, cp.Shard(i, n))] for i in range(1, n + 1)]
        flat = [k for share in shares for k in share]
        assert sorted(flat) == sorted(keys) and len(set(flat)) == len(keys)  # disjoint, and all of them
        assert max(map(len, shares)) - min(map(len, shares)) <= 1  # balanced
    # cells in the other order and seeds listed backwards: the same campaign, so the same split
    swapped = CAMPAIGN.replace("seeds = [1, 2, 3]", "seeds = [3, 1, 2]")
    cells = swapped.split("[[cell]]")
    swapped = cells[0] + "[[cell]]" + cells[2] + "[[cell]]" + cells[1]
    other = cp.load(
        write(tmp_path, swapped.replace("time_limit = 1.0", "time_limits = [2.0, 1.0]"), "d.toml")
    )
    for n in (2, 3, 5):
        for i in range(1, n + 1):
            assert {r.key for r in cp.shard_runs(camp.runs, cp.Shard(i, n))} == {
                r.key for r in cp.shard_runs(other.runs, cp.Shard(i, n))
            }
    # with at least N seeds, every cell is on every shard
    for i in (1, 2, 3):
        assert {r.cell for r in cp.shard_runs(camp.runs, cp.Shard(i, 3))} == {"good", "stale"}
    # the CLI lists the same share from another directory, time zone and host name
    first = cli("campaign", str(write(tmp_path)), "--dry-run", "--shard", "2/3")
    env = {**os.environ, "TZ": "Pacific/Kiritimati", "HOSTNAME": "elsewhere"}
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "faultline",
            "campaign",
            str(tmp_path / "c.toml"),
            "--dry-run",
            "--shard",
            "2/3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=env,
    )
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    listed = [ln.split("\t")[0] for ln in first.stdout.splitlines() if "\texpect " in ln]
    assert listed == [ln.split("\t")[0] for ln in again.stdout.splitlines() if "\texpect " in ln]
    assert listed == [r.key for r in cp.shard_runs(cp.load(tmp_path / "c.toml").runs, cp.Shard(2, 3))]
    assert "2 runs (shard 2/3 of 6)" in first.stdout and "campaign.shard-2-of-3.json" in first.stdout


@pytest.mark.integration
def test_random_seeds_are_drawn_once_and_shared_through_a_seed_file(tmp_path: Path) -> None:
    path = write(tmp_path)
    out = cli("campaign", str(path), "--dry-run", "--shard", "1/2", "--seeds", "random:4")
    assert out.returncode == 254 and len(out.stderr.strip().splitlines()) == 1
    assert "random:N" in out.stderr and "@FILE" in out.stderr and "Traceback" not in out.stderr
    # drawn once on one host: the dry run prints the draw on stdout, every shard reads it from a file
    drawn = cli("campaign", str(path), "--dry-run", "--seeds", "random:4")
    assert drawn.returncode == 0, drawn.stderr
    line = next(ln for ln in drawn.stdout.splitlines() if ln.startswith("seeds drawn at random: "))
    seeds = [int(s) for s in line.split(": ")[1].split(",")]
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text(line.split(": ")[1] + "\n")
    shares = []
    for shard in ("1/2", "2/2"):
        out = cli("campaign", str(path), "--dry-run", "--shard", shard, "--seeds", f"@{seed_file}")
        assert out.returncode == 0, out.stderr
        shares.append({ln.split("\t")[0] for ln in out.stdout.splitlines() if "\texpect " in ln})
    assert not shares[0] & shares[1]
    assert shares[0] | shares[1] == {f"{c}|seed={s}|t=1" for c in ("good", "stale") for s in seeds}
    # the file's format: commas, spaces or lines, and comments
    seed_file.write_text("# drawn on host 1\n5, 6\n7 8  # more\n")
    assert cp.parse_seeds(f"@{seed_file}") == ([5, 6, 7, 8], False)
    for text, needle in (("5, x\n", "integers"), ("# none\n", "empty"), ("5 5\n", "twice")):
        seed_file.write_text(text)
        with pytest.raises(UsageError, match=needle):
            cp.parse_seeds(f"@{seed_file}")
    out = cli("campaign", str(path), "--dry-run", "--seeds", f"@{tmp_path / 'missing.txt'}")
    assert (
        out.returncode == 254 and "cannot read the seed file" in out.stderr and "Traceback" not in out.stderr
    )


# ---- deterministic runs: whole scorecards compared -------------------------------------------------------


def synthetic_run(test: TestSpec, store: Path) -> Outcome:
    """A run decided by its cell and seed alone: a synthetic register history with stale reads when the
    cell injects the bug, stored as a real run would be."""
    rng = random.Random(f"{test.name}|{test.seed}|{test.time_limit}")
    history, injected, _ = synth_run(
        rng, 300, concurrency=4, keys=3, nemesis=list(test.nemesis), anomalies=2 if test.bugs else 0
    )
    run = Store(store).create_run(test.name, test.to_json())
    run.history_path.write_text("".join(json.dumps(op) + "\n" for op in history))
    valid = not injected
    run.finish({"valid": valid})
    return Outcome(valid, {"valid": valid}, run.path, None, len(history))


def comparable(card: dict[str, Any]) -> dict[str, Any]:
    """A scorecard without what depends on when and where it ran: wall-clock fields, and the run ids
    (time stamps, and with several stores the store's label)."""
    out = {k: v for k, v in card.items() if k not in WALL_CLOCK}
    out["run_scores"] = sorted(
        json.dumps({k: v for k, v in r.items() if k != "run_id"}, sort_keys=True) for r in card["run_scores"]
    )
    out["warnings"] = sorted(re.sub(r"^\S+: ", "", w) for w in card["warnings"])
    exp = card["expectations"]
    out["expectations"] = {**exp, "runs": sorted(json.dumps(v, sort_keys=True) for v in exp["runs"].values())}
    return out


def test_shards_in_two_stores_or_one_score_like_one_host(tmp_path: Path) -> None:
    camp = cp.load(write(tmp_path), store_override=tmp_path / "one-host")
    cp.execute(camp, synthetic_run)
    single = score_store(camp.store)  # auto: pandas, as for the merged stores below
    card = json.loads((single.out_dir / "scorecard.json").read_text())
    assert card["runs"] == 6 and card["expectations"]["met"] == 6 and card["verdict"] == "false"

    # two hosts, each with its own store
    for i, store in ((1, "host1"), (2, "host2")):
        part = cp.apply_shard(
            cp.load(tmp_path / "c.toml", store_override=tmp_path / store / "store"), cp.Shard(i, 2)
        )
        assert len(part.runs) == 3
        cp.execute(part, synthetic_run)
        assert cp.state_path(part).name == f"campaign.shard-{i}-of-2.json"
    stores = [tmp_path / "host1" / "store", tmp_path / "host2" / "store"]
    score_store(stores, tmp_path / "merged")
    merged_card = json.loads((tmp_path / "merged" / "scorecard.json").read_text())
    assert comparable(merged_card) == comparable(card)
    assert merged_card["engine"] == "pandas" and merged_card["engine_reason"].startswith("auto: 6 runs")
    # run ids keep their store: the same folder name on both hosts, told apart by the host's folder
    assert [s["label"] for s in merged_card["stores"]] == ["host1-store", "host2-store"]
    assert {r["run_id"].split("/")[0] for r in merged_card["run_scores"]} == {"host1-store", "host2-store"}
    assert set(merged_card["expectations"]["runs"]) == {r["run_id"] for r in merged_card["run_scores"]}
    page = (tmp_path / "merged" / "scorecard.html").read_text()
    for href in re.findall(r"href='(\.\./host[12]/store/[^']+/report\.html)'", page)[:2]:
        assert (tmp_path / "merged" / href).parent.is_dir(), href  # links lead to the runs, wherever --out is
    assert len(re.findall(r"href='\.\./host", page)) == 6

    # both shards at once into one shared store: distinct runs, neither loses the other's records
    shared = tmp_path / "shared"
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def host(i: int) -> None:
        part = cp.apply_shard(cp.load(tmp_path / "c.toml", store_override=shared), cp.Shard(i, 2))

        def in_step(test: TestSpec, store: Path) -> Outcome:
            start.wait(timeout=60)  # every run of one shard starts with a run of the other
            return synthetic_run(test, store)

        try:
            cp.execute(part, in_step)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=host, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(p.name for p in shared.glob("campaign*.json")) == [
        "campaign.shard-1-of-2.json",
        "campaign.shard-2-of-2.json",
    ]
    assert not list(shared.rglob("*.tmp"))
    run_dirs = list(Store(shared).run_dirs())
    assert len(run_dirs) == 6 and len({r.run_id for r in run_dirs}) == 6
    assert len(Store(shared).read_index()) == 6
    one_store = score_store(shared)
    assert comparable(json.loads((one_store.out_dir / "scorecard.json").read_text())) == comparable(card)
    # the whole campaign into that store later runs nothing again: the shards' runs count
    ran: list[str] = []
    records = cp.execute(
        cp.load(tmp_path / "c.toml", store_override=shared),
        lambda test, store: ran.append(test.name) or synthetic_run(test, store),
    )
    assert ran == [] and len(records) == 6


def test_scoring_several_stores_refuses_mistakes(tmp_path: Path) -> None:
    from faultline.results.synth import synth_store

    synth_store(tmp_path / "a", runs=1, ops=100, seed=1, jobs=1)
    out = cli("score", str(tmp_path / "a"), str(tmp_path / "a" / "."), "--out", str(tmp_path / "o"))
    assert out.returncode == 254 and "given twice" in out.stderr
    out = cli("score", str(tmp_path / "a"), str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    assert out.returncode == 254 and "does not exist" in out.stderr
    synth_store(tmp_path / "b", runs=1, ops=100, seed=2, jobs=1)
    out = cli("score", str(tmp_path / "a"), str(tmp_path / "b"))
    assert out.returncode == 254 and "needs --out DIR" in out.stderr and "Traceback" not in out.stderr


def test_auto_engine_takes_pandas_for_a_small_store_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faultline.results import engines
    from faultline.results.synth import synth_store

    synth_store(tmp_path / "s", runs=2, ops=200, seed=3, jobs=1)
    choice = engines.choose_engine(tmp_path / "s")
    assert (
        choice.engine == "pandas"
        and "2 runs" in choice.reason
        and f"under {AUTO_SPARK_EVENTS:,}" in choice.reason
    )
    assert engines.choose_engine(tmp_path / "s", "spark").engine == "spark"
    assert engines.choose_engine(tmp_path / "s", master="spark://h:7077").engine == "spark"
    monkeypatch.setattr(engines, "AUTO_SPARK_EVENTS", 100)  # a store beyond the threshold goes to Spark
    big = engines.choose_engine(tmp_path / "s")
    assert big.engine == "spark" and "at least 100" in big.reason
    out = cli("score", str(tmp_path / "s"))
    assert out.returncode in (0, 1), out.stderr
    card = json.loads((tmp_path / "s" / "_score" / "scorecard.json").read_text())
    assert card["engine"] == "pandas" and card["engine_reason"].startswith("auto: 2 runs")
    assert "with pandas" in out.stderr and not (tmp_path / "s" / "_score" / "spark.log").exists()
    assert "id='engine'>engine: pandas" in (tmp_path / "s" / "_score" / "scorecard.html").read_text()


def test_a_cluster_with_no_executor_is_a_clean_error_not_a_hang() -> None:
    """A job submitted to a master no worker serves would wait for ever: the driver gives up and says why."""
    from faultline.results.spark_session import wait_for_executors

    def session(master: str, members: int) -> Any:
        """The little of a SparkSession the wait reads: the master, and who joined (the driver too)."""
        status = SimpleNamespace(size=lambda: members)
        jvm = SimpleNamespace(sc=lambda: SimpleNamespace(getExecutorMemoryStatus=lambda: status))
        return SimpleNamespace(sparkContext=SimpleNamespace(master=master, _jsc=jvm))

    said: list[str] = []
    with pytest.raises(
        UsageError, match="no executor joined from spark://h:7077 in 1 s: is a worker registered"
    ):
        wait_for_executors(session("spark://h:7077", 1), timeout_s=0.6, say=said.append)
    assert said == ["waiting for executors from spark://h:7077"]
    assert (
        wait_for_executors(session("spark://h:7077", 3), timeout_s=0.6, settle_s=0.1) == 2
    )  # not the driver
    assert wait_for_executors(session("local[2]", 1), timeout_s=0.6) == 0


def test_executors_that_join_late_are_waited_for() -> None:
    """A second worker's executor that joins a second after the first is still counted (and so used)."""
    from faultline.results.spark_session import wait_for_executors

    joined_at = [time.monotonic(), time.monotonic() + 1.0]
    status = SimpleNamespace(size=lambda: 1 + sum(time.monotonic() >= t for t in joined_at))
    jvm = SimpleNamespace(sc=lambda: SimpleNamespace(getExecutorMemoryStatus=lambda: status))
    session = SimpleNamespace(sparkContext=SimpleNamespace(master="spark://h:7077", _jsc=jvm))
    assert wait_for_executors(session, timeout_s=10, settle_s=1.5) == 2


# ---- the CLI end to end on the fake cluster ---------------------------------------------------------------


def verdicts(card: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a fake-cluster scorecard must agree on (its histories vary with timing, its verdicts do not)."""
    return sorted(
        (
            g["workload"],
            g["nemesis"],
            g["bug"],
            g["runs"],
            g["valid"],
            g["invalid"],
            g["unknown"],
            g["detection_rate"],
        )
        for g in card["groups"]
    )


@pytest.mark.integration
def test_cli_shards_on_the_fake_cluster_into_two_stores_and_into_one(tmp_path: Path) -> None:
    path = write(tmp_path, CAMPAIGN.replace("seeds = [1, 2, 3]", "seeds = [1, 2]"))
    base = [sys.executable, "-m", "faultline", "campaign", str(path), "--quiet"]
    # four hosts' worth at once: shards 1/2 and 2/2 into their own stores, and again into one shared store
    jobs = [
        (["--store", str(tmp_path / "h1"), "--shard", "1/2"]),
        (["--store", str(tmp_path / "h2"), "--shard", "2/2"]),
        (["--store", str(tmp_path / "shared"), "--shard", "1/2"]),
        (["--store", str(tmp_path / "shared"), "--shard", "2/2"]),
    ]
    procs = [
        subprocess.Popen([*base, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for extra in jobs
    ]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert "2/2 expectations met" in out and "not scored here" in err
    single = cli("campaign", str(path), "--store", str(tmp_path / "one"), "--quiet")
    assert single.returncode == 0 and "4/4 expectations met" in single.stdout, single.stdout + single.stderr
    one = json.loads((tmp_path / "one" / "_score" / "scorecard.json").read_text())
    assert one["engine"] == "pandas" and one["engine_reason"].startswith("auto:")  # a small store: no JVM

    merged = cli("score", str(tmp_path / "h1"), str(tmp_path / "h2"), "--out", str(tmp_path / "merged"))
    assert merged.returncode == 1 and "4 runs" in merged.stderr, merged.stderr  # the stale cell is invalid
    shared = cli("score", str(tmp_path / "shared"))
    assert shared.returncode == 1, shared.stderr
    for out_dir in (tmp_path / "merged", tmp_path / "shared" / "_score"):
        card = json.loads((out_dir / "scorecard.json").read_text())
        assert verdicts(card) == verdicts(one), out_dir
        assert (card["expectations"]["met"], card["expectations"]["total"]) == (4, 4)
        assert card["expectations"]["campaign"] == "t"
    state = {p.name: json.loads(p.read_text()) for p in (tmp_path / "shared").glob("campaign*.json")}
    assert sorted(state) == ["campaign.shard-1-of-2.json", "campaign.shard-2-of-2.json"]
    assert sorted(r["key"] for s in state.values() for r in s["runs"]) == sorted(
        f"{c}|seed={s}|t=1" for c in ("good", "stale") for s in (1, 2)
    )
    assert {s["shard"] for s in state.values()} == {"1/2", "2/2"}
    assert len({r["run_dir"] for s in state.values() for r in s["runs"]}) == 4
    assert not list((tmp_path / "shared").glob(".*.tmp"))


# ---- a standalone Spark cluster on this machine -----------------------------------------------------------

# the JVMs of this small cluster start and stay on the quick compiler and the serial collector: on a
# 2-core machine the daemons' and executors' start-up compiling and GC threads compete with the work
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stops what the fixture started, workers first (each with the executors it launched)."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[str, list[Path], dict[str, str]]]:
    """A standalone master and two one-core workers on 127.0.0.1; (master URL, the workers' work dirs, the
    environment for a driver). Stopped, with the executors they launched, whatever the test did."""
    conf = (
        tmp_path / "spark-conf"
    )  # spark-defaults.conf for the driver: its own JVM's and the executors' options
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {QUICK_JVM}\nspark.executor.extraJavaOptions {QUICK_JVM}\n"
    )
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_DAEMON_JAVA_OPTS", QUICK_JVM),
    }
    logs = tmp_path / "spark-daemons"
    logs.mkdir()
    work_dirs = [tmp_path / "worker1", tmp_path / "worker2"]
    commands = [
        [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            "0",
        ]
    ]
    commands += [
        [
            "org.apache.spark.deploy.worker.Worker",
            url,
            "--host",
            "127.0.0.1",
            "--cores",
            "1",
            "--memory",
            "1g",
            "--webui-port",
            "0",
            "--work-dir",
            str(work),
        ]
        for work in work_dirs
    ]
    for work in work_dirs:
        work.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, command in zip(("master", "worker1", "worker2"), commands, strict=True):
            with open(logs / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [str(_spark_class()), *command],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + 120
        while (logs / "master.log").read_text(errors="replace").count("Registering worker") < 2:
            dead = [p.args for p in procs if p.poll() is not None]
            assert not dead and time.monotonic() < deadline, (
                f"workers did not register: {dead}\n"
                + (logs / "master.log").read_text(errors="replace")[-2000:]
            )
            time.sleep(0.5)
        yield url, work_dirs, {**os.environ, "SPARK_CONF_DIR": str(conf)}
    finally:
        _stop(procs)


@pytest.mark.spark
def test_score_several_stores_on_a_standalone_cluster_of_two_workers(
    tmp_path: Path, standalone: tuple[str, list[Path], dict[str, str]]
) -> None:
    from faultline.results.synth import synth_store

    url, work_dirs, env = standalone
    stores = [tmp_path / "h1" / "store", tmp_path / "h2" / "store"]
    for seed, store in enumerate(stores, 1):
        synth_store(store, runs=2, ops=300, anomaly_rate=0.5, seed=seed, keys=3, jobs=1)
    out = cli("score", *map(str, stores), "--out", str(tmp_path / "cluster"), "--master", url, env=env)
    assert out.returncode == 1, out.stderr  # a run with injected stale reads is invalid
    assert re.search(r"\d executor\(s\) joined from " + re.escape(url), out.stderr), out.stderr
    assert f"with spark {url}" in out.stderr
    card = json.loads((tmp_path / "cluster" / "scorecard.json").read_text())
    assert (
        card["engine"] == f"spark {url} (runs)"
        and card["engine_reason"] == f"auto: --master {url} asked for Spark"
    )
    # every executor ran on a worker of that cluster, and the numbers are the single process's
    for work in work_dirs:
        assert [p.name for p in work.glob("app-*/*/stderr")], f"no executor on {work}"
    baseline = cli("score", *map(str, stores), "--out", str(tmp_path / "baseline"), "--engine", "pandas")
    assert baseline.returncode == 1, baseline.stderr
    base = json.loads((tmp_path / "baseline" / "scorecard.json").read_text())
    drop = (*WALL_CLOCK, "engine", "engine_reason")
    assert {k: v for k, v in card.items() if k not in drop} == {
        k: v for k, v in base.items() if k not in drop
    }
    assert card["runs"] == 4 and {r["run_id"].split("/")[0] for r in card["run_scores"]} == {
        "h1-store",
        "h2-store",
    }
