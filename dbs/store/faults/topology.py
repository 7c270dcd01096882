"""Faults that change the cluster's shape through the admin tools: tablet membership changes, the permanent
replacement of a master (master-permanent-failure.txt), migration from one master to three, replacing a
tablet server for good, and the loss of a tablet's majority recovered with unsafe_change_config.

Each is one op whose completion lists the steps it took; each waits (bounded) for the cluster to be
healthy again before it returns, and says so in its completion when it is not.

A repair an operator makes is an op of its own, with its reason in the completion, never part of a heal:
`unsafe-change-config` after a majority loss, `recopy-master` (a replacement's failed copy run again) and
`rebuild-lagging-masters` (a master still behind the leader after a while, rebuilt from it). The last
two run in the repair phase, once every fault is stopped and healed; a master that never caught up on
its own is then named in `never_caught_up`, which the catalog checker reports whether or not the
rebuild succeeded (docs/controller.md).
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any, Protocol, cast

from faultline.core import Op, Run
from faultline.db.nodes import backend, first_up, role_nodes
from faultline.dbs.store.admin import ConfigChange
from faultline.dbs.store.layout import MASTER, MASTER_PORT, master_dns
from faultline.dbs.store.tools import (
    admin,
    dns_holder,
    ksck,
    master_leader,
    master_roles,
    master_roles_seen_by,
    masters_arg,
    node_of_address,
    tablets,
    tserver_nodes,
    workload_tablets,
)
from faultline.nemesis import grudge as gr
from faultline.nemesis.base import NemesisError, done, log, nemesis_rng, wait_until
from faultline.node.master.catalog import SYS_TABLET as SYS_CATALOG_TABLET  # the masters' catalog tablet

if TYPE_CHECKING:
    from faultline.cluster.base import ClusterSpec


class _KeepsSpec(Protocol):
    """A backend that keeps the cluster spec it runs: every backend the store runs on (the node backends
    and the fake) does, though the cluster protocols do not say so."""

    spec: ClusterSpec


def _cluster_spec(test: Run) -> ClusterSpec:
    """The spec the cluster runs now (master-migrate grows its masters)."""
    return cast(_KeepsSpec, backend(test)).spec


def _fs_dir(test: Run, node: str) -> str:
    b = backend(test)
    return f"{b.node_dir(node)}/data"


def _next_name(test: Run, prefix: str) -> str:
    """A node name never used in this run (a destroyed node's name is not reused: logs stay apart)."""
    b = backend(test)
    used: set[str] = test.state.setdefault("used_names", set())
    used |= (
        set(b.nodes())
        | {f"m{i}" for i in range(1, int(test.spec.db_opts.get("masters", 3)) + 1)}
        | {f"t{i}" for i in range(1, int(test.spec.db_opts.get("tservers", 5)) + 1)}
    )
    i = 1
    while f"{prefix}{i}" in used:
        i += 1
    used.add(f"{prefix}{i}")
    return f"{prefix}{i}"


def masters_healthy(test: Run, n: int) -> bool:
    """`master list` shows n voters and exactly one leader."""
    roles = master_roles(test)
    return sum(r[2] == "LEADER" for r in roles) == 1 and sum(r[3] for r in roles) >= n


class MembershipNemesis:
    """Adds, removes and moves tablet replicas and transfers tablet leadership, through the admin tools."""

    fs = frozenset({"membership"})

    def __init__(self) -> None:
        self.rng: random.Random | None = None  # set by setup

    def setup(self, test: Run) -> MembershipNemesis:
        self.rng = nemesis_rng(test, "membership")
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        action = (op.get("value") or {}).get("action", "leader-step-down")
        ts = tablets(test)
        if not ts:
            return done(op, {"action": action, "skipped": "no tablet reported by ksck"}, kind="fail")
        assert self.rng is not None
        t = self.rng.choice(ts)
        servers = role_nodes(test, "tservers")
        holders = [n for n in t["replica_nodes"] if n]
        spare = [s for s in servers if s not in holders]
        runner = first_up(test, role_nodes(test, "masters"))
        masters = masters_arg(test)
        uuid_of = {n: u for n, u in zip(t["replica_nodes"], t["replicas"], strict=False) if n}
        uuid_of.update({n: u for u, n in tserver_nodes(test).items()})
        change = _membership_change(action, holders, spare, self.rng)
        if change is None:
            return done(
                op, {"action": action, "tablet": t["tablet"], "skipped": "no suitable replica"}, kind="fail"
            )
        if change[0] == "leader_step_down":
            r = admin(test).leader_step_down(runner, masters, t["tablet"], None, 60)
            label = ["tablet", "leader_step_down", masters]
        else:
            uuids = tuple(uuid_of.get(n, n) for n in change[1])
            r = admin(test).change_config(runner, masters, ConfigChange(change[0], t["tablet"], uuids), 60)
            label = ["tablet", "change_config", change[0]]
        value = {"action": action, "tablet": t["tablet"], "argv": label}
        return done(op, value if r.ok else {**value, "error": r.message()}, kind="ok" if r.ok else "info")

    def heal(self, test: Run) -> None:
        pass  # membership changes are not faults to undo; the cluster re-replicates on its own


def _membership_change(
    action: str, holders: list[str], spare: list[str], rng: random.Random
) -> tuple[str, list[str]] | None:
    """(tablet change, the nodes it names) for a membership action; None when no replica suits it."""
    if action == "leader-step-down":
        return "leader_step_down", []
    if action == "add-replica" and spare:
        return "add_replica", [spare[0]]
    if action == "remove-replica" and len(holders) > 3:
        return "remove_replica", [rng.choice(holders)]
    if action == "move-replica" and spare and holders:
        return "move_replica", [rng.choice(holders), spare[0]]
    return None


def _bugs(test: Run) -> list[str]:
    """The store's injected bugs, for the admin tool (part of the store under test, like the nodes)."""
    return [str(bug) for bug in (test.spec.bugs or [])]


def _uuids_by_name(roles: list[tuple[str, str, str, bool]]) -> dict[str, str]:
    """DNS name -> master uuid, from `master_roles` rows."""
    return {addr.rsplit(":", 1)[0]: u for u, addr, _, _ in roles}


def _uuid(test: Run, node: str) -> str:
    out = admin(test).fs_uuid(node, _fs_dir(test, node), 20).checked(node).out
    return out.strip().splitlines()[-1].strip()


# the operator's repairs, each an op of its own: the masters' run once every fault is stopped and healed
# (NemesisPackage.repair_generator); unsafe_change_config right after the majority loss it recovers from
UNSAFE_CHANGE_CONFIG: Op = {"f": "unsafe-change-config", "value": None}


def master_repairs(fault: str) -> tuple[Op, ...]:
    """`recopy-master` then `rebuild-lagging-masters`, addressed to the nemesis of `fault` (value `for`:
    with both master-replace nemeses composed, each repairs its own replacement)."""
    return tuple({"f": f, "value": {"for": fault}} for f in ("recopy-master", "rebuild-lagging-masters"))


def master_leads(test: Run, name: str) -> bool:
    """True when the masters say the master under DNS name `name` leads."""
    return any(role == "LEADER" and addr.rsplit(":", 1)[0] == name for _, addr, role, _ in master_roles(test))


def request_master_leadership(test: Run, name: str, uuid: str, steps: list[str]) -> bool:
    """Asks the leader master to transfer leadership to `uuid` (the master under DNS name `name`); True
    when it leads already (nothing asked)."""
    if master_leads(test, name):
        return True
    runner = first_up(test, role_nodes(test, "masters"))
    r = admin(test).leader_step_down(runner, masters_arg(test), SYS_CATALOG_TABLET, uuid, 30)
    steps.append(f"leader_step_down --new-leader {uuid}: {r.message(200)}")
    return False


def await_master_leadership(test: Run, name: str, steps: list[str], wait_s: float) -> bool:
    ok = wait_until(lambda: master_leads(test, name), wait_s, 0.5, f"{name} leading")
    steps.append(f"{name} leads" if ok else f"{name} does not lead")
    return ok


def hand_master_leadership(test: Run, name: str, uuid: str, steps: list[str], wait_s: float = 20.0) -> bool:
    """Leadership moved to the master under `name`; True once the masters say it leads."""
    return request_master_leadership(test, name, uuid, steps) or await_master_leadership(
        test, name, steps, wait_s
    )


class MasterLeaderReturnNemesis:
    """The masters' leadership handed to another master and, `hold_s` later, back: the first leader leads
    again without any fault. A master that leads again must hear every tablet server's full report anew
    (KUDU-1374): one that trusts what the tablet servers told it as a follower, or before, cannot locate a
    tablet whose leader did not change since. Nothing is left behind, so the completion is `transient`
    and the catalog checker's timed rules judge the cluster right after it (docs/checkers.md)."""

    fs = frozenset({"master-leader-return"})

    def __init__(self, hold_s: float = 4.0, wait_s: float = 20.0) -> None:
        self.hold_s, self.wait_s = hold_s, wait_s
        self.rng: random.Random | None = None  # set by setup

    def setup(self, test: Run) -> MasterLeaderReturnNemesis:
        self.rng = nemesis_rng(test, "master-leader-return")
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        seen: dict[str, list[tuple[str, str, str, bool]]] = {"roles": []}

        def led() -> bool:
            # a cluster still electing its first leader (a loaded machine, early in a run) is waited for:
            # skipping would leave the run without its one fault
            seen["roles"] = roles = master_roles(test)
            return any(role == "LEADER" for _, _, role, _ in roles) and len(roles) > 1

        wait_until(led, self.wait_s, 0.5, "a leader master")
        roles = seen["roles"]
        names = _uuids_by_name(roles)
        leader = next((addr.rsplit(":", 1)[0] for _, addr, role, _ in roles if role == "LEADER"), None)
        others = sorted(
            addr.rsplit(":", 1)[0] for _, addr, role, voter in roles if role != "LEADER" and voter
        )
        if leader is None or not others:
            return done(op, {"skipped": "no leader master, or no other voter"}, kind="fail")
        steps: list[str] = []
        assert self.rng is not None
        other = self.rng.choice(others)
        away = hand_master_leadership(test, other, names[other], steps, self.wait_s)
        if away:
            time.sleep(self.hold_s)  # the other master leads: tablet servers report to it meanwhile
        back = away and hand_master_leadership(test, leader, names[leader], steps, self.wait_s)
        value = {"leader": leader, "via": other, "returned": back, "steps": steps, "transient": True}
        return done(op, value, kind="ok" if back else "info")

    def heal(self, test: Run) -> None:
        """Nothing to undo: leadership moves are not faults."""


class MasterReplaceNemesis:
    """master-permanent-failure.txt, step by step, on a random master C:
    stop C and destroy its data; make a fresh node D; move C's DNS name to D; wait for a leader among the
    survivors; copy the master state to D with the remote bootstrap tool; start the master on D with the
    same master addresses; wait until the masters are healthy voters again. Then, with `lead_after`, hand
    the masters' leadership to D: a replacement that cannot lead is not a replacement (and the tablet
    servers must have found it under C's name by then, KUDU-1620).

    The operator hands the copy tool the master it saw leading, then the other survivors, and leaves the
    choice of source to the tool, which must pick the current leader: the master seen leading may be an
    old leader cut off from the others (it still says it leads), and a copy of a lagging catalog under C's
    identity lets that old leader commit again, apart from the rest (KUDU-1556).
    The tool runs with the store's injected bugs, as the node processes do.

    Repairs (`master_repairs`, each its own op): `recopy-master` runs a failed copy again and starts the
    replacement; `rebuild-lagging-masters` waits `settle_s` for every master to hold what the leader
    committed and rebuilds the ones that never caught up, naming them in `never_caught_up`."""

    fs = frozenset({"replace-master", "recopy-master", "rebuild-lagging-masters"})

    # bounded well below a run: faults run one at a time, so a wait on a partition (that only the next op
    # heals) cannot end, and a long one would hold every other fault back
    def __init__(
        self, wait_s: float = 40, lead_after: bool = True, settle_s: float = 20.0, healthy_s: float = 10.0
    ) -> None:
        self.wait_s = wait_s
        self.healthy_s = healthy_s  # a started replacement catches up in seconds: longer is a finding
        self.lead_after = lead_after
        self.settle_s = settle_s
        self.rng: random.Random | None = None  # set by setup
        # a replacement made but not started yet: {"node", "name", "uuid", "copied"}
        self.pending: dict[str, Any] | None = None

    def setup(self, test: Run) -> MasterReplaceNemesis:
        self.rng = nemesis_rng(test, "master-replace")
        return self

    @staticmethod
    def _names(test: Run) -> list[str]:
        n_masters = _cluster_spec(test).role(MASTER).count  # the cluster's, which master-migrate grows
        return [master_dns(i) for i in range(1, n_masters + 1)]

    def _destroy_and_rename(self, test: Run, name: str, victim: str, uuid: str, steps: list[str]) -> str:
        """Stops and destroys `victim` (master `uuid`), makes a fresh node and moves the DNS name `name`
        to it."""
        b = backend(test)
        b.stop(victim)
        steps.append(f"stop {victim}")
        b.destroy(victim)  # its data is gone: it can never come back
        steps.append(f"destroy {victim}")
        replacement = _next_name(test, "m")
        b.add_node(replacement, role="master", start=False)
        self.pending = {"node": replacement, "name": name, "uuid": uuid, "copied": False}
        steps.append(f"add node {replacement}")
        b.set_dns(name, replacement)
        steps.append(f"dns {name} -> {replacement}")
        return replacement

    def _copy_state(
        self,
        test: Run,
        replacement: str,
        uuid: str,
        source: str,
        steps: list[str],
        wait_s: float | None = None,
    ) -> None:
        """Formats the replacement with the dead master's uuid (the masters' Raft config names it by uuid)
        and copies the catalog to it with the remote bootstrap tool, which picks among `source`."""
        fs_dir = _fs_dir(test, replacement)
        formatted = admin(test).fs_format(replacement, fs_dir, uuid, 60)
        if not formatted.ok and "already formatted" not in formatted.err:  # by an earlier attempt: copy again
            raise NemesisError(f"{replacement}: fs format failed: {formatted.err.strip()[-300:]}")
        steps.append(f"fs format --uuid {uuid} on {replacement}")
        last: list[str] = []

        def copied() -> bool:
            r = admin(test).copy_from_remote(
                replacement, SYS_CATALOG_TABLET, source, fs_dir, _bugs(test), 120
            )
            last[:] = [r.message()]
            return r.ok

        if not wait_until(copied, self.wait_s if wait_s is None else wait_s, 2.0, "copy_from_remote"):
            raise NemesisError(
                f"{replacement}: copy_from_remote from {source} kept failing: {last[0] if last else ''}"
            )
        if self.pending is not None:
            self.pending["copied"] = True
        steps.append(f"copy_from_remote {source}: {last[0] if last else ''}")

    def _start(self, test: Run, replacement: str, steps: list[str]) -> None:
        backend(test).start(replacement)
        self.pending = None
        steps.append(f"start master on {replacement}")

    def invoke(self, test: Run, op: Op) -> Op:
        if op["f"] == "recopy-master":
            return self._recopy(test, op)
        if op["f"] == "rebuild-lagging-masters":
            return self._rebuild_lagging(test, op)
        steps: list[str] = []
        try:
            return self._replace(test, op, steps)
        except NemesisError as exc:
            # the masters did not recover within the bound (no leader among the survivors, no source to
            # copy from): a finding about the store, not a harness failure, so the run goes on and its
            # final checks judge the cluster
            log.warning("%s: %s", op.get("f"), exc)
            if self.pending is not None:
                self.pending["error"] = str(exc)
            return done(op, {"steps": steps, "error": str(exc)}, kind="info")

    def _replace(self, test: Run, op: Op, steps: list[str]) -> Op:
        names = self._names(test)
        holders = {name: dns_holder(test, name) for name in names}
        found: dict[str, str | None] = {"leader": None}

        def led() -> bool:
            # a cluster still electing its first leader is waited for (bounded), as master-leader-return does
            found["leader"] = master_leader(test)
            return found["leader"] is not None

        wait_until(led, self.wait_s, 0.5, "a leader master")
        roles = master_roles(test)
        leader = found["leader"]
        assert self.rng is not None
        name = self.rng.choice(names)
        victim = holders[name]
        uuid = _uuids_by_name(roles).get(name)
        if victim is None or leader is None or uuid is None:
            return done(op, {"skipped": f"no holder or uuid for {name}, or no leader"}, kind="fail")
        replacement = self._destroy_and_rename(test, name, victim, uuid, steps)
        # the source is the leader now: if C led, the survivors elect a new one first (the document's
        # "replace A with whichever node was elected the new leader")
        now = self._surviving_leader(test, names, name, victim, replacement)
        steps.append(f"leader {now['leader']} ({now['addr']})")
        # the master the operator saw leading first, then every other survivor by the DNS names the masters
        # are configured with: the tool must find the current leader among them (the one seen may be an
        # old leader cut off from the rest, still believing it leads)
        seen = str(now["addr"])
        source = ",".join(
            [seen, *(f"{n}:{MASTER_PORT}" for n in names if n != name and f"{n}:{MASTER_PORT}" != seen)]
        )
        self._copy_state(test, replacement, uuid, source, steps)
        self._start(test, replacement, steps)
        acted = time.monotonic()  # when the operator last did something; after it, the op only watches
        healthy = wait_until(
            lambda: masters_healthy(test, len(names)), self.healthy_s, 1.0, "masters healthy"
        )
        leads = False
        if healthy and self.lead_after:
            leads = request_master_leadership(test, name, uuid, steps)
            acted = time.monotonic()
            leads = leads or await_master_leadership(test, name, steps, min(self.wait_s, 20.0))
        # the replacement runs with its copy: what is left unhealthy from here on is the store's doing, and
        # the fault ended with the operator's last action (the checker's timed rules count from there)
        value = {
            "name": name,
            "dead": victim,
            "uuid": uuid,
            "replacement": replacement,
            "leader": now["leader"],
            "steps": steps,
            "healthy": healthy,
            "replacement_leads": leads,
            "transient": True,
            "watched_s": round(time.monotonic() - acted, 3),
        }
        return done(op, value, kind="ok" if healthy else "info")

    def _surviving_leader(
        self, test: Run, names: list[str], name: str, victim: str, replacement: str
    ) -> dict[str, str | None]:
        """{"leader": node, "addr": HOST:PORT} of a master other than the dead one (DNS name `name`, node
        `victim`) that says it leads, waited for; NemesisError when none does within `wait_s`."""
        now: dict[str, str | None] = {"leader": None, "addr": None}

        def survivor_leads() -> bool:
            # the masters' view, then each survivor's own, asked from the replacement machine (where the
            # operator works): a survivor that says it leads is what the operator sees (it may be an old
            # leader cut off from the others: the copy tool must tell)
            views = [master_roles(test)] + [
                master_roles_seen_by(test, replacement, f"{n}:{MASTER_PORT}") for n in names if n != name
            ]
            for roles in views:
                for _, addr, role, _ in roles:
                    node = node_of_address(test, addr)
                    if role == "LEADER" and addr.rsplit(":", 1)[0] != name and node != victim:
                        now["leader"], now["addr"] = node, addr
                        return True
            return False

        if not wait_until(survivor_leads, self.wait_s, 1.0, "a leader among the surviving masters"):
            raise NemesisError(f"no leader among the surviving masters after {victim} died")
        return now

    def _catalog_laggards(self, test: Run, client: Any) -> tuple[str | None, list[str]]:
        """(leader's DNS name, names of the masters that lack what it committed), each master asked
        directly through the host's node client; (None, []) when there is no single leader to judge by."""
        from faultline.node.client import catalog_lags

        views = {}
        for n in self._names(test):
            try:
                views[n] = client.catalog_replica(f"{n}:{MASTER_PORT}", timeout=2.0)
            except Exception:
                views[n] = None
        leaders = [n for n, st in views.items() if st is not None and st.role == "LEADER"]
        if len(leaders) != 1:
            return None, []
        lead = views[leaders[0]]
        return leaders[0], [n for n, st in views.items() if n != leaders[0] and catalog_lags(lead, st)]

    def _laggards(self, test: Run, settle_s: float) -> tuple[str | None, list[str]]:
        """(leader, masters still behind it) after waiting up to `settle_s` for every master to hold what
        the leader committed; judged against a single leader only (right after a heal there may be none
        yet): (None, []) when none showed up."""
        connect = test.connect
        if connect is None:  # no node client to ask the masters with
            return None, []
        found: dict[str, Any] = {"leader": None, "late": []}
        client = connect()
        try:

            def settled() -> bool:
                found["leader"], found["late"] = self._catalog_laggards(test, client)
                return found["leader"] is not None and not found["late"]

            wait_until(settled, settle_s, 1.0, "masters caught up")
        finally:
            client.close()
        return found["leader"], list(found["late"])

    def _rebuild(self, test: Run, leader: str, late: list[str], steps: list[str]) -> list[str]:
        """As master-permanent-failure.txt tells the operator: each master of `late` is destroyed, and a
        fresh node under its name copies the catalog from `leader`. Returns the names rebuilt."""
        uuids = _uuids_by_name(master_roles(test))
        rebuilt = []
        for name in late:
            holder = dns_holder(test, name)
            uuid = uuids.get(name)
            if holder is None or uuid is None:
                continue
            replacement = self._destroy_and_rename(test, name, holder, uuid, steps)
            self._copy_state(test, replacement, uuid, f"{leader}:{MASTER_PORT}", steps)
            self._start(test, replacement, steps)
            rebuilt.append(name)
        return rebuilt

    def _rebuild_lagging(self, test: Run, op: Op) -> Op:
        """The repair `rebuild-lagging-masters`: a master still behind the leader `settle_s` after every
        fault stopped never caught up on its own (the store's masters catch up by snapshot, docs/node.md):
        it is named in `never_caught_up`, the evidence, then rebuilt from the leader."""
        if test.connect is None:
            return done(op, {"skipped": "no node client to ask the masters with"}, kind="fail")
        leader, late = self._laggards(test, self.settle_s)
        if leader is None:
            return done(op, {"skipped": f"no single leader master within {self.settle_s:g} s"}, kind="fail")
        # a replacement the harness never got a copy into was never started: not the store's finding
        unstarted = [self.pending["name"]] if self.pending is not None and not self.pending["copied"] else []
        never = [n for n in late if n not in unstarted]
        if not late:
            return done(op, {"leader": leader, "never_caught_up": [], "rebuilt": [], "transient": True})
        reason = (
            f"{', '.join(late)} still behind the leader {leader} {self.settle_s:g} s after every fault "
            "stopped"
            + (f" ({', '.join(unstarted)} never started: its copy failed)" if unstarted else "")
            + ": rebuilt from the leader"
        )
        steps: list[str] = []
        value: dict[str, Any] = {
            "reason": reason,
            "leader": leader,
            "never_caught_up": never,
            "never_started": unstarted,
            "waited_s": self.settle_s,
            "steps": steps,
        }
        try:
            value["rebuilt"] = self._rebuild(test, leader, late, steps)
        except NemesisError as exc:
            return done(op, {**value, "rebuilt": [], "error": str(exc)}, kind="info")
        # bounded like a replacement's catch-up, not a fault's wait: a rebuild that leaves the masters unhealthy
        # is already the finding (never_caught_up), and the final reads wait on for the masters themselves
        value["healthy"] = wait_until(
            lambda: masters_healthy(test, len(self._names(test))), 2 * self.healthy_s, 1.0, "masters healthy"
        )
        value["transient"] = True  # rebuilt and started: what stays wrong now is the store's doing
        return done(op, value, kind="ok" if value["healthy"] else "info")

    def _recopy(self, test: Run, op: Op) -> Op:
        """The repair `recopy-master`: a replacement whose copy failed (no leader to copy from then) gets
        the catalog from the surviving masters now, and starts."""
        pending = self.pending
        if pending is None or pending["copied"]:
            return done(op, {"skipped": "no replacement waits for its copy"}, kind="fail")
        reason = (
            f"the copy of the catalog to {pending['node']}, the replacement under {pending['name']}, "
            f"failed: {pending.get('error', 'interrupted')}"
        )
        steps: list[str] = []
        source = ",".join(f"{n}:{MASTER_PORT}" for n in self._names(test) if n != pending["name"])
        try:
            self._copy_state(test, pending["node"], pending["uuid"], source, steps, wait_s=20.0)
        except NemesisError as exc:
            return done(op, {"reason": reason, "steps": steps, "error": str(exc)}, kind="info")
        self._start(test, pending["node"], steps)
        return done(
            op, {"reason": reason, "name": pending["name"], "replacement": pending["node"], "steps": steps}
        )

    def heal(self, test: Run) -> None:
        """Starts a replacement that was made and holds its copy but was not started yet (a process to
        bring back). Nothing else: one whose copy failed stays stopped (a master that starts with no
        catalog would found a new one under the dead master's identity) until the repair `recopy-master`,
        and a master left behind stays behind for the checkers to see."""
        pending = self.pending
        if pending is None:
            return
        if not pending["copied"]:
            log.warning(
                "heal: %s holds no copy of the catalog; left stopped for the repair recopy-master",
                pending["node"],
            )
            return
        self.pending = None
        backend(test).start(pending["node"])


class MasterReplaceLaggingNemesis(MasterReplaceNemesis):
    """A master replaced while the old leader is cut off, the one case where the copy's source matters
    (KUDU-1556), staged in order:

    1. the leader master L is cut off from the other masters; they elect X, and for `lag_s` X commits the
       catalog's changes with the third master C alone (L never sees them);
    2. C dies for good and is replaced by D under C's name; the operator hands the copy tool L first (the
       leader it saw last: L still says it leads), then X. The tool must copy from X, the leader of the
       newest term; a careless one copies from L, the first that answers;
    3. the cut moves in one step (a heal in between would let X catch L up at once): X is cut off and L
       rejoins before D starts, so L and D must elect a leader between them. D copied from X leads with
       everything; D copied from L shares L's log, and the changes only X and the dead C held are lost;
    4. after `hold_s`, every cut heals and the masters must be three healthy voters again. D, leading from
       a copy, holds its log only from the copy's snapshot: it catches L up by sending that snapshot. A
       master that stays behind is a finding, for the repair `rebuild-lagging-masters` to name."""

    fs = frozenset({"replace-master-lagging", "recopy-master", "rebuild-lagging-masters"})

    def __init__(self, wait_s: float = 40, lag_s: float = 10.0, hold_s: float = 5.0) -> None:
        super().__init__(wait_s=wait_s, lead_after=False)
        self.lag_s, self.hold_s = lag_s, hold_s

    def setup(self, test: Run) -> MasterReplaceLaggingNemesis:
        self.rng = nemesis_rng(test, "master-replace-lagging")
        return self

    def _leader_among(self, test: Run, runner: str, names: list[str]) -> str | None:
        """The DNS name among `names` whose master says it leads, asking each one itself from `runner`."""
        for n in names:
            for _, addr, role, _ in master_roles_seen_by(test, runner, f"{n}:{MASTER_PORT}"):
                if role == "LEADER" and addr.rsplit(":", 1)[0] == n:
                    return n
        return None

    def _replace(self, test: Run, op: Op, steps: list[str]) -> Op:
        b = backend(test)
        names = self._names(test)
        if len(names) < 3:
            return done(op, {"skipped": "needs three masters"}, kind="fail")
        roles = master_roles(test)
        uuids = _uuids_by_name(roles)
        old = next((addr.rsplit(":", 1)[0] for _, addr, role, _ in roles if role == "LEADER"), None)
        holders = {n: dns_holder(test, n) for n in names}
        if old is None or any(h is None for h in holders.values()) or set(uuids) < set(names):
            return done(op, {"skipped": "no leader master, or a master without holder or uuid"}, kind="fail")
        masters = role_nodes(test, "masters")
        assert self.rng is not None
        b.partition(gr.isolate_one(masters, self.rng, node=holders[old]))
        steps.append(f"cut off the leader {old} ({holders[old]})")
        try:
            others = [n for n in names if n != old]
            new: dict[str, str | None] = {"name": None}

            def elected() -> bool:
                new["name"] = self._leader_among(test, str(holders[others[0]]), others)
                return new["name"] is not None

            if not wait_until(elected, self.wait_s, 0.5, "a new leader master"):
                return done(op, {"steps": steps, "skipped": "no new leader master"}, kind="info")
            x = str(new["name"])
            c = next(n for n in others if n != x)
            steps.append(f"{x} leads; {old} lags for {self.lag_s} s")
            time.sleep(self.lag_s)
            replacement = self._destroy_and_rename(test, c, str(holders[c]), uuids[c], steps)
            self._copy_state(test, replacement, uuids[c], f"{old}:{MASTER_PORT},{x}:{MASTER_PORT}", steps)
            # one step, no heal in between: healed even for a moment, X would catch L up at once
            b.partition(gr.isolate_one(role_nodes(test, "masters"), self.rng, node=holders[x]))
            steps.append(f"cut off {x} ({holders[x]}) instead")
            self._start(test, replacement, steps)
            after: dict[str, str | None] = {"name": None}

            def reelected() -> bool:
                after["name"] = self._leader_among(test, replacement, [old, c])
                return after["name"] is not None

            wait_until(reelected, self.wait_s, 0.5, f"a leader among {old} and {c}")
            steps.append(
                f"{after['name']} leads without {x}" if after["name"] else f"no leader among {old}, {c}"
            )
            time.sleep(self.hold_s)
        finally:
            b.heal_network()
        steps.append("healed")
        healthy = wait_until(lambda: masters_healthy(test, len(names)), self.wait_s, 1.0, "masters healthy")
        value = {
            "old_leader": old,
            "new_leader": x,
            "replaced": c,
            "replacement": replacement,
            "steps": steps,
            "healthy": healthy,
        }
        return done(op, value, kind="ok" if healthy else "info")


class MasterMigrateNemesis:
    """One master to three, as master-permanent-failure.txt describes (a run started with --db-opt masters=1):
    stop A; format each new node and read its uuid; rewrite A's catalog config to all three; start A;
    copy A's state to each new node; start them; wait until three healthy voters."""

    fs = frozenset({"migrate-masters"})

    def __init__(self, wait_s: float = 120) -> None:
        self.wait_s = wait_s
        self.done_once = False

    def setup(self, test: Run) -> MasterMigrateNemesis:
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        if self.done_once:
            return done(op, {"skipped": "already migrated"}, kind="fail")
        b = backend(test)
        masters = role_nodes(test, "masters")
        if len(masters) != 1:
            return done(op, {"skipped": f"needs one master, found {len(masters)}"}, kind="fail")
        a = masters[0]
        steps = [f"stop {a}"]
        b.stop(a)
        new_nodes = []
        for i in (2, 3):
            node = _next_name(test, "m")
            b.add_node(node, role="master", start=False)
            b.set_dns(master_dns(i), node)
            new_nodes.append((node, master_dns(i)))
            admin(test).fs_format(node, _fs_dir(test, node), None, 60).checked(node)
            steps.append(f"format {node} as {master_dns(i)}")
        peers = [(a, master_dns(1)), *new_nodes]
        uuids = {node: _uuid(test, node) for node, _ in peers}
        config = [f"{uuids[n]}:{dns}:{MASTER_PORT}" for n, dns in peers]
        admin(test).rewrite_raft_config(a, SYS_CATALOG_TABLET, config, _fs_dir(test, a), 60).checked(a)
        steps.append("rewrite_raft_config on " + a)
        _cluster_spec(test).role(
            MASTER
        ).count = 3  # from now on every node process starts with the three master addresses
        b.start(a)
        for node, _ in new_nodes:
            source = f"{master_dns(1)}:{MASTER_PORT}"
            admin(test).copy_from_remote(
                node, SYS_CATALOG_TABLET, source, _fs_dir(test, node), [], 120
            ).checked(node)
            b.start(node)
            steps.append(f"copy and start {node}")
        # tablet servers learn the new masters by a restart with the new master addresses, one at a time
        for t in role_nodes(test, "tservers"):
            b.stop(t)
            b.start(t)
        steps.append("restarted the tablet servers with three master addresses")
        self.done_once = True
        healthy = wait_until(lambda: masters_healthy(test, 3), self.wait_s, 1.0, "three masters")
        return done(op, {"steps": steps, "healthy": healthy}, kind="ok" if healthy else "info")

    def heal(self, test: Run) -> None:
        pass


class TserverReplaceNemesis:
    """Destroys a tablet server for good, adds a fresh one, and waits until ksck reports every tablet
    back at full replication (the masters re-replicate)."""

    fs = frozenset({"replace-tserver"})

    def __init__(self, wait_s: float = 180) -> None:
        self.wait_s = wait_s
        self.rng: random.Random | None = None  # set by setup

    def setup(self, test: Run) -> TserverReplaceNemesis:
        self.rng = nemesis_rng(test, "tserver-replace")
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        b = backend(test)
        servers = role_nodes(test, "tservers")
        if len(servers) <= 3:
            return done(op, {"skipped": "needs more than 3 tablet servers to re-replicate"}, kind="fail")
        assert self.rng is not None
        victim = self.rng.choice(servers)
        b.stop(victim)
        b.destroy(victim)
        fresh = _next_name(test, "t")
        b.add_node(fresh, role="tserver", start=True)
        healthy = wait_until(lambda: ksck(test)[0], self.wait_s, 2.0, "full replication")
        return done(
            op, {"destroyed": victim, "added": fresh, "healthy": healthy}, kind="ok" if healthy else "info"
        )

    def heal(self, test: Run) -> None:
        pass


class MajorityLossNemesis:
    """Destroys a majority of one tablet's replicas (the servers holding them, for good); then, as its own
    op, the operator's repair `unsafe-change-config`: each tablet left without a majority is forced onto
    its survivors with `remote_replica unsafe_change_config`, fresh tablet servers are added, and the op
    waits for ksck to be clean. The repair's reason names the loss.

    The survivor is first cut off from the other tablet servers for `lag_s`, so it is the lagging replica
    when the others die (the case that loses data: the majority kept acknowledging writes it never saw).
    Those writes are gone; the checkers must report the loss, not hide it."""

    fs = frozenset({"majority-loss", "unsafe-change-config"})

    def __init__(self, wait_s: float = 180, lag_s: float = 4.0) -> None:
        self.wait_s = wait_s
        self.lag_s = lag_s
        self.rng: random.Random | None = None  # set by setup
        self.lost: dict[str, Any] | None = None  # the loss the repair has yet to recover from

    def setup(self, test: Run) -> MajorityLossNemesis:
        self.rng = nemesis_rng(test, "majority-loss")
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        if op["f"] == "unsafe-change-config":
            return self._repair(test, op)
        b = backend(test)
        full: list[dict[str, Any]] = []
        for _ in range(3):  # the listing can time out while the masters are busy (catalog workload)
            every = tablets(test)
            full = [t for t in every if len([n for n in t["replica_nodes"] if n]) >= 3]
            if full:
                break
            time.sleep(2.0)
        mine = {t["tablet"] for t in workload_tablets(test)}
        ts = [t for t in full if t["tablet"] in mine] or full  # a tablet the workload writes to, if known
        if not ts:
            return done(op, {"skipped": "no tablet with three known replicas"}, kind="fail")
        assert self.rng is not None
        t = self.rng.choice(ts)
        holders = [n for n in t["replica_nodes"] if n]
        # a follower survives: cut off, it lags while the leader and the other follower keep committing
        followers = [n for n in holders if n != t.get("leader_node")] or holders
        survivor = self.rng.choice(followers)
        lost = sorted(n for n in holders if n != survivor)
        if self.lag_s > 0:
            b.partition(gr.isolate_one(role_nodes(test, "tservers"), self.rng, node=survivor))
        try:
            time.sleep(self.lag_s)  # the majority goes on acknowledging writes the survivor never sees
            for n in lost:
                b.stop(n)
                b.destroy(n)
        finally:
            if self.lag_s > 0:
                b.heal_network()
        self.lost = {"tablet": t["tablet"], "lost": lost, "survivor": survivor, "listed": every}
        return done(op, {"tablet": t["tablet"], "lost": lost, "survivor": survivor})

    def _repair(self, test: Run, op: Op) -> Op:
        """`unsafe-change-config`, after ksck as an operator would: force every tablet left without a
        majority onto its survivors (the chosen tablet is one of them), add fresh tablet servers, and keep
        checking until ksck is clean: a table created meanwhile may have lost its majority as well."""
        loss, self.lost = self.lost, None
        if loss is None:
            return done(op, {"skipped": "no majority lost"}, kind="fail")
        b = backend(test)
        lost = loss["lost"]
        reason = (
            f"tablet {loss['tablet']} lost its majority ({', '.join(lost)} destroyed, {loss['survivor']} "
            "left): tablets without a majority forced onto their survivors"
        )
        tries: dict[str, int] = {}
        forced = self._force_orphans(test, loss["listed"], lost, tries)
        added = []
        for _ in lost:
            fresh = _next_name(test, "t")
            b.add_node(fresh, role="tserver", start=True)
            added.append(fresh)

        def clean() -> bool:
            if ksck(test)[0]:
                return True
            forced.extend(self._force_orphans(test, tablets(test), lost, tries))
            return False

        healthy = wait_until(clean, self.wait_s, 2.0, "re-replication")
        not_forced = sorted(tab for tab in tries if tab not in forced)
        return done(
            op,
            {
                "reason": reason,
                "tablet": loss["tablet"],
                "lost": lost,
                "survivor": loss["survivor"],
                "forced": forced,
                "not_forced": not_forced,
                "added": added,
                "healthy": healthy,
            },
            kind="ok" if healthy else "info",
        )

    def _force_orphans(
        self,
        test: Run,
        listed: list[dict[str, Any]],
        lost: list[str],
        tries: dict[str, int],
        max_tries: int = 3,
    ) -> list[str]:
        """`unsafe_change_config` onto its live replicas for each leaderless tablet of `listed` whose live
        replicas are no majority; a tablet is tried at most `max_tries` times (one still being created on a
        lost server cannot be forced: the masters place it anew). Returns the tablets forced."""
        forced = []
        for tab in listed:
            leader = tab.get("leader_node")  # one listed on a lost server is the masters' stale view
            if (leader and leader not in lost) or tries.get(tab["tablet"], 0) >= max_tries:
                continue
            known = [(n, u) for n, u in zip(tab["replica_nodes"], tab["replicas"], strict=False) if n]
            live = [(n, u) for n, u in known if n not in lost]
            if not live or len(live) * 2 > len(tab["replicas"]):
                continue
            tries[tab["tablet"]] = tries.get(tab["tablet"], 0) + 1
            try:
                runner = live[0][0]
                uuids = [str(u) for _, u in live]
                admin(test).unsafe_change_config(runner, f"{runner}:7050", tab["tablet"], uuids, 60).checked(
                    runner
                )
                forced.append(tab["tablet"])
                tries[tab["tablet"]] = max_tries
            except NemesisError as exc:
                # the tablet may be gone meanwhile (its table deleted by the catalog workload)
                log.warning("majority-loss: could not force tablet %s: %s", tab["tablet"], exc)
        return forced

    def heal(self, test: Run) -> None:
        pass
