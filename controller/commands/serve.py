"""`faultline serve`: browse a store's runs, reports, plots and files in a web browser."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from typing import Any

from faultline.controller.errors import UsageError
from faultline.core import options

HELP = "browse a store in a web browser: runs, verdicts, reports, plots, files, zip downloads"
DESCRIPTION = (
    "Serves STORE over HTTP: the runs of every store at or below it (a campaign's store inside the main "
    "one included) newest first, with verdict colours and filters (store, workload, nemesis, verdict), "
    "each run's report, plots, timeline and files, a zip of any run, the campaigns and their scorecards. "
    "Binds 127.0.0.1 by default and answers only requests addressed to it (the Host header); pass --host "
    "0.0.0.0 only on a network you trust (there is no authentication), with --allow-host for the names "
    "the machine is reached by."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, loopback only)"
    )
    parser.add_argument(
        "--port", type=options.port, default=8080, help="port (default 8080; 0 picks a free one)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this host name (repeatable; e.g. the machine's DNS name)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")


def run(args: argparse.Namespace) -> int:
    from faultline.results.serve import make_server
    from faultline.results.store import StoreError

    try:
        server = make_server(
            args.store, args.host, args.port, verbose=args.verbose, allow_hosts=args.allow_host
        )
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    assert isinstance(host, str)  # the bound address as the socket reports it: text for an IP socket
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        print(
            f"faultline serve: warning: listening on {host}, reachable from other machines", file=sys.stderr
        )
    print(f"faultline serve: {found(server.view)}", file=sys.stderr)
    print(f"faultline serve: http://{host}:{port}/  (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def found(view: Any) -> str:
    """What the server found, so an empty page never surprises: runs per store, at any depth."""
    stores = view.stores()
    if not stores:
        return (
            f"no runs in {view.store.root}, at any depth (a run is STORE/<test-name>/<stamp>/, as "
            "`faultline run --store STORE` and `faultline campaign` write them)"
        )
    counts = {rel or ".": sum(1 for _ in s.run_dirs()) for rel, s in stores.items()}
    where = ", ".join(f"{rel} ({n})" for rel, n in counts.items())
    return f"{sum(counts.values())} runs in {len(counts)} store{'s' if len(counts) > 1 else ''} under {view.store.root}: {where}"
