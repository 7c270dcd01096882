"""The nemesis protocol, the package a nemesis comes in (the fault and its schedule), the registry's entry
for one, and the capability of a DB that offers faults of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from faultline.core import Op, Run

if TYPE_CHECKING:
    from faultline.gen import Gen


class Nemesis(Protocol):
    """A fault that is set up, invoked by ops and always healed."""

    @property
    def fs(self) -> frozenset[str]:
        """The op names (`f`) this nemesis handles (read-only: a class attribute, or a property)."""
        ...

    def setup(self, test: Run) -> Nemesis: ...

    def invoke(self, test: Run, op: Op) -> Op: ...

    def heal(self, test: Run) -> None: ...


@dataclass(frozen=True, kw_only=True)
class NemesisPackage:
    """A nemesis with the schedule that drives it during the main phase (None: it never acts), the ops
    that stop its fault before healing (None: nothing to stop), and the repairs an operator would make
    once every fault is stopped and healed (None: none). `heal` restores the network, processes, clocks,
    flags and crash points only; a repair of data is an op of its own, recorded with its reason, so the
    checkers see what needed repairing."""

    nemesis: Nemesis
    generator: Gen | None = None
    final_generator: Gen | None = None
    repair_generator: Gen | None = None


@dataclass(frozen=True)
class Build:
    """What a nemesis package is built for: the interval between a fault's start and stop (seconds), and the
    roles of the DB's nodes a fault may aim at beyond `all` (db.api.Leaders.target_roles, in the DB's order;
    empty for a DB whose nodes are all alike). Generic schedules draw their targets from these, so they never
    name one DB's roles."""

    interval_s: float
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Entry:
    """One nemesis: the name users type, a line for `--help`, what builds its package for a run (`Build`:
    the interval between a fault's start and stop, the DB's roles), the DB capabilities it needs (db/api.py protocols: a DB
    without one refuses it before anything starts), the DB that offers it (None: a generic fault), a
    further test of the DB (`refuse(db)`: why it cannot take the fault, None when it can), whether it
    needs the disk layer (cluster/disklayer.py), and the options it takes (`--nemesis-opt KEY=VALUE`: each
    name with a check of its value, which says why a value is wrong, None when it is right)."""

    name: str
    help: str
    factory: Callable[[Build], NemesisPackage]
    needs: tuple[type, ...] = ()
    db: str | None = None
    refuse: Callable[[Any], str | None] | None = None
    # the fault needs the disk layer under the DB's data directories (mounted for such runs only)
    disk_layer: bool = False
    options: Mapping[str, Callable[[Any], str | None]] = field(default_factory=dict)


@runtime_checkable
class OffersNemeses(Protocol):
    """A DB with faults of its own (the store: master replacement, elections, power loss ...), which the
    registry lists beside the generic ones for runs of that DB."""

    def nemesis_entries(self) -> Sequence[Entry]: ...
