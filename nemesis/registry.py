"""Nemeses by name, and their composition.

`NEMESES[name]` is an `Entry` (name, help, factory) and `get(name, db, interval_s)` builds its
`NemesisPackage` for a run of `db` (the DB object, which the caller chose: this layer names no DB): the same
shape as workloads.registry and checkers.registry, so the CLI lists and validates all three alike.
`compose(names, db, interval_s)` merges several: one composite nemesis that routes
each op to the package that handles its `f`; their schedules run side by side (each package cycles wait,
start, wait, stop, offset from the others so faults overlap and interleave); the final generator stops
every package's fault, `heal` heals them all, and the repair generator runs every package's repairs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from faultline import gen
from faultline.core import Op, Run
from faultline.db.api import (
    DB,
    FILE_CORRUPTION_KINDS,
    DataFiles,
    Kill,
    Leaders,
    Offers,
    Pause,
    Primaries,
)
from faultline.db.nodes import PRIMARIES
from faultline.nemesis import disk, faults
from faultline.nemesis.api import Build, Entry, Nemesis, NemesisPackage, OffersNemeses
from faultline.nemesis.base import choice_op
from faultline.nemesis.corruption import (
    FILE_GLOB,
    MODES,
    check_file_glob,
    declared_files,
    file_corrupt_package,
)
from faultline.nemesis.grudge import SHAPES

ALL_SUBSETS = ("one", "minority", "majority", "leaders")


def start_stop(f: str, choices: Mapping[str, Sequence[Any]], interval_s: float) -> tuple[gen.Gen, gen.Gen]:
    start = gen.limit(1, gen.repeat(choice_op(f"start-{f}", choices)))
    stop = gen.once({"f": f"stop-{f}", "value": None})
    schedule = gen.cycle(gen.seq(gen.sleep(interval_s), start, gen.sleep(interval_s), stop))
    return schedule, gen.once({"f": f"stop-{f}", "value": None})


def role_targets(roles: Sequence[str]) -> tuple[str, ...]:
    """What a fault aimed at a random role draws from: each of the DB's roles, or all its nodes."""
    return (*roles, "all")


def partition_package(shapes: Sequence[str], interval_s: float, targets: Sequence[str]) -> NemesisPackage:
    sched, final = start_stop("partition", {"shape": shapes, "targets": targets}, interval_s)
    return NemesisPackage(nemesis=faults.PartitionNemesis(), generator=sched, final_generator=final)


def process_package(mode: str, build: Build, primaries_only: bool = False) -> NemesisPackage:
    """Kills or pauses on a random subset of a random role of the DB's (of all its nodes when they are all
    alike), or (`primaries_only`) on the DB's primaries."""
    choices = (
        {"targets": (PRIMARIES,), "subset": ("all",)}
        if primaries_only
        else {"targets": build.roles or ("all",), "subset": ALL_SUBSETS}
    )
    interval_s = build.interval_s
    sched, final = start_stop(mode, choices, interval_s)
    return NemesisPackage(nemesis=faults.ProcessNemesis(mode), generator=sched, final_generator=final)


def packet_package(interval_s: float) -> NemesisPackage:
    sched, final = start_stop("packet", {"subset": ("one", "minority", "all")}, interval_s)
    return NemesisPackage(nemesis=faults.PacketNemesis(), generator=sched, final_generator=final)


def clock_package(build: Build) -> NemesisPackage:
    sched, final = start_stop(
        "clock",
        {
            "kind": ("bump", "strobe"),
            "targets": role_targets(build.roles),
            "subset": ("one", "minority", "majority"),
        },
        build.interval_s,
    )
    return NemesisPackage(nemesis=faults.ClockNemesis(), generator=sched, final_generator=final)


def one_shot_package(
    nemesis: Nemesis,
    f: str,
    interval_s: float,
    value: Callable[[gen.Context], Any] | None = None,
    times: int | None = None,
    then: Sequence[Op] = (),
    repairs: Sequence[Op] = (),
) -> NemesisPackage:
    """`f` every interval (`times` at most), each followed by the ops `then` (an operator's repair that
    belongs to the fault); `repairs` run once every fault is stopped and healed."""
    op = gen.limit(1, gen.repeat(lambda ctx: {"f": f, "value": value(ctx) if value else None}))
    sched = gen.cycle(gen.seq(gen.sleep(interval_s), op, *(gen.once(o) for o in then)), times=times)
    return NemesisPackage(
        nemesis=nemesis,
        generator=sched,
        repair_generator=gen.seq(*(gen.once(o) for o in repairs)) if repairs else None,
    )


_SHAPE_HELP = {
    "one": "one node cut off",
    "halves": "two halves",
    "majority": "a minority cut off",
    "ring": "each node hears a different majority",
    "bridge": "two halves joined by one node",
    "leader": "a leader cut off",
}


def _shape_package(shape: str) -> Callable[[Build], NemesisPackage]:
    """The factory of the package that partitions with one shape (bound here, not by the loop)."""
    return lambda b: partition_package([shape], b.interval_s, role_targets(b.roles))


_KIND_HELP = {
    "bitflip": "random bits flipped",
    "truncate": "the tail cut off",
    "zero": "a range zeroed",
    "rollback": "an older copy copied back",
}


def _file_package(kind: str) -> Callable[[Build], NemesisPackage]:
    """The factory of the package that damages files one way, the DB stopped around it (bound here)."""
    return lambda b: file_corrupt_package(
        f"file-{kind}", [kind], ["stopped"], ["one"], b.interval_s, role_targets(b.roles)
    )


# the file faults' option: the files to damage instead of the DB's own globs (nemesis/corruption.py)
_FILE_OPTIONS = {FILE_GLOB: check_file_glob}


def _network_and_process_entries() -> list[Entry]:
    """Partitions, kills, pauses, packet and clock faults."""
    return [
        Entry("none", "no faults", lambda b: NemesisPackage(nemesis=Noop())),
        Entry(
            "partition",
            "a random partition shape each time",
            lambda b: partition_package(SHAPES, b.interval_s, role_targets(b.roles)),
        ),
        *(Entry(f"partition-{s}", _SHAPE_HELP[s], _shape_package(s)) for s in SHAPES),
        Entry(
            "partition-primary",
            "the DB's primary cut off from every other node",
            lambda b: partition_package(["leader"], b.interval_s, targets=(PRIMARIES,)),
            needs=(Primaries,),
        ),
        Entry("kill", "SIGKILL, then restart", lambda b: process_package("kill", b), needs=(Kill,)),
        Entry("pause", "SIGSTOP, then SIGCONT", lambda b: process_package("pause", b), needs=(Pause,)),
        Entry(
            "kill-primary",
            "the DB's primary SIGKILLed, then restarted",
            lambda b: process_package("kill", b, primaries_only=True),
            needs=(Kill, Primaries),
        ),
        Entry(
            "pause-primary",
            "the DB's primary SIGSTOPped, then SIGCONTed",
            lambda b: process_package("pause", b, primaries_only=True),
            needs=(Pause, Primaries),
        ),
        Entry(
            "packet",
            "delay, reordering, loss, duplication or a rate limit on some nodes' links",
            lambda b: packet_package(b.interval_s),
        ),
        Entry("clock", "clock bumps and strobes", clock_package),
    ]


def _disk_entries() -> list[Entry]:
    """The file faults and the losses of what was never fsynced."""
    return [
        Entry(
            "file-corrupt",
            "a data file of one node or a minority damaged (any kind), with the DB running or stopped",
            lambda b: file_corrupt_package(
                "file-corrupt",
                FILE_CORRUPTION_KINDS,
                MODES,
                ("one", "minority"),
                b.interval_s,
                role_targets(b.roles),
            ),
            needs=(DataFiles, Kill),
            refuse=declared_files,
            options=_FILE_OPTIONS,
        ),
        *(
            Entry(
                f"file-{k}",
                f"{_KIND_HELP[k]} in a data file of one node, the DB stopped meanwhile",
                _file_package(k),
                needs=(DataFiles, Kill),
                refuse=declared_files,
                options=_FILE_OPTIONS,
            )
            for k in FILE_CORRUPTION_KINDS
        ),
        Entry(
            "lose-unfsynced",
            "one node, a minority, a majority or all killed at once, what they never "
            "fsynced dropped by the disk layer, then started again",
            lambda b: disk.lose_unfsynced_package(b.interval_s),
            needs=(DataFiles, Kill),
            disk_layer=True,
        ),
        Entry(
            "lose-unfsynced-all",
            "every node killed at once, what they never fsynced dropped, then started",
            lambda b: disk.lose_unfsynced_package(b.interval_s, ("all",)),
            needs=(DataFiles, Kill),
            disk_layer=True,
        ),
    ]


def _entries() -> list[Entry]:
    return [*_network_and_process_entries(), *_disk_entries()]


NEMESES: dict[str, Entry] = {e.name: e for e in _entries()}


# the generic faults beside each DB's own (OffersNemeses)
_OFFERS = Offers(NEMESES, lambda db: db.nemesis_entries() if isinstance(db, OffersNemeses) else ())
offered = _OFFERS.offered
entries_for = _OFFERS.entries_for
all_entries = _OFFERS.all_entries


def build_for(db: DB, interval_s: float) -> Build:
    """What a package is built for in a run of `db`: the interval, and the roles the DB's nodes fall into."""
    roles = tuple(db.target_roles) if isinstance(db, Leaders) else ()
    return Build(interval_s=interval_s, roles=roles)


# the faults every DB offers, by name, for a hint that a fault exists but belongs to another DB
Elsewhere = Callable[[], Mapping[str, Entry]]


def refusal(db: DB, name: str, elsewhere: Elsewhere | None = None) -> str | None:
    """Why a run of `db` cannot take nemesis `name` (None: it can): unknown, another DB's own fault (when
    `elsewhere` lists them), a capability the DB lacks (db/api.py), or a generic fault the DB declares it
    cannot take."""
    entry = entries_for(db).get(name)
    if entry is None:
        other = elsewhere().get(name) if elsewhere is not None else None
        if other is not None and other.db:
            return f"{name} is a fault of the {other.db} DB ({other.help})"
        return f"unknown nemesis {name!r}"
    missing = [cap.__name__ for cap in entry.needs if not isinstance(db, cap)]
    if missing:
        return (
            f"{name} needs the DB capability {', '.join(missing)} (db/api.py), which the {db.name} DB lacks"
        )
    why_not = entry.refuse(db) if entry.refuse is not None else None
    if why_not:
        return f"{name}: {why_not}"
    allowed = getattr(db, "nemeses", None)
    if name != "none" and entry.db is None and allowed is not None and name not in allowed:
        why = (getattr(db, "nemesis_notes", None) or {}).get(name)
        return f"the {db.name} DB does not support nemesis {name}" + (f": {why}" if why else "")
    return None


def disk_dirs(names: Sequence[str], db: DB) -> dict[str, list[str]]:
    """The data directories (role -> templates) that need the disk layer for a run of `db` with these
    nemeses: the DB's `data_dirs` when one of them needs the layer, else none (the run mounts nothing)."""
    entries = entries_for(db)
    if not any(entries[n].disk_layer for n in names if n in entries) or not isinstance(db, DataFiles):
        return {}
    return {role: list(dirs) for role, dirs in db.data_dirs.items()}


def supported(db: DB) -> list[str]:
    """The nemeses a run of `db` can take."""
    return [n for n in entries_for(db) if refusal(db, n) is None]


def validate(names: Sequence[str], db: DB, elsewhere: Elsewhere | None = None) -> list[str]:
    """Returns the names, or raises ValueError naming the one `db` cannot take and what it supports."""
    if not names:
        raise ValueError(f"no nemesis given; valid: {', '.join(supported(db))}")
    for n in names:
        why = refusal(db, n, elsewhere)
        if why:
            choices = "valid:" if why.startswith("unknown") else f"the {db.name} DB supports"
            raise ValueError(f"{why}; {choices} {', '.join(supported(db))}")
    return list(names)


def validate_opts(opts: Mapping[str, Any], names: Sequence[str], db: DB) -> dict[str, Any]:
    """Returns the nemesis options (`--nemesis-opt KEY=VALUE`), or raises ValueError naming the first one
    that none of the nemeses `names` takes, or whose value is wrong (each entry checks its own)."""
    entries = entries_for(db)
    taken = {k: check for n in names if n in entries for k, check in entries[n].options.items()}
    for key, value in opts.items():
        if key not in taken:
            takers = sorted(n for n, e in entries.items() if key in e.options)
            hint = f" (it is an option of {', '.join(takers)})" if takers else ""
            offered = ", ".join(sorted(taken)) or "none"
            raise ValueError(
                f"--nemesis-opt {key}: no nemesis of this run takes it{hint}; they take: {offered}"
            )
        why = taken[key](value)
        if why:
            raise ValueError(f"--nemesis-opt {key}: must be {why}")
    return dict(opts)


def get(name: str, db: DB, interval_s: float = 10.0) -> NemesisPackage:
    """The package of nemesis `name` for a run of `db`; a name it cannot take raises ValueError naming the
    valid ones."""
    validate([name], db)
    return entries_for(db)[name].factory(build_for(db, interval_s))


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


def compose(names: Sequence[str], db: DB, interval_s: float = 10.0) -> NemesisPackage:
    """One package from several, interleaved on a schedule (see the module docstring), for a run of `db`."""
    validate(names, db)
    pkgs = [get(n, db, interval_s) for n in dict.fromkeys(names)]
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
