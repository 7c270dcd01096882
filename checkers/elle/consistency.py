"""Consistency models: which anomalies each forbids, which models imply which, and the verdict boundary.

The hierarchy follows Adya (PL-1, PL-2, PL-2.99, PL-2+, PL-SI, PL-3, PL-SS), Daudjee & Salem (strong
session variants) and the relations collected on jepsen.io/consistency, restricted to the models these
checkers can decide. Each model with a `cycle` subgraph is decided exactly by whether that subgraph of
the dependency graph has a cycle (linear time); the specific cycles found explain why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from faultline.checkers.elle.anomalies import implied, implying
from faultline.checkers.elle.graph import PR, RT, RW, RWP, RWT, WR, WW, WWP, WWT


@dataclass(frozen=True)
class Model:
    """A consistency model: the models it implies, the anomalies it forbids, its cycle test."""

    name: str
    weaker: tuple[str, ...]
    forbids: tuple[str, ...]
    cycle: int = 0  # edge bits of the subgraph that must be acyclic (0: none)
    nonadjacent: bool = False  # the cycle test is the G-nonadjacent product graph over `cycle` plus rw

    @property
    def rw(self) -> int:
        """The anti-dependency relations this model's cycle test counts as rw."""
        return RW | (self.cycle & (RWP | RWT))


_D = WWP | RWP | WWT | RWT  # register version orders known from process or realtime order
MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model("read-uncommitted", (), ("G0", "duplicate-elements", "cyclic-versions"), WW),
        Model("read-committed", ("read-uncommitted",), ("G1",), WW | WR),
        Model("consistent-view", ("read-committed",), ("G1", "G-single")),
        Model("repeatable-read", ("read-committed",), ("G1", "G2-item", "lost-update"), WW | WR | RW),
        Model(
            "snapshot-isolation",
            ("consistent-view",),
            ("internal", "G1", "G-nonadjacent", "lost-update"),
            WW | WR,
            True,
        ),
        Model(
            "serializable", ("repeatable-read", "snapshot-isolation"), ("internal", "G1", "G2"), WW | WR | RW
        ),
        Model("strong-session-read-uncommitted", ("read-uncommitted",), ("G0-process",), WW | PR),
        Model(
            "strong-session-read-committed",
            ("read-committed", "strong-session-read-uncommitted"),
            ("G1c-process",),
            WW | WR | PR,
        ),
        Model(
            "strong-read-uncommitted", ("strong-session-read-uncommitted",), ("G0-realtime",), WW | PR | RT
        ),
        Model(
            "strong-read-committed",
            ("strong-session-read-committed", "strong-read-uncommitted"),
            ("G1c-realtime",),
            WW | WR | PR | RT,
        ),
        Model(
            "strong-session-snapshot-isolation",
            ("snapshot-isolation", "strong-session-read-committed"),
            ("G1-process", "G-nonadjacent-process"),
            WW | WR | PR,
            True,
        ),
        Model(
            "strong-snapshot-isolation",
            ("strong-session-snapshot-isolation", "strong-read-committed"),
            ("G1-realtime", "G-nonadjacent-realtime"),
            WW | WR | PR | RT,
            True,
        ),
        Model(
            "strong-session-serializable",
            ("serializable", "strong-session-snapshot-isolation"),
            ("G1-process", "G2-process"),
            WW | WR | RW | PR | WWP | RWP,
        ),
        Model(
            "strict-serializable",
            ("strong-session-serializable", "strong-snapshot-isolation"),
            ("G1-realtime", "G2-realtime"),
            WW | WR | RW | PR | RT | _D,
        ),
    )
}

ALIASES = {
    "PL-1": "read-uncommitted",
    "PL-2": "read-committed",
    "PL-2+": "consistent-view",
    "PL-2.99": "repeatable-read",
    "PL-SI": "snapshot-isolation",
    "PL-3": "serializable",
    "conflict-serializable": "serializable",
    "PL-SS": "strict-serializable",
    "strong-serializable": "strict-serializable",
    "strict-1SR": "strict-serializable",
}
DEFAULT = ("strict-serializable",)


def canonical(names: Iterable[str]) -> list[str]:
    """Model names with aliases resolved; an unknown name raises ValueError naming the known ones."""
    out = []
    for raw in names:
        name = ALIASES.get(raw.strip().lstrip(":"), raw.strip().lstrip(":"))
        if name not in MODELS:
            raise ValueError(f"unknown consistency model {raw!r}; known: {', '.join(MODELS)}")
        out.append(name)
    return out


def weaker_closure(names: Iterable[str]) -> set[str]:
    """The models `names` and every model they imply."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(MODELS[m].weaker)
    return seen


def cycle_anomaly(model: str) -> str:
    """The anomaly reported when a model's cycle test fails but no specific cycle was named."""
    return f"{model}-cycle-exists"


def forbidden(claimed: Iterable[str]) -> set[str]:
    """Every anomaly whose presence contradicts one of the claimed models."""
    ms = weaker_closure(claimed)
    direct = {a for m in ms for a in MODELS[m].forbids}
    return implying(direct) | {cycle_anomaly(m) for m in ms if MODELS[m].cycle}


def impossible(anomalies: Iterable[str]) -> set[str]:
    """The models that cannot hold given `anomalies` (and everything stronger than them)."""
    found = set(anomalies)
    ims = implied(found)
    bad = {m.name for m in MODELS.values() if ims & set(m.forbids) or cycle_anomaly(m.name) in found}
    return {m for m in MODELS if weaker_closure([m]) & bad}


def boundary(anomalies: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the weakest models ruled out, the other models ruled out), like Elle's `:not` and `:also-not`."""
    ims = impossible(anomalies)
    weakest = sorted(m for m in ims if not (weaker_closure(MODELS[m].weaker) & ims))
    return weakest, sorted(ims - set(weakest))


def needs(claimed: Iterable[str]) -> tuple[bool, bool]:
    """(process edges needed?, realtime edges needed?) to decide the claimed models."""
    ms = weaker_closure(claimed)
    rt = any(MODELS[m].cycle & RT for m in ms)
    pr = rt or any(MODELS[m].cycle & PR for m in ms)
    return pr, rt


def cycle_tests(edges_present: int) -> list[Model]:
    """The models whose cycle test can say something with the edges present, weakest first."""
    order = list(MODELS)
    return [
        MODELS[m] for m in order if MODELS[m].cycle and not (MODELS[m].cycle & ~edges_present & (PR | RT))
    ]
