"""Builds a test (`faultline.core.TestSpec`, frozen plain data) from options, validating everything before
anything starts; stamps it for one run; and makes the run's live handles (`faultline.core.Run`: the DB,
the cluster backend, the client factory). test.json holds exactly `TestSpec.to_json()`.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from faultline.controller.errors import UsageError
from faultline.core import Run, TestSpec
from faultline.db.api import DB
from faultline.dbs import DEFAULT as DEFAULT_DB
from faultline.dbs import UnknownDB, every_nemesis, every_workload, get_db


def _choices(what: str, value: str, valid: Sequence[str]) -> UsageError:
    return UsageError(f"unknown {what} {value!r}; valid: {', '.join(valid)}")


def split_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [x for v in value for x in str(v).split(",")]
    return [i.strip() for i in items if i.strip()]


def parse_opts(
    raw: Any, flag: str = "--db-opt", what: str = "DB option", numbers: bool = True
) -> dict[str, Any]:
    """`--db-opt KEY=VALUE` (repeatable) or a campaign's `db_opt` table, as plain data: numbers become
    numbers (unless not `numbers`: a nemesis's file glob `0001` stays text), everything else stays text.
    `--nemesis-opt` (`nemesis_opt`) is read the same way, with its own `flag` and `what` in errors."""
    if raw is None:
        return {}
    items: list[tuple[Any, Any]]
    if isinstance(raw, Mapping):
        items = list(raw.items())
    else:
        items = []
        for item in [raw] if isinstance(raw, str) else raw:
            name, sep, text = str(item).partition("=")
            if not sep or not name.strip():
                raise UsageError(f"{flag} {item!r}: use KEY=VALUE")
            items.append((name.strip(), text.strip()))
    out: dict[str, Any] = {}
    for key, value in items:
        if not re.match(r"^[a-z][a-z0-9_]{0,40}$", str(key)):
            raise UsageError(f"{what} {key!r}: use lowercase letters, digits and '_'")
        if isinstance(value, str) and numbers:
            with contextlib.suppress(ValueError):
                value = int(value)
        if not isinstance(value, (str, int, float, bool)):
            raise UsageError(f"{what} {key}: a number or text, not {value!r}")
        out[str(key)] = value
    return out


def chosen_db(name: str | None) -> DB:
    """The DB a user named (--db, the campaign key `db`), or a one-line UsageError."""
    try:
        return get_db(name)
    except UnknownDB as exc:
        raise UsageError(str(exc)) from None


def _backend_kind(name: str, db: DB) -> Any:
    """The registered cluster backend `name` (cluster.backends; a DB plug-in may register its own, as the
    store does its in-memory fake), if it can run `db`; else a one-line UsageError."""
    from faultline.cluster import backends
    from faultline.cluster.base import ClusterError

    try:
        kind = backends.kind(name)
    except ClusterError:
        raise _choices("cluster", name, backends.kinds()) from None
    if not kind.runs(db.name):
        raise UsageError(f"the {name} cluster runs only {', '.join(sorted(kind.dbs or ()))}, not {db.name}")
    return kind


def build_test(opts: Mapping[str, Any]) -> TestSpec:
    """A validated test from options (argparse namespace vars, a campaign cell, the pytest fixture)."""
    from faultline.db.api import Bugs
    from faultline.nemesis import registry as nemeses_registry
    from faultline.workloads import registry as workloads_registry

    db_name = str(opts.get("db") or DEFAULT_DB)
    db = chosen_db(db_name)
    workload = str(opts.get("workload") or "register")
    try:
        workloads_registry.validate(workload, db, every_workload)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    nemeses = split_list(opts.get("nemesis") or "none")
    if "none" in nemeses and len(nemeses) > 1:
        raise UsageError("--nemesis none cannot be combined with other nemeses")
    try:
        nemeses_registry.validate(nemeses, db, every_nemesis)
    except ValueError as exc:
        raise UsageError(f"{exc} (docs/your-own-db.md lists them per DB)") from None
    try:
        nemesis_opts = nemeses_registry.validate_opts(
            parse_opts(opts.get("nemesis_opt"), "--nemesis-opt", "nemesis option", numbers=False), nemeses, db
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    bugs = split_list(opts.get("inject_bug"))
    known_bugs = db.bugs if isinstance(db, Bugs) else {}
    if bugs and not known_bugs:
        raise UsageError(
            f"--inject-bug turns on a DB's own bugs (such as the bugs of the bundled store); the "
            f"{db.name} DB has none"
        )
    for b in bugs:
        if b not in known_bugs:
            raise _choices("bug", b, sorted(known_bugs))
    db_opts = parse_opts(opts.get("db_opt"))
    if opts.get("isolation"):
        db_opts["isolation"] = str(opts["isolation"])
    accepted = getattr(db, "options", None)
    unknown = sorted(set(db_opts) - set(accepted or {})) if accepted is not None else []
    if unknown:
        takes = "; ".join(f"{k}: {v}" for k, v in (accepted or {}).items()) or "none"
        raise UsageError(
            f"the {db.name} DB takes no option {unknown[0]!r} (--db-opt, --isolation); it takes: {takes}"
        )
    cluster = str(opts.get("cluster") or "docker")
    backend_kind = _backend_kind(cluster, db)

    def positive(name: str, default: float, integer: bool = False) -> Any:
        raw = opts.get(name)
        flag = "--" + name.replace("_", "-")
        try:
            value = (
                int(default if raw is None else raw) if integer else float(default if raw is None else raw)
            )
        except (TypeError, ValueError):
            raise UsageError(f"{flag} must be a {'whole ' if integer else ''}number, not {raw!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise UsageError(f"{flag} must be positive and finite, not {raw!r}")
        return value

    time_limit = positive("time_limit", 60.0)
    concurrency = positive("concurrency", 10, integer=True)
    masters = positive("masters", 3, integer=True)
    tservers = positive("tservers", 5, integer=True)
    interval = positive("nemesis_interval", 10.0)
    test_count = positive("test_count", 1, integer=True)
    rate = positive("rate", 1.0) if opts.get("rate") is not None else None
    op_timeout = positive("op_timeout", 5.0)
    seed = opts.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise UsageError(f"--seed must be an integer, not {seed!r}") from None
    # A cluster this run brings up gets a name of its own, so runs side by side (two campaigns, a CI
    # suite next to a demo) never collide; a reused cluster is `faultline cluster up`'s default name.
    cluster_name = str(
        opts.get("cluster_name")
        or ("faultline" if opts.get("reuse_cluster") else f"fl-{secrets.token_hex(3)}")
    )
    if not re.match(r"^[a-z][a-z0-9-]{0,30}$", cluster_name):
        raise UsageError(f"--cluster-name {cluster_name!r}: use lowercase letters, digits and '-' (max 31)")
    name = str(opts.get("name") or "-".join([workload, *nemeses] + [f"bug-{b}" for b in bugs]))[:128]
    if cluster == "ssh" and not opts.get("nodes"):
        raise UsageError("--cluster ssh needs --nodes HOSTS_FILE (see docs/cluster.md for its format)")
    if cluster == "ssh":
        from faultline.cluster.ssh_backend import load_hosts

        try:
            load_hosts(str(opts["nodes"]))  # checked now, before a campaign or a run starts
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        db.validate(
            {
                "masters": masters,
                "tservers": tservers,
                "bugs": bugs,
                "nemesis": nemeses,
                "workload": workload,
                **db_opts,
            }
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        cluster_spec = db.cluster_spec(
            cluster_name,
            {"masters": masters, "tservers": tservers, "bugs": bugs, "clock": "clock" in nemeses, **db_opts},
        )
    except ValueError as exc:
        raise UsageError(f"{db.name} cluster: {exc}") from None
    cluster_spec.disk_dirs = disk_layer_dirs(nemeses, db, cluster)
    quiet = opts.get("quiet_period")
    try:
        quiet = None if quiet is None else float(quiet)
    except (TypeError, ValueError):
        raise UsageError(f"--quiet-period must be a number, not {quiet!r}") from None
    if quiet is not None and not (math.isfinite(quiet) and quiet >= 0):
        raise UsageError(f"--quiet-period must be a finite number >= 0, not {quiet!r}")
    return TestSpec(
        name=re.sub(r"[^A-Za-z0-9._+-]", "_", name),
        db=db_name,
        workload=workload,
        nemesis=tuple(nemeses),
        nemesis_interval=interval,
        nemesis_opts=nemesis_opts,
        bugs=tuple(bugs),
        seed=seed,
        time_limit=time_limit,
        concurrency=concurrency,
        cluster=cluster,
        cluster_name=cluster_name,
        masters=masters,
        tservers=tservers,
        test_count=test_count,
        op_timeout_s=op_timeout,
        quiet_period=float(quiet) if quiet is not None else backend_kind.default_quiet_period_s,
        leave_cluster_running=bool(opts.get("leave_cluster_running")),
        reuse_cluster=bool(opts.get("reuse_cluster")),
        workload_opts={"concurrency": concurrency, **({"rate": rate} if rate else {})},
        db_opts=db_opts,
        hosts_file=str(opts["nodes"]) if opts.get("nodes") else None,
        cluster_spec=cluster_spec.to_mapping(),
    )


def disk_layer_dirs(nemeses: Sequence[str], db: DB, cluster: str) -> dict[str, list[str]]:
    """The data directories that get a disk layer (a disk fault among `nemeses`), refused before anything
    starts on a backend that cannot mount it. Docker and local mount it on this machine, which must have
    FUSE; the SSH backend mounts it on its hosts, which it asks for FUSE itself before it uploads anything
    (SSHBackend.check_fuse): here only the layer must be built."""
    from faultline.cluster import disklayer
    from faultline.nemesis import registry as nemeses_registry

    dirs = nemeses_registry.disk_dirs(nemeses, db)
    if not dirs:
        return {}
    if cluster not in ("docker", "local", "ssh"):
        raise UsageError(
            f"--cluster {cluster} cannot mount the disk layer that {', '.join(nemeses)} needs; "
            "use --cluster docker, local or ssh"
        )
    why = disklayer.unavailable(mounts_here=cluster != "ssh")
    if why:
        raise UsageError(f"the disk layer that {', '.join(nemeses)} needs cannot be mounted: {why}")
    return dirs


def stamp(spec: TestSpec) -> TestSpec:
    """The test for one run: the start time now, and a tag that names this run's tables (runs on a
    reused cluster never see each other's rows)."""
    return spec.replace(
        start_time=datetime.now(UTC).isoformat().replace("+00:00", "Z"), run_tag=secrets.token_hex(3)
    )


def make_backend(spec: TestSpec) -> Any:
    """The cluster backend object for the test (not started; attached when the cluster is reused)."""
    from faultline.cluster import backends
    from faultline.cluster.base import ClusterError, ClusterSpec, NodeBackend

    kind = spec.cluster
    cluster_spec = ClusterSpec.from_mapping(spec.cluster_spec)
    try:
        if spec.reuse_cluster:
            b = backends.attach(kind, cluster_spec.name)
            # a cluster that outlives its process keeps its spec with it, as the node backends do
            attached = cast(NodeBackend, b).spec
            if attached.db != cluster_spec.db:
                raise UsageError(
                    f"cluster {cluster_spec.name!r} runs {attached.db or 'nothing'}, not "
                    f"{cluster_spec.db}: bring up a fresh cluster"
                )
            running = sorted(attached.db_opts.get("bugs") or [])
            if running != sorted(spec.bugs):
                raise UsageError(
                    f"cluster {cluster_spec.name!r} runs with bugs {running or 'none'}, not "
                    f"{sorted(spec.bugs) or 'none'}: bring up a fresh cluster"
                )
            return b
        return backends.make_backend(kind, cluster_spec, hosts=spec.hosts_file, seed=spec.seed)
    except (ClusterError, ValueError) as exc:
        raise UsageError(f"{kind} cluster: {exc}") from None


def start_run(spec: TestSpec, backend: Any | None = None) -> Run:
    """The live handles of one run of `spec`: its DB, its backend (made unless given) and the DB's client
    factory."""
    db = get_db(spec.db)
    run = Run(spec, db, backend if backend is not None else make_backend(spec))
    run.connect = db.connector(run)
    return run
