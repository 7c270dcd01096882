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
    "Clusters of a DB (the bundled store by default: masters and tablet servers): 'up' starts it on Docker (default), in network "
    "namespaces on this machine (--cluster local, needs root) or on real hosts over SSH (--cluster ssh "
    "--hosts FILE); 'status' lists nodes, roles, addresses, DNS names and the leading master; 'logs NODE' "
    "prints a node's log; 'down' removes a cluster ('down --all' removes everything Faultline made on this "
    "machine); 'image' builds the node image (cached by a hash of its inputs)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser, default_name: str | None) -> None:
        p.add_argument(
            "--cluster",
            choices=["docker", "local", "ssh"],
            default=None,
            help="backend (default: docker for up; for the others, wherever the cluster is)",
        )
        p.add_argument(
            "--name",
            default=default_name,
            help="cluster name"
            + (f" (default {default_name})" if default_name else " (default: the only cluster that is up)"),
        )

    up = sub.add_parser(
        "up",
        help="start a cluster",
        description="Start a DB's cluster (the store: masters and tablet servers).",
    )
    common(up, "default")
    up.add_argument(
        "--db",
        default=None,
        metavar="NAME",
        help="the DB to run: a registered name (default store) or package.module:Attribute",
    )
    up.add_argument("--masters", type=options.positive_int, default=3, help="number of masters (default 3)")
    up.add_argument(
        "--tservers", type=options.positive_int, default=5, help="number of tablet servers (default 5)"
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

    st = sub.add_parser("status", help="nodes, roles, addresses, DNS names, leader")
    common(st, None)
    st.add_argument("--json", action="store_true", help="machine-readable output")

    lg = sub.add_parser("logs", help="print a node's log")
    common(lg, None)
    lg.add_argument("node", help="node name (m1, t3, ...)")

    dn = sub.add_parser("down", help="remove a cluster (or --all)")
    common(dn, None)
    dn.add_argument(
        "--all",
        action="store_true",
        help="remove every Faultline container, network, namespace and recorded ssh cluster",
    )

    sh = sub.add_parser(
        "ssh",
        help="a shell on a node, or run one command there",
        description="Open a shell on a node (docker exec, ip netns exec or ssh), or run "
        "`-- CMD ...` there and print its output (exit status passed through).",
    )
    common(sh, None)
    sh.add_argument("node", help="node name (m1, t3, ...)")
    sh.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (default: an interactive shell)")
    sh.add_argument(
        "--timeout", type=options.positive_float, default=60, help="seconds for a command (default 60)"
    )

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
    from faultline.cluster.backends import attach, make_backend, remove_everything
    from faultline.cluster.base import ClusterError, NodeBackend
    from faultline.controller.errors import UsageError

    if args.action == "image":
        from faultline.cluster.image import ImageBuildError, build_image

        packages, python_packages = _image_packages(args)
        try:
            rep = build_image(packages, python_packages, args.rebuild, log=_err)
        except ImageBuildError as exc:
            raise UsageError(f"image build: {exc}") from exc
        print(f"{rep.tag} built in {rep.seconds:.1f} s" if rep.built else f"{rep.tag} is up to date")
        return 0

    if args.action == "up":
        kind = args.cluster or "docker"
        if kind == "ssh" and not args.hosts:
            raise UsageError("--cluster ssh needs --hosts FILE")
        if args.inject_bug:
            from faultline.db.api import Bugs

            db = _db(args)
            known = db.bugs if isinstance(db, Bugs) else {}
            valid = ", ".join(sorted(known)) or f"none (the {db.name} DB has no injectable bugs)"
            for bug in args.inject_bug:
                if bug not in known:
                    raise UsageError(f"unknown bug {bug!r}; valid: {valid}")
        try:
            spec = _db(args).cluster_spec(
                args.name,
                {
                    "masters": args.masters,
                    "tservers": args.tservers,
                    "daemon": args.daemon,
                    "bugs": args.inject_bug,
                },
            )
            backend = make_backend(kind, spec, hosts=args.hosts)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        assert isinstance(backend, NodeBackend)  # --cluster offers only the built-in docker, local and ssh
        t0 = time.monotonic()
        cast(_ReportsProgress, backend).up(log=lambda s: _err(f"  {s}"))
        desc = backend.describe()
        desc["daemons"] = {n: "started" if backend.process_argv(n) else "-" for n in backend.nodes()}
        if args.json:
            print(json.dumps(desc, indent=1))
        else:
            _print_status(backend, desc, leader=None)
            _err(f"cluster {args.name} ({kind}) up in {time.monotonic() - t0:.1f} s")
        return 0

    if args.action == "down" and args.all:
        n = remove_everything(log=_err)
        print(f"removed {n} Faultline object(s)")
        return 0

    kind, name = _find(args)
    if args.action == "down" and not _has_nodes(kind, name):
        from faultline.cluster import disklayer

        try:
            disklayer.unmount_cluster(kind, name)  # only its disk layers were left (a run killed early)
        except disklayer.DiskLayerError as exc:
            raise ClusterError(str(exc)) from None
        print(f"cluster {name} ({kind}) removed")
        return 0
    backend = attach(kind, name)
    assert isinstance(backend, NodeBackend)  # _find looks only at the built-in kinds, all node backends
    if args.action == "down":
        backend.down()
        print(f"cluster {name} ({kind}) removed")
        return 0
    if args.action == "ssh":
        if args.node not in backend.info:
            raise UsageError(f"no node {args.node!r} in cluster {name} (nodes: {', '.join(backend.info)})")
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if cmd:
            rc, out, err = backend.remote.exec(args.node, cmd, args.timeout)
            sys.stdout.write(out)
            sys.stderr.write(err)
            return rc
        return _interactive(backend, args.node)
    if args.action == "logs":
        if args.node not in backend.info:
            raise UsageError(f"no node {args.node!r} in cluster {name} (nodes: {', '.join(backend.info)})")
        sys.stdout.write(backend.logs(args.node))
        return 0
    # status
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
        print(
            f"{n['name']:<6} {n['role']:<8} {n['address']:<16} {','.join(n['dns']) or '-':<12} {state:<10}{mark}"
        )
    if "leader" in desc:
        print(f"leader: {leader or 'unknown (none answered)'}")


def _interactive(backend, node: str) -> int:
    """Replaces this process with an interactive shell on the node."""
    import os
    import shutil

    from faultline.controller.errors import UsageError

    info = backend.info[node]
    if backend.kind == "docker":
        argv = ["docker", "exec", "-it", info.host, "bash"]
    elif backend.kind == "local":
        argv = ["ip", "netns", "exec", info.host, os.environ.get("SHELL", "/bin/bash")]
    else:
        h = backend.hosts[node]
        argv = ["ssh", "-p", str(h.port), "-i", os.path.expanduser(h.key), f"{h.user}@{h.address}"]
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]} is not installed here; run a command instead: cluster ssh {node} -- CMD")
    sys.stdout.flush()
    os.execvp(argv[0], argv)
    return 255
