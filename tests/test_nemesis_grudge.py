"""Partition shapes: properties of the grudges, checked on the who-hears-whom graph."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from faultline.nemesis import grudge as gr

SIZES = [3, 4, 5, 7, 8]


def names(n: int) -> list[str]:
    return [f"n{i}" for i in range(1, n + 1)]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", range(5))
def test_majorities_ring_every_node_sees_a_distinct_majority(n: int, seed: int) -> None:
    nodes = names(n)
    g = gr.majorities_ring(nodes, random.Random(seed))
    views = [frozenset(gr.view(g, nodes, a)) for a in nodes]
    assert all(len(v) == n // 2 + 1 for v in views)
    assert all(a in v for a, v in zip(nodes, views, strict=True))
    assert len(set(views)) == n  # no two nodes see the same majority
    assert all(a not in g[a] for a in nodes)


@pytest.mark.parametrize("n", SIZES)
def test_isolate_one_and_leader(n: int) -> None:
    nodes = names(n)
    g = gr.shape("leader", nodes, random.Random(1), leader="n2")
    assert gr.describe(g) == sorted([["n2"], sorted(set(nodes) - {"n2"})])
    g = gr.shape("one", nodes, random.Random(2))
    comps = gr.describe(g)
    assert sorted(len(c) for c in comps) == [1, n - 1]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("seed", range(4))
def test_halves_and_majority_are_two_symmetric_components(n: int, seed: int) -> None:
    nodes = names(n)
    h = gr.shape("halves", nodes, random.Random(seed))
    assert sorted(len(c) for c in gr.describe(h)) == [n // 2, n - n // 2]
    m = gr.shape("majority", nodes, random.Random(seed))
    small, big = sorted(gr.describe(m), key=len)
    assert len(big) > n / 2 and 1 <= len(small) < n / 2
    for g in (h, m):  # symmetric: a drops b exactly when b drops a
        assert all((b in g[a]) == (a in g[b]) for a in nodes for b in nodes)


@pytest.mark.parametrize("n", SIZES)
def test_bridge_one_node_hears_and_is_heard_by_all(n: int) -> None:
    nodes = names(n)
    g = gr.shape("bridge", nodes, random.Random(n))
    graph = gr.hears(g, nodes)
    bridges = [a for a in nodes if graph.in_degree(a) == n and graph.out_degree(a) == n]
    assert len(bridges) == 1
    others = nx.DiGraph(graph.subgraph(set(nodes) - set(bridges)))
    und = others.to_undirected(reciprocal=True)
    assert nx.number_connected_components(und) == 2  # without the bridge, two sides
    assert nx.is_strongly_connected(graph)  # through the bridge, everyone is reachable


def test_unknown_shape_names_the_choices() -> None:
    with pytest.raises(ValueError, match="ring"):
        gr.shape("triangle", names(3), random.Random(0))


def test_to_json_drops_empty_entries() -> None:
    g = gr.isolate_one(names(3), random.Random(0), node="n1")
    assert gr.to_json(g) == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
