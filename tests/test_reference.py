"""The CPU reference matcher (common/cpu/reference.py), the oracle of every engine: exact counts of
the three external query sets, and a brute-force oracle (every injective or arbitrary mapping
checked edge by edge) on many tiny random graphs covering vertex labels, edge labels, directed
graphs, homomorphisms, disconnected queries, limit, collect, timeouts and the chunked stack."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import common
from _paths import DATA
from common.cpu.reference import FILTERS, ORDERS, ReferenceMatcher, matching_order
from common.engine.result import Status
from common.graph.io import load_graph, load_query_set, read_expected_counts
from common.graph.model import Graph

#: yeast queries whose known count is at most this are checked (424 of the 497 with a count).
YEAST_MAX_COUNT = 10**7


# ---------------------------------------------------------------------------------- oracle
def brute_force(data: Graph, query: Graph, homomorphic: bool = False) -> set[tuple[int, ...]]:
    """Every embedding as a tuple (data vertex of query vertex i at position i), by trying every
    injective (or, homomorphic, every) mapping and checking labels and each query edge."""
    dsrc, ddst, delab = data.edges()
    delab = [0] * len(dsrc) if delab is None else delab.tolist()
    edges = {}
    for a, b, el in zip(dsrc.tolist(), ddst.tolist(), delab):
        edges[(a, b)] = el
        if not data.directed:
            edges[(b, a)] = el
    qsrc, qdst, qelab = query.edges()
    qedges = list(zip(qsrc.tolist(), qdst.tolist(),
                      [0] * len(qsrc) if qelab is None else qelab.tolist()))
    dlab, qlab = data.labels.tolist(), query.labels.tolist()
    nq, n = query.num_vertices, data.num_vertices
    mappings = (itertools.product(range(n), repeat=nq) if homomorphic
                else itertools.permutations(range(n), nq))
    return {f for f in mappings
            if all(dlab[f[i]] == qlab[i] for i in range(nq))
            and all(edges.get((f[a], f[b])) == el for a, b, el in qedges)}


def dense_random_graph(rng, n: int, p: float, num_labels: int, num_elabels: int, directed: bool) -> Graph:
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b and (directed or a < b)]
    kept = [pair for pair in pairs if rng.random() < p]
    src = [a for a, _ in kept]
    dst = [b for _, b in kept]
    elab = rng.integers(0, num_elabels, len(kept)) if num_elabels > 1 else None
    return Graph.from_edges(n, src, dst, rng.integers(0, num_labels, n), elab, directed=directed)


def sampled_query(rng, data: Graph, k: int) -> Graph:
    """k data vertices with a random part of the edges among them (labels kept): a query that
    usually has embeddings, and often a disconnected one."""
    chosen = rng.choice(data.num_vertices, size=k, replace=False)
    index = {int(v): i for i, v in enumerate(chosen)}
    src, dst, elab = data.edges()
    elab = np.zeros(src.size, np.int64) if elab is None else elab
    keep = [i for i in range(src.size) if int(src[i]) in index and int(dst[i]) in index
            and rng.random() < 0.75]
    return Graph.from_edges(k, [index[int(src[i])] for i in keep], [index[int(dst[i])] for i in keep],
                            data.labels[chosen], elab[keep] if keep else None, directed=data.directed)


def random_case(seed: int) -> tuple[Graph, Graph, bool]:
    """(data, query, homomorphic) of 5-8 data and 2-4 query vertices; a seed fixes whether the
    graphs are directed, edge-labelled, and the matching homomorphic."""
    rng = np.random.default_rng(seed)
    directed = rng.random() < 0.3
    num_elabels = 2 if rng.random() < 0.3 else 1
    num_labels = int(rng.integers(1, 4))
    data = dense_random_graph(rng, int(rng.integers(5, 9)), float(rng.uniform(0.3, 0.8)), num_labels,
                        num_elabels, directed)
    k = int(rng.integers(2, 5))
    if rng.random() < 0.6:
        query = sampled_query(rng, data, k)
    else:
        query = dense_random_graph(rng, k, float(rng.uniform(0.2, 0.9)), num_labels, num_elabels, directed)
    return data, query, bool(rng.random() < 0.25)


def embeddings_set(result) -> set[tuple[int, ...]]:
    rows = [tuple(row) for row in result.embeddings.tolist()]
    assert len(rows) == len(set(rows)), "an embedding was reported twice"
    return set(rows)


def is_embedding(data: Graph, query: Graph, f) -> bool:
    """f is injective, label-preserving and maps every query edge onto a data edge."""
    if len(set(f)) != len(f):
        return False
    if any(data.labels[f[i]] != query.labels[i] for i in range(len(f))):
        return False
    return all(data.has_edge(f[a], f[b]) for a, b in zip(*query.edges()[:2]))


SEEDS = range(200)


# ---------------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("filter_", FILTERS)
def test_random_graphs_match_brute_force(filter_, order):
    """Counts and the exact set of embeddings equal the brute force for every filter and order."""
    multiplied = 0
    for seed in SEEDS:
        data, query, homomorphic = random_case(seed)
        expected = brute_force(data, query, homomorphic)
        engine = ReferenceMatcher(filter=filter_, order=order).prepare(data)
        counted = engine.match(query, homomorphic=homomorphic)
        collected = engine.match(query, homomorphic=homomorphic, collect=True)
        assert counted.status is Status.OK and collected.status is Status.OK
        assert counted.count == len(expected), (seed, counted, len(expected))
        assert collected.count == len(expected), seed
        assert embeddings_set(collected) == expected, seed
        assert collected.embeddings.dtype == np.int32
        assert collected.embeddings.shape == (len(expected), query.num_vertices)
        multiplied += counted.stats.get("multiplied_levels", 1) > 1
    assert multiplied > 0, "no case exercised the product count of independent last levels"


def test_random_cases_cover_every_feature():
    """The random cases of the brute-force test include each feature they claim to cover."""
    cases = [random_case(seed) for seed in SEEDS]
    assert any(d.directed for d, _, _ in cases)
    assert any(d.has_edge_labels and q.has_edge_labels for d, q, _ in cases)
    assert any(h for _, _, h in cases)
    assert any(not q.is_connected() for _, q, _ in cases)
    assert any(d.num_labels > 1 for d, _, _ in cases)
    assert sum(len(brute_force(d, q, h)) > 0 for d, q, h in cases) > len(cases) // 2


@pytest.mark.parametrize("chunk_steps", [1, 2, 5])
def test_tiny_chunks_resume_the_stack(chunk_steps):
    """A compiled call that stops every few steps resumes exactly where it stopped."""
    for seed in range(0, 200, 5):
        data, query, homomorphic = random_case(seed)
        expected = brute_force(data, query, homomorphic)
        engine = ReferenceMatcher(chunk_steps=chunk_steps).prepare(data)
        counted = engine.match(query, homomorphic=homomorphic)
        collected = engine.match(query, homomorphic=homomorphic, collect=True)
        assert counted.count == len(expected), seed
        assert embeddings_set(collected) == expected, seed
        if len(expected) > chunk_steps:  # collecting takes at least one step per embedding
            assert collected.stats["compiled_calls"] > 1


def test_collect_buffer_grows_past_its_first_capacity():
    """K9 with a 4-vertex path: 9*8*7*6 = 3024 embeddings, more than one collect buffer holds."""
    data = Graph.from_edges(9, *zip(*itertools.combinations(range(9), 2)))
    path = Graph.from_edges(4, [0, 1, 2], [1, 2, 3])
    expected = brute_force(data, path)
    assert len(expected) == 9 * 8 * 7 * 6
    result = ReferenceMatcher().prepare(data).match(path, collect=True)
    assert result.count == len(expected)
    assert embeddings_set(result) == expected


def test_limit_stops_at_exactly_limit_embeddings():
    for seed in SEEDS:
        data, query, homomorphic = random_case(seed)
        expected = brute_force(data, query, homomorphic)
        if not expected:
            continue
        engine = ReferenceMatcher(chunk_steps=3).prepare(data)
        for limit in sorted({1, (len(expected) + 1) // 2, len(expected)}):
            result = engine.match(query, homomorphic=homomorphic, limit=limit, collect=True)
            assert result.status is Status.LIMIT and result.count == limit, (seed, limit)
            assert len(result.embeddings) == limit
            assert embeddings_set(result) <= expected
            counted = engine.match(query, homomorphic=homomorphic, limit=limit)
            assert counted.status is Status.LIMIT and counted.count == limit
        above = engine.match(query, homomorphic=homomorphic, limit=len(expected) + 1)
        assert above.status is Status.OK and above.count == len(expected), seed


def test_timeout_returns_a_partial_count_of_real_embeddings():
    """An 8-clique in K40 (40!/32! ~ 3.9e12 embeddings) cannot finish in 50 ms."""
    n = 40
    data = Graph.from_edges(n, *zip(*itertools.combinations(range(n), 2)))
    query = Graph.from_edges(8, *zip(*itertools.combinations(range(8), 2)))
    total = int(np.prod(np.arange(n - 7, n + 1, dtype=np.float64)))
    engine = ReferenceMatcher(chunk_steps=1 << 14).prepare(data)
    result = engine.match(query, timeout_s=0.05)
    assert result.status is Status.TIMEOUT
    assert 0 < result.count < total
    collected = engine.match(query, timeout_s=0.05, collect=True)
    assert collected.status is Status.TIMEOUT
    assert len(collected.embeddings) == collected.count > 0
    sample = collected.embeddings[:: max(1, collected.count // 500)].tolist()
    assert all(is_embedding(data, query, row) for row in sample)
    assert len(np.unique(collected.embeddings, axis=0)) == collected.count


def test_directed_edges_and_edge_labels_are_respected():
    """A directed 3-cycle matches a directed 3-cycle 3 times, not its reverse; an edge label
    mismatch leaves no embedding."""
    cycle = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], directed=True)
    data = Graph.from_edges(4, [0, 1, 2, 2], [1, 2, 0, 3], directed=True)
    engine = ReferenceMatcher().prepare(data)
    assert engine.match(cycle).count == 3
    reverse = Graph.from_edges(3, [1, 2, 0], [0, 1, 2], directed=True)
    assert engine.match(reverse).count == 3
    path = Graph.from_edges(3, [0, 1], [1, 2], directed=True)
    assert engine.match(path).count == len(brute_force(data, path)) == 4
    labelled = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], edge_labels=[1, 1, 2])
    triangle = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], edge_labels=[1, 1, 1])
    other = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], edge_labels=[2, 1, 1])
    engine = ReferenceMatcher().prepare(labelled)
    assert engine.match(triangle).count == 0
    assert engine.match(other).count == len(brute_force(labelled, other)) == 2


def test_unknown_query_labels_give_zero():
    data = Graph.from_edges(4, [0, 1, 2], [1, 2, 3], labels=[0, 1, 0, 1])
    engine = ReferenceMatcher().prepare(data)
    unknown = Graph.from_edges(2, [0], [1], labels=[0, 7])
    result = engine.match(unknown, collect=True)
    assert result.status is Status.OK and result.count == 0
    assert result.embeddings.shape == (0, 2)
    unknown_edge_label = Graph.from_edges(2, [0], [1], labels=[0, 1], edge_labels=[3])
    assert engine.match(unknown_edge_label).count == 0
    known = Graph.from_edges(2, [0], [1], labels=[0, 1])
    assert engine.match(known).count == len(brute_force(data, known)) == 3


def test_query_larger_than_data_graph():
    """Injective: no embedding; homomorphic: the brute-force count (a path folds onto an edge)."""
    edge = Graph.from_edges(2, [0], [1])
    path = Graph.from_edges(4, [0, 1, 2], [1, 2, 3])
    engine = ReferenceMatcher().prepare(edge)
    result = engine.match(path, collect=True)
    assert result.count == 0 and result.status is Status.OK and result.embeddings.shape == (0, 4)
    homomorphic = engine.match(path, homomorphic=True, collect=True)
    assert homomorphic.count == len(brute_force(edge, path, homomorphic=True)) == 2
    assert embeddings_set(homomorphic) == {(0, 1, 0, 1), (1, 0, 1, 0)}


def test_single_vertex_and_edgeless_queries():
    data = Graph.from_edges(6, [0, 1, 2, 3], [1, 2, 3, 4], labels=[0, 1, 0, 1, 0, 0])
    engine = ReferenceMatcher().prepare(data)
    assert engine.match(Graph.from_edges(1, [], [], labels=[0])).count == 4
    pair = Graph.from_edges(2, [], [], labels=[0, 0])
    assert engine.match(pair).count == 4 * 3
    assert engine.match(pair, homomorphic=True).count == 4 * 4


# ---------------------------------------------------------------------------------- phases
def test_filters_are_sound_and_nested():
    """Every brute-force embedding (homomorphism, when the case is homomorphic) maps u into C(u);
    label candidates are exactly the vertices of u's label; each stronger filter keeps a subset
    of the weaker one's candidates."""
    for seed in SEEDS:
        data, query, homomorphic = random_case(seed)
        expected = brute_force(data, query, homomorphic)
        previous = None
        for filter_ in FILTERS:
            engine = ReferenceMatcher(filter=filter_).prepare(data)
            bitmap, offsets, lists = engine.candidates(query, homomorphic=homomorphic)
            sets = [set(lists[offsets[u]:offsets[u + 1]].tolist()) for u in range(query.num_vertices)]
            for u, cands in enumerate(sets):
                assert cands == set(np.flatnonzero(bitmap[u]).tolist())
                assert {f[u] for f in expected} <= cands, (seed, filter_, u)
                if filter_ == "label":
                    assert cands == set(np.flatnonzero(data.labels == query.labels[u]).tolist())
                if previous is not None:
                    assert cands <= previous[u], (seed, filter_, u)
            previous = sets


def test_matching_orders_are_connected_permutations():
    """Each order lists every query vertex once, and (gql, ri) a vertex with an ordered
    neighbour follows whenever one exists, so components come one after another."""
    for seed in SEEDS:
        _, query, _ = random_case(seed)
        adj = [set() for _ in range(query.num_vertices)]
        for a, b in zip(*query.edges()[:2]):
            adj[a].add(int(b))
            adj[b].add(int(a))
        sizes = np.random.default_rng(seed).integers(1, 10, query.num_vertices)
        assert matching_order(query, sizes, "input") == list(range(query.num_vertices))
        for method in ("gql", "ri"):
            order = matching_order(query, sizes, method)
            assert sorted(order) == list(range(query.num_vertices))
            for i in range(1, len(order)):
                frontier = {w for u in order[:i] for w in adj[u]} - set(order[:i])
                if frontier:
                    assert order[i] in frontier, (seed, method, order)


def test_result_reports_phases_and_stats():
    data = Graph.from_edges(5, [0, 1, 2, 3], [1, 2, 3, 4], labels=[0, 1, 0, 1, 0])
    query = Graph.from_edges(3, [0, 1], [1, 2], labels=[0, 1, 0])
    result = ReferenceMatcher(filter="label").prepare(data).match(query)
    assert result.count == len(brute_force(data, query)) == 4
    assert set(result.phases) == {"filter", "plan", "enumerate"}
    assert all(seconds >= 0 for seconds in result.phases.values())
    assert result.stats["candidate_sizes"] == [3, 2, 3]
    assert sorted(result.stats["order"]) == [0, 1, 2]


def test_options_are_validated_and_registered():
    with pytest.raises(ValueError, match="filter"):
        ReferenceMatcher(filter="bogus")
    with pytest.raises(ValueError, match="order"):
        ReferenceMatcher(order="bogus")
    with pytest.raises(ValueError, match="chunk_steps"):
        ReferenceMatcher(chunk_steps=0)
    engine = common.create_engine("cpu", filter="degree", order="gql", device_memory_limit=1 << 20)
    assert isinstance(engine, ReferenceMatcher) and engine.filter == "degree"
    data, query, _ = random_case(1)
    assert common.match(data, query, engine="cpu").count == len(brute_force(data, query))


# ---------------------------------------------------------------------------------- real data
def run_query_set(data: Graph, queries: list[Graph], expected: dict[str, int], **options):
    engine = ReferenceMatcher(**options).prepare(data)
    wrong = []
    for query in queries:
        result = engine.match(query)
        if result.status is not Status.OK or result.count != expected[query.name]:
            wrong.append((query.name, result.count, expected[query.name]))
    return wrong


def test_real_data_is_present():
    for path in ("hprd/HPRD.graph", "yeast/yeast.graph", "gmatch_test/data.graph"):
        assert (DATA / path).is_file(), f"missing {DATA / path}"


# The input order is not connected on these queries: with only label or degree filtering it
# enumerates cross products and takes seconds to minutes per query, so it is left out there.
HPRD_OPTIONS = [(f, o) for f in FILTERS for o in ORDERS if o != "input" or f in ("nlf", "refine")]


@pytest.mark.slow
@pytest.mark.parametrize("filter_,order", HPRD_OPTIONS)
def test_hprd_dense_16_all_100(filter_, order):
    """SubgraphMatching's test set: the 100 HPRD dense 16-vertex queries, under each option."""
    data = load_graph(DATA / "hprd" / "HPRD.graph")
    expected = read_expected_counts(DATA / "hprd" / "expected_counts_1_100.txt")
    queries = load_query_set(DATA / "hprd" / "queries")
    assert len(queries) == len(expected) == 100
    assert run_query_set(data, queries, expected, filter=filter_, order=order) == []


@pytest.fixture(scope="module")
def yeast():
    """The yeast graph, its known counts and every query whose DAF count is at most
    YEAST_MAX_COUNT (queries missing from the count file have no known answer and are left out)."""
    data = load_graph(DATA / "yeast" / "yeast.graph")
    expected = read_expected_counts(DATA / "yeast" / "expected_counts.txt")
    names = [name for name, count in expected.items() if count <= YEAST_MAX_COUNT]
    queries = load_query_set([DATA / "yeast" / "queries" / f"{name}.graph" for name in names])
    return data, expected, queries


#: the yeast queries are checked in this many interleaved parts, so that test workers share them
YEAST_PARTS = 4


@pytest.mark.slow
@pytest.mark.parametrize("part", range(YEAST_PARTS))
def test_yeast_queries_with_known_counts(yeast, part):
    """Every ``YEAST_PARTS``-th yeast query with a known count, from ``part`` on: together the
    parts check all 424."""
    data, expected, queries = yeast
    assert len(queries) == 424
    assert run_query_set(data, queries[part::YEAST_PARTS], expected) == []


@pytest.mark.slow
def test_github_q0_to_q10():
    """gMatch's test set on the musae-GitHub graph (up to 6.2e7 embeddings)."""
    data = load_graph(DATA / "gmatch_test" / "data.graph")
    expected = read_expected_counts(DATA / "gmatch_test" / "expected_counts.txt")
    queries = load_query_set(DATA / "gmatch_test" / "queries")
    assert sorted(q.name for q in queries) == sorted(expected) and len(queries) == 11
    assert run_query_set(data, queries, expected) == []


def test_a_count_beyond_int64_is_exact():
    # A hub with 600 leaves of each of 7 labels; the star query has one leaf per label:
    # 600**7 ~ 2.8e19 embeddings, more than 2**63 - 1.
    k, leaves = 7, 600
    n = 1 + k * leaves
    data = Graph.from_edges(n, np.zeros(k * leaves, np.int64), np.arange(1, n),
                            np.concatenate([[k], np.repeat(np.arange(k), leaves)]))
    star = Graph.from_edges(k + 1, np.zeros(k, np.int64), np.arange(1, k + 1),
                            np.concatenate([[k], np.arange(k)]))
    result = ReferenceMatcher().prepare(data).match(star)
    assert (result.status, result.count) == ("ok", leaves ** k)      # a Python int, not wrapped
    smaller = Graph.from_edges(k, np.zeros(k - 1, np.int64), np.arange(1, k),
                               np.concatenate([[k], np.arange(k - 1)]))
    assert ReferenceMatcher().prepare(data).match(smaller).count == leaves ** (k - 1)
