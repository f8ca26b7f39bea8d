"""Compiled host planning over neighbour bitmasks: the bit helpers against Python's integers,
and EGSM's VertexGrouping (paper §5.3) on queries whose groups follow from the paper's rules."""

from __future__ import annotations

import numpy as np
import pytest

from common.graph.bitmasks import bits, lowest_bit, masks_of, neighbour_masks, popcount
from common.graph.generate import random_walk_query, rmat, uniform_labels
from common.graph.model import Graph
from egsm.order import plan, query_shape


def test_bit_helpers_agree_with_python_integers():
    rng = np.random.default_rng(3)
    for value in [1, 2, 3, 1 << 31, (1 << 32) - 1] + rng.integers(1, 1 << 40, size=50).tolist():
        assert popcount(value) == value.bit_count()
        assert lowest_bit(value) == (value & -value).bit_length() - 1
        assert bits(value) == [i for i in range(value.bit_length()) if value >> i & 1]
    assert popcount(0) == 0 and bits(0) == []


def test_neighbour_masks_are_the_csr_rows():
    query = random_walk_query(rmat(40, 160, seed=2, labels=uniform_labels(40, 3, seed=2)), 12, seed=5)
    rows = [query.neighbors_of(u).tolist() for u in range(query.num_vertices)]
    assert neighbour_masks(query.offsets, query.neighbors).tolist() == masks_of(rows).tolist()
    assert [bits(int(m)) for m in masks_of(rows)] == [sorted(r) for r in rows]


def _query(n, edges):
    return Graph.from_edges(n, [a for a, _ in edges], [b for _, b in edges])


@pytest.fixture
def clique_with_attachments():
    """K4 on 0-3; triangle 3-4-5 hanging at 3; leaf 6 at 0; path 7-8 at 1."""
    edges = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (3, 4), (4, 5), (5, 3), (0, 6), (1, 7), (7, 8)]
    query = _query(9, edges)
    rel = np.full((9, 9), 10, np.int64)
    rel[1, 7] = 5                    # tree {7, 8} hangs on a smaller relation than tree {6}
    rel[3, 2] = 1                    # bfs: 2 first, then 1 (through 2), then 0
    rel[2, 1] = 2
    return neighbour_masks(query.offsets, query.neighbors), rel


def test_vertex_grouping_follows_the_paper(clique_with_attachments):
    nbr, rel = clique_with_attachments
    shape = query_shape(nbr)
    assert bits(shape.core) == [0, 1, 2, 3, 4, 5]          # the 2-core
    assert bits(shape.dense) == [0, 1, 2, 3]               # the 4-clique's vertices
    assert shape.first_vertex == 3                         # largest degree in V_d
    assert plan(nbr, rel, "bfs-dfs").groups == [[3], [0, 1, 2], [4, 5], [7, 8], [6]]
    assert plan(nbr, rel, "dfs").groups == [[3], [0, 1, 2, 4, 5, 6, 7, 8]]
    assert plan(nbr, rel, "bfs").groups == [[3], [2], [1], [0], [4], [5], [7], [6], [8]]


def test_a_tree_query_groups_around_its_heaviest_edge():
    star = _query(5, [(0, 1), (0, 2), (0, 3), (1, 4)])      # no 2-core: the edge 0-1 (degrees 3 + 2)
    nbr = neighbour_masks(star.offsets, star.neighbors)
    shape = query_shape(nbr)
    assert bits(shape.core) == bits(shape.dense) == [0, 1] and shape.first_vertex == 0
    assert plan(nbr, np.ones((5, 5), np.int64)).groups == [[0], [1], [2], [3], [4]]


def test_an_unknown_mode_is_refused(clique_with_attachments):
    with pytest.raises(ValueError, match="mode"):
        plan(*clique_with_attachments, mode="sideways")
