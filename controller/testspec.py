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
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


def resolve_db(name: str | None) -> tuple[str, DB]:
    """The DB a user named (--db, the campaign key `db`; the default DB when none), with the name a run
    records in test.json; an unknown one is a one-line UsageError. The one place the default is read."""
    chosen = str(name or DEFAULT_DB)
    try:
        return chosen, get_db(chosen)
    except UnknownDB as exc:
        raise UsageError(str(exc)) from None


def chosen_db(name: str | None) -> DB:
    """The DB a user named, or the default one (`resolve_db`)."""
    return resolve_db(name)[1]


# The store's sizes were once options of every test (`--masters N`, a campaign cell's `masters = N`); they
# are its DB options now. The old spellings are still read, with one line on stderr naming the new form.
DEPRECATED_DB_OPTS = ("masters", "tservers")


def warn_deprecated(old: str, new: str) -> None:
    print(f"faultline: {old} is deprecated; use {new}", file=sys.stderr, flush=True)


def fold_deprecated(opts: Mapping[str, Any], warn: bool = True) -> dict[str, Any]:
    """`opts` with a deprecated `masters`/`tservers` moved into its DB options (an explicit --db-opt of the
    same name wins), saying so on stderr (`warn`) as for the command line's flags."""
    moved = {k: opts[k] for k in DEPRECATED_DB_OPTS if opts.get(k) is not None}
    out = {k: v for k, v in opts.items() if k not in DEPRECATED_DB_OPTS}
    if not moved:
        return out
    for key in moved if warn else ():
        warn_deprecated(f"--{key}", f"--db-opt {key}=N")
    out["db_opt"] = {**parse_opts({k: str(v) for k, v in moved.items()}), **parse_opts(opts.get("db_opt"))}
    return out


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


def default_kind() -> str:
    """The cluster backend a run uses unless told (`--cluster`)."""
    from faultline.cluster import backends

    return backends.DEFAULT


@dataclass(frozen=True)
class Rule:
    """One option of a test read from plain data (argparse's text, a campaign's numbers): `convert` it
    (else "--flag must be {what}, not RAW"), then `check` it (else "--flag must be {must}, not RAW").
    `default` is used when the option is not given: a value, or a function of all the options; None
    leaves the option unset."""

    key: str
    convert: Callable[[Any], Any]
    what: str
    check: Callable[[Any], bool]
    must: str
    default: Any = None
    refusal: str = "{flag} must be {must}, not {raw!r}"  # the error when `check` fails
    blank_unset: bool = False  # an empty value counts as not given

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    def read(self, opts: Mapping[str, Any]) -> Any:
        raw = opts.get(self.key)
        if raw is None or (self.blank_unset and not raw):
            raw = self.default(opts) if callable(self.default) else self.default
            if raw is None:
                return None
        try:
            value = self.convert(raw)
        except (TypeError, ValueError):
            raise UsageError(f"{self.flag} must be {self.what}, not {opts.get(self.key)!r}") from None
        if not self.check(value):
            raise UsageError(
                self.refusal.format(flag=self.flag, must=self.must, raw=opts.get(self.key), value=value)
            )
        return value


def _is_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _is_non_negative(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _positive(key: str, default: float | None, integer: bool = False) -> Rule:
    what = "a whole number" if integer else "a number"
    return Rule(key, int if integer else float, what, _is_positive, "positive and finite", default)


def _random_seed(opts: Mapping[str, Any]) -> int:
    return random.SystemRandom().randrange(2**31)


def _fresh_cluster_name(opts: Mapping[str, Any]) -> str:
    """A cluster this run brings up gets a name of its own, so runs side by side (two campaigns, a CI
    suite next to a demo) never collide; a reused cluster is `faultline cluster up`'s default name."""
    return "faultline" if opts.get("reuse_cluster") else f"fl-{secrets.token_hex(3)}"


# The test's own options, checked in this order; the DB's options are the DB's (DB.options, DB.validate).
RULES: tuple[Rule, ...] = (
    _positive("time_limit", 60.0),
    _positive("concurrency", 10, integer=True),
    _positive("nemesis_interval", 10.0),
    _positive("test_count", 1, integer=True),
    _positive("rate", None),
    _positive("op_timeout", 5.0),
    Rule("seed", int, "an integer", lambda v: True, "", _random_seed),
    Rule(
        "cluster_name",
        str,
        "text",
        lambda v: bool(re.match(r"^[a-z][a-z0-9-]{0,30}$", v)),
        "lowercase letters, digits and '-' (max 31)",
        _fresh_cluster_name,
        refusal="{flag} {value!r}: use {must}",
        blank_unset=True,
    ),
    Rule(
        "quiet_period",
        float,
        "a number",
        _is_non_negative,
        "a finite number >= 0",
    ),
)


def apply_rules(opts: Mapping[str, Any], rules: Sequence[Rule] = RULES) -> dict[str, Any]:
    """Every rule's value, by key (None: not given and no default)."""
    return {rule.key: rule.read(opts) for rule in rules}


def _names(opts: Mapping[str, Any], db: DB) -> tuple[str, list[str], dict[str, Any], list[str]]:
    """The workload, the nemeses, their options and the bugs, each one the DB offers."""
    from faultline.db.api import Bugs
    from faultline.nemesis import registry as nemeses_registry
    from faultline.workloads import registry as workloads_registry

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
    raw_nemesis_opts = parse_opts(opts.get("nemesis_opt"), "--nemesis-opt", "nemesis option", numbers=False)
    try:
        nemesis_opts = nemeses_registry.validate_opts(raw_nemesis_opts, nemeses, db)
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
    return workload, nemeses, nemesis_opts, bugs


def db_options(db: DB, raw: Any, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The DB's own options (--db-opt, a campaign's db_opt, plus `extra` such as --isolation), each one the
    DB takes (DB.options; a DB that declares none takes any)."""
    db_opts = {**parse_opts(raw), **(extra or {})}
    accepted = getattr(db, "options", None)
    unknown = sorted(set(db_opts) - set(accepted or {})) if accepted is not None else []
    if unknown:
        takes = "; ".join(f"{k}: {v}" for k, v in (accepted or {}).items()) or "none"
        raise UsageError(
            f"the {db.name} DB takes no option {unknown[0]!r} (--db-opt, --isolation); it takes: {takes}"
        )
    return db_opts


def check_hosts_file(kind: Any, path: Any, flag: str = "--nodes") -> None:
    """A kind whose nodes are named in a hosts file gets one, readable, before a campaign or a run starts."""
    if kind.hosts_file is None:
        return
    if not path:
        raise UsageError(
            f"--cluster {kind.name} needs {flag} HOSTS_FILE (see docs/cluster.md for its format)"
        )
    try:
        kind.hosts_file(str(path))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def build_test(opts: Mapping[str, Any]) -> TestSpec:
    """A validated test from options (argparse namespace vars, a campaign cell, the pytest fixture)."""
    opts = fold_deprecated(opts)
    db_name, db = resolve_db(opts.get("db"))
    workload, nemeses, nemesis_opts, bugs = _names(opts, db)
    db_opts = db_options(
        db, opts.get("db_opt"), {"isolation": str(opts["isolation"])} if opts.get("isolation") else {}
    )
    cluster = str(opts.get("cluster") or default_kind())
    kind = _backend_kind(cluster, db)
    v = apply_rules(opts)
    name = str(opts.get("name") or "-".join([workload, *nemeses] + [f"bug-{b}" for b in bugs]))[:128]
    check_hosts_file(kind, opts.get("nodes"))
    try:
        db.validate({"bugs": bugs, "nemesis": nemeses, "workload": workload, **db_opts})
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        cluster_spec = db.cluster_spec(
            v["cluster_name"], {"bugs": bugs, "clock": "clock" in nemeses, **db_opts}
        )
    except ValueError as exc:
        raise UsageError(f"{db.name} cluster: {exc}") from None
    cluster_spec.disk_dirs = disk_layer_dirs(nemeses, db, cluster)
    return TestSpec(
        name=re.sub(r"[^A-Za-z0-9._+-]", "_", name),
        db=db_name,
        workload=workload,
        nemesis=tuple(nemeses),
        nemesis_interval=v["nemesis_interval"],
        nemesis_opts=nemesis_opts,
        bugs=tuple(bugs),
        seed=v["seed"],
        time_limit=v["time_limit"],
        concurrency=v["concurrency"],
        cluster=cluster,
        cluster_name=v["cluster_name"],
        test_count=v["test_count"],
        op_timeout_s=v["op_timeout"],
        quiet_period=kind.default_quiet_period_s if v["quiet_period"] is None else v["quiet_period"],
        leave_cluster_running=bool(opts.get("leave_cluster_running")),
        reuse_cluster=bool(opts.get("reuse_cluster")),
        workload_opts={"concurrency": v["concurrency"], **({"rate": v["rate"]} if v["rate"] else {})},
        db_opts=db_opts,
        hosts_file=str(opts["nodes"]) if opts.get("nodes") else None,
        cluster_spec=cluster_spec.to_mapping(),
    )


def _either(names: Sequence[str]) -> str:
    """`a, b or c`."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def disk_layer_dirs(nemeses: Sequence[str], db: DB, cluster: str) -> dict[str, list[str]]:
    """The data directories that get a disk layer (a disk fault among `nemeses`), refused before anything
    starts on a backend that cannot mount it. Where the backend kind mounts it (BackendKind.disk_layer):
    on this machine, which must have FUSE; on its hosts, which the backend asks for FUSE itself before it
    uploads anything (SSHBackend.check_fuse), so here only the layer must be built."""
    from faultline.cluster import backends, disklayer
    from faultline.cluster.base import ClusterError
    from faultline.nemesis import registry as nemeses_registry

    dirs = nemeses_registry.disk_dirs(nemeses, db)
    if not dirs:
        return {}
    try:
        where = backends.kind(cluster).disk_layer
    except ClusterError:
        where = "none"
    if where == "none":
        able = [k for k in backends.kinds() if backends.kind(k).disk_layer != "none"]
        raise UsageError(
            f"--cluster {cluster} cannot mount the disk layer that {', '.join(nemeses)} needs; "
            f"use --cluster {_either(able)}"
        )
    why = disklayer.unavailable(mounts_here=where == "here")
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
