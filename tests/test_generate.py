"""Workload generators (common/graph/generate.py): determinism, R-MAT, labels, queries, patterns, query sets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from _paths import DATA
from common.graph.generate import (
    DENSE_AVERAGE_DEGREE,
    PATTERNS,
    QuerySet,
    classify_density,
    gsi_query,
    pattern,
    power_law_labels,
    query_set,
    random_walk_query,
    relabel,
    rmat,
    stwig_query,
    uniform_labels,
)
from common.graph.io import load_graph
from common.graph.model import Graph


def edge_set(graph: Graph) -> set[tuple[int, int]]:
    src, dst, _ = graph.edges()
    return set(zip(src.tolist(), dst.tolist()))


@pytest.fixture(scope="module")
def data() -> Graph:
    return rmat(2000, 12000, seed=11, labels=6)


# ----------------------------------------------------------------------------------- R-MAT
def test_rmat_same_seed_same_graph_and_different_seed_different_graph():
    g1 = rmat(1000, 5000, seed=3, labels=4)
    g2 = rmat(1000, 5000, seed=3, labels=4)
    g3 = rmat(1000, 5000, seed=4, labels=4)
    assert g1.same_structure(g2) and g1.meta == g2.meta
    assert not np.array_equal(g1.neighbors, g3.neighbors)
    assert not np.array_equal(g1.labels, g3.labels)


@pytest.mark.parametrize("n, m", [(1024, 8000), (1000, 8000), (777, 3000)])
def test_rmat_exact_edge_count_without_loops_or_duplicates(n, m):
    g = rmat(n, m, seed=5)
    src, dst, _ = g.edges()
    assert g.num_vertices == n and g.num_edges == m == src.size
    assert np.all(src < dst)  # no self-loops, each undirected edge once
    assert np.unique(src.astype(np.int64) * n + dst).size == m
    assert g.neighbors.max() < n
    assert g.meta["num_edges_generated"] == m and g.meta["scale"] == math.ceil(math.log2(n))


def test_rmat_meta_records_every_parameter():
    g = rmat(500, 1500, 0.4, 0.2, 0.2, 0.2, seed=9, name="stand-in")
    assert g.name == "stand-in"
    for key, value in {"generator": "rmat", "num_vertices": 500, "num_edges": 1500, "a": 0.4, "b": 0.2,
                       "c": 0.2, "d": 0.2, "seed": 9, "out_of_range_ids": "rejected"}.items():
        assert g.meta[key] == value
    assert g.meta["candidates_drawn"] >= 1500


def test_rmat_complete_graph_is_reached_and_a_short_budget_says_so():
    full = rmat(8, 28, seed=1)
    assert full.num_edges == 28 and np.all(full.degrees == 7)
    short = rmat(8, 28, seed=1, max_rounds=1)
    assert short.num_edges == short.meta["num_edges_generated"] < short.meta["num_edges"] == 28


def test_rmat_is_skewed_where_uniform_quadrants_are_not():
    skewed = rmat(4096, 32768, seed=2)
    flat = rmat(4096, 32768, 0.25, 0.25, 0.25, 0.25, seed=2)
    assert skewed.max_degree > 10 * skewed.average_degree
    assert flat.max_degree < 3 * flat.average_degree
    # Vertex 0 sits in the a-quadrant at every level: it is the hub.
    assert skewed.degrees[0] == skewed.max_degree


def test_rmat_rejects_bad_input():
    with pytest.raises(ValueError, match="sum to 1"):
        rmat(100, 200, 0.5, 0.2, 0.2, 0.2, seed=1)
    with pytest.raises(ValueError, match=">= 0"):
        rmat(100, 200, 1.2, -0.2, 0.0, 0.0, seed=1)
    with pytest.raises(ValueError, match="num_edges"):
        rmat(4, 7, seed=1)
    with pytest.raises(ValueError, match="seed"):
        rmat(100, 200, seed=-1)
    with pytest.raises(ValueError, match="seed"):
        rmat(100, 200, seed=1.5)


# ----------------------------------------------------------------------------------- labels
def chi_square(observed: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * observed.sum()
    return float(((observed - expected) ** 2 / expected).sum())


def test_uniform_labels_fit_the_uniform_distribution():
    labels = uniform_labels(40000, 8, seed=1)
    assert labels.dtype == np.int32 and labels.min() == 0 and labels.max() == 7
    counts = np.bincount(labels, minlength=8)
    assert chi_square(counts, np.full(8, 1 / 8)) < 24.3  # chi-square 99.9% quantile, 7 dof
    assert np.array_equal(labels, uniform_labels(40000, 8, seed=1))
    assert not np.array_equal(labels, uniform_labels(40000, 8, seed=2))


def test_power_law_labels_follow_zipf_and_not_uniform():
    n, num_labels, s = 40000, 8, 1.0
    labels = power_law_labels(n, num_labels, s, seed=4)
    counts = np.bincount(labels, minlength=num_labels)
    zipf = np.arange(1, num_labels + 1, dtype=float) ** -s
    zipf /= zipf.sum()
    assert chi_square(counts, zipf) < 24.3
    assert chi_square(counts, np.full(num_labels, 1 / num_labels)) > 1000
    assert counts[0] / n > 2.5 / num_labels  # label 0 is about 0.37 of the vertices, uniform 0.125
    assert np.all(np.diff(counts) < 0)
    flat = np.bincount(power_law_labels(n, num_labels, 0.0, seed=4), minlength=num_labels)
    assert chi_square(flat, np.full(num_labels, 1 / num_labels)) < 24.3


def test_label_generators_reject_bad_input():
    with pytest.raises(ValueError):
        uniform_labels(10, 0, seed=1)
    with pytest.raises(ValueError, match="exponent"):
        power_law_labels(10, 4, -1.0, seed=1)


def test_relabel_returns_a_new_graph_with_recorded_label_parameters():
    g = rmat(300, 900, seed=7)
    labels = power_law_labels(300, 5, 1.5, seed=8)
    params = {"generator": "power_law", "num_labels": 5, "exponent": 1.5, "seed": 8}
    h = relabel(g, labels, params=params)
    assert np.array_equal(h.labels, labels) and not g.labels.any()
    assert np.array_equal(h.neighbors, g.neighbors) and h.name == g.name
    assert h.meta["labels"] == params and g.meta["labels"] == {"generator": "none"}
    assert h.meta["a"] == g.meta["a"]
    # rmat(labels=L) draws the same labels as relabelling with uniform_labels under the same seed.
    assert rmat(300, 900, seed=7, labels=5).same_structure(relabel(g, uniform_labels(300, 5, seed=7)))
    with pytest.raises(ValueError, match="shape"):
        relabel(g, labels[:-1])


# ----------------------------------------------------------------------------------- queries
def check_embedding(query: Graph, data: Graph) -> list[int]:
    """The query's recorded data vertices map it injectively and label-preservingly into data."""
    mapped = query.meta["data_vertices"]
    assert len(mapped) == len(set(mapped)) == query.num_vertices
    assert np.array_equal(query.labels, data.labels[mapped])
    for i, j in edge_set(query):
        assert data.has_edge(mapped[i], mapped[j])
    return mapped


def induced_edges(data: Graph, mapped: list[int]) -> set[tuple[int, int]]:
    return {(i, j) for i, j in itertools.combinations(range(len(mapped)), 2)
            if data.has_edge(mapped[i], mapped[j])}


def check_visit_order(query: Graph):
    """Vertex i > 0 was reached from an earlier vertex, so it has a neighbour j < i."""
    for i in range(1, query.num_vertices):
        assert query.neighbors_of(i)[0] < i


@pytest.mark.parametrize("strategy", ["walk", "expand"])
def test_induced_query_is_the_induced_subgraph_of_its_walk(data, strategy):
    for seed in range(25):
        q = random_walk_query(data, 10, seed=seed, strategy=strategy)
        assert q.num_vertices == 10 and q.is_connected()
        mapped = check_embedding(q, data)
        assert edge_set(q) == induced_edges(data, mapped)
        check_visit_order(q)
        assert q.meta["generator"] == "random_walk" and q.meta["seed"] == seed
        assert q.meta["induced"] and q.meta["strategy"] == strategy and q.meta["num_edges"] == q.num_edges


def test_walk_query_keeps_only_walked_edges(data):
    fewer = 0
    for seed in range(25):
        q = random_walk_query(data, 10, seed=seed, induced=False)
        assert q.is_connected() and q.num_edges >= 9
        mapped = check_embedding(q, data)
        induced = induced_edges(data, mapped)
        assert edge_set(q) <= induced
        fewer += len(edge_set(q)) < len(induced)
        check_visit_order(q)
        # Same seed, same walk: the induced query is cut from the same vertices.
        assert random_walk_query(data, 10, seed=seed).meta["data_vertices"] == mapped
    assert fewer > 0


def test_queries_are_deterministic(data):
    a = random_walk_query(data, 8, seed=21)
    assert a.same_structure(random_walk_query(data, 8, seed=21))
    others = [random_walk_query(data, 8, seed=s).meta["data_vertices"] for s in range(22, 27)]
    assert all(o != a.meta["data_vertices"] for o in others)


def test_queries_copy_edge_labels():
    base = rmat(300, 1500, seed=2, labels=3)
    src, dst, _ = base.edges()
    elab = (src + dst) % 4
    data = Graph.from_edges(base.num_vertices, src, dst, base.labels, elab)
    for q in (random_walk_query(data, 7, seed=1), random_walk_query(data, 7, seed=1, induced=False),
              gsi_query(data, 7, 8, seed=1)):
        mapped = q.meta["data_vertices"]
        qs, qd, ql = q.edges()
        assert ql is not None and qs.size == q.num_edges
        assert np.array_equal(ql, (np.asarray(mapped)[qs] + np.asarray(mapped)[qd]) % 4)


def test_walk_that_cannot_reach_k_vertices_raises():
    triangles = np.arange(30).reshape(10, 3)
    g = Graph.from_edges(30, triangles.ravel(), np.roll(triangles, 1, axis=1).ravel())
    assert random_walk_query(g, 3, seed=0).num_edges == 3
    with pytest.raises(ValueError, match="no connected 4-vertex query"):
        random_walk_query(g, 4, seed=0, max_tries=20)
    with pytest.raises(ValueError, match="num_vertices"):
        random_walk_query(g, 31, seed=0)
    with pytest.raises(ValueError, match="no edges"):
        random_walk_query(Graph.from_edges(5, [], []), 2, seed=0)
    directed = Graph.from_edges(3, [0, 1], [1, 2], directed=True)
    with pytest.raises(ValueError, match="undirected"):
        random_walk_query(directed, 2, seed=0)


def test_walk_restarts_outside_a_small_component():
    # Vertices 0-1 form a 2-vertex component; 2..9 a path. Some starts land in the small one.
    g = Graph.from_edges(10, [0, *range(2, 9)], [1, *range(3, 10)])
    tries = [random_walk_query(g, 5, seed=s).meta["tries"] for s in range(20)]
    assert max(tries) > 1
    for s in range(20):
        assert min(random_walk_query(g, 5, seed=s).meta["data_vertices"]) >= 2


def test_gsi_query_hits_its_edge_target(data):
    for seed in range(15):
        for target in (9, 12, 16):
            q = gsi_query(data, 10, target, seed=seed)
            mapped = check_embedding(q, data)
            assert q.is_connected()
            check_visit_order(q)
            available = len(induced_edges(data, mapped))
            assert q.num_edges == min(target, available)
            assert q.meta["edge_target_met"] == (available >= target)
            assert q.meta["num_edges_target"] == target


def test_gsi_query_on_a_tree_runs_out_of_edges():
    star = Graph.from_edges(20, np.zeros(19, dtype=int), np.arange(1, 20))
    q = gsi_query(star, 6, 10, seed=1)
    assert q.num_edges == 5 and q.is_connected() and not q.meta["edge_target_met"]
    with pytest.raises(ValueError, match="needs >= 5 edges"):
        gsi_query(star, 6, 4, seed=1)


def test_stwig_queries_have_n_vertices_and_2n_edges():
    for n in range(5, 11):
        for seed in range(5):
            q = stwig_query(n, num_labels=4, seed=seed)
            assert q.num_vertices == n and q.num_edges == min(2 * n, n * (n - 1) // 2)
            assert q.is_connected() and q.labels.max() < 4
            check_visit_order(q)
    assert np.all(stwig_query(5, num_labels=2, seed=1).degrees == 4)  # N = 5 with 10 edges is K5
    assert stwig_query(12, num_labels=1, seed=3, extra_edges_factor=1).num_edges == 12


def test_stwig_queries_are_deterministic_and_keep_their_shape_across_label_counts():
    a = stwig_query(9, num_labels=16, seed=4)
    assert a.same_structure(stwig_query(9, num_labels=16, seed=4))
    assert not np.array_equal(a.neighbors, stwig_query(9, num_labels=16, seed=5).neighbors)
    b = stwig_query(9, num_labels=2, seed=4)
    assert np.array_equal(a.neighbors, b.neighbors) and b.labels.max() < 2
    assert a.meta == {"generator": "stwig", "num_vertices": 9, "num_labels": 16, "extra_edges_factor": 2,
                      "seed": 4, "num_edges_target": 18, "num_edges": 18}


# ----------------------------------------------------------------------------------- query sets
@pytest.mark.parametrize("method, kw", [("induced", {}), ("walk", {}), ("gsi", {"num_edges": 14}),
                                        ("stwig", {})])
def test_query_set_builds_count_connected_queries(data, method, kw):
    qs = query_set(data, 12, 8, seed=6, method=method, **kw)
    assert len(qs) == 12 and qs.params["method"] == method and qs.params["seed"] == 6
    seeds = qs.params["query_seeds"]
    assert len(set(seeds)) == 12 and [q.meta["seed"] for q in qs] == seeds
    assert len({q.name for q in qs}) == 12
    for q in qs:
        assert q.num_vertices == 8 and q.is_connected()
        if method != "stwig":
            check_embedding(q, data)
    again = query_set(data, 12, 8, seed=6, method=method, **kw)
    assert all(a.same_structure(b) for a, b in zip(qs, again))
    if method == "stwig":
        assert qs.params["num_labels"] == data.num_labels


def test_query_set_rejects_unknown_methods(data):
    with pytest.raises(ValueError, match="method"):
        query_set(data, 3, 5, seed=1, method="bfs")
    with pytest.raises(ValueError, match="num_labels"):
        query_set(None, 3, 5, seed=1, method="stwig")
    with pytest.raises(ValueError, match="data is None"):
        query_set(None, 3, 5, seed=1, method="induced")
    assert len(query_set(None, 3, 5, seed=1, method="stwig", num_labels=3)) == 3


@pytest.mark.parametrize("edge_labels", [False, True])
def test_query_set_save_load_round_trip(data, tmp_path, edge_labels):
    if edge_labels:
        src, dst, _ = data.edges()
        data = Graph.from_edges(data.num_vertices, src, dst, data.labels, (src * dst) % 3, name="elab")
    qs = query_set(data, 6, 7, seed=2, method="gsi", num_edges=10)
    assert all(q.has_edge_labels == edge_labels for q in qs)
    qs.save(tmp_path / "set")
    assert sorted(p.name for p in (tmp_path / "set").iterdir()) == sorted(
        [f"{q.name}.graph" for q in qs] + ["params.json"])
    back = QuerySet.load(tmp_path / "set")
    assert back.params == qs.params
    assert [q.name for q in back] == [q.name for q in qs]
    for a, b in zip(qs, back):
        assert a.same_structure(b) and a.meta == b.meta


# ----------------------------------------------------------------------------------- shapes
def test_density_rule_matches_the_yeast_query_sets():
    folder = DATA / "yeast" / "queries"
    files = sorted(folder.glob("query_*_*_*.graph"))
    assert len(files) == 500
    checked = 0
    for path in files:
        kind, size = path.name.split("_")[1:3]
        if size == "4":  # the SIGMOD'20 study does not split its 4-vertex set by density
            continue
        assert classify_density(load_graph(path)) == kind, path.name
        checked += 1
    assert checked == 400


def test_density_threshold_is_average_degree_three():
    assert DENSE_AVERAGE_DEGREE == 3.0
    assert classify_density(pattern("P2")) == "dense"  # K4: average degree exactly 3
    assert classify_density(pattern("P3")) == "sparse"  # diamond: 2.5
    assert classify_density(pattern("P5")) == "sparse"  # 5 vertices, 7 edges: 2.8
    assert classify_density(pattern("P6")) == "dense"  # 5 vertices, 8 edges: 3.2


def isomorphic(a: Graph, b: Graph) -> bool:
    if a.num_vertices != b.num_vertices or a.num_edges != b.num_edges:
        return False
    if sorted(a.degrees.tolist()) != sorted(b.degrees.tolist()):
        return False
    target = edge_set(b)
    for perm in itertools.permutations(range(a.num_vertices)):
        if {tuple(sorted((perm[u], perm[v]))) for u, v in edge_set(a)} == target:
            return True
    return False


def test_patterns_match_the_gmatch_files():
    assert PATTERNS == [f"P{i}" for i in range(1, 10)]
    graphs = {}
    for name in PATTERNS:
        g = pattern(name)
        ref = load_graph(DATA / "gmatch_test" / "patterns" / name.lower())
        assert isomorphic(g, ref), name
        assert edge_set(g) == edge_set(ref), name  # numbered as in the files
        assert not g.labels.any() and g.is_connected() and g.meta["name"] == name
        graphs[name] = g
    # Nine different shapes: no two patterns are isomorphic.
    for x, y in itertools.combinations(PATTERNS, 2):
        assert not isomorphic(graphs[x], graphs[y]), (x, y)
    assert pattern("p7").same_structure(graphs["P7"])
    with pytest.raises(ValueError, match="unknown pattern"):
        pattern("P10")
