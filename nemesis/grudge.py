"""Partition shapes as grudges, computed over the current nodes with networkx.

A grudge maps each node to the set of nodes whose traffic it drops (inbound), which is exactly what
`ClusterBackend.partition` applies. Shapes are described by who can hear whom: a directed graph with
an edge b -> a when a accepts b's traffic; the grudge is its complement. Shapes follow Jepsen's
partition vocabulary (isolate one node, random halves, majorities ring, bridge), plus majority/minority
and the current leader alone.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import networkx as nx

Grudge = dict[str, set[str]]

SHAPES: tuple[str, ...] = ("one", "halves", "majority", "ring", "bridge", "leader")


def from_components(nodes: Iterable[str], components: Sequence[Iterable[str]]) -> Grudge:
    """Nodes in different components drop each other's traffic; nodes in no component are untouched."""
    comps = [set(c) for c in components]
    everyone = set().union(*comps) if comps else set()
    grudge: Grudge = {n: set() for n in nodes}
    for comp in comps:
        for a in comp:
            grudge[a] = everyone - comp
    return grudge


def from_views(nodes: Iterable[str], views: dict[str, set[str]]) -> Grudge:
    """Each node hears only the nodes of its view (itself included)."""
    nodes = list(nodes)
    return {a: set(nodes) - views.get(a, set(nodes)) - {a} for a in nodes}


def hears(grudge: Grudge, nodes: Iterable[str]) -> nx.DiGraph[str]:
    """The directed graph b -> a when a accepts traffic from b (self-loops included)."""
    g: nx.DiGraph[str] = nx.DiGraph()
    nodes = list(nodes)
    g.add_nodes_from(nodes)
    for a in nodes:
        for b in nodes:
            if b not in grudge.get(a, set()):
                g.add_edge(b, a)
    return g


def view(grudge: Grudge, nodes: Iterable[str], a: str) -> set[str]:
    return set(hears(grudge, nodes).predecessors(a))


def isolate_one(nodes: Sequence[str], rng: random.Random, node: str | None = None) -> Grudge:
    victim = node if node is not None else rng.choice(list(nodes))
    return from_components(nodes, [[victim], [n for n in nodes if n != victim]])


def halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return from_components(nodes, [shuffled[:cut], shuffled[cut:]])


def majority_minority(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """A random minority (of a random size) cut off from the majority."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    size = rng.randint(1, max(1, (len(shuffled) - 1) // 2))
    return from_components(nodes, [shuffled[:size], shuffled[size:]])


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Nodes on a shuffled ring; each hears a window of a majority around itself, so every node sees a
    majority but no two see the same one (with 3 or more nodes)."""
    ring = list(nodes)
    rng.shuffle(ring)
    n = len(ring)
    if n < 3:
        return {a: set() for a in nodes}
    m = n // 2 + 1
    back = (m - 1) // 2
    # a window of m consecutive ring positions starting `back` steps behind each node: distinct starts,
    # so distinct windows, and each contains its own node
    views = {a: {ring[(i - back + j) % n] for j in range(m)} for i, a in enumerate(ring)}
    return from_views(nodes, views)


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot hear each other, and one node that both hear and that hears both."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    if len(shuffled) < 3:
        return halves(nodes, rng)
    b = shuffled[0]
    rest = shuffled[1:]
    cut = len(rest) // 2
    left, right = set(rest[:cut]), set(rest[cut:])
    grudge: Grudge = {n: set() for n in nodes}
    for a in left:
        grudge[a] = set(right)
    for a in right:
        grudge[a] = set(left)
    grudge[b] = set()
    return grudge


def shape(name: str, nodes: Sequence[str], rng: random.Random, leader: str | None = None) -> Grudge:
    """The grudge of shape `name` (one of SHAPES) over `nodes`. `leader` is needed for "leader"."""
    nodes = sorted(nodes)
    if name == "one":
        return isolate_one(nodes, rng)
    if name == "halves":
        return halves(nodes, rng)
    if name == "majority":
        return majority_minority(nodes, rng)
    if name == "ring":
        return majorities_ring(nodes, rng)
    if name == "bridge":
        return bridge(nodes, rng)
    if name == "leader":
        if leader is None or leader not in nodes:
            return isolate_one(nodes, rng)
        return isolate_one(nodes, rng, node=leader)
    raise ValueError(f"unknown partition shape {name!r}; valid: {', '.join(SHAPES)}")


def describe(grudge: Grudge) -> list[list[str]]:
    """Groups of nodes that hear each other both ways (for the history and the progress display)."""
    nodes = sorted(grudge)
    g = hears(grudge, nodes).to_undirected(reciprocal=True)
    return sorted(sorted(c) for c in nx.connected_components(g))


def to_json(grudge: Grudge) -> dict[str, list[str]]:
    return {a: sorted(bs) for a, bs in sorted(grudge.items()) if bs}
