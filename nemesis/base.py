"""What the nemeses share: node selection, running the node's admin tools, and asking the cluster who leads.

Leaders are asked of the cluster (the masters' own view through `tool master list --json`, tablets through
`tool table list --tablets --json` and `tool cluster ksck --json`), never guessed, so `partition-leader` and
`kill leaders` hit the real leader. The tools' JSON is read only through node/tool/output.py's parsers.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from faultline.core import Run
from faultline.dbs.store import StoreDB, node_of_host, run_tool
from faultline.gen import Context
from faultline.node.tool.output import parse_master_list, parse_table_list

log = logging.getLogger("faultline.nemesis")
Op = dict[str, Any]

ROLES = ("masters", "tservers", "all")
PRIMARIES = "primaries"
SUBSETS = ("one", "minority", "majority", "all", "leaders")


class NemesisError(RuntimeError):
    """A fault could not be applied or healed; the message names the step."""


def backend(test: Run) -> Any:
    b = test.backend
    if b is None:
        raise NemesisError("the test has no cluster backend")
    return b


def nemesis_rng(test: Run, salt: str) -> random.Random:
    """A generator of the run's seed, one per nemesis, so choices replay with the seed."""
    return random.Random(f"{test.spec.seed}:{salt}")


def is_store(test: Run) -> bool:
    """Whether the DB is the bundled store, whose masters, tablets and admin tools some nemeses drive."""
    return isinstance(test.db, StoreDB) or test.db is None


def role_nodes(test: Run, role: str) -> list[str]:
    """The live (not destroyed) nodes of a target: the store's masters or tservers, the DB's primaries
    (as it reports them), or all. Another DB has no masters or tablet servers: those mean all its nodes."""
    nodes = list(backend(test).nodes())
    if role == "primaries":
        return sorted(set(primaries(test)) & set(nodes))
    if not is_store(test):
        return sorted(nodes)
    if role == "masters":
        return sorted(n for n in nodes if re.match(r"^m\d+$", n))
    if role == "tservers":
        return sorted(n for n in nodes if re.match(r"^t\d+$", n))
    return sorted(nodes)


def targets_of(test: Run, value: Mapping[str, Any]) -> str:
    """The op's `targets`, as the history should name them: a DB without the store's roles has only
    `all` (and `primaries`)."""
    targets = str(value.get("targets", "all"))
    return "all" if targets in ("masters", "tservers") and not is_store(test) else targets


def primaries(test: Run) -> list[str]:
    """The nodes the DB says lead now (the store: the leader master); [] when it cannot say."""
    try:
        return list(test.db.primaries(test))
    except Exception as exc:
        log.warning("cannot ask the DB for its primaries: %s", exc)
        return []


def pick_subset(nodes: Sequence[str], subset: str, rng: random.Random, leaders: Sequence[str] = ()) -> list[str]:
    nodes = sorted(nodes)
    if not nodes:
        return []
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if subset == "one":
        return shuffled[:1]
    if subset == "minority":
        return sorted(shuffled[: max(1, (len(nodes) - 1) // 2)])
    if subset == "majority":
        return sorted(shuffled[: len(nodes) // 2 + 1])
    if subset == "all":
        return nodes
    if subset == "leaders":
        return sorted(set(leaders) & set(nodes)) or shuffled[:1]
    raise ValueError(f"unknown node subset {subset!r}; valid: {', '.join(SUBSETS)}")


def tool(test: Run, node: str, args: Sequence[str], timeout: float = 60,
         check: bool = True) -> tuple[int, str, str]:
    """Runs `python -m faultline.node tool ARGS` on `node` through the backend's Remote."""
    rc, out, err = run_tool(backend(test), node, args, timeout)
    if check and rc != 0:
        raise NemesisError(f"{node}: tool {' '.join(args[:3])} failed (exit {rc}): {(err or out).strip()[-400:]}")
    return rc, out, err


def masters_arg(test: Run) -> str:
    return ",".join(backend(test).addresses("master"))


def dns_holder(test: Run, name: str) -> str | None:
    """The node that currently holds a master DNS name (moved by master-replace)."""
    return backend(test).dns_holder(name)


def node_of_address(test: Run, addr: str) -> str | None:
    """The node behind HOST:PORT, where HOST is a node name, a master DNS name or an address."""
    return node_of_host(backend(test), addr.rsplit(":", 1)[0])


def first_up(test: Run, nodes: Sequence[str]) -> str:
    """A node to run a tool from: any of `nodes` that answers a trivial command."""
    b = backend(test)
    for n in nodes:
        try:
            if b.remote.exec(n, ["true"], 10)[0] == 0:
                return n
        except Exception:
            continue
    raise NemesisError(f"no reachable node among {', '.join(nodes)}")


def _tool_anywhere(test: Run, args: Sequence[str], timeout: float = 30) -> tuple[int, str, str]:
    runner = first_up(test, role_nodes(test, "masters") + role_nodes(test, "tservers"))
    return tool(test, runner, args, timeout=timeout, check=False)


def _master_rows(rc: int, out: str) -> list[tuple[str, str, str, bool]]:
    """(uuid, addr, role, voter) per master from `tool master list --json`; [] when the tool failed."""
    if rc != 0:
        return []
    try:
        return [(m["uuid"], m["addr"], m["role"], m["voter"]) for m in parse_master_list(out)]
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable `master list --json` output: %s", exc)
        return []


def master_roles(test: Run) -> list[tuple[str, str, str, bool]]:
    """`tool master list --json`: (uuid, addr, role, voter) per master, from the leader's view."""
    return _master_rows(*_tool_anywhere(test, ["master", "list", masters_arg(test), "--json"], timeout=20)[:2])


def master_roles_seen_by(test: Run, runner: str, masters: str,
                         timeout: float = 10) -> list[tuple[str, str, str, bool]]:
    """`tool master list MASTERS --json` run on `runner`: (uuid, addr, role, voter) as those masters (e.g. one
    HOST:PORT) see them; [] when they do not answer."""
    rc, out, _ = tool(test, runner, ["master", "list", masters, "--json"], timeout=timeout, check=False)
    return _master_rows(rc, out)


def master_leader(test: Run) -> str | None:
    """The node of the current leader master, as the masters report it (None if none)."""
    try:
        for _, addr, role, _ in master_roles(test):
            if role == "LEADER":
                return node_of_address(test, addr)
    except Exception as exc:
        log.warning("cannot ask for the leader master: %s", exc)
    return None


def ksck(test: Run, timeout: float = 60) -> tuple[bool, dict[str, Any]]:
    """(healthy, report) from `tool cluster ksck --json`."""
    import json

    try:
        rc, out, err = _tool_anywhere(test, ["cluster", "ksck", masters_arg(test), "--json"], timeout=timeout)
    except Exception as exc:
        return False, {"problems": [str(exc)]}
    try:
        rep = json.loads(out)
    except ValueError:
        return False, {"problems": [(err or out).strip()[-300:]]}
    return rc == 0 and bool(rep.get("healthy")), rep


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
    rc, out, _ = _tool_anywhere(test, ["table", "list", masters_arg(test), "--tablets", "--json"], timeout=30)
    if rc != 0:
        return []
    try:
        tables = parse_table_list(out)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable `table list --json` output: %s", exc)
        return []
    nodes = tserver_nodes(test)
    result = []
    for table in tables:
        for t in table.get("tablets", []):
            uuids = [r["uuid"] for r in t["replicas"]]
            leader = next((r["uuid"] for r in t["replicas"] if r["role"] == "LEADER"), None)
            result.append({"tablet": t["tablet_id"], "table": table["name"], "state": t["state"],
                           "leader": leader, "replicas": uuids, "replica_nodes": [nodes.get(u) for u in uuids],
                           "leader_node": nodes.get(leader) if leader else None})
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
                out.append({"tablet": t.tablet_id, "table": name, "state": t.state,
                            "leader": leader.uuid if leader else None,
                            "replicas": [r.uuid for r in t.replicas],
                            "replica_addrs": [r.addr for r in t.replicas],
                            "replica_nodes": [node_of_address(test, r.addr) for r in t.replicas],
                            "leader_node": node_of_address(test, leader.addr) if leader else None})
    except Exception as exc:
        log.warning("cannot ask the masters for the workload's tablets: %s", exc)
        return []
    finally:
        if client is not None:
            client.close()
    return out


def tablet_leaders(test: Run) -> list[str]:
    return sorted({t["leader_node"] for t in tablets(test) if t.get("leader_node")})


def wait_until(pred: Callable[[], bool], timeout_s: float, interval_s: float = 1.0, what: str = "") -> bool:
    """Polls `pred` until true or the deadline; bounded in time and count."""
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / max(interval_s, 0.01)) + 2):
        try:
            if pred():
                return True
        except Exception as exc:
            log.info("waiting for %s: %s", what, exc)
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    return False


def bring_back(nodes: set[str], lock: Any, action: Callable[[str], Any], what: str) -> list[str]:
    """Runs `action` (start, resume, ...) on every node still in `nodes`, removing each one that came
    back; a node that failed stays in the set for the next heal. Raises NemesisError naming every failure
    after trying them all."""
    with lock:
        pending = sorted(nodes)
    errors = []
    for n in pending:
        try:
            action(n)
            with lock:
                nodes.discard(n)
        except Exception as exc:
            errors.append(f"{n}: {exc}")
    if errors:
        raise NemesisError(f"could not {what}: {'; '.join(errors)}")
    return pending


def done(op: Op, value: Any = None, kind: str = "ok", **extra: Any) -> Op:
    out = {**op, "type": kind, **extra}
    if value is not None:
        out["value"] = value
    return out


def choice_op(f: str, choices: Mapping[str, Sequence[Any]]) -> Callable[[Context], Op]:
    """An op whose value draws each field from its choices with the run's randomness."""
    def make(ctx: Context) -> Op:
        return {"f": f, "value": {k: ctx.rng.choice(list(v)) for k, v in choices.items()}}
    return make
