"""Nemeses by name, and their composition.

`NEMESES[name]` is an `Entry` (name, help, factory) and `get(name, interval_s)` builds its
`NemesisPackage`: the same shape as workloads.registry and checkers.registry, so the CLI lists and
validates all three alike. `compose(names, interval_s)` merges several: one composite nemesis that routes
each op to the package that handles its `f`; their schedules run side by side (each package cycles wait,
start, wait, stop, offset from the others so faults overlap and interleave); the final generator stops
every package's fault, `heal` heals them all, and the repair generator runs every package's repairs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faultline import gen
from faultline.core import Run
from faultline.nemesis import blip, elections, faults, learner, power, topology
from faultline.nemesis.api import Nemesis, NemesisPackage
from faultline.nemesis.base import PRIMARIES, ROLES, Op, choice_op
from faultline.nemesis.grudge import SHAPES

ALL_SUBSETS = ("one", "minority", "majority", "leaders")


@dataclass(frozen=True)
class Entry:
    """One nemesis: the name users type, a line for `--help`, and what builds its package from the
    interval between a fault's start and stop (seconds)."""

    name: str
    help: str
    factory: Callable[[float], NemesisPackage]


def _start_stop(f: str, choices: Mapping[str, Sequence[Any]], interval_s: float) -> tuple[gen.Gen, gen.Gen]:
    start = gen.limit(1, gen.repeat(choice_op(f"start-{f}", choices)))
    stop = gen.once({"f": f"stop-{f}", "value": None})
    schedule = gen.cycle(gen.seq(gen.sleep(interval_s), start, gen.sleep(interval_s), stop))
    return schedule, gen.once({"f": f"stop-{f}", "value": None})


def partition_package(shapes: Sequence[str], interval_s: float,
                      targets: Sequence[str] = ROLES) -> NemesisPackage:
    sched, final = _start_stop("partition", {"shape": shapes, "targets": targets}, interval_s)
    return NemesisPackage(nemesis=faults.PartitionNemesis(), generator=sched, final_generator=final)


def process_package(mode: str, interval_s: float, primaries_only: bool = False) -> NemesisPackage:
    """Kills or pauses on a random subset of a random role, or (`primaries_only`) on the DB's primaries."""
    choices = ({"targets": (PRIMARIES,), "subset": ("all",)} if primaries_only
               else {"targets": ("masters", "tservers"), "subset": ALL_SUBSETS})
    sched, final = _start_stop(mode, choices, interval_s)
    return NemesisPackage(nemesis=faults.ProcessNemesis(mode), generator=sched, final_generator=final)


def packet_package(interval_s: float) -> NemesisPackage:
    sched, final = _start_stop("packet", {"subset": ("one", "minority", "all")}, interval_s)
    return NemesisPackage(nemesis=faults.PacketNemesis(), generator=sched, final_generator=final)


def power_loss_package(subsets: Sequence[str], interval_s: float) -> NemesisPackage:
    """Power cuts on tablet servers every other interval, sized at random among `subsets` (the run's
    seed decides). `power-loss-tablet` always cuts every replica of one tablet: a cut of only a majority
    loses unsynced data only when the next leader is one of the cut replicas (it missed the `no-fsync`
    bug in 1 of 3 runs), a cut of all of them loses it every time."""
    sched, final = _start_stop("power-loss", {"targets": ("tservers",), "subset": subsets}, interval_s)
    return NemesisPackage(nemesis=power.PowerLossNemesis(), generator=sched, final_generator=final)


def clock_package(interval_s: float) -> NemesisPackage:
    sched, final = _start_stop("clock", {"kind": ("bump", "strobe"), "targets": ROLES,
                                         "subset": ("one", "minority", "majority")}, interval_s)
    return NemesisPackage(nemesis=faults.ClockNemesis(), generator=sched, final_generator=final)


def learner_partition_package(interval_s: float) -> NemesisPackage:
    """A NON_VOTER added to one tablet, then that tablet's leader and the learner cut off together from the
    other voters (nemesis/learner.py); stop heals and removes the learner."""
    sched, final = _start_stop("learner-partition", {}, interval_s)
    return NemesisPackage(nemesis=learner.LearnerPartitionNemesis(), generator=sched, final_generator=final)


def one_shot_package(nemesis: Nemesis, f: str, interval_s: float,
                     value: Callable[[gen.Context], Any] | None = None, times: int | None = None,
                     then: Sequence[Op] = (), repairs: Sequence[Op] = ()) -> NemesisPackage:
    """`f` every interval (`times` at most), each followed by the ops `then` (an operator's repair that
    belongs to the fault); `repairs` run once every fault is stopped and healed."""
    op = gen.limit(1, gen.repeat(lambda ctx: {"f": f, "value": value(ctx) if value else None}))
    sched = gen.cycle(gen.seq(gen.sleep(interval_s), op, *(gen.once(o) for o in then)), times=times)
    return NemesisPackage(nemesis=nemesis, generator=sched,
                          repair_generator=gen.seq(*(gen.once(o) for o in repairs)) if repairs else None)


def _membership_value(ctx: gen.Context) -> dict[str, str]:
    return {"action": ctx.rng.choice(["leader-step-down", "add-replica", "remove-replica", "move-replica"])}


_SHAPE_HELP = {
    "one": "one node cut off",
    "halves": "two halves",
    "majority": "a minority cut off",
    "ring": "each node hears a different majority",
    "bridge": "two halves joined by one node",
    "leader": "a leader cut off",
}


def _entries() -> list[Entry]:
    return [
        Entry("none", "no faults", lambda i: NemesisPackage(nemesis=Noop())),
        Entry("partition", "a random partition shape each time", lambda i: partition_package(SHAPES, i)),
        *(Entry(f"partition-{s}", _SHAPE_HELP[s], lambda i, s=s: partition_package([s], i)) for s in SHAPES),
        # the leader shape aimed at one kind of leader: a tablet's (stale reads) or the masters' (catalog)
        Entry("partition-tablet-leader", "a tablet leader cut off",
              lambda i: partition_package(["leader"], i, targets=("tservers",))),
        Entry("partition-master-leader", "the leader master cut off",
              lambda i: partition_package(["leader"], i, targets=("masters",))),
        Entry("partition-primary", "the DB's primary cut off from every other node",
              lambda i: partition_package(["leader"], i, targets=(PRIMARIES,))),
        Entry("kill", "SIGKILL, then restart", lambda i: process_package("kill", i)),
        Entry("pause", "SIGSTOP, then SIGCONT", lambda i: process_package("pause", i)),
        Entry("kill-primary", "the DB's primary SIGKILLed, then restarted",
              lambda i: process_package("kill", i, primaries_only=True)),
        Entry("pause-primary", "the DB's primary SIGSTOPped, then SIGCONTed",
              lambda i: process_package("pause", i, primaries_only=True)),
        Entry("packet", "delay, reordering, loss, duplication or a rate limit on some nodes' links",
              packet_package),
        Entry("clock", "clock bumps and strobes", clock_package),
        Entry("membership", "replica adds, removals, moves and leader step-downs",
              lambda i: one_shot_package(topology.MembershipNemesis(), "membership", i / 2, _membership_value)),
        # once a run: a second replacement would start while the first still settles (the op takes 10-35 s),
        # and the catalog checker's timed rules judge the quiet stretch after it
        Entry("master-replace", "a master replaced for good, once",
              lambda i: one_shot_package(topology.MasterReplaceNemesis(), "replace-master", i, times=1,
                                         repairs=topology.master_repairs("replace-master"))),
        # once a run: the catalog checker's timed rules judge the quiet stretch after it
        Entry("master-leader-return", "the masters' leadership handed away and back once, with no fault",
              lambda i: one_shot_package(topology.MasterLeaderReturnNemesis(), "master-leader-return", i,
                                         times=1)),
        # a master replaced while the old leader is cut off, then the cut moves (KUDU-1556's case, staged)
        Entry("master-replace-lagging", "a master replaced while the old leader lags, cut off",
              lambda i: one_shot_package(topology.MasterReplaceLaggingNemesis(), "replace-master-lagging", i,
                                         repairs=topology.master_repairs("replace-master-lagging"))),
        Entry("master-migrate", "one master to three, needs --masters 1",
              lambda i: one_shot_package(topology.MasterMigrateNemesis(), "migrate-masters", i, times=1)),
        Entry("tserver-replace", "a tablet server replaced for good",
              lambda i: one_shot_package(topology.TserverReplaceNemesis(), "replace-tserver", i)),
        Entry("majority-loss", "a tablet majority lost, recovered by unsafe_change_config",
              lambda i: one_shot_package(topology.MajorityLossNemesis(), "majority-loss", i, times=1,
                                         then=[topology.UNSAFE_CHANGE_CONFIG],
                                         repairs=[topology.UNSAFE_CHANGE_CONFIG])),
        Entry("power-loss", "power cuts on tablet servers", lambda i: power_loss_package(power.PACKAGE_SUBSETS, i)),
        Entry("power-loss-tablet", "power cuts on every replica of one tablet",
              lambda i: power_loss_package(("tablet-all",), i)),
        Entry("learner-partition", "a new learner cut off with its tablet's leader", learner_partition_package),
        Entry("leader-blip", "a tablet leader cut off until a new one is elected",
              lambda i: one_shot_package(blip.LeaderBlipNemesis(), "leader-blip", i)),
        # staged elections on one tablet (nemesis/elections.py)
        Entry("vote-crash", "a voter crashes after voting, asked again in the same term",
              lambda i: one_shot_package(elections.VoteCrashNemesis(), "vote-crash", i)),
        Entry("figure-8", "the Raft paper's Figure 8, staged",
              lambda i: one_shot_package(elections.Figure8Nemesis(), "figure-8", i)),
    ]


NEMESES: dict[str, Entry] = {e.name: e for e in _entries()}


def validate(names: Sequence[str]) -> list[str]:
    """Returns the names, or raises ValueError naming the unknown one and the valid choices."""
    if not names:
        raise ValueError(f"no nemesis given; valid: {', '.join(NEMESES)}")
    for n in names:
        if n not in NEMESES:
            raise ValueError(f"unknown nemesis {n!r}; valid: {', '.join(NEMESES)}")
    return list(names)


def get(name: str, interval_s: float = 10.0) -> NemesisPackage:
    """The package of nemesis `name`; an unknown name raises ValueError naming the valid ones."""
    validate([name])
    return NEMESES[name].factory(interval_s)


class Noop:
    fs: frozenset[str] = frozenset()

    def setup(self, test: Run) -> Noop:
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        return {**op, "type": "fail", "error": "no nemesis handles this op"}

    def heal(self, test: Run) -> None:
        pass


class Composite:
    """Routes each op to the nemesis whose `fs` has its `f` (and, for an op whose value names the fault it
    is `for`, that fault's `f` too: a repair shared by two nemeses goes to its own); heals every one, even
    if some fail."""

    def __init__(self, nemeses: Sequence[Any]) -> None:
        self.nemeses = list(nemeses)
        self.fs = frozenset().union(*(n.fs for n in self.nemeses)) if self.nemeses else frozenset()

    def setup(self, test: Run) -> Composite:
        self.nemeses = [n.setup(test) or n for n in self.nemeses]
        return self

    def invoke(self, test: Run, op: Op) -> Op:
        value = op.get("value")
        owner = value.get("for") if isinstance(value, dict) else None
        for n in self.nemeses:
            if op["f"] in n.fs and (owner is None or owner in n.fs):
                return n.invoke(test, op)
        return {**op, "type": "fail", "error": f"no nemesis handles {op['f']!r}"}

    def heal(self, test: Run) -> None:
        errors = []
        for n in self.nemeses:
            try:
                n.heal(test)
            except Exception as exc:
                errors.append(f"{type(n).__name__}: {exc}")
        if errors:
            raise RuntimeError("heal failed: " + "; ".join(errors))


def compose(names: Sequence[str], interval_s: float = 10.0) -> NemesisPackage:
    """One package from several, interleaved on a schedule (see the module docstring)."""
    validate(names)
    pkgs = [get(n, interval_s) for n in dict.fromkeys(names)]
    gens = []
    for i, p in enumerate(pkgs):
        if p.generator is None:
            continue
        offset = interval_s * i / max(1, len(pkgs))
        gens.append(gen.seq(gen.sleep(offset), p.generator) if offset else p.generator)
    finals = [p.final_generator for p in pkgs if p.final_generator is not None]
    repairs = [p.repair_generator for p in pkgs if p.repair_generator is not None]
    return NemesisPackage(
        nemesis=Composite([p.nemesis for p in pkgs]),
        generator=gen.any_of(*gens) if gens else None,
        final_generator=gen.seq(*finals) if finals else None,
        repair_generator=gen.seq(*repairs) if repairs else None,
    )
