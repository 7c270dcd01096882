"""The store's cluster queries: who leads, which tablets exist and where, the tablet servers' uuids, asked
through the run's admin (admin.py: the real tools on a node, or the in-memory fake's answers).

Leaders are asked of the cluster (the masters' own view through `tool master list --json`, tablets through
`tool table list --tablets --json` and `tool cluster ksck --json`), never guessed, so leader-aimed faults
hit the real leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from faultline.cluster.api import ClusterBackend
from faultline.core import Run
from faultline.db.nodes import backend, first_up, role_nodes
from faultline.db.process import node_of_host
from faultline.dbs.store.admin import StoreAdmin, admin_of
from faultline.dbs.store.layout import MASTER, TSERVER
from faultline.node.tool.output import MasterRow

log = logging.getLogger("faultline.dbs.store")

Roles = list[tuple[str, str, str, bool]]  # (uuid, addr, role, voter) per master


def admin(test: Run) -> StoreAdmin:
    """The run's admin (dbs/store/admin.py): the fake's own on the in-memory cluster, else the CLI tools."""
    return admin_of(backend(test))


def masters_arg(test: Run) -> str:
    return ",".join(backend(test).addresses("master"))


def dns_holder(test: Run, name: str) -> str | None:
    """The node that currently holds a master DNS name (moved by master-replace)."""
    return backend(test).dns_holder(name)


def node_of_address(test: Run, addr: str) -> str | None:
    """The node behind HOST:PORT, where HOST is a node name, a master DNS name or an address."""
    return node_of_host(backend(test), addr.rsplit(":", 1)[0])


def _runner(test: Run) -> str:
    """A node to run a cluster-wide admin action from: a master or tablet server that answers."""
    return first_up(test, role_nodes(test, "masters") + role_nodes(test, "tservers"))


def _rows(rows: list[MasterRow]) -> Roles:
    return [(m["uuid"], m["addr"], m["role"], m["voter"]) for m in rows]


def master_rows_from(b: ClusterBackend, runners: Sequence[str], timeout: float) -> Roles:
    """`tool master list --json` of every master, run on the first of `runners` whose tool answers:
    (uuid, addr, role, voter) per master; [] when none does within `timeout` in all."""
    deadline = time.monotonic() + timeout
    for runner in runners:
        left = deadline - time.monotonic()
        if left <= 0.5:
            break
        try:
            rows = _rows(admin_of(b).master_list(runner, ",".join(b.addresses(MASTER)), left))
        except Exception as exc:
            log.info("master list on %s: %s", runner, exc)
            continue
        if rows:
            return rows
    return []


def leader_master(b: ClusterBackend, timeout: float = 10) -> str | None:
    """The node whose master leads the catalog, as the masters report it (asked from the masters first,
    then the tablet servers); None when none answers or none leads. The one leader lookup of the store."""
    for _, addr, role, _ in master_rows_from(b, [*b.nodes(MASTER), *b.nodes(TSERVER)], timeout):
        if role == "LEADER":
            return node_of_host(b, addr.rsplit(":", 1)[0])
    return None


def master_roles(test: Run) -> Roles:
    """`tool master list --json`: (uuid, addr, role, voter) per master, from the leader's view."""
    b = backend(test)
    return master_rows_from(b, [*b.nodes(MASTER), *b.nodes(TSERVER)], 20)


def master_leader(test: Run) -> str | None:
    """The node of the current leader master (None if none, or when the masters cannot be asked)."""
    try:
        return leader_master(backend(test))
    except Exception as exc:
        log.warning("cannot ask for the leader master: %s", exc)
        return None


def master_roles_seen_by(test: Run, runner: str, masters: str, timeout: float = 10) -> Roles:
    """`tool master list MASTERS --json` run on `runner`: (uuid, addr, role, voter) as those masters (e.g. one
    HOST:PORT) see them; [] when they do not answer."""
    return _rows(admin(test).master_list(runner, masters, timeout))


def ksck(test: Run, timeout: float = 60) -> tuple[bool, dict[str, Any]]:
    """(healthy, report) from `tool cluster ksck --json`."""
    try:
        return admin(test).ksck(_runner(test), masters_arg(test), timeout)
    except Exception as exc:
        return False, {"problems": [str(exc)]}


def tserver_nodes(test: Run) -> dict[str, str]:
    """uuid -> node for the tablet servers the masters know."""
    _, rep = ksck(test)
    out = {}
    for t in rep.get("tservers", []):
        node = node_of_address(test, str(t.get("addr", "")))
        if node:
            out[str(t["uuid"])] = node
    return out


def tablets(test: Run) -> list[dict[str, Any]]:
    """Every tablet from `tool table list --tablets --json`: tablet, table, state, leader (uuid), replicas
    (uuids), replica_nodes and leader_node (node names, None when unknown)."""
    tables = admin(test).table_list(_runner(test), masters_arg(test), 30)
    if not tables:
        return []
    nodes = tserver_nodes(test)
    result = []
    for table in tables:
        for t in table.get("tablets", []):
            uuids = [r["uuid"] for r in t["replicas"]]
            leader = next((r["uuid"] for r in t["replicas"] if r["role"] == "LEADER"), None)
            result.append(
                {
                    "tablet": t["tablet_id"],
                    "table": table["name"],
                    "state": t["state"],
                    "leader": leader,
                    "replicas": uuids,
                    "replica_nodes": [nodes.get(u) for u in uuids],
                    "leader_node": nodes.get(leader) if leader else None,
                }
            )
    return result


def of_this_run(test: Run, ts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tablets among `ts` whose table is named with this run's tag; all of `ts` if none is."""
    tag = test.spec.run_tag
    mine = [t for t in ts if tag and str(t.get("table", "")).endswith(str(tag))]
    return mine or ts


def run_tablets(test: Run, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """This run's tablets that pass `keep`: asked of the masters directly (`workload_tablets`, one RPC);
    else from the admin tools' listing (`tablets`), narrowed to this run's tables."""
    fast = [t for t in workload_tablets(test) if keep(t)]
    return fast or of_this_run(test, [t for t in tablets(test) if keep(t)])


def workload_tablets(test: Run, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """The tablets of the tables this run's workload created (`test.state["tables"]`, recorded by the
    workload's setup), as the masters place them, asked through the host's node client: one RPC instead of
    two admin-tool processes, so a leader-isolating fault lands while that leader still leads. Same fields
    as `tablets`, plus replica_addrs (HOST:PORT each); empty when the workload recorded no table or the
    masters do not answer."""
    state = test.state
    names = list(state.get("tables", ())) if isinstance(state, dict) else []
    connect = test.connect
    if not names or connect is None:
        return []
    out: list[dict[str, Any]] = []
    client = None
    try:
        client = connect()
        for name in names:
            locs = client.table_locations(name, timeout=timeout_s)
            for t in locs.tablets:
                leader = next((r for r in t.replicas if r.role == "LEADER"), None)
                out.append(
                    {
                        "tablet": t.tablet_id,
                        "table": name,
                        "state": t.state,
                        "leader": leader.uuid if leader else None,
                        "replicas": [r.uuid for r in t.replicas],
                        "replica_addrs": [r.addr for r in t.replicas],
                        "replica_nodes": [node_of_address(test, r.addr) for r in t.replicas],
                        "leader_node": node_of_address(test, leader.addr) if leader else None,
                    }
                )
    except Exception as exc:
        log.warning("cannot ask the masters for the workload's tablets: %s", exc)
        return []
    finally:
        if client is not None:
            client.close()
    return out


def tablet_leaders(test: Run) -> list[str]:
    return sorted({t["leader_node"] for t in tablets(test) if t.get("leader_node")})
