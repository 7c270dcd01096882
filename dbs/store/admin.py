"""The store's admin actions as a protocol: one typed method per thing the store's code asks of its
Kudu-like admin tools (list the masters or tables, ksck, move leadership, change a tablet's config, format
a data directory, copy a replica, ...).

`CliAdmin` runs the real tool, `python -m faultline.node tool ...`, on a node through the backend's Remote
and reads its `--json` output through node/tool/output.py's parsers; the store's in-memory fake cluster
answers the same methods from its own state (dbs/store/fake.py, `FakeAdmin`), so it never reads argv.
`admin_of` decides which a run gets, in one place: the backend's own admin when it carries one (the fake),
else the CLI one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from faultline.cluster.api import ClusterBackend
from faultline.db.nodes import NodeError
from faultline.dbs.store.layout import tool_argv
from faultline.node.tool.output import MasterRow, TableRow, parse_master_list, parse_table_list

log = logging.getLogger("faultline.dbs.store")


@dataclass(frozen=True)
class ToolResult:
    """What one admin action answered: exit code, output, errors, and `what` ran (for messages)."""

    rc: int
    out: str
    err: str
    what: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def message(self, limit: int = 300) -> str:
        """The output when it succeeded, else the errors (the output when there are none); the tail."""
        return (self.out if self.ok else (self.err or self.out)).strip()[-limit:]

    def checked(self, node: str) -> ToolResult:
        """Itself when it succeeded; else a NodeError naming the node, the action and the tail of the errors."""
        if not self.ok:
            tail = (self.err or self.out).strip()[-400:]
            raise NodeError(f"{node}: tool {self.what} failed (exit {self.rc}): {tail}")
        return self


@dataclass(frozen=True)
class ConfigChange:
    """A change of one tablet's Raft config: add_replica or remove_replica (one uuid), or move_replica
    (from, to); an added replica's type (NON_VOTER) when not a voter."""

    change: str
    tablet: str
    uuids: tuple[str, ...]
    replica_type: str | None = None


class StoreAdmin(Protocol):
    """The store's admin actions. `runner` (or `node`) is the node the action runs on; `masters` the
    master addresses, comma-separated; each returns what the tool answered, and a failure to reach the
    node at all raises."""

    def master_list(self, runner: str, masters: str, timeout: float) -> list[MasterRow]:
        """The masters' Raft config as `masters` report it; [] when the tool fails or answers nothing
        readable."""
        ...

    def table_list(self, runner: str, masters: str, timeout: float) -> list[TableRow]:
        """Every table with its tablets; [] when the tool fails or answers nothing readable."""
        ...

    def ksck(self, runner: str, masters: str, timeout: float) -> tuple[bool, dict[str, Any]]:
        """(healthy, report): the tablet servers with uuid, address and liveness, and the problems."""
        ...

    def leader_step_down(
        self, runner: str, masters: str, tablet: str, new_leader: str | None, timeout: float
    ) -> ToolResult:
        """The tablet's leader steps down (for `new_leader`, a uuid, when given)."""
        ...

    def change_config(self, runner: str, masters: str, change: ConfigChange, timeout: float) -> ToolResult:
        """The config change on its tablet."""
        ...

    def unsafe_change_config(
        self, runner: str, server: str, tablet: str, uuids: Sequence[str], timeout: float
    ) -> ToolResult:
        """Forces the tablet's config on `server` (HOST:PORT) onto `uuids` (after a majority loss)."""
        ...

    def fs_format(self, node: str, fs_dir: str, uuid: str | None, timeout: float) -> ToolResult:
        """Formats the node's data directory (with the uuid of the node it replaces, when given)."""
        ...

    def fs_uuid(self, node: str, fs_dir: str, timeout: float) -> ToolResult:
        """The uuid a formatted data directory carries (`out`, last line)."""
        ...

    def rewrite_raft_config(
        self, node: str, tablet: str, peers: Sequence[str], fs_dir: str, timeout: float
    ) -> ToolResult:
        """A stopped server's Raft config of `tablet` rewritten to `peers` (UUID:HOST:PORT each)."""
        ...

    def copy_from_remote(
        self, node: str, tablet: str, source: str, fs_dir: str, bugs: Sequence[str], timeout: float
    ) -> ToolResult:
        """A copy of `tablet` into the node's data directory from the servers `source` names (the tool
        picks among them), run with the store's injected `bugs`."""
        ...


class CliAdmin:
    """The admin actions as `python -m faultline.node tool ...` run on a node through the backend."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend

    def run(self, node: str, args: Sequence[str], timeout: float) -> ToolResult:
        """`python -m faultline.node tool ARGS` on `node`, through the backend's Remote."""
        b = self.backend
        argv = [*b.env_argv(node), *b.expand(node, tool_argv(args))]
        rc, out, err = b.remote.exec(node, argv, timeout)
        return ToolResult(rc, out, err, " ".join(args[:3]))

    def master_list(self, runner: str, masters: str, timeout: float) -> list[MasterRow]:
        r = self.run(runner, ["master", "list", masters, "--json"], timeout)
        return _parsed(r, parse_master_list, "master list") if r.ok else []

    def table_list(self, runner: str, masters: str, timeout: float) -> list[TableRow]:
        r = self.run(runner, ["table", "list", masters, "--tablets", "--json"], timeout)
        return _parsed(r, parse_table_list, "table list") if r.ok else []

    def ksck(self, runner: str, masters: str, timeout: float) -> tuple[bool, dict[str, Any]]:
        r = self.run(runner, ["cluster", "ksck", masters, "--json"], timeout)
        try:
            rep = json.loads(r.out)
        except ValueError:
            return False, {"problems": [(r.err or r.out).strip()[-300:]]}
        return r.ok and bool(rep.get("healthy")), rep

    def leader_step_down(
        self, runner: str, masters: str, tablet: str, new_leader: str | None, timeout: float
    ) -> ToolResult:
        extra = ["--new-leader", new_leader] if new_leader else []
        return self.run(runner, ["tablet", "leader_step_down", masters, tablet, *extra], timeout)

    def change_config(self, runner: str, masters: str, change: ConfigChange, timeout: float) -> ToolResult:
        extra = ["--replica-type", change.replica_type] if change.replica_type else []
        args = ["tablet", "change_config", change.change, masters, change.tablet, *change.uuids, *extra]
        return self.run(runner, args, timeout)

    def unsafe_change_config(
        self, runner: str, server: str, tablet: str, uuids: Sequence[str], timeout: float
    ) -> ToolResult:
        args = ["remote_replica", "unsafe_change_config", server, tablet, *uuids]
        return self.run(runner, args, timeout)

    def fs_format(self, node: str, fs_dir: str, uuid: str | None, timeout: float) -> ToolResult:
        return self.run(
            node, ["fs", "format", "--fs-dir", fs_dir, *(["--uuid", uuid] if uuid else [])], timeout
        )

    def fs_uuid(self, node: str, fs_dir: str, timeout: float) -> ToolResult:
        return self.run(node, ["fs", "dump", "uuid", "--fs-dir", fs_dir], timeout)

    def rewrite_raft_config(
        self, node: str, tablet: str, peers: Sequence[str], fs_dir: str, timeout: float
    ) -> ToolResult:
        args = ["local_replica", "cmeta", "rewrite_raft_config", tablet, *peers, "--fs-dir", fs_dir]
        return self.run(node, args, timeout)

    def copy_from_remote(
        self, node: str, tablet: str, source: str, fs_dir: str, bugs: Sequence[str], timeout: float
    ) -> ToolResult:
        bug_args = [a for bug in bugs for a in ("--inject-bug", str(bug))]
        args = ["local_replica", "copy_from_remote", tablet, source, "--fs-dir", fs_dir, *bug_args]
        return self.run(node, args, timeout)


def _parsed(r: ToolResult, parse: Any, what: str) -> Any:
    """The rows `parse` reads from the tool's `--json` output; [] when it cannot."""
    try:
        return parse(r.out)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable `%s --json` output: %s", what, exc)
        return []


def admin_of(backend: ClusterBackend) -> StoreAdmin:
    """The admin a run's backend gets: its own (`store_admin`, the in-memory fake's), else the CLI one."""
    own: StoreAdmin | None = getattr(backend, "store_admin", None)
    return own if own is not None else CliAdmin(backend)
