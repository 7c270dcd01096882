"""The DB seam: DBs by name or import path, what a DB decides (which nodes clients talk to, what runs on
the hosts), and one-line refusals of DBs, workloads and nemeses that do not fit."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from cli_runs import run_module

from faultline.controller import testspec
from faultline.controller.errors import UsageError
from faultline.controller.runner import run_test
from faultline.dbs import UnknownDB, get_db, loadable
from faultline.dbs.store import StoreDB
from faultline.dbs.store.fake import FakeBackend
from faultline.dbs.store.layout import MASTER, TSERVER
from faultline.nemesis.registry import compose
from faultline.workloads.registry import get as get_workload


def faultline_run(*args: str, env: dict[str, str] | None = None) -> CompletedProcess[str]:
    """`faultline run ARGS` as a user runs it; `env` is added to the environment."""
    return run_module("faultline", "run", *args, timeout=120, env=env)


def test_dbs_by_name_and_by_import_path() -> None:
    assert isinstance(get_db(None), StoreDB) and isinstance(get_db("store"), StoreDB)
    assert isinstance(get_db("faultline.dbs.store:StoreDB"), StoreDB)
    for bad, says in (
        ("nope", "unknown DB 'nope'"),
        ("no.such.module:X", "cannot import"),
        ("faultline.dbs.store:Nope", "has no Nope"),
        ("json:loads", "is not a DB"),
    ):
        with pytest.raises(UnknownDB, match=says):
            get_db(bad)


class _ClientsOnMasters(StoreDB):
    """A DB that sends its clients to the masters (any rule a DB likes)."""

    name = "masters-clients"

    def client_nodes(self, test: Any) -> list[str]:
        return test.backend.nodes(MASTER)


class _Recording:
    """Wraps a workload client and notes the node each worker's client was opened on."""

    def __init__(self, inner: Any, seen: list[str]) -> None:
        self.inner, self.seen = inner, seen

    def setup(self, test: Any) -> None:
        self.inner.setup(test)

    def open(self, test: Any, node: str) -> Any:
        self.seen.append(node)
        return self.inner.open(test, node)


@pytest.mark.parametrize(("db", "role"), [(StoreDB(), TSERVER), (_ClientsOnMasters(), MASTER)])
def test_the_runner_spreads_workers_over_the_nodes_the_db_names(tmp_path: Path, db: Any, role: str) -> None:
    test = testspec.stamp(
        testspec.build_test(
            {
                "cluster": "fake",
                "workload": "register",
                "time_limit": 0.5,
                "concurrency": 4,
                "seed": 3,
                "quiet_period": 0,
            }
        )
    )
    run = testspec.start_run(test, FakeBackend(seed=3))
    run.db = db
    seen: list[str] = []
    wl = get_workload("register", get_db("store"), test.workload_opts)
    wl = dataclasses.replace(wl, client=_Recording(wl.client, seen))
    out = run_test(run, wl, compose(["none"], get_db("store"), 1), None, install_signals=False)
    assert out.valid is True, out.results
    assert seen and set(seen) <= set(run.backend.nodes(role)), seen


def test_build_test_asks_the_db() -> None:
    test = testspec.build_test(
        {"cluster": "fake", "db_opt": ["masters=1", "tservers=3"], "inject_bug": "no-fsync"}
    )
    assert test.db == "store"
    spec = test.cluster_spec
    assert [(r["role"], r["count"]) for r in spec["roles"]] == [(MASTER, 1), (TSERVER, 3)]
    assert spec["db_opts"] == {"bugs": ["no-fsync"]} and spec["python_packages"] == ["grpcio", "protobuf"]
    with pytest.raises(UsageError, match="unknown DB 'etcd-9'"):
        testspec.build_test({"db": "etcd-9"})

    class Narrow(StoreDB):
        workloads = frozenset({"set"})
        nemeses = frozenset({"kill"})

    sys.modules[__name__].Narrow = Narrow  # importable by path for the rest of this test
    try:
        path = f"{__name__}:Narrow"
        with pytest.raises(UsageError, match="no client for workload 'register'"):
            testspec.build_test({"db": path, "workload": "register"})
        with pytest.raises(UsageError, match="does not support nemesis partition"):
            testspec.build_test({"db": path, "workload": "set", "nemesis": "kill,partition"})
        assert testspec.build_test({"db": path, "workload": "set", "nemesis": "kill"}).db == path
    finally:
        del sys.modules[__name__].Narrow


def test_cli_refuses_an_unknown_db_in_one_line() -> None:
    p = faultline_run("--cluster", "fake", "--db", "nope.mod:X")
    assert p.returncode == 254
    assert p.stderr.strip().count("\n") == 0 and "nope.mod" in p.stderr, p.stderr


# ---------------------------------------------------------------- the real databases' declarations

REAL = ("etcd", "redis-sentinel", "postgres", "mariadb", "nats")


@pytest.mark.parametrize("name", REAL)
def test_real_dbs_declare_packages_processes_and_templates_that_fill(name: str) -> None:
    """Each real DB names its Debian packages (they go into the image tag) and a command per role whose
    placeholders the cluster can fill for every node."""
    from faultline.cluster.base import fill_template
    from faultline.cluster.image import image_tag

    db = get_db(name)
    spec = db.cluster_spec("fl-x", {"clock": False})
    assert spec.packages and spec.db == name and spec.roles
    assert image_tag(spec.packages) != image_tag(())
    for role in spec.roles:
        for node in role.node_names():
            values = {
                "python": "python3",
                "dir": f"/d/{node}",
                "name": node,
                "address": "10.0.0.2",
                "port": str(role.port),
                "advertise": f"10.0.0.2:{role.port}",
            }
            for template in (role.argv, role.prepare):
                filled = fill_template(
                    template, values, lambda r: [f"{n}:1" for n in spec.role(r).node_names()]
                )
                assert not any("{" in part and "}" in part and "{dir}" in part for part in filled)


def test_the_run_refuses_what_a_real_db_cannot_do_before_anything_starts() -> None:
    with pytest.raises(UsageError, match="etcd is a Go program"):
        testspec.build_test({"db": "etcd", "workload": "register", "nemesis": "clock"})
    with pytest.raises(UsageError, match="power-loss is a fault of the store DB"):
        testspec.build_test({"db": "redis-sentinel", "workload": "set", "nemesis": "power-loss"})
    with pytest.raises(UsageError, match="no client for workload 'bank'"):
        testspec.build_test({"db": "redis-sentinel", "workload": "bank"})
    with pytest.raises(UsageError, match="no peers"):
        testspec.build_test({"db": "postgres", "workload": "register", "nemesis": "partition"})
    with pytest.raises(UsageError, match="bugs of the bundled store"):
        testspec.build_test({"db": "etcd", "workload": "register", "inject_bug": "no-fsync"})
    with pytest.raises(UsageError, match="members must be 1, 3, 5 or 7"):
        testspec.build_test({"db": "etcd", "workload": "register", "db_opt": ["members=4"]})
    five = testspec.build_test({"db": "etcd", "workload": "register", "db_opt": ["members=5"]})
    assert five.db_opts == {"members": 5} and five.cluster_spec["roles"][0]["count"] == 5
    with pytest.raises(UsageError, match=r"libfaketime 0\.9\.10 aborts redis-server"):
        testspec.build_test({"db": "redis-sentinel", "workload": "set", "nemesis": "clock"})
    # clock faults reach postgres through libfaketime: its node preloads it only then, as the postgres user
    clocked = testspec.build_test({"db": "postgres", "workload": "register", "nemesis": "clock"}).cluster_spec
    assert clocked["faketime"] and clocked["roles"][0]["user"] == "postgres"
    assert not testspec.build_test({"db": "postgres", "workload": "set"}).cluster_spec["faketime"]


@pytest.mark.parametrize("raw", [["nokey"], ["=1"], ["Bad-Key=1"]])
def test_db_options_are_key_value(raw: list[str]) -> None:
    with pytest.raises(UsageError):
        testspec.parse_opts(raw)


def test_a_user_db_module_that_fails_to_import_is_named(tmp_path: Path) -> None:
    (tmp_path / "crashing_db.py").write_text("raise RuntimeError('boom at import')\n")
    p = faultline_run("--cluster", "fake", "--db", "crashing_db:DB", env={"PYTHONPATH": str(tmp_path)})
    assert p.returncode == 254, p.stderr
    assert "crashing_db" in p.stderr and "boom at import" in p.stderr and "Traceback" not in p.stderr


def test_an_unknown_db_lists_the_registered_ones() -> None:
    p = faultline_run("--cluster", "fake", "--db", "mongo")
    assert p.returncode == 254
    assert all(n in p.stderr for n in ("store", *REAL)), p.stderr


def test_a_db_setup_failure_stops_the_run_with_the_nodes_log(tmp_path: Path) -> None:
    """A DB whose node never serves: the run is cut short at setup with the node's log tail, healed, checked
    (nothing to check: unknown) and the cluster torn down."""
    from faultline.db.process import DBStartError

    class NeverReady(StoreDB):
        def setup(self, test: Any, node: str) -> None:
            raise DBStartError(f"store on {node} did not become ready: last lines of its log: kaboom")

    test = testspec.stamp(
        testspec.build_test(
            {"cluster": "fake", "workload": "register", "time_limit": 0.5, "seed": 3, "quiet_period": 0}
        )
    )
    backend = FakeBackend(seed=3)
    run = testspec.start_run(test, backend)
    run.db = NeverReady()
    out = run_test(
        run,
        get_workload("register", get_db("store"), test.workload_opts),
        compose(["none"], get_db("store"), 1),
        None,
        install_signals=False,
    )
    assert out.valid == "unknown" and "DBSetupFailed" in str(out.cut_short) and "kaboom" in str(out.cut_short)
    assert out.ops == 0 and backend.events[-1] == ("down", "") and not backend.is_up


def test_primary_targeted_faults_ask_the_db() -> None:
    """kill-primary and partition-primary hit exactly the nodes the DB names as its primaries."""
    from faultline.dbs.store.fake import fake_run
    from faultline.nemesis.faults import PartitionNemesis, ProcessNemesis

    run = fake_run()
    run.backend.up(
        run.spec.cluster_spec or __import__("faultline.dbs.store.fake", fromlist=["x"]).store_spec()
    )

    class Primaried(StoreDB):
        def primaries(self, test: Any) -> list[str]:
            return ["t2"]

    run.db = Primaried()
    kill = ProcessNemesis("kill").setup(run)
    done = kill.invoke(run, {"f": "start-kill", "value": {"targets": "primaries", "subset": "all"}})
    assert done["value"]["nodes"] == ["t2"] and run.backend.daemon_status("t2") == "stopped"
    kill.heal(run)
    assert run.backend.daemon_status("t2") == "running"
    part = PartitionNemesis().setup(run)
    done = part.invoke(run, {"f": "start-partition", "value": {"shape": "leader", "targets": "primaries"}})
    assert done["value"]["leader"] == "t2" and ["t2"] in done["value"]["groups"]


def test_packet_faults_draw_among_what_the_kernel_can_do_and_are_restored() -> None:
    from faultline.dbs.store.fake import fake_run, store_spec
    from faultline.nemesis.faults import PacketNemesis

    run = fake_run()
    run.backend.up(store_spec())
    run.backend.packet_kinds = lambda node: ("loss", "duplicate", "rate")  # a kernel without netem
    nem = PacketNemesis().setup(run)
    kinds = set()
    for _ in range(12):
        done = nem.invoke(run, {"f": "start-packet", "value": {"subset": "minority"}})
        kinds.add(done["value"]["kind"])
        assert done["value"]["nodes"] and set(run.backend.packets) == set(done["value"]["nodes"])
        nem.invoke(run, {"f": "stop-packet", "value": None})
        assert run.backend.packets == {} and run.backend.residue() == []
    assert kinds <= {"loss", "duplicate", "rate"} and len(kinds) >= 2


def test_campaigns_take_db_options(tmp_path: Path) -> None:
    from faultline.controller.campaign import load

    path = tmp_path / "c.toml"
    cell = (
        '[campaign]\nname = "x"\n[[cell]]\nname = "e"\ndb = "etcd"\nworkload = "register"\nexpect = "valid"\n'
    )
    path.write_text(cell + "db_opt = {members = 5}\n")
    assert load(path).runs[0].opts["db_opt"] == {"members": 5}
    path.write_text(cell + "db_opt = {members = 4}\n")
    with pytest.raises(UsageError, match="members must be 1, 3, 5 or 7"):
        load(path)


def test_a_stores_own_fault_is_refused_for_etcd_in_one_line_naming_what_etcd_supports() -> None:
    p = faultline_run("--db", "etcd", "--nemesis", "master-replace")
    assert p.returncode == 254, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr, p.stderr
    assert "master-replace is a fault of the store DB" in p.stderr
    assert "the etcd DB supports none, partition," in p.stderr and "kill-primary" in p.stderr


def test_generic_faults_kill_and_pause_through_the_db() -> None:
    """kill and pause go through the DB's Kill and Pause, so a DB that does them its own way is heard."""
    from faultline.dbs.store.fake import fake_run
    from faultline.nemesis.faults import ProcessNemesis

    calls: list[tuple[str, str]] = []

    def recorded(name: str) -> Any:
        """StoreDB's `name`, which first notes that it was called and on which node."""

        def method(self: StoreDB, test: Any, node: str) -> None:
            calls.append((name, node))
            getattr(StoreDB, name)(self, test, node)

        return method

    Recording = type("Recording", (StoreDB,), {n: recorded(n) for n in ("kill", "start", "pause", "resume")})

    test = dataclasses.replace(fake_run(seed=3), db=Recording())
    for mode, undo in (("kill", "start"), ("pause", "resume")):
        n = ProcessNemesis(mode).setup(test)
        hit = n.invoke(test, {"f": f"start-{mode}", "value": {"targets": "tservers", "subset": "one"}})[
            "value"
        ]
        n.invoke(test, {"f": f"stop-{mode}", "value": None})
        assert calls[-2:] == [(mode, hit["nodes"][0]), (undo, hit["nodes"][0])], calls
    assert test.backend.residue() == []


def test_a_fault_needs_the_capability_it_uses() -> None:
    """A DB without Kill cannot take kill (nor kill-primary); without Primaries, no primary-aimed fault."""
    from faultline.cluster.base import ClusterSpec
    from faultline.nemesis import registry

    class Bare:
        """The DB core alone: no capability."""

        name = "bare"
        workloads = frozenset({"register"})
        nemeses = None
        nemesis_notes: dict[str, str] = {}

        def cluster_spec(self, name: str, opts: Any) -> ClusterSpec:
            return ClusterSpec(name=name, roles=[], db=self.name)

    bare = Bare()
    assert "kill" not in registry.supported(bare) and "partition" in registry.supported(bare)
    with pytest.raises(ValueError, match="kill needs the DB capability Kill"):
        registry.validate(["kill"], bare)
    with pytest.raises(ValueError, match="needs the DB capability Kill, Primaries"):
        registry.validate(["kill-primary"], bare)
    assert set(registry.supported(StoreDB())) >= {"kill", "pause", "master-replace", "power-loss"}


def test_the_stores_own_workload_and_faults_are_listed_with_their_owner() -> None:
    from faultline.nemesis import registry as nemeses
    from faultline.workloads import registry as workloads

    assert "catalog" not in workloads.WORKLOADS and workloads.all_entries(loadable())["catalog"].db == "store"
    assert (
        "master-replace" not in nemeses.NEMESES
        and nemeses.all_entries(loadable())["master-replace"].db == "store"
    )
    assert workloads.supported(get_db("etcd")) == ["register", "set", "bank", "lock", "counter", "unique-ids"]
    with pytest.raises(UsageError, match="catalog is a workload of the store DB"):
        testspec.build_test({"db": "etcd", "workload": "catalog"})
    help_text = faultline_run("--help").stdout
    assert "master-replace" in " ".join(help_text.split()) and "store only" in " ".join(help_text.split())


def test_the_fake_cluster_runs_only_the_store() -> None:
    assert testspec.build_test({"cluster": "fake", "workload": "register"}).quiet_period == 0.2
    with pytest.raises(UsageError, match="the fake cluster runs only store, not etcd"):
        testspec.build_test({"db": "etcd", "cluster": "fake", "workload": "register"})


def test_the_controller_names_no_db_and_no_backend() -> None:
    """Every DB and backend is reached through the registries and protocols: no literal in controller/
    names the fake backend, and nothing compares a DB's name with the default DB's."""
    import ast

    offenders = []
    for path in sorted((Path(__file__).resolve().parent.parent / "controller").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value == "fake":
                offenders.append(f"{path.name}:{node.lineno}: 'fake'")
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Name) and side.id == "DEFAULT_DB"
                for side in [node.left, *node.comparators]
            ):
                offenders.append(f"{path.name}:{node.lineno}: compares with DEFAULT_DB")
    assert not offenders, offenders


def test_a_user_db_offers_a_fault_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/examples/single_redis.py ships `client-pause`: its runs may name it, other DBs' may not."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent / "docs" / "examples"))
    spec = testspec.build_test(
        {"db": "single_redis:SingleRedis", "workload": "register", "nemesis": "pause,client-pause"}
    )
    assert spec.nemesis == ("pause", "client-pause")
    from faultline.nemesis import registry

    pkg = registry.compose(["client-pause"], get_db("single_redis:SingleRedis"), 1.0)
    assert pkg.nemesis.fs == {"start-client-pause", "stop-client-pause"} and pkg.final_generator is not None
    with pytest.raises(UsageError, match="unknown nemesis 'client-pause'"):
        testspec.build_test({"db": "etcd", "workload": "register", "nemesis": "client-pause"})
