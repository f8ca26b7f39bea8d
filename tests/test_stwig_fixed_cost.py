"""STwig's per-query fixed cost and shape (issue "one shape for every engine"): the one-call CPU
exploration equals the resumable one, the one-launch split equals the per-level launches, a
query's launches and copies stay few, match_twigs goes through the base class's checks, the
engine uses the shared BufferPool and ``self.budget``, and stats carry ``order`` and
``candidate_sizes``."""

from __future__ import annotations

import numpy as np
import pytest

import stwig.explore as explore_module
import stwig.join as hashjoin_module
from common.cpu.reference import ReferenceMatcher
from common.engine.deadline import Deadline
from common.engine.result import Status
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.pool import BufferPool
from common.gpu.runtime import simulator_active
from common.graph import generate
from common.graph.model import Graph
from stwig import STwig, STwigCPU
from stwig.order import Twig, decompose

SIM = dict(threads_per_block=8, blocks=2)


@pytest.fixture(scope="module")
def workload():
    data = generate.rmat(40, 110, 0.4, 0.2, 0.2, 0.2, seed=3, labels=3)
    queries = [generate.random_walk_query(data, k, seed=s, induced=False) for k in (4, 5, 6) for s in range(3)]
    queries += [generate.stwig_query(k, num_labels=3, seed=s) for k in (4, 5) for s in range(2)]
    return data, queries, ReferenceMatcher().prepare(data)


def test_fast_exploration_equals_the_resumable_path(workload, monkeypatch):
    data, queries, _ = workload
    explorer = explore_module.CpuExplorer(data)
    compared = 0
    for query in queries:
        twigs = decompose(query, data.label_frequencies)
        for homomorphic in (False, True):
            fast = explorer.explore(twigs, query.labels, homomorphic=homomorphic, deadline=Deadline(None),
                                    max_bytes=1 << 30)
            with monkeypatch.context() as m:
                m.setattr(explore_module, "FAST_STEPS", 3)          # cut inside the first STwigs
                slow = explorer.explore(twigs, query.labels, homomorphic=homomorphic,
                                        deadline=Deadline(None), max_bytes=1 << 30)
            assert np.array_equal(fast[0], slow[0]), query.name
            assert fast[1:] == slow[1:], query.name
            compared += fast[0].size > 0
    assert compared >= 5


def test_counts_exact_when_the_fast_path_runs_out_of_steps(workload, monkeypatch):
    data, queries, ref = workload
    monkeypatch.setattr(explore_module, "FAST_STEPS", 5)
    engine = STwigCPU().prepare(data)
    nonzero = 0
    for query in queries:
        expected = ref.match(query).count
        assert engine.match(query).count == expected, query.name
        nonzero += expected > 0
    assert nonzero >= 3


def test_relation_cap_is_oom_in_the_fast_path(workload):
    data, queries, _ = workload
    engine = STwigCPU(max_relation_bytes=8).prepare(data)
    result = engine.match(queries[0])
    assert result.status is Status.OOM and "max_relation_bytes" in result.reason


def _sorted_rows(a):
    return a[np.lexsort(a.T[::-1])] if a.size else a


def _units(join):
    urec = join.urec.copy_to_host()[:join.units, :join.depth] if join.depth else None
    urow = join.urow.copy_to_host()[:join.units] if join.depth else None
    return join.depth, join.units, urow, urec


@pytest.mark.slow
def test_one_launch_split_equals_per_level_launches(workload):
    data, queries, ref = workload
    engines = {}
    for small in (True, False):
        engine = STwig(**SIM, split_rows=1 << 30, split_levels=8, collect_batch_rows=50).prepare(data)
        engine._join_state.small_split = small
        engines[small] = engine
    deep = 0
    for query in queries[::2]:
        got = {}
        for small, engine in engines.items():
            result = engine.match(query, collect=True)
            assert result.count == ref.match(query).count, (query.name, small)
            if result.stats.get("split_depth") is not None:
                got[small] = (_units(engine._join_state), result.embeddings)
        if got:
            (d1, u1, row1, rec1), emb1 = got[True]
            (d2, u2, row2, rec2), emb2 = got[False]
            assert (d1, u1) == (d2, u2), query.name
            if d1:                  # the same units (chain order follows the build's atomics)
                assert np.array_equal(_sorted_rows(np.column_stack([row1, rec1])),
                                      _sorted_rows(np.column_stack([row2, rec2]))), query.name
                deep += d1 >= 2
            assert np.array_equal(_sorted_rows(emb1), _sorted_rows(emb2)), query.name
    assert deep >= 1


def test_a_small_query_takes_few_launches_and_copies(kernel_calls):
    data = generate.rmat(40, 110, 0.4, 0.2, 0.2, 0.2, seed=3, labels=6)
    queries = [generate.random_walk_query(data, k, seed=s, induced=False) for k in (3, 4, 5) for s in range(4)]
    ref = ReferenceMatcher().prepare(data)
    engine = STwig(**SIM).prepare(data)
    joined = 0
    for query in queries:
        engine.match(query)                                        # buffers grown
        kernel_calls.update(launches=[], copies=0, uploads=0)
        result = engine.match(query)
        launched, to_host, to_device = len(kernel_calls["launches"]), kernel_calls["copies"], kernel_calls["uploads"]
        assert result.count == ref.match(query).count
        if "join_units" not in result.stats:
            continue
        launches = result.stats["join_launches"]
        # Build, one split launch, the join launches, and the head and ctrl fills (driver
        # memsets on a GPU, launches in the simulator); units past the one-launch split's
        # capacity cost a count, a scan (<= 3 launches, one copy back) and a fill per level.
        small = result.stats["join_units"] <= hashjoin_module.SMALL_SPLIT_UNITS
        joined += small
        levels = 0 if small else result.stats["split_depth"]
        fills = 2 if simulator_active() else 0
        assert 0 < launched <= 2 + fills + launches + 5 * levels, (query.name, launched, result.stats)
        assert to_device <= 2, (query.name, to_device)      # relations, plan
        assert 0 < to_host <= 1 + launches + levels, (query.name, to_host)
    assert joined >= 3


def test_match_twigs_goes_through_the_base_class_checks(workload):
    data, queries, _ = workload
    engine = STwigCPU().prepare(data)
    query = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], [0, 0, 0])
    twigs = [Twig(0, (1, 2)), Twig(1, (2,))]
    with pytest.raises(ValueError, match="limit"):
        engine.match_twigs(query, twigs, limit=0)
    with pytest.raises(ValueError, match="timeout_s"):
        engine.match_twigs(query, twigs, timeout_s=-1)
    with pytest.raises(TypeError):
        engine.match_twigs("not a graph", twigs)
    missing = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], [0, 0, 99])
    result = engine.match_twigs(missing, twigs, collect=True)
    assert result.count == 0 and result.status is Status.OK and result.embeddings.shape == (0, 3)
    assert "label" in result.stats["note"]
    with pytest.raises(ValueError):
        engine.match_twigs(query, [Twig(0, (1,))])                 # does not cover the query
    ok = engine.match_twigs(query, twigs, limit=1)
    assert ok.count == min(1, ReferenceMatcher().prepare(data).match(query).count)


def test_engine_uses_the_shared_pool_and_budget(workload):
    data, queries, _ = workload
    engine = STwig(**SIM).prepare(data)
    assert not hasattr(engine, "_budget")
    assert not hasattr(hashjoin_module, "DeviceBuffers")
    assert isinstance(engine.budget, DeviceMemoryBudget)
    assert isinstance(engine.pool, BufferPool) and engine.pool.budget is engine.budget
    assert engine._join_state.pool is engine.pool
    peaks = [engine.match(q).peak_device_bytes for q in queries]
    assert max(peaks) > 0
    again = engine.match(queries[int(np.argmin(peaks))]).peak_device_bytes
    assert again == min(peaks)            # a query's own peak, not the largest seen so far


@pytest.mark.parametrize("make", [lambda: STwig(**SIM), lambda: STwigCPU(),
                                  lambda: STwig(exploration="gpu", threads_per_block=16, blocks=2)],
                         ids=["stwig", "stwig-cpu", "stwig-gpu-explore"])
@pytest.mark.slow_cases("stwig-gpu-explore")
def test_stats_carry_order_and_candidate_sizes(workload, make):
    data, queries, ref = workload
    engine = make().prepare(data)
    checked = 0
    for query in queries:
        result = engine.match(query, collect=True)
        assert result.count == ref.match(query).count
        order, sizes = result.stats["order"], result.stats["candidate_sizes"]
        nq = query.num_vertices
        assert sorted(order) == list(range(nq))
        assert len(sizes) == nq
        frequencies = data.label_frequencies[query.labels]
        assert all(0 <= s <= f for s, f in zip(sizes, frequencies))
        for v in range(nq):                    # every embedding's image is a candidate
            assert np.unique(result.embeddings[:, v]).size <= sizes[v]
        if result.count:
            checked += 1
            assert all(s > 0 for s in sizes)
            # the plan binds R_1's columns first, in STwig order
            twig = result.stats["twigs"][0]
            assert order[:len(twig)] == twig
    assert checked >= 3
