"""`faultline cluster up|status|logs|down|image`: bring a cluster of the store up and down by hand."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from faultline.core import options

HELP = (
    "bring a cluster up or down (docker, local namespaces, ssh hosts); show status and logs; build the image"
)
DESCRIPTION = (
    "Clusters of a DB (the bundled store by default; its size and layout are the DB's options, --db-opt): "
    "'up' starts it on Docker (default), in network namespaces on this machine (--cluster local, needs "
    "root) or on real hosts over SSH (--cluster ssh --hosts FILE); 'status' lists nodes, roles, addresses, DNS names and the leading master; 'logs NODE' "
    "prints a node's log; 'down' removes a cluster ('down --all' removes everything Faultline made on this "
    "machine); 'image' builds the node image (cached by a hash of its inputs)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_up(sub)
    st = sub.add_parser("status", help="nodes, roles, addresses, DNS names, leader")
    _common(st, None)
    st.add_argument("--json", action="store_true", help="machine-readable output")
    lg = sub.add_parser("logs", help="print a node's log")
    _common(lg, None)
    lg.add_argument("node", help="node name (m1, t3, ...)")
    dn = sub.add_parser("down", help="remove a cluster (or --all)")
    _common(dn, None)
    dn.add_argument(
        "--all",
        action="store_true",
        help="remove every Faultline container, network, namespace and recorded ssh cluster",
    )
    _add_ssh(sub)
    _add_image(sub)


def _common(p: argparse.ArgumentParser, default_name: str | None) -> None:
    """--cluster and --name, which every action but `image` takes."""
    from faultline.cluster import backends

    p.add_argument(
        "--cluster",
        choices=list(backends.kinds()),
        default=None,
        help=f"backend (default: {backends.DEFAULT} for up; for the others, wherever the cluster is)",
    )
    p.add_argument(
        "--name",
        default=default_name,
        help="cluster name"
        + (f" (default {default_name})" if default_name else " (default: the only cluster that is up)"),
    )


def _add_up(sub: Any) -> None:
    up = sub.add_parser(
        "up",
        help="start a cluster",
        description="Start a DB's cluster (its nodes as the DB's options say: --db-opt).",
    )
    from faultline.controller.testspec import DEPRECATED_DB_OPTS

    _common(up, "default")
    up.add_argument(
        "--db",
        default=None,
        metavar="NAME",
        help="the DB to run: a registered name (default store) or package.module:Attribute",
    )
    up.add_argument(
        "--db-opt",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="an option of the DB (repeatable), e.g. members=5 for etcd (docs/your-own-db.md)",
    )
    for key in DEPRECATED_DB_OPTS:
        up.add_argument(
            f"--{key}",
            type=options.positive_int,
            default=None,
            metavar="N",
            help=f"deprecated: --db-opt {key}=N",
        )
    up.add_argument("--hosts", metavar="FILE", help="ssh backend: TOML hosts file (see docs/cluster.md)")
    up.add_argument(
        "--daemon",
        choices=["node", "placeholder", "none"],
        default="node",
        help="store only: what runs on each node: the store (node, default), a TCP stand-in "
        "(placeholder) or nothing",
    )
    up.add_argument(
        "--inject-bug",
        action="append",
        default=[],
        metavar="NAME",
        help="start the nodes with an injected bug (repeatable)",
    )
    up.add_argument("--json", action="store_true", help="print the cluster description as JSON")


def _add_ssh(sub: Any) -> None:
    sh = sub.add_parser(
        "ssh",
        help="a shell on a node, or run one command there",
        description="Open a shell on a node (docker exec, ip netns exec or ssh), or run "
        "`-- CMD ...` there and print its output (exit status passed through).",
    )
    _common(sh, None)
    sh.add_argument("node", help="node name (m1, t3, ...)")
    sh.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (default: an interactive shell)")
    sh.add_argument(
        "--timeout", type=options.positive_float, default=60, help="seconds for a command (default 60)"
    )


def _add_image(sub: Any) -> None:
    im = sub.add_parser("image", help="build the node image unless it is cached")
    im.add_argument("--db", default=None, metavar="NAME", help="whose packages go in (default store)")
    im.add_argument(
        "--every-db",
        action="store_true",
        help="one image with every registered DB's packages, which each DB's runs then use "
        "instead of building their own (what `make image` builds)",
    )
    im.add_argument(
        "--rebuild", action="store_true", help="build even if an image with the same inputs exists"
    )


def _err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class _ReportsProgress(Protocol):
    """`up` as the built-in backends offer it: with the spec they were made with, telling `log` each step."""

    def up(self, spec: Any = None, log: Callable[[str], None] = ...) -> None: ...


def _find(args: argparse.Namespace):
    """The (kind, name) the user means: explicit flags, or the only cluster that is up."""
    from faultline.cluster.backends import KINDS, list_clusters
    from faultline.controller.errors import UsageError

    kinds = (args.cluster,) if args.cluster else KINDS
    unreachable: list[str] = []
    found = list_clusters(kinds, unreachable)
    if args.name:
        found = [(k, n) for k, n in found if n == args.name]
    if not found and unreachable:
        raise UsageError(unreachable[0])
    if not found:
        where = args.cluster or "any backend"
        raise UsageError(f"no cluster{' named ' + repr(args.name) if args.name else ''} is up on {where}")
    if len(found) > 1:
        raise UsageError(
            "several clusters are up: "
            + ", ".join(f"{n} ({k})" for k, n in found)
            + "; pick one with --name/--cluster"
        )
    return found[0]


def _has_nodes(kind: str, name: str) -> bool:
    """Whether the cluster has nodes to attach to (beside any disk layer it left)."""
    from faultline.cluster import disklayer

    return (kind, name) not in disklayer.clusters_with_layers() or _attachable(kind, name)


def _attachable(kind: str, name: str) -> bool:
    from faultline.cluster.backends import attach
    from faultline.cluster.base import ClusterError

    try:
        attach(kind, name)
    except ClusterError:
        return False
    return True


def run(args: argparse.Namespace) -> int:
    from faultline.cluster.base import ClusterError
    from faultline.controller.errors import UsageError

    try:
        return _dispatch(args)
    except ClusterError as exc:
        raise UsageError(str(exc)) from exc


def _dispatch(args: argparse.Namespace) -> int:
    if args.action == "image":
        return _image(args)
    if args.action == "up":
        return _up(args)
    if args.action == "down" and args.all:
        from faultline.cluster.backends import remove_everything

        n = remove_everything(log=_err)
        print(f"removed {n} Faultline object(s)")
        return 0
    kind, name = _find(args)
    if args.action == "down" and not _has_nodes(kind, name):
        return _down_disk_layers(kind, name)
    from faultline.cluster.backends import attach
    from faultline.cluster.base import NodeBackend

    backend = attach(kind, name)
    assert isinstance(backend, NodeBackend)  # _find looks only at the built-in kinds, all node backends
    if args.action == "down":
        backend.down()
        print(f"cluster {name} ({kind}) removed")
        return 0
    if args.action in ("ssh", "logs") and args.node not in backend.info:
        from faultline.controller.errors import UsageError

        raise UsageError(f"no node {args.node!r} in cluster {name} (nodes: {', '.join(backend.info)})")
    if args.action == "ssh":
        return _ssh(args, backend)
    if args.action == "logs":
        sys.stdout.write(backend.logs(args.node))
        return 0
    return _status(args, backend)


def _image(args: argparse.Namespace) -> int:
    from faultline.cluster.image import ImageBuildError, build_image
    from faultline.controller.errors import UsageError

    packages, python_packages = _image_packages(args)
    try:
        rep = build_image(packages, python_packages, args.rebuild, log=_err)
    except ImageBuildError as exc:
        raise UsageError(f"image build: {exc}") from exc
    print(f"{rep.tag} built in {rep.seconds:.1f} s" if rep.built else f"{rep.tag} is up to date")
    return 0


def _up(args: argparse.Namespace) -> int:
    from faultline.cluster import backends
    from faultline.cluster.base import NodeBackend
    from faultline.controller.errors import UsageError
    from faultline.controller.testspec import db_options, fold_deprecated

    kind = backends.kind(args.cluster or backends.DEFAULT)
    if kind.hosts_file is not None and not args.hosts:
        raise UsageError(f"--cluster {kind.name} needs --hosts FILE")
    db = _db(args)
    db_opts = db_options(db, fold_deprecated(vars(args)).get("db_opt"))
    _check_bugs(db, args.inject_bug)
    try:
        spec = db.cluster_spec(args.name, {"daemon": args.daemon, "bugs": args.inject_bug, **db_opts})
        backend = backends.make_backend(kind.name, spec, hosts=args.hosts)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if not isinstance(backend, NodeBackend):
        raise UsageError(
            f"a {kind.name} cluster lives in the process that made it: it cannot be brought up here"
        )
    t0 = time.monotonic()
    cast(_ReportsProgress, backend).up(log=lambda s: _err(f"  {s}"))
    desc = backend.describe()
    desc["daemons"] = {n: "started" if backend.process_argv(n) else "-" for n in backend.nodes()}
    if args.json:
        print(json.dumps(desc, indent=1))
    else:
        _print_status(backend, desc, leader=None)
        _err(f"cluster {args.name} ({kind.name}) up in {time.monotonic() - t0:.1f} s")
    return 0


def _check_bugs(db: Any, bugs: list[str]) -> None:
    """Each bug `cluster up --inject-bug` names is one of the DB's own."""
    from faultline.controller.errors import UsageError
    from faultline.db.api import Bugs

    known = db.bugs if isinstance(db, Bugs) else {}
    valid = ", ".join(sorted(known)) or f"none (the {db.name} DB has no injectable bugs)"
    for bug in bugs:
        if bug not in known:
            raise UsageError(f"unknown bug {bug!r}; valid: {valid}")


def _down_disk_layers(kind: str, name: str) -> int:
    """`down` of a cluster of which only its disk layers were left (a run killed early)."""
    from faultline.cluster import disklayer
    from faultline.cluster.base import ClusterError

    try:
        disklayer.unmount_cluster(kind, name)
    except disklayer.DiskLayerError as exc:
        raise ClusterError(str(exc)) from None
    print(f"cluster {name} ({kind}) removed")
    return 0


def _ssh(args: argparse.Namespace, backend: Any) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if cmd:
        rc, out, err = backend.remote.exec(args.node, cmd, args.timeout)
        sys.stdout.write(out)
        sys.stderr.write(err)
        return rc
    return _interactive(backend, args.node)


def _status(args: argparse.Namespace, backend: Any) -> int:
    desc = backend.describe()
    desc["daemons"] = {}
    for node in backend.nodes():
        try:
            desc["daemons"][node] = backend.daemon_status(node)
        except Exception as exc:
            desc["daemons"][node] = f"unknown ({type(exc).__name__})"
    leader = _leader(backend)
    desc["leader"] = leader
    if args.json:
        print(json.dumps(desc, indent=1))
    else:
        _print_status(backend, desc, leader)
    return 0


def _image_packages(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The Debian and Python packages of the image asked for: one DB's, or (`--every-db`) all of theirs."""
    from faultline.controller.errors import UsageError
    from faultline.dbs import loadable

    if args.every_db and args.db:
        raise UsageError("--every-db and --db name different images: give one of them")
    specs = (
        [db.cluster_spec("image", {}) for db in loadable()]
        if args.every_db
        else [_db(args).cluster_spec("image", {})]
    )
    return ([p for s in specs for p in s.packages], [p for s in specs for p in s.python_packages])


def _db(args: argparse.Namespace):
    from faultline.controller.testspec import chosen_db

    return chosen_db(args.db)


def _leader(backend) -> str | None:
    """The primary of the DB the cluster runs, when it is a registered one that can say."""
    from faultline.dbs import UnknownDB, get_db

    try:
        db = get_db(backend.spec.db)
    except UnknownDB:  # nothing, a stand-in, or a DB this installation cannot import
        return None
    from faultline.core import Run, TestSpec
    from faultline.db.api import Primaries

    if not isinstance(db, Primaries):  # a DB without the capability cannot say who leads
        return None
    test = Run(TestSpec(name=backend.spec.name, workload="", db=backend.spec.db), db, backend)
    primaries = db.primaries(test)
    return primaries[0] if primaries else None


def _print_status(backend, desc: dict, leader: str | None) -> None:
    where = "; ".join(f"{role}s at {','.join(addrs)}" for role, addrs in desc["addresses"].items())
    print(f"cluster {desc['name']} ({desc['backend']}, {backend.spec.db or 'nothing'}), {where}")
    print(f"{'NODE':<6} {'ROLE':<8} {'ADDRESS':<16} {'DNS':<12} {'DAEMON':<10}")
    for n in desc["nodes"]:
        state = desc.get("daemons", {}).get(n["name"], "-")
        mark = "  <- leader" if leader and leader == n["name"] else ""
        dns = ",".join(n["dns"]) or "-"
        print(f"{n['name']:<6} {n['role']:<8} {n['address']:<16} {dns:<12} {state:<10}{mark}")
    if "leader" in desc:
        print(f"leader: {leader or 'unknown (none answered)'}")


def _interactive(backend, node: str) -> int:
    """Replaces this process with an interactive shell on the node."""
    import os
    import shutil

    from faultline.cluster import backends
    from faultline.controller.errors import UsageError

    kind = backends.kind(backend.kind)
    if kind.shell_argv is None:
        raise UsageError(
            f"a {kind.name} cluster has no shell; run a command instead: cluster ssh {node} -- CMD"
        )
    argv = kind.shell_argv(backend, node)
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]} is not installed here; run a command instead: cluster ssh {node} -- CMD")
    sys.stdout.flush()
    os.execvp(argv[0], argv)
    return 255
