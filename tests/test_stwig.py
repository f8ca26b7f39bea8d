"""STwig engines (GPU pipeline in the simulator, CPU baseline): counts and embeddings against the
reference matcher (injective and homomorphic), the paper's Fig. 1 example, decomposition
invariants, limit / collect / timeout / oom statuses and rejected inputs."""

from __future__ import annotations

import numpy as np
import pytest

from common.cpu.reference import ReferenceMatcher
from common.engine.result import PHASES, Status
from common.graph import generate
from common.graph.model import Graph
from stwig import STwig, STwigCPU
from stwig.order import Twig, check_twigs, decompose, estimated_order, join_plan

# Small launch shapes: the simulator runs one Python thread per CUDA thread.
SIM = dict(threads_per_block=8, blocks=2)
# "-resume": a step budget of 1-3 steps per thread and launch, so that nearly every unit's DFS is
# saved and resumed many times; "-split": the probe side split for every R_1 (split_rows above
# any |R_1|) at the first join level, or "-split2" the first two; "-paper": one unit per R_1
# row (split_probe=False).
ALWAYS_SPLIT = 1 << 30
ENGINES = {
    "gpu": lambda: STwig(**SIM, collect_batch_rows=5),
    "gpu-explore": lambda: STwig(exploration="gpu", threads_per_block=16, blocks=2, split_probe=False),
    "gpu-resume-split": lambda: STwig(**SIM, step_budget=3, split_rows=ALWAYS_SPLIT,
                                      split_levels=1, collect_batch_rows=7),
    "gpu-split2": lambda: STwig(**SIM, split_rows=ALWAYS_SPLIT, split_levels=2),
    "gpu-resume-paper": lambda: STwig(**SIM, step_budget=2, split_probe=False),
    "cpu": lambda: STwigCPU(collect_batch_rows=5),
    "cpu-parallel": lambda: STwigCPU(parallel=True),
    "cpu-stwig-order": lambda: STwigCPU(join_order="stwig"),
    "cpu-resume-split": lambda: STwigCPU(step_budget=1, split_rows=ALWAYS_SPLIT, split_levels=1,
                                         collect_batch_rows=5),
    "cpu-resume-split2": lambda: STwigCPU(step_budget=2, split_rows=ALWAYS_SPLIT, split_levels=2),
    "cpu-split-deep": lambda: STwigCPU(split_rows=ALWAYS_SPLIT, split_levels=8),
    "cpu-resume-paper": lambda: STwigCPU(step_budget=2, split_probe=False),
    "cpu-parallel-resume-split": lambda: STwigCPU(parallel=True, step_budget=3, split_rows=ALWAYS_SPLIT,
                                                  split_levels=1),
}
RESUMING = [name for name in ENGINES if "-resume" in name]
# Extra simulator engines run every third query (the simulator is slow).
SAMPLED = {"gpu-resume-split", "gpu-resume-paper", "gpu-split2"}


def _graph(n, m, labels, seed):
    return generate.rmat(n, m, 0.4, 0.2, 0.2, 0.2, seed=seed, labels=labels)


@pytest.fixture(scope="module")
def workloads():
    """(data graph, queries): the paper's shape (N vertices, 2N random edges) and walk queries."""
    out = []
    for seed, (n, m, labels) in enumerate([(30, 75, 3), (24, 70, 2)]):
        data = _graph(n, m, labels, seed)
        queries = [generate.stwig_query(k, num_labels=labels, seed=s) for k in (3, 4, 5) for s in range(2)]
        queries += [generate.random_walk_query(data, k, seed=s, induced=False) for k in (4, 6) for s in range(2)]
        out.append((data, queries))
    return out


@pytest.fixture(scope="module")
def prepared(workloads):
    return [({name: make().prepare(data) for name, make in ENGINES.items()},
             ReferenceMatcher().prepare(data), queries) for data, queries in workloads]


@pytest.mark.slow_cases("gpu-False", "gpu-explore-False", "gpu-explore-True")
@pytest.mark.parametrize("homomorphic", [False, True])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_counts_equal_reference(prepared, engine, homomorphic):
    nonzero = 0
    for engines, ref, queries in prepared:
        for query in queries[::3] if engine in SAMPLED else queries:
            expected = ref.match(query, homomorphic=homomorphic).count
            result = engines[engine].match(query, homomorphic=homomorphic)
            assert result.status is Status.OK
            assert result.count == expected, (query.name, homomorphic, result.stats)
            nonzero += expected > 0
    assert nonzero >= 3


@pytest.mark.parametrize("engine", ["gpu", "cpu", "cpu-parallel", "gpu-split2", "cpu-split-deep",
                                    *RESUMING])
@pytest.mark.slow_cases("gpu-resume-paper", "gpu-resume-split", "gpu-split2", "gpu")
def test_collected_embeddings_equal_reference(prepared, engine):
    engines, ref, queries = prepared[1]
    for query in queries[::3] if engine in SAMPLED else queries:
        for homomorphic in (False, True):
            expected = ref.match(query, homomorphic=homomorphic, collect=True).embeddings
            result = engines[engine].match(query, homomorphic=homomorphic, collect=True)
            assert result.embeddings.shape == expected.shape
            assert sorted(map(tuple, result.embeddings)) == sorted(map(tuple, expected))
            assert result.count == len(expected)


def _fig1():
    """Fig. 1 of the paper as reconstructed from its text: A1 A2 B1 B2 C1 D1 D2 D3 E1."""
    names = ["A1", "A2", "B1", "B2", "C1", "D1", "D2", "D3", "E1"]
    labels = [0, 0, 1, 1, 2, 3, 3, 3, 4]
    edges = [("A1", "B1"), ("A1", "C1"), ("A2", "B2"), ("A2", "C1"), ("B1", "C1"), ("B1", "D1"),
             ("D1", "E1"), ("D2", "E1"), ("D3", "E1")]
    idx = {name: i for i, name in enumerate(names)}
    src, dst = zip(*[(idx[a], idx[b]) for a, b in edges])
    data = Graph.from_edges(len(names), src, dst, labels)
    # Query A..E = 0..4: A-B, A-C, B-C, B-D, D-E.
    query = Graph.from_edges(5, [0, 0, 1, 1, 3], [1, 2, 2, 3, 4], [0, 1, 2, 3, 4])
    twigs = [Twig(0, (1, 2)), Twig(1, (2, 3)), Twig(3, (4,))]
    return data, query, twigs, [idx[x] for x in ("A1", "B1", "C1", "D1", "E1")]


@pytest.mark.parametrize("engine", ["gpu", "gpu-explore", "cpu", "gpu-resume-split",
                                    "cpu-resume-split"])
def test_fig1_example_gives_its_single_answer(engine):
    data, query, twigs, answer = _fig1()
    matcher = ENGINES[engine]().prepare(data)
    for homomorphic in (False, True):
        result = matcher.match_twigs(query, twigs, collect=True, homomorphic=homomorphic)
        assert result.count == 1
        assert result.embeddings.tolist() == [answer]
        # R1 = {(A1,B1,C1), (A2,B2,C1)}, R2 = {(B1,C1,D1)}, R3 = {(D1,E1)}: D2, D3 pruned.
        assert result.stats["relation_rows"] == [2, 1, 1]
    assert matcher.match(query).count == 1


def test_fig1_join_plan():
    _, query, twigs, _ = _fig1()
    plan = join_plan(twigs, query.num_vertices)
    assert plan.vertex_of_slot.tolist() == [0, 1, 2, 3, 4]
    assert plan.nkeys.tolist() == [2, 1] and plan.nnew.tolist() == [1, 1]
    assert plan.keyslot[0, :2].tolist() == [1, 2] and plan.newcol[0, 0] == 2
    assert plan.first_new_slot.tolist() == [3, 4]


def test_decomposition_is_an_edge_disjoint_cover_in_stwig_order():
    data = _graph(64, 200, 4, 3)
    for k in range(2, 14):
        for seed in range(4):
            query = generate.stwig_query(k, num_labels=4, seed=seed)
            twigs = decompose(query, data.label_frequencies)
            check_twigs(query, twigs)
            # Sun et al.'s greedy roots both endpoints of a chosen edge: at most 2 * |V(Q)| / 2 twigs.
            assert len(twigs) <= max(1, query.num_vertices - 1)


def test_check_twigs_rejects_bad_decompositions():
    _, query, twigs, _ = _fig1()
    with pytest.raises(ValueError):
        check_twigs(query, [twigs[0], twigs[2], twigs[1]])        # D is not bound before (D; E)
    with pytest.raises(ValueError):
        check_twigs(query, twigs[:2])                              # D-E uncovered
    with pytest.raises(ValueError):
        check_twigs(query, [*twigs, Twig(4, (3,))])                # D-E twice


@pytest.mark.slow_cases("gpu")
@pytest.mark.parametrize("engine", ["gpu", "cpu"])
def test_cliques_with_one_label_count_automorphic_copies(engine):
    data = _graph(14, 50, 1, 7)
    ref = ReferenceMatcher().prepare(data)
    matcher = ENGINES[engine]().prepare(data)
    for k in (3, 4):
        src, dst = np.triu_indices(k, 1)
        clique = Graph.from_edges(k, src, dst, np.zeros(k, np.int32))
        for homomorphic in (False, True):
            expected = ref.match(clique, homomorphic=homomorphic).count
            assert expected > 0
            assert matcher.match(clique, homomorphic=homomorphic).count == expected


@pytest.mark.slow_cases("gpu")
@pytest.mark.parametrize("engine", ["gpu", "cpu"])
def test_star_single_vertex_and_deep_queries(engine):
    data = _graph(40, 60, 2, 11)
    ref = ReferenceMatcher().prepare(data)
    matcher = ENGINES[engine]().prepare(data)
    star = Graph.from_edges(4, [0, 0, 0], [1, 2, 3], [0, 1, 1, 0])
    single = Graph.from_edges(1, [], [], [1])
    path = Graph.from_edges(10, np.arange(9), np.arange(1, 10), np.arange(10) % 2)
    cycle = Graph.from_edges(8, np.arange(8), (np.arange(8) + 1) % 8, np.zeros(8, np.int32))
    for query in (star, single, path, cycle):
        for homomorphic in (False, True):
            expected = ref.match(query, homomorphic=homomorphic, collect=True)
            result = matcher.match(query, homomorphic=homomorphic, collect=True)
            assert result.count == expected.count, (query, homomorphic)
            assert sorted(map(tuple, result.embeddings)) == sorted(map(tuple, expected.embeddings))
    assert len(decompose(path, data.label_frequencies)) >= 5       # >= 4 sub-joins deep


@pytest.mark.slow_cases("gpu-resume-split")
@pytest.mark.parametrize("engine", ["gpu", "cpu", "gpu-resume-split", "cpu-resume-paper"])
def test_limit_stops_at_limit(prepared, engine):
    engines, ref, queries = prepared[1]
    matcher = engines[engine]
    query = max(queries, key=lambda q: ref.match(q).count)
    expected = ref.match(query, collect=True)
    everything = set(map(tuple, expected.embeddings))
    for limit in (1, expected.count // 2 + 1):
        result = matcher.match(query, limit=limit, collect=True)
        assert result.status is Status.LIMIT and result.count == limit
        assert len(result.embeddings) == limit and set(map(tuple, result.embeddings)) <= everything
        assert matcher.match(query, limit=limit).status is Status.LIMIT
    above = matcher.match(query, limit=expected.count + 1)
    assert above.status is Status.OK and above.count == expected.count


@pytest.mark.parametrize("engine", ["gpu", "cpu"])
def test_timeout_and_memory_caps_become_statuses(prepared, engine):
    engines, ref, queries = prepared[1]
    query = max(queries, key=lambda q: ref.match(q).count)
    stopped = engines[engine].match(query, timeout_s=1e-9)
    assert stopped.status is Status.TIMEOUT and stopped.stats["timeout_in"] == "exploration"
    assert stopped.phases["filter"] > 0          # the time spent exploring is still reported
    capped = {"gpu": STwig(**SIM, max_relation_bytes=64), "cpu": STwigCPU(max_relation_bytes=64)}
    small = capped[engine].prepare(_graph(24, 70, 2, 1))
    result = small.match(query)
    assert result.status is Status.OOM and "max_relation_bytes" in result.reason
    assert result.reason.startswith("host allocation of"), result.reason     # a host cap, not the device's


def test_device_memory_limit_gives_oom():
    data = _graph(24, 70, 2, 1)
    query = generate.random_walk_query(data, 5, seed=0, induced=False)
    matcher = STwig(**SIM, device_memory_limit=256).prepare(data)
    result = matcher.match(query)
    assert result.status is Status.OOM and result.count == 0
    assert STwig(**SIM).prepare(data).match(query).status is Status.OK


def test_phases_and_breakdown_are_reported(prepared):
    engines, _, queries = prepared[0]
    for name in ("gpu", "cpu"):
        result = engines[name].match(queries[-1])
        assert set(result.phases) <= set(PHASES)
        for key in ("explore_s", "hash_s", "join_s"):
            assert result.stats[key] >= 0.0
        assert result.stats["num_twigs"] == len(result.stats["relation_rows"])


def test_rejects_edge_labels_directed_and_bad_options():
    data = Graph.from_edges(4, [0, 1, 2], [1, 2, 3], [0, 0, 0, 0], [1, 2, 1])
    query = Graph.from_edges(2, [0], [1], [0, 0], [1])
    result = STwig(**SIM).prepare(data).match(query)
    assert result.status is Status.UNSUPPORTED and "edge labels" in result.reason
    directed = Graph.from_edges(3, [0, 1], [1, 2], [0, 0, 0], directed=True)
    result = STwigCPU().prepare(directed).match(directed)
    assert result.status is Status.UNSUPPORTED
    with pytest.raises(ValueError):
        STwig(exploration="fpga")
    with pytest.raises(ValueError):
        STwig(threads_per_block=0)
    with pytest.raises(ValueError):
        STwigCPU(max_relation_bytes=0)
    with pytest.raises(ValueError):
        STwig(step_budget=0)
    with pytest.raises(ValueError):
        STwigCPU(split_rows=-1)
    with pytest.raises(ValueError):
        STwig(split_levels=0)


def test_decomposition_follows_the_greedy_scores():
    """f(v) = remaining degree / label frequency; the pair of largest f(v) + f(u) (ties: smaller
    ids) roots the first STwig at its larger-f end, then one at the other end if edges remain."""
    src, dst = [0, 0, 1, 2], [1, 2, 2, 3]            # a triangle 0-1-2 and a tail 2-3
    alike = Graph.from_edges(4, src, dst, [0, 0, 0, 0])
    assert decompose(alike, np.array([10])) == [Twig(2, (0, 1, 3)), Twig(0, (1,))]
    rare_first = Graph.from_edges(4, src, dst, [1, 0, 0, 0])
    assert decompose(rare_first, np.array([10, 1])) == [Twig(0, (1, 2)), Twig(2, (1, 3))]
    with pytest.raises(ValueError, match="label"):
        decompose(rare_first, np.array([10]))


def test_estimated_join_order_is_a_connected_permutation():
    data = _graph(64, 200, 4, 3)
    rng = np.random.default_rng(0)
    for k in range(4, 12):
        query = generate.stwig_query(k, num_labels=4, seed=k)
        twigs = decompose(query, data.label_frequencies)
        rows = rng.integers(1, 1000, len(twigs)).tolist()
        distinct = [rng.integers(1, 50, len(t.columns)).tolist() for t in twigs]
        order = estimated_order(twigs, rows, distinct)
        plan = join_plan(twigs, k, order)             # raises unless each step shares a vertex
        assert sorted(plan.build_order) == list(range(1, len(twigs)))
    _, query, twigs, _ = _fig1()
    with pytest.raises(ValueError):
        join_plan(twigs, 5, [2, 1])                   # (D; E) before D is bound


def test_resumed_runs_take_many_launches_and_split_only_when_asked(prepared):
    """The resume engines really save and resume (many launches); the split engines really
    split (work units = R_1 rows extended by matching build records), the paper's never does,
    and GPU and CPU make the same units."""
    engines, ref, queries = prepared[0]
    query = max(queries, key=lambda q: ref.match(q).count)
    expected = ref.match(query).count
    units = {}
    for name in [*RESUMING, "gpu", "cpu", "gpu-split2", "cpu-split-deep"]:
        result = engines[name].match(query)
        assert result.count == expected, name
        stats = result.stats
        depth = {"-split2": 2, "-split-deep": stats["num_twigs"] - 1, "-split": 1}
        want = next((d for key, d in depth.items() if key in name), 0)
        if name == "gpu":       # split while fewer units than 4 x its 16 threads
            want = stats["split_depth"]
            assert want >= 1
            assert stats["join_units"] >= 64 or want == stats["num_twigs"] - 1
        assert stats["split_depth"] == want, (name, stats)
        if "-resume" in name:
            assert stats["join_launches"] >= 5, (name, stats)
        if want == 0:
            assert stats["join_units"] == stats["relation_rows"][0]
        units.setdefault(want, set()).add(stats["join_units"])
    assert all(len(v) == 1 for v in units.values()), units
    assert expected in units[stats["num_twigs"] - 1]   # split to the last table: one unit a result


def _hub_and_clique(clique: int):
    """A hub (the only label-0 vertex) joined to a one-label clique, and a query hub - path of
    8 label-1 vertices: R_1 = hub x its neighbours (``clique`` rows), each the root of a
    subtree of ~clique^7 paths, far more than any test can enumerate."""
    src, dst = np.triu_indices(clique, 1)
    src = np.concatenate([src + 1, np.zeros(clique, np.int64)])
    dst = np.concatenate([dst + 1, np.arange(1, clique + 1)])
    labels = np.r_[0, np.ones(clique, np.int32)]
    data = Graph.from_edges(clique + 1, src, dst, labels)
    query = Graph.from_edges(9, np.arange(8), np.arange(1, 9), np.r_[0, np.ones(8, np.int32)])
    return data, query


@pytest.mark.parametrize("engine,clique,timeout,within", [
    ("cpu", 60, 0.3, 2.0), ("cpu-parallel", 60, 0.3, 2.0), ("gpu", 12, 0.5, 8.0)])
@pytest.mark.parametrize("collect", [False, True])
def test_timeout_is_honoured_inside_a_huge_probe_row(engine, clique, timeout, within, collect):
    import time

    data, query = _hub_and_clique(clique)
    matcher = ENGINES[engine]().prepare(data)
    began = time.perf_counter()
    result = matcher.match(query, timeout_s=timeout, collect=collect)
    elapsed = time.perf_counter() - began
    assert result.status is Status.TIMEOUT and result.stats["timeout_in"] == "join"
    assert result.stats["relation_rows"][0] == clique
    assert elapsed < timeout + within, elapsed
    if collect:
        assert result.embeddings.shape == (result.count, query.num_vertices)
