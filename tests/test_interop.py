"""networkx / scipy.sparse conversions, results_frame, and networkx's VF2 monomorphisms as an
independent oracle for the cpu engine and (in the simulator, on tiny graphs) gsi and egsm."""

import random

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from networkx.algorithms import isomorphism as iso

import common
from _paths import DATA
from common import Graph, InvalidGraphError, Status, load_graph, results_frame

LABELS = ["A", "B", "C"]


def random_case(seed: int, n: int, p: float, k: int, directed: bool = False, edge_labels: bool = False):
    """A random labelled data graph with string node ids and a connected k-vertex query cut from it
    (an induced walk subgraph with some edges dropped), query nodes named q0..q{k-1}."""
    rng = random.Random(seed)
    data = nx.gnp_random_graph(n, p, seed=seed, directed=directed)
    data = nx.relabel_nodes(data, {v: f"v{v * 7 + 3}" for v in data})
    for v in data:
        data.nodes[v]["kind"] = rng.choice(LABELS)
    for u, v in data.edges:
        data.edges[u, v]["rel"] = rng.choice("xy") if edge_labels else "x"
    undirected = data.to_undirected(as_view=True)
    start = rng.choice([v for v in data if undirected.degree(v) > 0])
    chosen, frontier = [start], start
    for _ in range(200):
        if len(chosen) == k:
            break
        frontier = rng.choice(list(undirected[frontier]))
        if frontier not in chosen:
            chosen.append(frontier)
    sub = data.subgraph(chosen).copy()
    for u, v in list(sub.edges):                       # drop some edges, keep it connected
        if rng.random() < 0.3:
            sub.remove_edge(u, v)
            if not nx.is_weakly_connected(sub) if directed else not nx.is_connected(sub):
                sub.add_edge(u, v, **data.edges[u, v])
    query = nx.relabel_nodes(sub, {v: f"q{i}" for i, v in enumerate(chosen)})
    return data, query


def oracle(data, query, edge_labels: bool):
    """Ordered embeddings as tuples over the query's node order, from networkx's GraphMatcher."""
    matcher = (iso.DiGraphMatcher if data.is_directed() else iso.GraphMatcher)(
        data, query, node_match=iso.categorical_node_match("kind", None),
        edge_match=iso.categorical_edge_match("rel", None) if edge_labels else None)
    order = list(query.nodes)
    out = set()
    for mapping in matcher.subgraph_monomorphisms_iter():
        inverse = {q: d for d, q in mapping.items()}
        out.add(tuple(inverse[q] for q in order))
    return out


def check(engine, data, query, edge_labels=False):
    expected = oracle(data, query, edge_labels)
    result = common.match(data, query, engine=engine, collect=True, vertex_label="kind",
                          edge_label="rel" if edge_labels else None)
    assert result.status is Status.OK, result
    rows = {tuple(r) for r in result.embeddings.tolist()}
    assert result.count == len(expected) == len(rows)
    assert rows == expected
    return result


@pytest.mark.parametrize("seed", range(12))
def test_cpu_agrees_with_networkx(seed):
    data, query = random_case(seed, n=14, p=0.3, k=3 + seed % 3)
    check("cpu", data, query)


@pytest.mark.parametrize("seed", range(4))
def test_cpu_agrees_with_networkx_directed_and_edge_labelled(seed):
    data, query = random_case(100 + seed, n=12, p=0.3, k=3 + seed % 2, directed=seed % 2 == 0,
                              edge_labels=True)
    check("cpu", data, query, edge_labels=True)


@pytest.mark.parametrize("engine,seed", [("gsi", 0), ("gsi", 1), ("egsm", 2), ("egsm", 3)])
def test_gpu_engines_agree_with_networkx_in_simulator(engine, seed):
    data, query = random_case(200 + seed, n=10, p=0.35, k=3 + seed % 2)
    result = check(engine, data, query)
    assert result.engine == engine


def test_gsi_agrees_with_networkx_on_edge_labels():
    data, query = random_case(300, n=10, p=0.35, k=3, edge_labels=True)
    check("gsi", data, query, edge_labels=True)


def test_networkx_round_trip_keeps_ids_labels_and_edges():
    data, _ = random_case(7, n=15, p=0.3, k=3, edge_labels=True)
    g = Graph.from_networkx(data, "kind", "rel")
    assert g.num_vertices == 15 and g.num_edges == data.number_of_edges()
    back = g.to_networkx("kind", "rel")
    assert set(back.nodes) == set(data.nodes)
    assert {v: back.nodes[v]["kind"] for v in back} == {v: data.nodes[v]["kind"] for v in data}
    assert {frozenset(e): back.edges[e]["rel"] for e in back.edges} == \
        {frozenset(e): data.edges[e]["rel"] for e in data.edges}
    assert Graph.from_networkx(back, "kind", "rel").same_structure(g)


def test_round_trip_of_a_real_graph():
    hprd = load_graph(DATA / "hprd" / "HPRD.graph")
    nxg = hprd.to_networkx()
    assert nxg.number_of_nodes() == 9460 and nxg.number_of_edges() == 34998
    assert set(nxg.nodes) == set(range(9460))                     # ids kept, nothing compacted
    again = Graph.from_networkx(nxg)
    assert again.same_structure(hprd) and "original_ids" not in again.meta


def test_from_networkx_refuses_bad_input():
    with pytest.raises(InvalidGraphError, match="multigraphs"):
        Graph.from_networkx(nx.MultiGraph([(0, 1)]))
    g = nx.path_graph(3)
    g.nodes[0]["colour"] = 1
    with pytest.raises(InvalidGraphError, match="no attribute 'colour'"):
        Graph.from_networkx(g, vertex_label="colour")
    assert Graph.from_networkx(g).num_labels == 1                 # default 'label' absent: unlabelled
    with pytest.raises(TypeError, match="networkx"):
        common.match({0: [1]}, g)


def test_from_scipy_matches_from_networkx():
    data, _ = random_case(11, n=16, p=0.25, k=3)
    data = nx.convert_node_labels_to_integers(data)
    labels = np.array([LABELS.index(data.nodes[v]["kind"]) for v in range(16)])
    adjacency = nx.to_scipy_sparse_array(data, nodelist=range(16), format="csr")
    from_nx = Graph.from_networkx(data, "kind")
    from_sp = Graph.from_scipy(adjacency, labels)
    assert from_sp.num_edges == from_nx.num_edges
    assert np.array_equal(from_sp.offsets, from_nx.offsets) and np.array_equal(from_sp.neighbors, from_nx.neighbors)
    upper = Graph.from_scipy(sp.triu(adjacency), labels)           # one triangle is enough
    assert upper.same_structure(from_sp)
    labelled = Graph.from_scipy(sp.csr_array(([2, 2, 3, 3], ([0, 1, 1, 2], [1, 0, 2, 1])), shape=(3, 3)),
                                edge_labels=True)
    assert labelled.edge_labels.tolist() == [2, 2, 3, 3]
    with pytest.raises(InvalidGraphError, match="square"):
        Graph.from_scipy(sp.csr_array(np.ones((2, 3))))
    with pytest.raises(TypeError, match="scipy.sparse"):
        Graph.from_scipy(np.ones((2, 2)))


def test_results_frame():
    data, query = random_case(5, n=12, p=0.3, k=3)
    results = [common.match(data, query, engine="cpu", vertex_label="kind"),
               common.match(data, query, engine="cpu", vertex_label="kind", limit=1)]
    frame = results_frame(results)
    assert list(frame["status"]) == ["ok", "limit"] and list(frame["exact"]) == [True, False]
    assert frame["count"].iloc[0] == len(oracle(data, query, False)) and frame["count"].iloc[1] == 1
    assert {"engine", "query", "seconds", "enumerate_s", "peak_device_bytes"} <= set(frame.columns)
    assert len(results_frame(results[0])) == 1


def monomorphisms(data, query, vertex_label="label", edge_label=None) -> int:
    """networkx's count of ordered embeddings (subgraph monomorphisms)."""
    matcher = (iso.DiGraphMatcher if data.is_directed() else iso.GraphMatcher)(
        data, query, node_match=iso.categorical_node_match(vertex_label, None),
        edge_match=iso.categorical_edge_match(edge_label, None) if edge_label else None)
    return sum(1 for _ in matcher.subgraph_monomorphisms_iter())


@pytest.mark.parametrize("labels", [("x", "y"), (-1, 1), ("0", "1"), (0.5, 1), (0, "1"), (1, 0)])
def test_a_query_label_the_data_lacks_matches_nothing(labels):
    data = nx.path_graph(4)
    nx.set_node_attributes(data, {0: 0, 1: 1, 2: 0, 3: 1}, "label")
    query = nx.Graph([("a", "b")])
    nx.set_node_attributes(query, dict(zip("ab", labels)), "label")
    expected = monomorphisms(data, query)
    assert common.match(data, query).count == expected
    graph = Graph.from_networkx(data)                           # data as a Graph, query networkx
    assert common.match(graph, query).count == expected
    assert [r.count for r in common.match_many(data, [query, query])] == [expected, expected]


def test_query_labels_are_coded_against_coded_data_labels():
    data = nx.path_graph(5)
    nx.set_node_attributes(data, dict(enumerate(["a", 7, "a", 7, "b"])), "label")
    for labels in (("a", 7), (0, 7), ("a", "c"), (7, "b"), ("c", "d")):
        query = nx.Graph([("u", "v")])
        nx.set_node_attributes(query, dict(zip("uv", labels)), "label")
        assert common.match(data, query).count == monomorphisms(data, query), labels


def test_a_query_label_a_file_graph_lacks_matches_nothing():
    hprd = load_graph(DATA / "hprd" / "HPRD.graph")
    query = nx.Graph([("a", "b")])
    nx.set_node_attributes(query, {"a": "x", "b": "y"}, "label")
    assert common.match(hprd, query).count == 0
    nx.set_node_attributes(query, {"a": int(hprd.labels[0]), "b": "y"}, "label")
    assert common.match(hprd, query).count == 0


def test_a_query_edge_label_the_data_lacks_matches_nothing():
    data = nx.path_graph(4)
    nx.set_edge_attributes(data, {(0, 1): 0, (1, 2): 1, (2, 3): 0}, "rel")
    for rel in ("x", -1, "0", 0, 1):
        query = nx.Graph([("a", "b")])
        query.edges["a", "b"]["rel"] = rel
        expected = monomorphisms(data, query, vertex_label="label", edge_label="rel")
        assert common.match(data, query, edge_label="rel").count == expected, rel


def test_a_query_self_loop_is_refused():
    data = nx.path_graph(4)
    data.add_edge(1, 1)                                         # a data graph's loop is dropped
    query = nx.Graph([("a", "b")])
    assert common.match(data, query).count == monomorphisms(data, query) == 6
    query.add_edge("b", "b")
    with pytest.raises(InvalidGraphError, match="self-loop"):
        common.match(data, query)
    with pytest.raises(ValueError, match="self-loop"):            # converted without its data graph
        common.match(data, Graph.from_networkx(query))
