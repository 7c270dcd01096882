"""A test is a plain dict; this module builds one from options, validating everything before anything starts.

Fields written to test.json: name, db, workload, nemesis (list), nemesis_interval, bugs (list), seed,
time_limit, concurrency, cluster, cluster_name, masters, tservers, start_time (ISO UTC), run_tag (suffix of
this run's table names), quiet_period, workload_opts, cluster_spec, leave_cluster_running, reuse_cluster. Live objects (backend, recorder, connect) are added by
the runner and never serialised (see runner.RUNTIME_KEYS).
"""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from faultline.controller.errors import UsageError
from faultline.dbs import DEFAULT as DEFAULT_DB
from faultline.dbs import UnknownDB, get_db

CLUSTERS: tuple[str, ...] = ("docker", "local", "ssh")
TEST_ONLY_CLUSTERS: tuple[str, ...] = ("fake",)  # in-memory, for testing the harness itself

def _choices(what: str, value: str, valid: Sequence[str]) -> UsageError:
    return UsageError(f"unknown {what} {value!r}; valid: {', '.join(valid)}")


def split_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else [x for v in value for x in str(v).split(",")]
    return [i.strip() for i in items if i.strip()]


def build_test(opts: Mapping[str, Any]) -> dict[str, Any]:
    """Validated test dict from options (argparse namespace vars or a campaign cell)."""
    from faultline.nemesis.registry import NEMESES
    from faultline.node.bugs import BUGS
    from faultline.workloads.registry import WORKLOADS

    workload = str(opts.get("workload") or "register")
    if workload not in WORKLOADS:
        raise _choices("workload", workload, list(WORKLOADS))
    nemeses = split_list(opts.get("nemesis") or "none")
    for n in nemeses:
        if n not in NEMESES:
            raise _choices("nemesis", n, list(NEMESES))
    if "none" in nemeses and len(nemeses) > 1:
        raise UsageError("--nemesis none cannot be combined with other nemeses")
    bugs = split_list(opts.get("inject_bug"))
    for b in bugs:
        if b not in BUGS:
            raise _choices("bug", b, sorted(BUGS))
    db_name = str(opts.get("db") or DEFAULT_DB)
    try:
        db = get_db(db_name)
    except UnknownDB as exc:
        raise UsageError(str(exc)) from None
    if workload not in db.workloads:
        raise UsageError(f"the {db.name} DB has no client for workload {workload!r}; it supports "
                         f"{', '.join(sorted(db.workloads))}")
    unsupported = [n for n in nemeses if db.nemeses is not None and n != "none" and n not in db.nemeses]
    if unsupported:
        raise UsageError(f"the {db.name} DB does not support nemesis {', '.join(unsupported)}")
    cluster = str(opts.get("cluster") or "docker")
    if cluster not in CLUSTERS + TEST_ONLY_CLUSTERS:
        raise _choices("cluster", cluster, list(CLUSTERS))

    def positive(name: str, default: float, integer: bool = False) -> Any:
        raw = opts.get(name)
        flag = "--" + name.replace("_", "-")
        try:
            value = int(default if raw is None else raw) if integer else float(default if raw is None else raw)
        except (TypeError, ValueError):
            raise UsageError(f"{flag} must be a {'whole ' if integer else ''}number, not {raw!r}") from None
        if value <= 0:
            raise UsageError(f"{flag} must be positive, not {raw!r}")
        return value

    time_limit = positive("time_limit", 60.0)
    concurrency = positive("concurrency", 10, integer=True)
    masters = positive("masters", 3, integer=True)
    tservers = positive("tservers", 5, integer=True)
    interval = positive("nemesis_interval", 10.0)
    test_count = positive("test_count", 1, integer=True)
    rate = positive("rate", 1.0) if opts.get("rate") is not None else None
    op_timeout = positive("op_timeout", 5.0)
    if "master-migrate" in nemeses and masters != 1:
        raise UsageError("--nemesis master-migrate starts from one master: use --masters 1")
    if tservers < 3:
        raise UsageError("--tservers must be at least 3 (tablets are replicated three ways)")
    seed = opts.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    try:
        seed = int(seed)
    except (TypeError, ValueError):
        raise UsageError(f"--seed must be an integer, not {seed!r}") from None
    # A cluster this run brings up gets a name of its own, so runs side by side (two campaigns, a CI
    # suite next to a demo) never collide; a reused cluster is `faultline cluster up`'s default name.
    cluster_name = str(opts.get("cluster_name") or ("faultline" if opts.get("reuse_cluster")
                                                    else f"fl-{secrets.token_hex(3)}"))
    if not re.match(r"^[a-z][a-z0-9-]{0,30}$", cluster_name):
        raise UsageError(f"--cluster-name {cluster_name!r}: use lowercase letters, digits and '-' (max 31)")
    name = str(opts.get("name") or "-".join([workload, *nemeses] + [f"bug-{b}" for b in bugs]))[:128]
    quiet = opts.get("quiet_period")
    test: dict[str, Any] = {
        "name": re.sub(r"[^A-Za-z0-9._+-]", "_", name),
        "db": db_name,
        "workload": workload,
        "nemesis": nemeses,
        "nemesis_interval": interval,
        "bugs": bugs,
        "seed": seed,
        "time_limit": time_limit,
        "concurrency": concurrency,
        "cluster": cluster,
        "cluster_name": cluster_name,
        "masters": masters,
        "tservers": tservers,
        "test_count": test_count,
        "op_timeout_s": op_timeout,
        "quiet_period": float(quiet) if quiet is not None else (0.2 if cluster == "fake" else 5.0),
        "leave_cluster_running": bool(opts.get("leave_cluster_running")),
        "reuse_cluster": bool(opts.get("reuse_cluster")),
        "workload_opts": {"concurrency": concurrency, **({"rate": rate} if rate else {})},
        "hosts_file": str(opts["nodes"]) if opts.get("nodes") else None,
    }
    if cluster == "ssh" and not test["hosts_file"]:
        raise UsageError("--cluster ssh needs --nodes HOSTS_FILE (see docs/cluster.md for its format)")
    try:
        spec = db.cluster_spec(cluster_name, {"masters": masters, "tservers": tservers, "bugs": bugs})
    except ValueError as exc:
        raise UsageError(f"{db.name} cluster: {exc}") from None
    test["cluster_spec"] = spec.to_mapping()
    return test


def stamp(test: dict[str, Any]) -> dict[str, Any]:
    """A copy for one run: start time now, master DNS names, node lists."""
    out = dict(test)
    out["start_time"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    # names this run's tables: runs on a reused cluster never see each other's rows
    out["run_tag"] = secrets.token_hex(3)
    out["master_names"] = [f"master-{i}" for i in range(1, int(test["masters"]) + 1)]
    out["tservers_list"] = [f"t{i}" for i in range(1, int(test["tservers"]) + 1)]
    return out


def make_backend(test: Mapping[str, Any]) -> Any:
    """The cluster backend object for the test (not started)."""
    kind = test["cluster"]
    if kind == "fake":
        from faultline.testing.fake import FakeBackend

        return FakeBackend(seed=int(test["seed"]))
    from faultline.cluster import backends
    from faultline.cluster.base import ClusterError, ClusterSpec

    spec_map = dict(test["cluster_spec"])
    try:
        if test.get("reuse_cluster"):
            b = backends.attach(kind, spec_map["name"])
            if b.spec.db != spec_map.get("db"):
                raise UsageError(f"cluster {spec_map['name']!r} runs {b.spec.db or 'nothing'}, not "
                                 f"{spec_map.get('db')}: bring up a fresh cluster")
            running = sorted(b.spec.db_opts.get("bugs") or [])
            if running != sorted(test.get("bugs") or []):
                raise UsageError(f"cluster {spec_map['name']!r} runs with bugs {running or 'none'}, not "
                                 f"{sorted(test.get('bugs') or []) or 'none'}: bring up a fresh cluster")
            return b
        return backends.make_backend(kind, ClusterSpec.from_mapping(spec_map), hosts=test.get("hosts_file"))
    except (ClusterError, ValueError) as exc:
        raise UsageError(f"{kind} cluster: {exc}") from None


def connector(test: Mapping[str, Any]) -> Any:
    """A zero-argument callable returning a client library object connected to the test's cluster: the
    DB's own, or the in-memory fake's (test["backend"] and test["database"] are set)."""
    if test["cluster"] == "fake":
        return test["backend"].client
    return test["database"].connector(test)
