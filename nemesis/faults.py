"""Transient faults: partitions, process kills and pauses, clock skew. Each starts, stops and heals.

Every start op's completion names exactly what was done (the grudge, the nodes killed, the offsets), so
the history alone tells which fault was active when.
"""

from __future__ import annotations

import threading
import time
from typing import cast

from faultline.cluster.api import PacketShape
from faultline.core import Op, Run
from faultline.db.api import Kill, Leaders, Pause
from faultline.db.nodes import PRIMARIES, backend, leaders, primaries, role_nodes, targets_of
from faultline.nemesis import grudge as gr
from faultline.nemesis.base import Seeded, bring_back, done, log, pick_subset


class PartitionNemesis(Seeded):
    """start-partition {shape, targets} cuts the network with a grudge; stop-partition heals it."""

    salt = "partition"

    fs = frozenset({"start-partition", "stop-partition"})

    def __init__(self) -> None:
        self.active = False

    def invoke(self, test: Run, op: Op) -> Op:
        if op["f"] == "stop-partition":
            backend(test).heal_network()
            self.active = False
            return done(op)
        v = op.get("value") or {}
        shape, targets = v.get("shape", "one"), targets_of(test, v)
        nodes = role_nodes(test, "all" if targets == PRIMARIES else targets)
        leader = None
        if shape == "leader":
            leader = self._leader(test, targets)
        grudge = gr.shape(shape, nodes, self.rng, leader=leader)
        backend(test).partition(grudge)
        self.active = True
        return done(
            op,
            {
                "shape": shape,
                "targets": targets,
                "groups": gr.describe(grudge),
                "grudge": gr.to_json(grudge),
                **({"leader": leader} if leader else {}),
            },
        )

    def _leader(self, test: Run, targets: str) -> str | None:
        """Whom the leader shape cuts off: the leader the DB names for `targets` when it has leaders of
        several kinds (db.api.Leaders), else one of its primaries."""
        if targets != PRIMARIES and isinstance(test.db, Leaders):
            return test.db.leader_to_isolate(test, targets, self.rng)
        found = primaries(test)
        return self.rng.choice(sorted(found)) if found else None

    def heal(self, test: Run) -> None:
        backend(test).heal_network()
        self.active = False


class ProcessNemesis(Seeded):
    """start-kill / start-pause on a subset of a role's nodes (or the current leaders); stop restarts them.

    `mode` is "kill" (SIGKILL, then start) or "pause" (SIGSTOP, then SIGCONT); both go through the DB
    (db.api.Kill, db.api.Pause), so a DB that kills or pauses itself differently says so there.
    """

    def __init__(self, mode: str) -> None:
        if mode not in ("kill", "pause"):
            raise ValueError(mode)
        self.mode = self.salt = mode
        self.fs = frozenset({f"start-{mode}", f"stop-{mode}"})
        self.affected: set[str] = set()
        self.lock = threading.Lock()

    def invoke(self, test: Run, op: Op) -> Op:
        b = backend(test)
        if op["f"].startswith("stop-"):
            revived = self._revive(test)
            return done(op, {"nodes": revived})
        v = op.get("value") or {}
        role, subset = targets_of(test, v), v.get("subset", "one")
        aimed = leaders(test, role) if subset == "leaders" else []
        victims = pick_subset(role_nodes(test, role), subset, self.rng, aimed)
        hit, skipped = [], []
        for n in victims:
            with self.lock:
                self.affected.add(n)  # before the act: a crash in between still gets healed
            try:
                # the registry gives a kill only to a DB with Kill, a pause only to one with Pause
                if self.mode == "kill":
                    cast(Kill, test.db).kill(test, n)
                else:
                    cast(Pause, test.db).pause(test, n)
            except Exception:
                # a process another fault killed cannot be paused: leave it to that fault's restart
                if self.mode != "pause" or b.daemon_status(n) != "stopped":
                    raise
                with self.lock:
                    self.affected.discard(n)
                skipped.append(n)
                continue
            hit.append(n)
        return done(
            op,
            {
                "targets": role,
                "subset": subset,
                "nodes": hit,
                **({"skipped_not_running": skipped} if skipped else {}),
            },
        )

    def _revive(self, test: Run) -> list[str]:
        b = backend(test)

        def resume(n: str) -> None:
            try:
                cast(Pause, test.db).resume(test, n)
            except Exception:
                # killed meanwhile by another fault: not paused any more, and that fault restarts it
                if b.daemon_status(n) != "stopped":
                    raise

        def restart(n: str) -> None:
            cast(Kill, test.db).start(test, n)

        return bring_back(
            self.affected,
            self.lock,
            restart if self.mode == "kill" else resume,
            "restart" if self.mode == "kill" else "resume",
        )

    def heal(self, test: Run) -> None:
        self._revive(test)


class ClockNemesis(Seeded):
    """Bumps, strobes and resets node clocks through the node's clock offset file (`set_clock_offset`), never the host's.

    start-clock {kind: bump|strobe, targets, subset}: bump sets a random offset of up to +-`max_skew_s`;
    strobe flips between that offset and none every `strobe_period_s` for `strobe_s`, then leaves the
    offset set. stop-clock resets every touched node to zero.
    """

    salt = "clock"

    fs = frozenset({"start-clock", "stop-clock"})

    def __init__(self, max_skew_s: float = 5.0, strobe_s: float = 3.0, strobe_period_s: float = 0.25) -> None:
        self.max_skew_s, self.strobe_s, self.strobe_period_s = max_skew_s, strobe_s, strobe_period_s
        self.touched: set[str] = set()

    def invoke(self, test: Run, op: Op) -> Op:
        b = backend(test)
        if op["f"] == "stop-clock":
            nodes = self._reset(test)
            return done(op, {"nodes": nodes})
        v = op.get("value") or {}
        kind = v.get("kind", "bump")
        victims = pick_subset(role_nodes(test, v.get("targets", "all")), v.get("subset", "one"), self.rng)
        offsets = {n: round(self.rng.uniform(-self.max_skew_s, self.max_skew_s), 3) for n in victims}
        self.touched |= set(victims)
        if kind == "strobe":
            deadline = time.monotonic() + self.strobe_s
            flip = False
            for _ in range(int(self.strobe_s / self.strobe_period_s) + 1):
                if time.monotonic() >= deadline:
                    break
                flip = not flip
                for n, off in offsets.items():
                    b.set_clock_offset(n, off if flip else 0.0)
                time.sleep(self.strobe_period_s)
        for n, off in offsets.items():
            b.set_clock_offset(n, off)
        return done(op, {"kind": kind, "offsets": offsets})

    def _reset(self, test: Run) -> list[str]:
        b = backend(test)
        nodes = sorted(self.touched)
        for n in nodes:
            try:
                b.set_clock_offset(n, 0.0)
                self.touched.discard(n)
            except Exception as exc:
                log.warning("clock reset on %s failed: %s", n, exc)
        return nodes

    def heal(self, test: Run) -> None:
        self._reset(test)


class PacketNemesis(Seeded):
    """start-packet {subset}: one packet fault (PACKET_KINDS: delay with jitter, reordering, loss,
    duplication or a rate limit), drawn among those the nodes' kernel can do, on one node, a minority or
    all; stop-packet restores every link it touched. The completion names the kind and its parameters."""

    salt = "packet"

    fs = frozenset({"start-packet", "stop-packet"})
    PARAMS = {
        "delay": {"delay_ms": 50, "jitter_ms": 25},
        "reorder": {"delay_ms": 20, "reorder_pct": 25},
        "loss": {"loss_pct": 20},
        "duplicate": {"duplicate_pct": 20},
        "rate": {"rate_kbit": 512},
    }

    def __init__(self) -> None:
        self.touched: set[str] = set()
        self.lock = threading.Lock()

    def invoke(self, test: Run, op: Op) -> Op:
        b = backend(test)
        if op["f"] == "stop-packet":
            return done(op, {"nodes": self._restore(test)})
        v = op.get("value") or {}
        victims = pick_subset(role_nodes(test, "all"), v.get("subset", "one"), self.rng)
        if not victims:
            return done(op, {"nodes": []})
        kinds = [k for k in self.PARAMS if k in b.packet_kinds(victims[0])]
        kind = self.rng.choice(kinds)
        params = self.PARAMS[kind]
        for n in victims:
            with self.lock:
                self.touched.add(n)  # before the act: a crash in between still gets restored
            b.packet(n, PacketShape(**params))
        return done(op, {"kind": kind, "params": params, "nodes": victims})

    def _restore(self, test: Run) -> list[str]:
        b = backend(test)
        return bring_back(self.touched, self.lock, lambda n: b.packet(n), "restore the links of")

    def heal(self, test: Run) -> None:
        self._restore(test)
