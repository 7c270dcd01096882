"""What DBs whose nodes each run one process share: the Jepsen db protocol through the cluster's process
primitives, waiting until a node serves, and the errors their clients raise.

A DB built on ProcessDB writes `cluster_spec` (its roles and their argv), `ready` (one probe of a node)
and either a `connector` that speaks the store's client API or a `client` per workload.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from faultline.core import Run

if TYPE_CHECKING:
    from faultline.cluster.api import ClusterBackend
    from faultline.cluster.base import NodeBackend

# The generic faults that need nothing of the DB beyond its processes and its network. Clock faults need
# libfaketime to reach the process (a DB that allows them sets its cluster spec's `faketime` for a clock
# test). A DB's own faults (the store's master replacement, power loss, ...) are offered by that DB.
PROCESS_NEMESES = frozenset(
    {
        "none",
        "partition",
        "partition-one",
        "partition-halves",
        "partition-majority",
        "partition-ring",
        "partition-bridge",
        "partition-primary",
        "kill",
        "pause",
        "kill-primary",
        "pause-primary",
        "packet",
    }
)


class DBStartError(RuntimeError):
    """A DB process that never came up or never served; the message names the node and ends with the tail
    of its log."""


class Definite(Exception):
    """A client error that proves the operation did not take effect (a refused write): `fail`."""

    definite = True


class Indeterminate(Exception):
    """A client error after which a write may or may not have taken effect: `info`."""

    indeterminate = True


def log_tail(test: Run, node: str, lines: int = 15) -> str:
    """The last lines of the node's process log, indented, for an error message."""
    try:
        text = test.backend.logs(node)
    except Exception as exc:
        return f"    (its log could not be read: {exc})"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(f"    {ln[:300]}" for ln in tail) or "    (its log is empty)"


def wait_ready(
    test: Run,
    node: str,
    probe: Callable[[], Any],
    what: str,
    timeout_s: float | None = None,
    interval_s: float = 0.5,
) -> None:
    """Polls `probe` (true when `node` serves) until the setup timeout; a process that died meanwhile
    fails at once. Raises DBStartError with the last probe error and the tail of the node's log."""
    timeout = float(test.spec.setup_timeout_s if timeout_s is None else timeout_s)
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            if probe():
                return
            last = "not ready yet"
        except Exception as exc:
            last = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        status = _status(test, node)
        if status not in ("running", "unknown"):
            raise DBStartError(
                f"{what} on {node} is {status} (it exited): {last}; the end of its log:\n"
                f"{log_tail(test, node)}"
            )
        if time.monotonic() >= deadline:
            raise DBStartError(
                f"{what} on {node} did not become ready within {timeout:.0f} s: {last}; the end of "
                f"its log:\n{log_tail(test, node)}"
            )
        time.sleep(interval_s)


def _status(test: Run, node: str) -> str:
    try:
        return str(test.backend.daemon_status(node))
    except Exception:
        return "unknown"


class ProcessDB:
    """The Jepsen db protocol for a DB whose nodes each run their role's process (see db/api.py)."""

    name = ""
    workloads: frozenset[str] = frozenset()
    nemeses: frozenset[str] | None = PROCESS_NEMESES
    nemesis_notes: Mapping[str, str] = {}
    packages: tuple[str, ...] = ()
    python_packages: tuple[str, ...] = ()
    # the DB's own options (--db-opt KEY=VALUE, a campaign's db_opt): name -> what it means
    options: Mapping[str, str] = {}

    def validate(self, opts: Mapping[str, Any]) -> None:
        """Refuses options this DB cannot run (ValueError, one line)."""

    def ready(self, test: Run, node: str) -> bool:
        """One probe: does `node` serve? (Errors count as not yet.)"""
        return True

    def setup(self, test: Run, node: str) -> None:
        wait_ready(test, node, lambda: self.ready(test, node), self.name)

    def teardown(self, test: Run, node: str) -> None:
        test.backend.stop(node)

    def start(self, test: Run, node: str) -> None:
        test.backend.start(node)

    def kill(self, test: Run, node: str) -> None:
        test.backend.kill(node)

    def pause(self, test: Run, node: str) -> None:
        test.backend.pause(node)

    def resume(self, test: Run, node: str) -> None:
        test.backend.resume(node)

    def primaries(self, test: Run) -> list[str]:
        return []

    def log_files(self, test: Run, node: str) -> list[str]:
        # a ProcessDB runs on the node backends (docker, local, ssh), which know each node's role
        b = cast("NodeBackend", test.backend)
        return [f"{b.node_dir(node)}/logs/{b.info[node].role}.log"]

    def client_nodes(self, test: Run) -> list[str]:
        return test.backend.nodes()

    def connector(self, test: Run) -> Callable[[], Any]:
        def no_connector() -> Any:
            raise RuntimeError(
                f"the {self.name} DB has no store-API connector; its clients connect themselves"
            )

        return no_connector

    def client(self, workload: str) -> Any:
        return None


# The faults through the disk layer under the DB's data directories (nemesis/disk.py): a DB takes them
# when it declares db.api.DataFiles (the registry refuses them to one that does not).
DISK_NEMESES = frozenset({"lose-unfsynced", "lose-unfsynced-all"})


def supported_nemeses(clock: bool) -> frozenset[str]:
    """The process-level and disk faults, plus clock faults where libfaketime reaches the DB's processes."""
    return PROCESS_NEMESES | DISK_NEMESES | ({"clock"} if clock else set())


def common_notes(clock_reason: str | None) -> dict[str, str]:
    """Why clock faults are refused for a DB (libfaketime does not reach its processes), if they are."""
    return {"clock": clock_reason} if clock_reason else {}


def node_of_host(backend: ClusterBackend, host: str) -> str | None:
    """The node behind a node name, a (movable) DNS name or an address; None when none is."""
    nodes = backend.nodes()
    if host in nodes:
        return host
    holder = backend.dns_holder(host)
    if holder:
        return holder
    for n in nodes:
        try:
            if backend.resolve(n) == host or backend.address(n) == host:
                return n
        except Exception:
            continue
    return None
