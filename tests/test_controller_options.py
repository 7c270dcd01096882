"""The store's sizes as its DB options (and their deprecated spellings), the test's option rules, and the
backend kinds' fields the controller reads instead of branching on names."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultline.cluster import backends
from faultline.controller import campaign, testspec
from faultline.controller.cli import main
from faultline.controller.errors import UsageError
from faultline.core import TestSpec


def test_the_store_sizes_are_db_options(capsys: pytest.CaptureFixture[str]) -> None:
    test = testspec.build_test({"cluster": "fake", "db_opt": ["masters=1", "tservers=3"]})
    assert test.db_opts == {"masters": 1, "tservers": 3}
    assert "masters" not in test.to_json() and "tservers" not in test.to_json()
    assert [r["count"] for r in test.cluster_spec["roles"]] == [1, 3]
    assert capsys.readouterr().err == ""
    default = testspec.build_test({"cluster": "fake"})
    assert default.db_opts == {} and [r["count"] for r in default.cluster_spec["roles"]] == [3, 5]
    with pytest.raises(UsageError, match="tservers must be at least 3"):
        testspec.build_test({"cluster": "fake", "db_opt": ["tservers=2"]})
    with pytest.raises(UsageError, match="masters must be a whole number, not 'x'"):
        testspec.build_test({"cluster": "fake", "db_opt": ["masters=x"]})


def test_the_deprecated_spellings_still_work_and_say_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    test = testspec.build_test({"cluster": "fake", "masters": "1", "tservers": None})
    assert test.db_opts == {"masters": 1}
    err = capsys.readouterr().err.splitlines()
    assert err == ["faultline: --masters is deprecated; use --db-opt masters=N"]
    # an explicit --db-opt wins over the old flag
    assert testspec.build_test({"cluster": "fake", "masters": 3, "db_opt": ["masters=1"]}).db_opts == {
        "masters": 1
    }
    with pytest.raises(UsageError, match="the postgres DB takes no option 'masters'"):
        testspec.build_test({"db": "postgres", "masters": 3})


def test_the_cli_maps_the_deprecated_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--db", "postgres", "--tservers", "5"]) == 254
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "faultline: --tservers is deprecated; use --db-opt tservers=N"
    assert "takes no option 'tservers'" in err[1] and len(err) == 2


def test_an_old_test_json_still_loads() -> None:
    spec = TestSpec.from_json({"name": "t", "workload": "register", "masters": 3, "tservers": 5})
    assert spec.name == "t" and not hasattr(spec, "masters")


def test_a_campaign_with_the_old_keys_warns_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.toml"
    f.write_text(
        '[campaign]\nname = "c"\ncluster = "fake"\nmasters = 1\n\n'
        '[[cell]]\nname = "a"\nworkload = "register"\nexpect = "valid"\nseeds = [1, 2]\n\n'
        '[[cell]]\nname = "b"\nworkload = "set"\nexpect = "valid"\ntservers = 3\n'
    )
    camp = campaign.load(f)
    assert [r.opts["db_opt"] for r in camp.runs] == [{"masters": 1}] * 2 + [{"masters": 1, "tservers": 3}]
    assert capsys.readouterr().err.splitlines() == [
        "faultline: the campaign key 'masters' is deprecated; use db_opt = {masters = N}",
        "faultline: the campaign key 'tservers' is deprecated; use db_opt = {tservers = N}",
    ]
    f.write_text(
        '[campaign]\nname = "c"\ncluster = "fake"\n\n'
        '[[cell]]\nworkload = "register"\nexpect = "valid"\ndb_opt = {masters = 1}\n'
    )
    assert campaign.load(f).runs[0].opts["db_opt"] == {"masters": 1}
    assert capsys.readouterr().err == ""


def test_option_rules_keep_their_messages() -> None:
    for opts, message in (
        ({"time_limit": "-3"}, "--time-limit must be positive and finite, not '-3'"),
        ({"concurrency": "many"}, "--concurrency must be a whole number, not 'many'"),
        ({"seed": "x"}, "--seed must be an integer, not 'x'"),
        ({"cluster_name": "Bad"}, "--cluster-name 'Bad': use lowercase letters, digits and '-' (max 31)"),
        ({"quiet_period": "-1"}, "--quiet-period must be a finite number >= 0, not '-1'"),
    ):
        with pytest.raises(UsageError) as exc:
            testspec.build_test({"cluster": "fake", **opts})
        assert str(exc.value) == message
    values = testspec.apply_rules({"reuse_cluster": True, "cluster_name": ""})
    assert values["cluster_name"] == "faultline" and values["rate"] is None and values["quiet_period"] is None


def test_backend_kinds_carry_what_the_controller_reads() -> None:
    assert backends.kinds()[0] == backends.DEFAULT
    docker, local, ssh = (backends.kind(k) for k in ("docker", "local", "ssh"))
    assert (docker.disk_layer, local.disk_layer, ssh.disk_layer) == ("here", "here", "hosts")
    assert docker.hosts_file is None and local.hosts_file is None and ssh.hosts_file is not None
    assert all(k.shell_argv is not None for k in (docker, local, ssh))

    class Info:
        host = "fl-x-m1"

    class Backend:
        info = {"m1": Info()}

    assert docker.shell_argv(Backend(), "m1") == ["docker", "exec", "-it", "fl-x-m1", "bash"]
    testspec.chosen_db("store")  # the store registers its in-memory fake
    fake = backends.kind("fake")
    assert (fake.hosts_file, fake.disk_layer, fake.shell_argv) == (None, "none", None)
    with pytest.raises(UsageError, match="use --cluster docker, local or ssh"):
        testspec.disk_layer_dirs(["lose-unfsynced"], testspec.chosen_db("etcd"), "fake")


def test_a_postgres_report_names_no_store_field(tmp_path: Path) -> None:
    """The Test table shows what was tested: the DB and its options, never the store's sizes for another DB
    (and the store's sizes only as its options)."""
    from faultline.results.report import render_report
    from faultline.results.store import Store

    def test_table(opts: dict[str, object]) -> str:
        spec = testspec.build_test({"workload": "set", "nemesis": "kill", "seed": 1, **opts})
        run = Store(tmp_path / "store").create_run(spec.name, spec.to_json())
        run.history_path.write_text("")
        run.finish({"valid": "unknown"})
        return render_report(run).split("<h2>Test</h2>")[1].split("</table>")[0]

    postgres = test_table({"db": "postgres", "db_opt": ["synchronous_commit=off"]})
    assert "<th>db</th><td>postgres</td>" in postgres
    assert "synchronous_commit=off" in postgres
    assert "masters" not in postgres and "tservers" not in postgres
    store = test_table({"cluster": "fake", "db_opt": ["masters=1"]})
    assert "<th>db</th><td>store</td>" in store and "<th>db_opts</th><td>masters=1</td>" in store
