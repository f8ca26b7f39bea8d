"""The peer engines (common/cpu/peers.py): networkx VF2 and igraph LAD/VF2 count exactly what the cpu
reference counts on tiny cases (undirected, directed, edge labels), stop at their deadline, and
join the side-by-side comparison."""

import time

import numpy as np
import pytest

import common
from _extras import requires
from _paths import DATA
from common import Graph, Status
from common.cpu.peers import installed_peers
from common.graph.generate import power_law_labels, query_set, rmat
from experiments.papers.compare import compare_engines, summarize

PEERS = [("networkx", {}), ("igraph", {"method": "lad"}), ("igraph", {"method": "vf2"})]


def _case(seed: int, directed: bool = False, edge_labels: bool = False):
    """A random 40-vertex labelled graph and three 4-vertex queries cut from it (the edges among
    vertices a breadth-first search reached, directions and edge labels kept)."""
    rng = np.random.default_rng(seed)
    n = 40
    src = rng.integers(0, n, 160)
    dst = rng.integers(0, n, 160)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    labels = rng.integers(0, 3, n)
    elab = (src * dst + src + dst) % 2 if edge_labels else None     # the same label for both copies of an edge
    data = Graph.from_edges(n, src, dst, labels, elab, directed=directed, name=f"case{seed}")
    s, d, e = data.edges()
    adjacency = {v: set() for v in range(n)}
    for u, v in zip(s.tolist(), d.tolist()):
        adjacency[u].add(v)
        adjacency[v].add(u)
    queries = []
    for start in rng.permutation(n).tolist():
        chosen = [start]
        for v in chosen:
            chosen += sorted(adjacency[v] - set(chosen))[:4 - len(chosen)]
        if len(chosen) < 4:
            continue
        ids = {v: i for i, v in enumerate(chosen)}
        inside = [k for k, (u, v) in enumerate(zip(s.tolist(), d.tolist())) if u in ids and v in ids]
        queries.append(Graph.from_edges(4, [ids[s[k]] for k in inside], [ids[d[k]] for k in inside],
                                        labels[chosen], None if e is None else e[inside], directed=directed,
                                        name=f"q{len(queries)}"))
        if len(queries) == 3:
            return data, queries
    raise AssertionError("no 4-vertex connected pieces")


def _rows(result) -> set:
    return set(map(tuple, result.embeddings.tolist()))


def test_both_peers_are_registered_when_installed():
    requires("networkx", "igraph")
    assert installed_peers() == ["networkx", "igraph"]
    assert {"networkx", "igraph"} <= set(common.available_engines())


def test_a_peer_is_registered_exactly_when_its_package_imports():
    import importlib.util

    importable = [name for name in ("networkx", "igraph") if importlib.util.find_spec(name)]
    assert installed_peers() == importable
    assert not common.create_engine("networkx").uses_device


@pytest.mark.parametrize("name,options", PEERS, ids=["networkx", "igraph-lad", "igraph-vf2"])
@pytest.mark.parametrize("directed,edge_labels", [(False, False), (True, False), (False, True)],
                         ids=["undirected", "directed", "edge-labels"])
def test_peer_counts_and_embeddings_equal_the_reference(name, options, directed, edge_labels):
    requires(name)
    checked = 0
    for seed in (1, 2):
        data, queries = _case(seed, directed, edge_labels)
        reference = common.create_engine("cpu").prepare(data)
        peer = common.create_engine(name, **options).prepare(data)
        for query in queries:
            expected = reference.match(query, collect=True)
            got = peer.match(query, collect=True)
            if edge_labels and options.get("method") == "lad":
                assert got.status == Status.UNSUPPORTED and "edge labels" in got.reason
                continue
            assert got.status == Status.OK, got.reason
            assert got.count == expected.count
            assert _rows(got) == _rows(expected)
            checked += expected.count > 0
    assert checked or (edge_labels and options.get("method") == "lad")


@pytest.mark.parametrize("name,options", PEERS, ids=["networkx", "igraph-lad", "igraph-vf2"])
def test_peer_counts_on_bundled_hprd_queries(name, options):
    requires(name)
    # exact counts shipped with the data (data/hprd): 3 and 80
    queries = [DATA / "hprd" / "queries" / f"query_dense_16_{i}.graph" for i in (1, 2)]
    results = common.match_many(DATA / "hprd" / "HPRD.graph", queries, engine=name, timeout_s=60, **options)
    assert [(str(r.status), r.count) for r in results] == [("ok", 3), ("ok", 80)]


def test_igraph_vf2_stops_at_its_deadline():
    """The registered peers' deadlines are tests/test_contract.py's; igraph's VF2 method here."""
    name, options = "igraph", {"method": "vf2"}
    requires(name)
    # an unlabelled dense graph and a 7-vertex cycle: millions of embeddings, far more than 0.3 s of search
    data = rmat(256, 6000, seed=3, name="dense")
    cycle = Graph.from_edges(7, np.arange(7), (np.arange(7) + 1) % 7, np.zeros(7, int), name="C7")
    engine = common.create_engine(name, **options).prepare(data)
    start = time.perf_counter()
    result = engine.match(cycle, timeout_s=0.3)
    assert result.status == Status.TIMEOUT
    assert time.perf_counter() - start < 3.0     # the full count runs far longer


def _igraph_in_daemon(send, data, queries, timeout_s):
    engine = common.create_engine("igraph", method="lad").prepare(data)
    send.send([(str(r.status), r.count) for r in (engine.match(q, timeout_s=timeout_s) for q in queries)])


def test_igraph_answers_and_times_out_inside_a_daemonic_process():
    """The experiments' runner worker and Dask's workers are daemons, which multiprocessing
    refuses children: igraph's child (its deadline) must still start there."""
    import multiprocessing

    requires("igraph")
    data, queries = _case(2)
    dense = rmat(256, 6000, seed=3, name="dense")
    cycle = Graph.from_edges(7, np.arange(7), (np.arange(7) + 1) % 7, np.zeros(7, int), name="C7")
    context = multiprocessing.get_context("fork")
    for graph, qs, timeout_s, want in ((data, queries, 30.0, [("ok", common.match(data, q).count) for q in queries]),
                                       (dense, [cycle], 0.3, None)):
        receive, send = context.Pipe(duplex=False)
        daemon = context.Process(target=_igraph_in_daemon, args=(send, graph, qs, timeout_s), daemon=True)
        daemon.start()
        assert receive.poll(60)
        got = receive.recv()
        daemon.join(10)
        assert got == want if want is not None else got[0][0] == "timeout"


def test_igraph_vf2_limit():
    """The registered peers' limits are tests/test_contract.py's; igraph's VF2 method here."""
    name, options = "igraph", {"method": "vf2"}
    requires(name)
    data, queries = _case(1)
    query = max(queries, key=lambda q: common.match(data, q).count)
    total = common.match(data, query).count
    assert total > 2
    result = common.match(data, query, engine=name, limit=2, collect=True, **options)
    assert (result.status, result.count, result.embeddings.shape) == (Status.LIMIT, 2, (2, query.num_vertices))


def test_peers_join_the_side_by_side_comparison():
    requires("networkx", "igraph")
    labels = power_law_labels(96, 4, 1.0, seed=7)
    data = rmat(96, 320, seed=7, labels=labels, name="rmat-demo")
    queries = list(query_set(data, 3, 4, seed=8, method="induced").queries)
    raw = compare_engines(data, queries, ["cpu", "networkx", "igraph"], timeout_s=20)
    table = summarize(raw).set_index("engine")
    for peer in ("networkx", "igraph"):
        assert table.loc[peer, "answered"] == 3
        assert table.loc[peer, "agreed"] == 3 and table.loc[peer, "disagreed"] == 0
    assert table.loc["cpu", "total embeddings"] == table.loc["networkx", "total embeddings"] > 0
