"""EGSM batches in the simulator: ``match_batch`` (filter steps 1-2 of the batch in one launch,
then each query's own search) gives the counts, statuses and embeddings of one query at a time
and of the CPU reference, in a batch that mixes unsupported (edge-labelled, disconnected),
one-vertex, missing-label, limited, plain and timed-out queries; stats carry candidate_sizes
and order; the per-centre wedge-filter launches count as the one-block launch."""

from __future__ import annotations

import numpy as np
import pytest

import egsm.engine as egsm_engine
from common.engine.registry import create_engine
from common.engine.result import Status
from common.graph.bitmasks import neighbour_masks
from common.graph.generate import random_walk_query, rmat
from common.graph.model import Graph
from egsm.engine import EGSM
from egsm.filter import filtering_order, prune_phases


def _rows(result):
    return sorted(map(tuple, result.embeddings.tolist()))


@pytest.fixture(scope="module")
def data(rmat40):
    return rmat40


@pytest.fixture(scope="module")
def mixed(data):
    return [
        random_walk_query(data, 4, seed=1),                                   # 181 embeddings
        Graph.from_edges(2, [0], [1], labels=[0, 1], edge_labels=[1], name="edge-labelled"),
        random_walk_query(data, 6, seed=8),                                   # 8
        Graph.from_edges(4, [0, 2], [1, 3], labels=[0, 0, 1, 1], name="disconnected"),
        Graph.from_edges(1, [], [], labels=[2], name="one vertex"),
        Graph.from_edges(2, [0], [1], labels=[0, 99], name="missing label"),
        random_walk_query(data, 5, seed=7),                                   # 128
    ]


@pytest.fixture(scope="module")
def pair(data):
    """Two queries the wedge filter and the scan tests share: 6 vertices (8 embeddings) and 5
    vertices (128)."""
    return [random_walk_query(data, 6, seed=8), random_walk_query(data, 5, seed=7)]


@pytest.fixture(scope="module")
def wedge_always(data, pair):
    """``pair`` matched with the wedge filter on every index (``wedge_filter_min_edges=0``), the
    module's constants as shipped; the tests that compare against it run it once."""
    return [EGSM(wedge_filter_min_edges=0).prepare(data).match(q) for q in pair]


@pytest.fixture(scope="module")
def default_batch(data, pair):
    """``pair`` as one collected batch of the default engine, the module's constants as shipped."""
    return EGSM().prepare(data).match_batch(pair, collect=True)


@pytest.mark.slow
def test_batch_equals_one_at_a_time_and_reference(data, mixed):
    cpu = create_engine("cpu").prepare(data)
    engine = EGSM().prepare(data)
    for limit in (None, 20):
        batch = engine.match_batch(mixed, limit=limit, collect=True)
        single = [engine.match(q, limit=limit, collect=True) for q in mixed]
        want = [cpu.match(q, limit=limit, collect=True) for q in mixed]
        statuses = [r.status for r in batch]
        assert statuses.count(Status.UNSUPPORTED) == 2
        if limit is not None:
            assert statuses.count(Status.LIMIT) == 2          # 181 and 128 (the one-vertex: 13)
        assert statuses.count(Status.OK) == 5 - statuses.count(Status.LIMIT)
        for q, b, s, w in zip(mixed, batch, single, want):
            assert b.query == q.name
            assert b.status is s.status, (q.name, b.status, s.status)
            if b.status is Status.UNSUPPORTED:               # the cpu engine takes these
                continue
            assert b.status is w.status, (q.name, b.status, w.status)
            assert b.count == s.count == w.count, q.name
            assert b.embeddings.shape == (b.count, q.num_vertices)
            if b.status is Status.OK:                          # a limit keeps any b.count rows
                assert _rows(b) == _rows(s) == _rows(w), q.name
            else:
                assert set(_rows(b)) <= set(_rows(cpu.match(q, collect=True)))


@pytest.mark.slow
def test_stats_name_candidate_sizes_and_order(data, mixed):
    engine = EGSM().prepare(data)
    for q, r in zip(mixed, engine.match_batch(mixed)):
        if r.status is Status.UNSUPPORTED or q.name == "missing label":
            continue
        sizes, order = r.stats["candidate_sizes"], r.stats["order"]
        assert len(sizes) == q.num_vertices and min(sizes) > 0
        assert sorted(order) == list(range(q.num_vertices))
        assert "candidates" not in r.stats
    # a query stopped before grouping (no candidate) still names an order
    k = int(data.max_degree) + 1
    star = Graph.from_edges(k + 1, [0] * k, list(range(1, k + 1)), labels=[0] * (k + 1))
    r = engine.match(star)
    assert r.count == 0 and min(r.stats["candidate_sizes"]) == 0
    assert sorted(r.stats["order"]) == list(range(k + 1))


def _trap():
    """K20 (label 0) plus a label-1 and a label-2 vertex hanging off vertex 0; a 10-vertex path
    whose ends need those two neighbours maps both ends to vertex 0 only, so injectivity rejects
    every one of the ~10^10 partial paths at the last level: minutes on a GPU and far longer in
    the simulator, with no embedding."""
    n = 20
    src = [a for a in range(n) for b in range(a + 1, n)] + [0, 0]
    dst = [b for a in range(n) for b in range(a + 1, n)] + [n, n + 1]
    data = Graph.from_edges(n + 2, src, dst, labels=[0] * n + [1, 2], name="K12+2")
    k = 10
    qsrc = list(range(k - 1)) + [0, k - 1]
    qdst = list(range(1, k)) + [k, k + 1]
    trap = Graph.from_edges(k + 2, qsrc, qdst, labels=[0] * k + [1, 2], name="trap")
    return data, trap


@pytest.mark.slow
def test_batch_mixes_timeout_limit_and_unsupported():
    data, trap = _trap()
    triangle = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 0], name="triangle")
    leaf = Graph.from_edges(2, [0], [1], labels=[0, 1], name="leaf")             # 1 embedding
    labelled = Graph.from_edges(2, [0], [1], labels=[0, 0], edge_labels=[3], name="edge-labelled")
    queries = [triangle, trap, labelled, leaf]
    cpu = create_engine("cpu").prepare(data)
    engine = EGSM(variant="DFS").prepare(data)
    engine.match(trap, timeout_s=1e-9)                       # compile outside the deadline
    batch = engine.match_batch(queries, limit=50, collect=True, timeout_s=6.0)
    single = [engine.match(q, limit=50, collect=True, timeout_s=6.0) for q in queries]
    want = {q.name: cpu.match(q, limit=50, collect=True) for q in (triangle, leaf)}
    for q, b, s in zip(queries, batch, single):
        assert b.status is s.status, q.name
    assert [r.status for r in batch] == [Status.LIMIT, Status.TIMEOUT, Status.UNSUPPORTED, Status.OK]
    assert batch[0].count == 50 == want["triangle"].count
    assert batch[1].count == 0 and batch[1].embeddings.shape == (0, trap.num_vertices)
    assert batch[3].count == 1 == want["leaf"].count
    assert _rows(batch[3]) == _rows(single[3]) == _rows(want["leaf"])
    assert set(_rows(batch[0])) <= set(_rows(cpu.match(triangle, collect=True)))


@pytest.mark.slow
def test_per_centre_wedge_filter_equals_one_block(data, monkeypatch, pair, wedge_always):
    """The one-block wedge filter leaves the candidate edges that one launch per centre leaves
    (and it does remove some)."""
    cpu = create_engine("cpu").prepare(data)
    qs, fused = pair, wedge_always
    monkeypatch.setattr(egsm_engine, "FUSED_PRUNE_CELLS", 0)      # one launch per centre
    apart = [EGSM(wedge_filter_min_edges=0).prepare(data).match(q) for q in qs]
    for q, f, a in zip(qs, fused, apart):
        assert f.count == a.count == cpu.match(q).count
        assert f.stats["candidate_edges"] == a.stats["candidate_edges"]
    assert any(sum(r.stats["candidate_edges"]) < r.stats["candidate_edges_before_wedge"] for r in fused)
    # the one-block filter ran centres together: some phase holds more than one centre
    widths = []
    for q in qs:
        own = neighbour_masks(q.offsets, q.neighbors)
        delta = filtering_order(own)
        bounds = prune_phases(own, np.concatenate((delta, delta[::-1]))).tolist()
        widths += [b - a for a, b in zip(bounds, bounds[1:])]
    assert max(widths) > 1


@pytest.mark.slow_cases("total-on-device", "total-on-host")
@pytest.mark.parametrize("small_scan", [None, 0], ids=["total-on-device", "total-on-host"])
def test_wedge_filter_skipped_below_min_edges(data, monkeypatch, small_scan, pair, wedge_always):
    """The wedge filter runs on indexes of at least ``wedge_filter_min_edges`` level-3 entries:
    at the query's own total it runs (the paper's result), one above it the index is NoF3's;
    compared on the device (one-block scan: the total stays there) and on the host (multi-block
    scan); the default skips these tiny indexes. Counts never change. On the host, the 5-vertex
    query only: the one whose candidate edges the filter prunes (the 6-vertex query's it keeps),
    the same comparison path at half the simulated launches."""
    import egsm.layout as layout
    if small_scan is not None:
        monkeypatch.setattr(layout, "SMALL_SCAN", small_scan)
    cpu = create_engine("cpu").prepare(data)
    nof3 = EGSM(variant="NoF3").prepare(data)
    pruned = 0
    for i, q in enumerate(pair):
        if small_scan is not None and i == 0:
            continue
        # with the constants as shipped, the module's shared run; with SMALL_SCAN patched, its own
        always = wedge_always[i] if small_scan is None else EGSM(wedge_filter_min_edges=0).prepare(data).match(q)
        total = always.stats["candidate_edges_before_wedge"]
        at = EGSM(wedge_filter_min_edges=total).prepare(data).match(q)
        above = EGSM(wedge_filter_min_edges=total + 1).prepare(data).match(q)
        default = EGSM().prepare(data).match(q)
        plain = nof3.match(q)
        assert always.count == at.count == above.count == default.count == plain.count == cpu.match(q).count
        assert always.stats["wedge_filter_applied"] and at.stats["wedge_filter_applied"]
        assert not above.stats["wedge_filter_applied"] and not default.stats["wedge_filter_applied"]
        assert at.stats["candidate_edges"] == always.stats["candidate_edges"]
        assert above.stats["candidate_edges"] == default.stats["candidate_edges"] == plain.stats["candidate_edges"]
        pruned += sum(always.stats["candidate_edges"]) < sum(plain.stats["candidate_edges"])
    assert pruned                                   # the filter removed edges somewhere
    with pytest.raises(ValueError, match="wedge_filter_min_edges"):
        EGSM(wedge_filter_min_edges=-1)


@pytest.mark.slow
def test_batch_larger_than_one_filter_launch(data, monkeypatch):
    # three shared filter launches of two queries (BATCH_MAX = 2): counts and peaks per query
    import egsm.layout as layout
    monkeypatch.setattr(layout, "BATCH_MAX", 2)
    cpu = create_engine("cpu").prepare(data)
    qs = [random_walk_query(data, k, seed=s) for k, s in ((4, 1), (6, 8), (5, 7), (4, 3), (5, 2))]
    engine = EGSM().prepare(data)
    got = engine.match_batch(qs)
    assert [r.count for r in got] == [cpu.match(q).count for q in qs]
    assert all(r.stats.get("batched_filter", 1) <= 2 for r in got)
    assert all(r.peak_device_bytes > 0 for r in got)


@pytest.mark.parametrize("small_scan, bound, fused", [(0, None, True), (0, 0, True), (None, 0, True),
                                                      (None, None, False)])
@pytest.mark.slow_cases("0-0-True", "0-None-True", "None-0-True", "None-None-False")
def test_scan_and_compaction_paths_agree(data, monkeypatch, small_scan, bound, fused, pair, default_batch):
    """Multi-block scans (SMALL_SCAN = 0), exact sizes read back (BOUND_COMPACT_SLOTS = 0:
    the level-3 total and the compacted totals) and one launch per index step
    (``fused_index=False``) give the counts, embeddings and index statistics of the default: the
    index of these small queries in one cooperative launch, the lists sized by upper bounds (the
    candidates' degree sums)."""
    import egsm.layout as layout
    cpu = create_engine("cpu").prepare(data)
    qs, default = pair, default_batch
    if small_scan is not None:
        monkeypatch.setattr(layout, "SMALL_SCAN", small_scan)
    if bound is not None:
        monkeypatch.setattr(egsm_engine, "BOUND_COMPACT_SLOTS", bound)
    other = EGSM(fused_index=fused).prepare(data).match_batch(qs, collect=True)
    for q, a, b in zip(qs, default, other):
        assert a.count == b.count == cpu.match(q).count
        assert _rows(a) == _rows(b)
        for key in ("candidate_edges", "candidate_edges_before_wedge", "candidate_index_bytes"):
            assert a.stats[key] == b.stats[key], key


@pytest.mark.slow
def test_fixed_cost_launches_and_copies(data, kernel_calls):
    """A small query: one filter launch, the index in one launch (six with the wedge filter
    between them, or with ``fused_index=False``), no per-centre wedge-filter launches, one-block
    scans, one launch per stage, 3 host reads (|C(u)| with the degree sums, ctrl + einfo, final
    ctrl: the level-3 lists are sized by the degree-sum bound), no synchronize; a batch shares
    the filter launch and its copy. Fills (memsets on a GPU, launches here) are not counted. The
    one-block wedge filter is launched when asked for on every index; by default this index's
    level-3 bound is under ``wedge_filter_min_edges``: no launch."""
    cpu = create_engine("cpu").prepare(data)
    q = random_walk_query(data, 6, seed=8)
    calls = kernel_calls
    for min_edges, fused, prunes, index_launches in ((0, True, 1, 6), (None, True, 0, 1), (None, False, 0, 6)):
        engine = EGSM(wedge_filter_min_edges=min_edges, fused_index=fused).prepare(data)
        engine.match(q)                               # kernels compiled, buffers grown
        calls.update(launches=[], copies=0, uploads=0, syncs=0)
        got = engine.match(q)
        assert got.count == cpu.match(q).count > 0
        stages = len(got.stats["groups"])
        launched = [name for name in calls["launches"] if name != "_fill_kernel"]
        assert launched.count("candidate_kernel") == 1 and launched.count("prune_all_kernel") == prunes
        assert "prune_kernel" not in launched and "scan_tiles" not in launched
        assert launched.count("extend_kernel") == stages
        assert launched.count("small_index_kernel") == (index_launches == 1)
        assert len(launched) == 1 + index_launches + prunes + stages, launched
        assert calls["copies"] == 3 and calls["syncs"] == 0
    qs = [q, random_walk_query(data, 5, seed=7), random_walk_query(data, 4, seed=1)]
    calls["launches"].clear()
    calls["copies"] = 0
    got = engine.match_batch(qs)
    assert [r.count for r in got] == [cpu.match(x).count for x in qs]
    assert calls["launches"].count("candidate_kernel") == 1
    assert calls["copies"] == 1 + 2 * len(qs)


def test_overfull_cuckoo_tables_are_rebuilt_then_reported(monkeypatch):
    # one bucket per table (16 cells) for 20 candidates: every build attempt fails, the host
    # sees the failure flag through the one ctrl + einfo copy, rebuilds MAX_REBUILDS times, raises
    import egsm.cuckoo_trie as trie
    g = rmat(20, 80, seed=4, labels=np.zeros(20, np.int32), name="unlabelled20")
    q = Graph.from_edges(2, [0], [1], labels=[0, 0])
    engine = EGSM().prepare(g)
    monkeypatch.setattr(egsm_engine, "table_sizes", lambda sizes: np.ones(len(sizes), np.int64))
    monkeypatch.setattr(egsm_engine, "MAX_REBUILDS", 2)
    monkeypatch.setattr(trie, "MAX_CUCKOO_LOOP", 2)            # the simulator reads it per launch
    with pytest.raises(RuntimeError, match="cuckoo build failed"):
        engine.match(q)
    monkeypatch.undo()
    assert engine.match(q).count == create_engine("cpu").prepare(g).match(q).count
