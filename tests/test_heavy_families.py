"""The seeded slow-path query families of gMatch's heavy benchmark (experiments.harness.workloads
heavy_family): reproducible, inside their family, and each one cut out of the GitHub graph."""

from __future__ import annotations

import numpy as np
import pytest

from common.graph.model import Graph
from experiments.harness.workloads import (
    HEAVY_FAMILIES,
    _longest_cycle_at_least,
    check_set,
    cycle_length,
    heavy_family,
)
from gmatch.order import build_plan


@pytest.fixture(scope="module")
def github():
    return check_set("github", 0).data


def _edges(query: Graph):
    return {(int(a), int(b)) for a in range(query.num_vertices)
            for b in query.neighbors[query.offsets[a]:query.offsets[a + 1]] if a < b}


@pytest.mark.parametrize("family", list(HEAVY_FAMILIES))
def test_families_are_seeded_inside_their_bounds_and_cut_from_the_data(github, family):
    spec = HEAVY_FAMILIES[family]
    queries = heavy_family(github, family, 6)
    again = heavy_family(github, family, 6)
    assert [q.name for q in queries] == [f"{family}_{i}" for i in range(6)]
    assert [_edges(q) for q in queries] == [_edges(q) for q in again]
    assert [q.meta["seed"] for q in queries] != [q.meta["seed"] for q in heavy_family(github, family, 6, seed=7)]
    for query in queries:
        assert query.num_vertices == spec.num_vertices and query.is_connected()
        assert query.num_edges >= spec.min_edges
        if spec.max_edges is not None:
            assert query.num_edges <= spec.max_edges
        if family == "cyclic8":
            assert _longest_cycle_at_least(query, 5)
        if family == "pendant-cycle":
            assert 4 <= cycle_length(query) <= 6 and np.diff(query.offsets).min() == 1
        if family == "noleaf12":
            assert build_plan(query, defer_leaves=True).free_leaves == 0
        image = np.asarray(query.meta["data_vertices"])          # the embedding it was cut from
        assert (github.labels[image] == query.labels).all()
        for a, b in _edges(query):
            row = github.neighbors[github.offsets[image[a]]:github.offsets[image[a] + 1]]
            assert image[b] in row


def test_long_cycle_check_and_unknown_family(github):
    def graph(n, edges):
        return Graph.from_edges(n, [a for a, _ in edges], [b for _, b in edges], [0] * n)

    pentagon = graph(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)])
    assert _longest_cycle_at_least(pentagon, 5) and not _longest_cycle_at_least(pentagon, 6)
    bowtie = graph(5, [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2)])      # two triangles
    assert _longest_cycle_at_least(bowtie, 3) and not _longest_cycle_at_least(bowtie, 4)
    assert cycle_length(pentagon) == 5 and cycle_length(bowtie) == 0
    tadpole = graph(6, [(0, 1), (1, 2), (2, 3), (3, 0), (3, 4), (4, 5)])     # a square and a tail
    assert cycle_length(tadpole) == 4
    path = graph(4, [(0, 1), (1, 2), (2, 3)])
    assert cycle_length(path) == 0
    with pytest.raises(ValueError, match="unknown query family"):
        heavy_family(github, "sparse99", 1)
