"""benchmarks/bench_run.py hands a DB's bugs and options to every run (and the bugs to the shared cluster)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "bench_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bugs_go_to_every_run_on_the_shared_cluster():
    bench = _bench_run()
    args = bench.parse_args(["--inject-bug", "no-fsync", "--nemeses", "none"])
    cmd = bench.run_command(args, "none", Path("/tmp/s"), "flbench-x")
    assert "--inject-bug=no-fsync" in cmd
    assert cmd[cmd.index("--cluster-name") + 1] == "flbench-x" and "--reuse-cluster" in cmd


def test_a_db_option_gives_each_run_its_own_cluster():
    bench = _bench_run()
    args = bench.parse_args(["--db", "etcd", "--db-opt", "members=5"])
    cmd = bench.run_command(args, "none", Path("/tmp/s"), "flbench-x")
    assert "--db-opt=members=5" in cmd
    assert "--reuse-cluster" not in cmd and "--cluster-name" not in cmd


def test_the_fake_never_names_a_cluster():
    bench = _bench_run()
    cmd = bench.run_command(bench.parse_args(["--fake"]), "none", Path("/tmp/s"), "flbench-x")
    assert cmd[cmd.index("--cluster") + 1] == "fake" and "--reuse-cluster" not in cmd
