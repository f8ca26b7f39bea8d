"""The Graph type: construction from edges, CSR invariants, derived arrays, validation errors."""

import numpy as np
import pytest

from common.errors import InvalidGraphError
from common.graph.model import Graph, gather_rows


def test_from_edges_dedups_drops_self_loops_and_sorts():
    g = Graph.from_edges(4, [2, 0, 1, 1, 3, 2, 2], [0, 1, 0, 2, 3, 1, 3], labels=[0, 1, 1, 2])
    assert g.num_vertices == 4 and g.num_edges == 4          # (0,1) twice, (3,3) a loop
    assert g.neighbors_of(2).tolist() == [0, 1, 3]
    assert g.neighbors_of(0).tolist() == [1, 2]
    assert g.offsets.dtype == np.int64 and g.neighbors.dtype == np.int32 and g.labels.dtype == np.int32
    src, dst, elab = g.edges()
    assert sorted(zip(src.tolist(), dst.tolist())) == [(0, 1), (0, 2), (1, 2), (2, 3)]
    assert elab is None


def test_derived_arrays_match_a_direct_computation():
    rng = np.random.default_rng(3)
    n = 50
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)
    labels = rng.integers(0, 6, n)
    g = Graph.from_edges(n, src, dst, labels=labels)
    adjacency = [set() for _ in range(n)]
    for a, b in zip(src, dst):
        if a != b:
            adjacency[a].add(b)
            adjacency[b].add(a)
    assert g.degrees.tolist() == [len(s) for s in adjacency]
    assert g.max_degree == max(len(s) for s in adjacency)
    assert g.num_edges == sum(len(s) for s in adjacency) // 2
    assert g.label_frequencies.tolist() == np.bincount(labels, minlength=6).tolist()
    for label in range(6):
        block = g.vertices_by_label[g.label_offsets[label]:g.label_offsets[label + 1]]
        assert block.tolist() == np.flatnonzero(labels == label).tolist()
    for v in range(n):
        assert g.neighbors_of(v).tolist() == sorted(adjacency[v])
    assert g.average_degree == pytest.approx(2 * g.num_edges / n)


def test_edge_labels_follow_their_edges_in_both_directions():
    g = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], edge_labels=[5, 6, 7])
    lookup = {(int(u), int(v)): int(lab) for u in range(3)
              for v, lab in zip(g.neighbors_of(u), g.edge_labels[g.offsets[u]:g.offsets[u + 1]])}
    assert lookup == {(0, 1): 5, (1, 0): 5, (1, 2): 6, (2, 1): 6, (2, 0): 7, (0, 2): 7}


def test_all_zero_edge_labels_mean_unlabelled():
    g = Graph.from_edges(3, [0, 1], [1, 2], edge_labels=[0, 0])
    assert g.edge_labels is None and not g.has_edge_labels


def test_conflicting_duplicate_edge_labels_are_rejected():
    with pytest.raises(InvalidGraphError, match="given twice with labels 1 and 2"):
        Graph.from_edges(3, [0, 1], [1, 0], edge_labels=[1, 2])


def test_directed_graph_keeps_direction_and_builds_in_csr():
    g = Graph.from_edges(4, [0, 0, 2, 3, 0], [1, 2, 1, 0, 1], edge_labels=[1, 2, 3, 4, 1], directed=True)
    assert g.num_edges == 4
    assert g.neighbors_of(0).tolist() == [1, 2] and g.neighbors_of(1).tolist() == []
    in_off, in_nbr, in_lab = g.in_csr
    ins = {v: in_nbr[in_off[v]:in_off[v + 1]].tolist() for v in range(4)}
    assert ins == {0: [3], 1: [0, 2], 2: [0], 3: []}
    assert in_lab[in_off[1]:in_off[2]].tolist() == [1, 3]
    assert g.is_connected()
    assert not Graph.from_edges(4, [0], [1], directed=True).is_connected()


def test_is_connected():
    assert Graph.from_edges(4, [0, 1, 2], [1, 2, 3]).is_connected()
    assert not Graph.from_edges(4, [0, 2], [1, 3]).is_connected()
    assert Graph.from_edges(1, [], []).is_connected()


@pytest.mark.parametrize("offsets, neighbors, labels, problem", [
    ([0, 1, 2], [1, 0], [0], "offsets has 3 entries for 1 vertices"),
    ([0, 1, 3], [1, 0], [0, 0], "offsets must run from 0"),
    ([0, 2, 1, 2], [1, 2], [0, 0, 0], "offsets decrease"),
    ([0, 1, 2], [1, 5], [0, 0], "outside 0..1"),
    ([0, 1, 2], [0, 1], [0, 0], "self-loop"),
    ([0, 2, 3, 4], [2, 1, 0, 0], [0, 0, 0], "not strictly increasing"),
    ([0, 1, 1], [1], [0, 0], "not symmetric"),
    ([0, 1, 2], [1, 0], [0, -1], "vertex labels must be non-negative"),
    ([0, 1, 2], [1, 0], [0, 1 << 24], "vertex labels must be at most 16,777,215"),
    ([0.0, 1.0, 2.0], [1, 0], [0, 0], "must hold integers"),
])
def test_invalid_csr_is_rejected_with_the_problem_named(offsets, neighbors, labels, problem):
    with pytest.raises(InvalidGraphError, match=problem):
        Graph(np.array(offsets), np.array(neighbors), np.array(labels))


def test_from_edges_rejects_out_of_range_endpoints_and_bad_label_counts():
    with pytest.raises(InvalidGraphError, match=r"edge 1 \(1, 3\) has an endpoint outside 0..2"):
        Graph.from_edges(3, [0, 1], [1, 3])
    with pytest.raises(InvalidGraphError, match="labels has 2 entries for 3 vertices"):
        Graph.from_edges(3, [0], [1], labels=[0, 1])


def test_arrays_are_read_only():
    g = Graph.from_edges(3, [0, 1], [1, 2])
    with pytest.raises(ValueError):
        g.neighbors[0] = 2


def test_gather_rows_concatenates_csr_rows():
    g = Graph.from_edges(5, [0, 0, 1, 3], [1, 2, 4, 4])
    rows = np.array([4, 0, 2])
    expected = np.concatenate([g.neighbors_of(int(r)) for r in rows])
    assert gather_rows(g.offsets, g.neighbors, rows).tolist() == expected.tolist()


@pytest.mark.parametrize("kwargs, problem", [
    ({"labels": [-1, 0]}, "vertex labels must be non-negative"),
    ({"labels": [0, 1 << 30]}, "renumber the labels"),
    ({"edge_labels": [-3]}, "edge labels must be non-negative"),
    ({"edge_labels": [2**32 + 1]}, "edge_labels does not fit in int32"),
    ({"edge_labels": [1 << 24]}, "edge labels must be at most"),
])
def test_from_edges_rejects_labels_out_of_range(kwargs, problem):
    with pytest.raises(InvalidGraphError, match=problem):
        Graph.from_edges(2, [0], [1], **kwargs)


@pytest.mark.parametrize("directed", [False, True])
def test_is_connected_agrees_with_networkx_on_both_sides_of_the_small_graph_path(directed):
    """Up to 64 vertices a bitmask BFS answers, above it the vectorised one: both against networkx."""
    import networkx as nx  # in the test extra

    rng = np.random.default_rng(7)
    for n in [2, 3, 5, 17, 40, 63, 64, 65, 90, 130] * 12:
        m = int(rng.integers(0, 2 * n))
        src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
        keep = src != dst
        g = Graph.from_edges(n, src[keep], dst[keep], directed=directed)
        oracle = nx.DiGraph() if directed else nx.Graph()
        oracle.add_nodes_from(range(n))
        oracle.add_edges_from(zip(src[keep].tolist(), dst[keep].tolist()))
        expected = nx.is_weakly_connected(oracle) if directed else nx.is_connected(oracle)
        assert g.is_connected() == expected, (n, m, directed)
