"""The engine contract (docs/design.md, "The engine contract"), checked on every registered engine.

One suite over ``common.available_engines()`` (gpusm's own engines and the installed peers; the
GPU engines run under the CUDA simulator when there is no GPU), as scikit-learn's
``parametrize_with_checks`` runs one set of checks over every estimator. Each check compares an
engine with the ``cpu`` reference on small graphs:

- counts of labelled, edge-labelled, directed, homomorphic and disconnected queries;
- ``limit`` (status ``limit``, count equal to the limit) and ``collect`` (every row an embedding,
  rows distinct, as many rows as the count);
- ``timeout_s`` (status ``timeout``, a lower bound, never an exception) and a device-memory limit
  too small for the data graph (status ``oom``);
- queries the engine cannot take (status ``unsupported`` with a reason naming the problem) and
  bad input (an exception naming it);
- the statistics every search reports, under names docs/statistics.md lists;
- ``peak_device_bytes`` of a query is its own, whatever ran before;
- ``match_batch`` answers as ``match`` does, query by query.

What an engine cannot do is declared once, on its class (``limitations``, ``uses_device``,
``contract_notes``), with the reason; :func:`declared` reads it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

import common
from common import Graph, create_engine
from common.engine.registry import BUILTIN_ENGINES, PEER_ENGINES, available_engines, engine_class
from common.engine.result import Status
from common.gpu.backend import BACKEND
from common.graph.generate import power_law_labels, query_set, random_walk_query, rmat

#: The engines checked: every registered engine that ships with gpusm or is an installed peer
#: (an engine a test module registers for itself is that module's business).
ENGINES = [name for name in available_engines() if name in BUILTIN_ENGINES or name in PEER_ENGINES]

#: Query kinds of the counts check, with the words an ``unsupported`` reason must contain.
KINDS = {"edge_labels": "edge label", "directed": "directed", "homomorphic": "homomorphic",
         "disconnected": "connected"}

def declared(engine: str, check: str) -> str:
    """The reason ``engine``'s class declares for ``check`` ('' when it declares none): a query
    kind of :data:`KINDS` it answers ``unsupported`` (``Engine.limitations``; the counts check
    then asserts exactly that); ``oom`` for an engine that holds no device memory (``uses_device``
    False: a device-memory limit is accepted and ignored, the count stays exact); any other check
    from ``Engine.contract_notes``: ``statistics`` (a peer library that exposes no matching order
    or candidate sets), ``deadline_cap`` (may answer the deadline test's star with OOM at its
    relation cap), ``simulator_launch`` (may run past its deadline's slack in the CUDA simulator,
    where a launch cannot be stopped before it polls the stop flag; the result then says so),
    ``simulator_<check>`` (a strict xfail in the simulator only; on a GPU it must pass), any other
    name a check the engine fails today (a strict xfail: when it starts passing, the note goes)."""
    cls = engine_class(engine)
    if check in KINDS:
        return cls.limitations.get(check, "")
    if check == "oom":
        return "" if cls.uses_device else "a CPU engine: no device memory"
    return cls.contract_notes.get(check, "")


def checks_for(check: str):
    """``ENGINES`` as pytest parameters of ``check``: an engine that declares the check a known
    failure (in the simulator only: ``simulator_<check>``) runs it as a strict xfail with the
    declared reason."""
    def known_failure(name: str) -> str:
        if check in (*KINDS, "oom", "statistics", "simulator_launch"):
            return ""
        return declared(name, check) or (declared(name, f"simulator_{check}") if BACKEND == "simulator" else "")

    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=known_failure(name)))
            if known_failure(name) else name for name in ENGINES]


# ---------------------------------------------------------------------- graphs
def _with_edge_labels(graph: Graph, num_labels: int, seed: int) -> Graph:
    src, dst, _ = graph.edges()
    labels = np.random.default_rng(seed).integers(0, num_labels, src.size)
    return Graph.from_edges(graph.num_vertices, src, dst, labels=graph.labels, edge_labels=labels,
                            name=f"{graph.name}-edge-labelled")


def _directed(graph: Graph, seed: int) -> Graph:
    """``graph`` with each edge given a direction at random (a tenth of them both)."""
    src, dst, _ = graph.edges()
    rng = np.random.default_rng(seed)
    flip = rng.random(src.size) < 0.5
    both = rng.random(src.size) < 0.1
    s, d = np.where(flip, dst, src), np.where(flip, src, dst)
    return Graph.from_edges(graph.num_vertices, np.concatenate([s, d[both]]), np.concatenate([d, s[both]]),
                            labels=graph.labels, directed=True, name=f"{graph.name}-directed")


def _oriented(query: Graph, directed_data: Graph) -> Graph:
    """``query`` (cut out of the undirected twin of ``directed_data``) with each edge directed as
    the data edge it was cut from, so that the query keeps its embedding."""
    image = np.asarray(query.meta["data_vertices"])
    arcs = {(s, d) for s, d, _ in _edge_set(directed_data)}
    src, dst, _ = query.edges()
    pairs = [(s, d) for a, b in zip(src.tolist(), dst.tolist()) for s, d in ((a, b), (b, a))
             if (int(image[s]), int(image[d])) in arcs]
    return Graph.from_edges(query.num_vertices, [s for s, _ in pairs], [d for _, d in pairs],
                            labels=query.labels, directed=True, name="directed")


def _disjoint_union(a: Graph, b: Graph) -> Graph:
    sa, da, _ = a.edges()
    sb, db, _ = b.edges()
    n = a.num_vertices
    return Graph.from_edges(n + b.num_vertices, np.concatenate([sa, sb + n]), np.concatenate([da, db + n]),
                            labels=np.concatenate([a.labels, b.labels]), name="disconnected")


@pytest.fixture(scope="module")
def workload():
    """Small graphs for every check: a labelled R-MAT graph and queries of each kind with their
    reference counts."""
    data = rmat(24, 60, seed=5, labels=power_law_labels(24, 3, 1.0, seed=6), name="contract")
    labelled = list(query_set(data, 2, 3, seed=9, method="induced").queries)
    labelled.append(random_walk_query(data, 4, seed=3, induced=False, name="walk4"))
    edge_data = _with_edge_labels(data, 2, seed=7)
    directed_data = _directed(data, seed=8)
    kinds = {
        "labelled": (data, labelled, False),
        "edge_labels": (edge_data, [random_walk_query(edge_data, 3, seed=4, name="edge-labelled")], False),
        "directed": (directed_data, [_oriented(random_walk_query(data, 3, seed=4), directed_data)], False),
        "homomorphic": (data, [random_walk_query(data, 3, seed=2, induced=False, name="homomorphic")], True),
        "disconnected": (data, [_disjoint_union(random_walk_query(data, 2, seed=1, name="a"),
                                                random_walk_query(data, 2, seed=2, name="b"))], False),
    }
    expected = {kind: [create_engine("cpu").prepare(graph).match(q, homomorphic=hom).count for q in queries]
                for kind, (graph, queries, hom) in kinds.items()}
    assert all(count > 0 for counts in expected.values() for count in counts), expected
    return kinds, expected


@pytest.fixture(scope="module")
def prepared(workload):
    """``prepared(name, kind="labelled")``: an engine prepared on the data graph of a query kind,
    one per engine and graph, shared by the checks that do not depend on what ran before."""
    kinds = workload[0]
    engines: dict[tuple, object] = {}

    def get(name: str, kind: str = "labelled"):
        graph = kinds[kind][0]
        if (name, graph.name) not in engines:
            engines[name, graph.name] = create_engine(name).prepare(graph)
        return engines[name, graph.name]
    return get


def _edge_set(graph: Graph) -> set:
    src, dst, elab = graph.edges()
    elab = np.zeros(src.size, np.int64) if elab is None else elab
    edges = set(zip(src.tolist(), dst.tolist(), elab.tolist()))
    if not graph.directed:
        edges |= {(d, s, e) for s, d, e in edges}
    return edges


def assert_embeddings(data: Graph, query: Graph, rows: np.ndarray, *, homomorphic: bool = False) -> None:
    """Every row maps query vertex ``u`` to data vertex ``rows[:, u]`` keeping labels and edges
    (and edge labels, and direction), injectively unless ``homomorphic``; rows are distinct."""
    assert rows.ndim == 2 and rows.shape[1] == query.num_vertices, rows.shape
    assert rows.min(initial=0) >= 0 and rows.max(initial=0) < data.num_vertices
    assert (data.labels[rows] == query.labels[None, :]).all(), "a row maps a vertex to one of another label"
    data_edges = _edge_set(data)
    for s, d, e in _edge_set(query):
        missing = [(int(a), int(b)) for a, b in zip(rows[:, s], rows[:, d]) if (int(a), int(b), e) not in data_edges]
        assert not missing, f"query edge ({s}, {d}) maps to non-edges {missing[:3]}"
    if not homomorphic:
        assert all(len(set(row)) == query.num_vertices for row in rows.tolist()), "a row repeats a data vertex"
    assert len({tuple(row) for row in rows.tolist()}) == len(rows), "rows repeat"


# ---------------------------------------------------------------------- checks
@pytest.mark.parametrize("kind", ["labelled", *KINDS])
@pytest.mark.parametrize("name", ENGINES)
def test_counts_equal_the_reference_or_the_query_kind_is_declared_unsupported(name, kind, workload, prepared):
    kinds, expected = workload
    _, queries, homomorphic = kinds[kind]
    engine = prepared(name, kind)
    for query, count in zip(queries, expected[kind]):
        result = engine.match(query, homomorphic=homomorphic)
        if declared(name, kind):
            assert result.status is Status.UNSUPPORTED, (name, kind, result)
            assert KINDS[kind] in result.reason, (name, kind, result.reason)
        else:
            assert (result.status, result.count) == (Status.OK, count), (name, query.name, result)


@pytest.mark.parametrize("name", ENGINES)
def test_limit_stops_at_the_limit_and_a_larger_one_changes_nothing(name, workload, prepared):
    kinds, expected = workload
    data, queries, _ = kinds["labelled"]
    query, count = queries[0], expected["labelled"][0]
    engine = prepared(name)
    assert count >= 3
    for limit in (1, count - 1):
        result = engine.match(query, limit=limit, collect=True)
        assert (result.status, result.count) == (Status.LIMIT, limit), (name, limit, result)
        assert_embeddings(data, query, result.embeddings[:limit])
    result = engine.match(query, limit=count + 5)
    assert (result.status, result.count) == (Status.OK, count), (name, result)


@pytest.mark.parametrize("name", ENGINES)
def test_collect_returns_every_embedding_once(name, workload, prepared):
    kinds, expected = workload
    data, queries, _ = kinds["labelled"]
    engine = prepared(name)
    for query, count in zip(queries, expected["labelled"]):
        result = engine.match(query, collect=True)
        assert (result.status, result.count) == (Status.OK, count), (name, query.name, result)
        assert result.embeddings.shape == (count, query.num_vertices)
        assert_embeddings(data, query, result.embeddings)
        assert engine.match(query).embeddings is None          # only when asked


@pytest.fixture(scope="module")
def heavy(hubs):
    """The one-label graph with hubs (tests/conftest.py) and a 7-vertex star: millions of
    embeddings, long on any engine."""
    data = hubs
    leaves = 6
    star = Graph.from_edges(leaves + 1, np.zeros(leaves, np.int64), np.arange(1, leaves + 1),
                            labels=np.zeros(leaves + 1, np.int32), name="star6")
    return data, star


def stopped_in_time(name: str, result) -> bool:
    """TIMEOUT with a lower bound and an overrun, or (an engine declaring ``deadline_cap``) OOM at
    its relation cap."""
    if result.status is Status.OOM and declared(name, "deadline_cap"):
        return "max_relation_bytes" in result.reason
    return (result.status is Status.TIMEOUT and result.count >= 0
            and result.stats["deadline_overrun_s"] >= 0)


@pytest.mark.slow_cases("egsm")
@pytest.mark.parametrize("name", ENGINES)
def test_a_deadline_is_status_timeout_with_a_lower_bound(name, heavy):
    from common.engine.base import deadline_slack

    data, star = heavy
    engine = create_engine(name).prepare(data)
    timeout = 0.5
    # an engine that declares a launch the simulator cannot stop has no wall-time bound to measure
    # there (and simulated kernels compile nothing): its one run is both the first and the checked one
    unbounded = BACKEND == "simulator" and bool(declared(name, "simulator_launch"))
    result = engine.match(star, timeout_s=timeout)
    assert stopped_in_time(name, result), (name, result)
    # once compiled, the engine stops within the slack of its deadline; in the simulator an engine
    # that declares a launch it cannot stop there may run past it, and the result says so
    if not unbounded:
        again = time.perf_counter()
        result = engine.match(star, timeout_s=timeout)
        wall = time.perf_counter() - again
    assert stopped_in_time(name, result), (name, result)
    if unbounded:
        assert (result.stats["deadline_overrun_s"] <= deadline_slack(timeout)
                or "the CUDA simulator ran a kernel launch to its end" in result.reason), (name, result)
    else:
        assert wall < timeout + deadline_slack(timeout), (name, wall)


@pytest.mark.parametrize("name", ENGINES)
def test_a_device_memory_limit_too_small_is_status_oom(name, workload):
    data, queries, _ = workload[0]["labelled"]
    engine = create_engine(name, device_memory_limit=4096).prepare(data)     # no exception
    result = engine.match(queries[0])
    if declared(name, "oom"):
        assert not engine_class(name).uses_device
        assert (result.status, result.count) == (Status.OK, workload[1]["labelled"][0])
    else:
        assert (result.status, result.count) == (Status.OOM, 0), (name, result)
        assert "device allocation of" in result.reason and "exceeds the budget" in result.reason, result.reason
        assert common.match(data, queries[0], engine=name, device_memory_limit=4096).status is Status.OOM
        assert [r.status for r in engine.match_batch(queries)] == [Status.OOM] * len(queries)


@pytest.mark.parametrize("name", ENGINES)
def test_a_query_larger_than_the_engine_takes_is_unsupported(name, prepared):
    engine = prepared(name)
    most = engine_class(name).max_query_vertices
    if most is None:
        assert engine.unsupported_reason(Graph.from_edges(70, np.arange(69), np.arange(1, 70))) == ""
        return
    n = most + 1
    path = Graph.from_edges(n, np.arange(n - 1), np.arange(1, n), labels=np.zeros(n, np.int32), name="long")
    result = engine.match(path)
    assert result.status is Status.UNSUPPORTED and result.count == 0
    assert f"at most {most} query vertices" in result.reason, result.reason


@pytest.mark.parametrize("name", ENGINES)
def test_bad_input_raises_an_error_naming_the_problem(name, workload, prepared):
    engine = prepared(name)
    query = workload[0]["labelled"][1][0]
    with pytest.raises(RuntimeError, match="before prepare"):
        create_engine(name).match(query)
    with pytest.raises(TypeError, match="takes a query Graph"):
        engine.match("not a graph")
    with pytest.raises(ValueError, match="has no vertices"):
        engine.match(Graph.from_edges(0, [], [], name="empty"))
    with pytest.raises(ValueError, match="is directed but the data graph is undirected"):
        engine.match(Graph.from_edges(2, [0], [1], directed=True, name="arc"))
    with pytest.raises(ValueError, match="limit must be a positive"):
        engine.match(query, limit=0)
    with pytest.raises(ValueError, match="timeout_s must be positive"):
        engine.match(query, timeout_s=0)
    with pytest.raises(ValueError, match=r"does not take these options \(no_such_option\)"):
        create_engine(name, no_such_option=1)


def _documented_statistics() -> set[str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "statistics.md").read_text()
    return {name for row in re.findall(r"^\|\s*(`.*?)\s*\|", text, flags=re.M)
            for name in re.findall(r"`(\w+)`", row)}


@pytest.mark.parametrize("name", ENGINES)
def test_statistics_carry_the_required_names_and_only_documented_ones(name, workload, prepared):
    kinds, expected = workload
    data, queries, _ = kinds["labelled"]
    engine = prepared(name)
    documented = _documented_statistics()
    for query, count in zip(queries, expected["labelled"]):
        result = engine.match(query, collect=True)
        assert result.count == count
        undocumented = set(result.stats) - documented
        assert not undocumented, f"{name} reports {sorted(undocumented)}, not in docs/statistics.md"
        if declared(name, "statistics"):
            assert not {"order", "candidate_sizes"} & set(result.stats)
            continue
        order = [int(u) for u in result.stats["order"]]
        assert sorted(order) == list(range(query.num_vertices)), (name, order)
        sizes = [int(s) for s in result.stats["candidate_sizes"]]
        assert len(sizes) == query.num_vertices, (name, sizes)
        frequencies = data.label_frequencies[query.labels]
        for u in range(query.num_vertices):       # every image of u is a candidate of u, of u's label
            assert len(set(result.embeddings[:, u].tolist())) <= sizes[u] <= frequencies[u], (name, u, sizes)


@pytest.mark.slow_cases("egsm", "gmatch", "gsi", "sgsi")
@pytest.mark.parametrize("name", checks_for("peak"))
def test_a_querys_peak_device_memory_is_its_own(name, workload):
    """The peak of a query is the same on a fresh engine and after other queries (``collect``,
    ``limit``, a larger query, the same query) grew its buffers."""
    kinds, _ = workload
    data, labelled, _ = kinds["labelled"]
    first, second = labelled[1], random_walk_query(data, 5, seed=12, induced=False, name="walk5")
    fresh = [create_engine(name).prepare(data).match(second).peak_device_bytes]
    engine = create_engine(name).prepare(data)
    fresh.insert(0, engine.match(first).peak_device_bytes)
    assert (min(fresh) > 0) == engine_class(name).uses_device, (name, fresh)
    engine.match(second, collect=True)
    engine.match(random_walk_query(data, 6, seed=11, name="larger"), limit=5)
    assert [engine.match(first).peak_device_bytes, engine.match(second).peak_device_bytes] == fresh, name


@pytest.mark.slow_cases("egsm", "gmatch", "gsi", "sgsi")
@pytest.mark.parametrize("name", ENGINES)
def test_a_batch_answers_as_single_queries_do(name, workload, prepared):
    kinds, expected = workload
    data, queries, _ = kinds["labelled"]
    engine = prepared(name)
    batch = engine.match_batch(queries, collect=True)
    assert [r.query for r in batch] == [q.name for q in queries]
    assert [(r.status, r.count) for r in batch] == [(Status.OK, c) for c in expected["labelled"]], name
    for query, result in zip(queries, batch):
        single = engine.match(query, collect=True)
        assert sorted(map(tuple, result.embeddings.tolist())) == sorted(map(tuple, single.embeddings.tolist()))
    limited = engine.match_batch(queries, limit=1)
    assert [(r.status, r.count) for r in limited] == [(Status.LIMIT, 1)] * len(queries), name


@pytest.mark.parametrize("name", ENGINES)
def test_two_engines_of_one_kind_in_one_process_both_answer(name, workload):
    """Two engines of the same kind prepared on two data graphs in one process (as a user
    comparing graphs would) answer every query exactly, in turns: neither keeps memory the
    other needs (docs/design.md, "Device memory")."""
    kinds, expected = workload
    data, queries, _ = kinds["labelled"]
    other = rmat(32, 90, seed=15, labels=power_law_labels(32, 3, 1.0, seed=16), name="contract-other")
    other_counts = [create_engine("cpu").prepare(other).match(q).count for q in queries]
    first, second = create_engine(name).prepare(data), create_engine(name).prepare(other)
    for query, want, want_other in zip(queries, expected["labelled"], other_counts):
        a, b = first.match(query), second.match(query)
        assert (a.status, a.count) == (Status.OK, want), (name, query.name, a.reason)
        assert (b.status, b.count) == (Status.OK, want_other), (name, query.name, b.reason)
