"""SGSI (gsi/sgsi/): with a device-memory limit that cuts the data graph into 2, 3 and 8
partitions, counts and embeddings equal in-core GSI's and the reference's, for queries whose
matches cross partitions; SGSI+ (histogram load balance), the load-balance layers on a hub whose
list spans segments, directed graphs with edge labels, limit/collect/timeout, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from _graphs import random_graph, reference, with_spokes
from common.engine.result import Status
from common.graph.model import Graph
from gsi.engine import GSI
from gsi.sgsi import SGSI
from test_gsi import walk_query


def hub_graph(n: int, m: int, hub_degree: int, seed: int, directed: bool = False, edge_labels: int = 1) -> Graph:
    """A random labelled graph plus vertex 0 joined to ``hub_degree`` others (a long list)."""
    return with_spokes(random_graph(n, m, 4, edge_labels, directed, seed), hub_degree, seed, edge_labels)


GRAPH = hub_graph(400, 1300, 300, seed=5)
DIRECTED = hub_graph(360, 1500, 250, seed=6, directed=True, edge_labels=2)
SHAPE = dict(block_threads=32, max_blocks=1)      # one warp: the simulator runs threads in Python
STREAMED = dict(SHAPE, zero_copy=False)            # segments only: the paper's §6


def limit_for_partitions(graph: Graph, k: int) -> int:
    """The smallest device-memory limit (a multiple of 32 bytes) whose largest PCSR partition
    is cut into exactly ``k`` segments with one neighbour list split between two of them."""
    for limit in range(40_000, 2_000_000, 32 * 8):
        words = SGSI.slot_words_for(graph, limit)
        _, segments = SGSI.plan_segments(graph, words)
        longest = max(segments, key=len)
        if len(longest) == k and any(a.hi == b.lo for a, b in zip(longest, longest[1:])):
            return limit
    raise AssertionError(f"no limit gives {k} partitions")


def segment_of(engine: SGSI, part: int, v: int) -> int:
    return next(i for i, s in enumerate(engine.segments[part]) if s.lo <= v <= s.hi)


@pytest.mark.slow_cases("2", "3", "8")
@pytest.mark.parametrize("k", [2, 3, 8])
def test_counts_under_a_limit_that_forces_k_partitions(k):
    limit = limit_for_partitions(GRAPH, k)
    engine = SGSI(device_memory_limit=limit, **STREAMED).prepare(GRAPH)
    assert len(engine.segments[0]) == k and engine.partitions == k
    assert engine.budget.in_use <= limit
    # a list that spans two segments (Algorithms 4 and 5 must stitch it)
    assert any(a.hi == b.lo for a, b in zip(engine.segments[0], engine.segments[0][1:]))
    crossing = 0
    queries = {2: (walk_query(GRAPH, 3, seed=4),), 3: (walk_query(GRAPH, 4, seed=0),),
               8: (walk_query(GRAPH, 4, seed=0),)}
    for q in queries[k]:
        got = engine.match(q, collect=True)
        want = reference(GRAPH, q, collect=True)
        assert got.status is Status.OK, got.reason
        assert got.count == want.count > 0
        if k == 3:
            assert got.count == GSI(**SHAPE).prepare(GRAPH).match(q).count
        assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
        assert got.peak_device_bytes <= limit
        crossing += sum(len({segment_of(engine, 0, int(v)) for v in row}) > 1 for row in got.embeddings)
        assert got.stats["segments_streamed"] >= 1 and got.stats["bytes_h2d"] > 0
    assert crossing > 0                      # matches whose vertices lie in different partitions


@pytest.mark.parametrize("options", [dict(load_balance="histogram"), dict(load_balance=False, duplicate_removal=False),
                                     dict(load_balance=True, w3=33, w1=100), dict(write_cache=False)],
                         ids=["sgsi+", "plain", "layers", "no-cache"])
@pytest.mark.slow_cases("layers", "no-cache", "sgsi+")
def test_variants_on_a_hub_spanning_segments(options):
    limit = limit_for_partitions(GRAPH, 3)
    engine = SGSI(device_memory_limit=limit, **options, **STREAMED).prepare(GRAPH)
    hub_segments = [s for s in engine.segments[0] if s.lo <= 0 <= s.hi]
    assert hub_segments and hub_segments[0].max_list > 100      # the hub's list is long
    q = walk_query(GRAPH, 3, seed=4)
    assert engine.match(q).count == reference(GRAPH, q).count > 0


@pytest.mark.slow
def test_directed_edge_labels_and_many_partitions():
    limit = limit_for_partitions(DIRECTED, 3)
    engine = SGSI(device_memory_limit=limit, load_balance="histogram", **STREAMED).prepare(DIRECTED)
    assert len(engine.segments) == 4                 # 2 edge labels x 2 directions
    assert engine.partitions > 4
    for seed in (0,):
        q = walk_query(DIRECTED, 4, seed=seed)
        got, want = engine.match(q), reference(DIRECTED, q)
        assert got.status is Status.OK and got.count == want.count, (q.name, got.stats)


@pytest.mark.parametrize("graph", ["undirected", "directed"])
def test_zero_copy_joins_in_place(graph):
    """With the graph mapped (the default) the filter and every chunk read it in place: nothing
    streams, every chunk counts then writes its rows, and counts and embeddings equal the
    reference's and the streamed join's, through the hub's 300-entry list and edge labels."""
    data = GRAPH if graph == "undirected" else DIRECTED
    limit = limit_for_partitions(data, 3)
    engine = SGSI(device_memory_limit=limit, **SHAPE).prepare(data)
    streamed = SGSI(device_memory_limit=limit, **STREAMED).prepare(data)
    for q in (walk_query(data, 3, seed=4), walk_query(data, 4, seed=0), walk_query(data, 5, seed=3)):
        got, want = engine.match(q, collect=True), reference(data, q, collect=True)
        assert got.status is Status.OK and got.stats["mode"] == "out-of-core"
        assert got.count == want.count == streamed.match(q).count > 0
        assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
        assert got.stats["segments_streamed"] == 0 and got.stats["bytes_streamed"] == 0
        assert got.stats["inplace_chunks"] == got.stats["chunks"] > 0 and got.stats["gba_splits"] == 0
        # each pass reads at least every survivor of the shortest list: twice per written level
        assert got.stats["bytes_inplace"] >= 8 * sum(got.stats["rows_per_iteration"][1:])
        assert got.peak_device_bytes <= limit


def test_in_place_list_offsets_resident_when_they_fit_else_mapped(monkeypatch):
    """The in-place join finds N(v, p) through per-partition offsets kept on the device when
    they take at most 1/DEGREE_SHARE of the budget, else read from mapped host memory too; both
    count exactly, and only the resident ones take device memory."""
    import gsi.sgsi.out_of_core as sgsi_module
    limit = limit_for_partitions(DIRECTED, 3)
    q = walk_query(DIRECTED, 4, seed=0)
    want = reference(DIRECTED, q).count
    resident = SGSI(device_memory_limit=limit, **SHAPE).prepare(DIRECTED)
    monkeypatch.setattr(sgsi_module, "DEGREE_SHARE", 10 ** 9)
    far = SGSI(device_memory_limit=limit, **SHAPE).prepare(DIRECTED)
    assert resident.inplace.resident_offsets and not far.inplace.resident_offsets
    assert resident.inplace.stride == DIRECTED.num_vertices + 1
    for engine in (resident, far):
        got = engine.match(q)
        assert got.status is Status.OK and got.count == want > 0 and got.stats["inplace_chunks"] > 0


def hub_triangle(graph: Graph) -> Graph:
    """A triangle through the hub (vertex 0) and two adjacent spokes, labelled as they are."""
    spokes = set(graph.neighbors_of(0).tolist())
    a, b = next((int(a), int(b)) for a in sorted(spokes) for b in graph.neighbors_of(a).tolist() if b in spokes)
    return Graph.from_edges(3, [0, 1, 2], [1, 2, 0], graph.labels[[0, a, b]].tolist(), name="hub_triangle")


@pytest.mark.parametrize("graph", ["undirected", "directed"])
def test_count_only_queries_count_the_last_step_in_place(graph):
    """Count-only, with the graph mapped, the last join step is counted in place (a warp per row
    of the last table, the shortest list looked up in the others): counts equal the reference's
    and the GBA join's (collect, and zero_copy=False), with fewer chunks, on queries whose last
    vertex has one linking edge or several, one of them the hub's 300-entry list."""
    data = GRAPH if graph == "undirected" else DIRECTED
    limit = limit_for_partitions(data, 3)
    engine = SGSI(device_memory_limit=limit, **SHAPE).prepare(data)
    streamed = SGSI(device_memory_limit=limit, **STREAMED).prepare(data)
    queries = [walk_query(data, 3, seed=4), walk_query(data, 4, seed=0), walk_query(data, 5, seed=1)]
    if graph == "undirected":
        queries.append(hub_triangle(data))
    several = 0
    for q in queries:
        want = reference(data, q).count
        got, listed = engine.match(q), engine.match(q, collect=True)
        assert got.status is Status.OK and got.stats["mode"] == "out-of-core"
        assert got.count == listed.count == streamed.match(q).count == want > 0, q.name
        assert got.stats["counted_rows"] == got.stats["rows_per_iteration"][-2] > 0
        assert got.stats["bytes_inplace"] >= 4 * sum(got.stats["rows_per_iteration"][1:])
        assert listed.stats["counted_rows"] == 0
        assert got.stats["chunks"] < listed.stats["chunks"]
        order = got.stats["order"]
        several += len(set(q.neighbors_of(order[-1]).tolist()) & set(order[:-1])) > 1
    assert several > 0 or graph == "directed"          # a last step with several linking edges
    limited = engine.match(queries[1], limit=7)
    assert limited.status is Status.LIMIT and limited.count == 7


def test_degree_bounds_are_exact_when_they_fit_and_bound_every_list_when_not():
    from gsi.pcsr import partition_lists
    from gsi.sgsi import degree_bounds

    lists = partition_lists(DIRECTED)
    n, P = DIRECTED.num_vertices, len(lists)
    exact = np.zeros((P, n), np.int64)
    for p, (rows, _) in enumerate(lists):
        exact[p] = np.bincount(rows, minlength=n)
    for max_bytes, rows_expected in ((4 * P * n, P), (4 * P * n - 1, 2)):
        deg, part_max = degree_bounds(DIRECTED, lists, 2, max_bytes)
        assert deg.size // n == rows_expected
        bound = np.minimum(deg.reshape(rows_expected, n)[np.arange(P) % rows_expected], part_max[:, None])
        assert (bound >= exact).all()
        assert (part_max == exact.max(axis=1)).all()
        if rows_expected == P:
            assert (bound == exact).all()
        else:
            assert (bound > exact).any()             # the per-direction degree is looser


def test_counts_with_per_direction_degree_bounds(monkeypatch):
    import gsi.sgsi.out_of_core as sgsi

    monkeypatch.setattr(sgsi, "DEGREE_SHARE", 1 << 40)  # exact per-partition degrees never fit
    limit = limit_for_partitions(DIRECTED, 3)
    engine = SGSI(device_memory_limit=limit, **STREAMED).prepare(DIRECTED)
    assert engine.deg_rows == 2                          # out- and in-degree, every label
    for seed in (0, 2):
        q = walk_query(DIRECTED, 4, seed=seed)
        got, want = engine.match(q), reference(DIRECTED, q)
        assert got.status is Status.OK and got.count == want.count > 0, (q.name, got.stats)


@pytest.mark.slow
def test_limit_collect_timeout_and_host_memory():
    limit = limit_for_partitions(GRAPH, 2)
    engine = SGSI(device_memory_limit=limit, **SHAPE).prepare(GRAPH)
    q = walk_query(GRAPH, 4, seed=0)
    want = reference(GRAPH, q, collect=True)
    r = engine.match(q, limit=7, collect=True)
    assert want.count > 7 and r.status is Status.LIMIT and r.count == 7 and r.embeddings.shape == (7, 4)
    assert {tuple(x) for x in r.embeddings.tolist()} <= {tuple(x) for x in want.embeddings.tolist()}
    r = engine.match(q, limit=want.count + 5)
    assert r.status is Status.OK and r.count == want.count
    assert engine.match(q, timeout_s=1e-9).status is Status.TIMEOUT
    tiny_host = SGSI(device_memory_limit=limit, host_memory_limit=64, **SHAPE).prepare(GRAPH).match(q, collect=True)
    assert tiny_host.status is Status.OOM and "host memory" in tiny_host.reason
    single = Graph.from_edges(1, [], [], [int(GRAPH.labels[0])])
    assert engine.match(single).count == int((GRAPH.labels == GRAPH.labels[0]).sum())


def test_errors_name_the_problem():
    starved = SGSI(device_memory_limit=2_000).prepare(GRAPH)      # too small: every query is oom
    result = starved.match(walk_query(GRAPH, 3, seed=0))
    assert result.status is Status.OOM and "raise device_memory_limit" in result.reason
    with pytest.raises(ValueError, match="load_balance"):
        SGSI(load_balance="sometimes")
    homomorphic = SGSI(**SHAPE).prepare(GRAPH).match(walk_query(GRAPH, 3, seed=0), homomorphic=True)
    assert homomorphic.status is Status.UNSUPPORTED


@pytest.mark.slow
def test_in_core_when_the_graph_fits_runs_gsis_join_without_streaming():
    from gsi.sgsi import resident_bytes
    q = walk_query(GRAPH, 4, seed=0)
    want = reference(GRAPH, q, collect=True)
    limit = 4 * resident_bytes(GRAPH)
    for engine in (SGSI(**SHAPE).prepare(GRAPH), SGSI(device_memory_limit=limit, **SHAPE).prepare(GRAPH),
                   SGSI(load_balance="histogram", device_memory_limit=limit, **SHAPE).prepare(GRAPH)):
        got = engine.match(q, collect=True)
        assert got.status is Status.OK and got.stats["mode"] == "in-core"
        assert got.stats["bytes_streamed"] == 0 and got.stats["segments_streamed"] == 0
        assert got.count == want.count > 0
        assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
        # device memory sized to the work, not a fixed reservation of the device
        assert got.peak_device_bytes <= limit
    with pytest.raises(ValueError, match="out_of_core"):
        SGSI(out_of_core="yes")


def test_out_of_core_peak_counts_the_scan_workspace_it_reserved_in_every_query():
    """The join's scan workspace, reserved at prepare, is in use in every query out of core: it
    counts in each query's peak, the same query giving the same peak."""
    from common.gpu.scan import workspace_bytes

    data = GRAPH
    engine = SGSI(device_memory_limit=limit_for_partitions(data, 3), **SHAPE).prepare(data)
    queries = (walk_query(data, 4, seed=0), walk_query(data, 3, seed=4))
    first = [engine.match(q).peak_device_bytes for q in queries]
    assert first == [engine.match(q).peak_device_bytes for q in queries]
    reserved = engine.scan_ws.capacity
    assert all(peak >= workspace_bytes(reserved) for peak in first)
    engine.match(queries[1])
    assert engine.pool._demand["scan workspace <i8"] == workspace_bytes(reserved)   # this query's demand


def test_in_core_embeddings_name_the_inputs_ids_once():
    """A data graph with its own ids (meta["original_ids"]): in core, the embeddings are mapped
    to them once, as out of core and by GSI."""
    n = 6
    ids = np.arange(n)[::-1].copy()                      # mapped twice, ids would be 0..n-1 again
    data = Graph.from_edges(n, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5], labels=[0, 1, 0, 1, 0, 1],
                            meta={"original_ids": ids})
    query = Graph.from_edges(2, [0], [1], labels=[0, 1])
    want = GSI(**SHAPE).prepare(data).match(query, collect=True)
    got = SGSI(**SHAPE).prepare(data).match(query, collect=True)
    assert got.stats["mode"] == "in-core"
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert set(got.embeddings.ravel().tolist()) <= set(ids.tolist())
    strings = Graph.from_edges(n, [0, 1, 2, 3, 4], [1, 2, 3, 4, 5], labels=[0, 1, 0, 1, 0, 1],
                               meta={"original_ids": np.array([f"v{i}" for i in range(n)], dtype=object)})
    got = SGSI(**SHAPE).prepare(strings).match(query, collect=True)
    assert sorted(map(tuple, got.embeddings.tolist())) == [("v0", "v1"), ("v2", "v1"), ("v2", "v3"),
                                                          ("v4", "v3"), ("v4", "v5")]


def test_only_the_segments_a_chunks_rows_reach_are_streamed():
    base = random_graph(120, 360, 1, 1, False, seed=3)
    src, dst, _ = base.edges()
    labels = np.zeros(120, np.int64)
    labels[:5] = 1                                   # five rare vertices, all in the first segment
    data = Graph.from_edges(120, src, dst, labels, name="rare5")
    engine = SGSI(device_memory_limit=40_000, **STREAMED).prepare(data)
    assert len(engine.segments[0]) >= 3
    q = Graph.from_edges(3, [0, 1], [1, 2], [1, 0, 0])
    got, want = engine.match(q, collect=True), reference(data, q, collect=True)
    assert got.status is Status.OK and got.stats["mode"] == "out-of-core"
    assert got.count == want.count > 0
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    pcsr = got.stats["segments_streamed"] - len(engine.sig_segments)
    # two iterations; every segment of the partition streamed for each would be 2 x segments
    assert 1 <= pcsr < 2 * len(engine.segments[0])
    assert got.stats["bytes_streamed"] > 0 and got.stats["h2d_gbps"] >= 0


@pytest.mark.slow
def test_out_of_core_chunks_split_by_gba_and_new_tables_written_in_parts(monkeypatch):
    import gsi.sgsi.out_of_core as sgsi_module
    # one vertex label, two edge labels: most candidates survive, so a new table outgrows its share
    data = random_graph(120, 360, 1, 2, False, seed=3)
    q = Graph.from_edges(3, [0, 1], [1, 2], [0, 0, 0], [0, 1])
    want = reference(data, q, collect=True)
    monkeypatch.setattr(sgsi_module, "ROW_SHARE", 0.6)      # many rows per chunk
    monkeypatch.setattr(sgsi_module, "TABLE_SHARE", 0.05)   # little room for a new table
    engine = SGSI(device_memory_limit=40_000, work_bytes=8000, **STREAMED).prepare(data)
    assert [len(s) for s in engine.segments] == [3, 3]       # two label partitions of 3 segments
    got = engine.match(q, collect=True)
    assert got.status is Status.OK and got.count == want.count > 0
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert got.stats["split_outputs"] > 0 and got.peak_device_bytes <= 40_000
    hub = SGSI(device_memory_limit=48_704, work_bytes=8_000, **STREAMED).prepare(GRAPH)
    q4 = walk_query(GRAPH, 4, seed=0)
    got = hub.match(q4)
    assert got.status is Status.OK and got.count == reference(GRAPH, q4).count > 0
    assert got.stats["gba_splits"] > 0                 # the hub's 300 neighbours cut a chunk short
    monkeypatch.setattr(sgsi_module, "ROW_SHARE", 0.25)
    # a row's GBA is min(|N(v', l0)|, |C(u)|): with four vertex labels the hub's row fits a
    # working memory that its 300 neighbours would not; with one label (|C(u)| > 300) it does not
    small = SGSI(device_memory_limit=48_704, work_bytes=3_000, **STREAMED).prepare(GRAPH).match(q4)
    assert small.status is Status.OK and small.count == reference(GRAPH, q4).count
    assert max(small.stats["candidate_sizes"]) < 300
    src, dst, _ = GRAPH.edges()
    flat = Graph.from_edges(GRAPH.num_vertices, src, dst, np.zeros(GRAPH.num_vertices, np.int32), name="flat")
    starved = SGSI(device_memory_limit=48_704, work_bytes=3_000, **STREAMED).prepare(flat).match(walk_query(flat, 4, 0))
    assert starved.status is Status.OOM and "one row's GBA" in starved.reason


def test_in_place_chunks_count_then_write_their_rows_in_parts(monkeypatch):
    """With every list read in place a chunk counts each row's survivors, then writes them (no
    GBA): the rows of a new table that outgrows its room are written in parts sized by the exact
    counts, and the embeddings equal the reference's."""
    import gsi.sgsi.out_of_core as sgsi_module
    data = random_graph(120, 360, 1, 2, False, seed=3)
    q = Graph.from_edges(4, [0, 1, 2], [1, 2, 3], [0, 0, 0, 0], [0, 1, 0])
    want = reference(data, q, collect=True)
    monkeypatch.setattr(sgsi_module, "ROW_SHARE", 0.6)      # many rows per chunk
    monkeypatch.setattr(sgsi_module, "TABLE_SHARE", 0.05)   # little room for a new table
    engine = SGSI(device_memory_limit=40_000, work_bytes=8000, **SHAPE).prepare(data)
    got = engine.match(q, collect=True)
    assert got.status is Status.OK and got.stats["mode"] == "out-of-core"
    assert got.count == want.count > 0
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert got.stats["split_outputs"] > 0 and got.stats["gba_splits"] == 0
    assert got.stats["segments_streamed"] == 0 and got.peak_device_bytes <= 40_000
    counted = engine.match(q)
    assert counted.count == want.count and counted.stats["counted_rows"] == got.stats["rows_per_iteration"][-2]


def test_the_join_before_a_counted_last_step_takes_the_whole_per_row_arena(monkeypatch):
    """Count-only, in place: the join whose table the counted last step reads is the last one in
    chunks, so each of its chunks takes every free per-row slot (an earlier join takes half, the
    later levels need the rest); the count equals the reference's."""
    data = random_graph(120, 360, 1, 2, False, seed=3)
    q = Graph.from_edges(4, [0, 1, 2], [1, 2, 3], [0, 0, 0, 0], [0, 1, 0])
    seen = []
    chunk = SGSI._chunk_in_place

    def spy(self, q, level, tb, a, m, fw, fr, top):
        seen.append((level, m, (self.rows_cap - fr) // self.row_arrays))
        return chunk(self, q, level, tb, a, m, fw, fr, top)

    monkeypatch.setattr(SGSI, "_chunk_in_place", spy)
    engine = SGSI(device_memory_limit=40_000, work_bytes=3000, **SHAPE).prepare(data)
    got = engine.match(q)
    assert got.status is Status.OK and got.count == reference(data, q).count > 0
    assert got.stats["counted_rows"] > 0
    before_last = [(m, free) for level, m, free in seen if level == 1]
    earlier = [(m, free) for level, m, free in seen if level == 0]
    assert len(before_last) > 1 and earlier                    # chunked at both levels
    assert all(m <= free // 2 for m, free in earlier)
    assert max(m for m, _ in before_last) > min(free for _, free in before_last) // 2
    assert all(m <= free for m, free in before_last)


def test_new_tables_are_grouped_by_the_segment_of_the_next_linking_vertex(monkeypatch):
    """Out of core, every table a step joins on is grouped by the segment of its first linking
    edge's vertex, with the bucket starts the engine uses to run each segment over its rows."""
    data = random_graph(120, 360, 1, 1, False, seed=3)
    q = Graph.from_edges(3, [0, 1], [1, 2], [0, 0, 0])
    seen = []
    level = SGSI._level

    def spy(self, q, step, tb, rows, fw, fr, top, buckets=None):
        width = step + 1
        table = self.d_words[tb:tb + rows * width].copy_to_host().reshape(rows, width)
        col, part = q.steps[step][3][0][:2]
        keys = np.searchsorted([s.hi for s in self.segments[part]], table[:, col])
        seen.append((step, keys, buckets))
        return level(self, q, step, tb, rows, fw, fr, top, buckets)

    monkeypatch.setattr(SGSI, "_level", spy)
    engine = SGSI(device_memory_limit=30_000, work_bytes=5_000, **STREAMED).prepare(data)
    got, want = engine.match(q, collect=True), reference(data, q, collect=True)
    assert got.stats["mode"] == "out-of-core" and len(engine.segments[0]) >= 3
    assert got.count == want.count > 0
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert {step for step, _, _ in seen} == {0, 1}
    for _, keys, buckets in seen:
        assert np.all(np.diff(keys) >= 0)
        assert buckets.tolist() == np.searchsorted(keys, np.arange(buckets.size), side="left").tolist()
    assert max(np.unique(keys).size for step, keys, _ in seen if step == 1) >= 2


def test_a_budget_too_small_for_one_segment_slot_names_the_budget():
    result = SGSI(device_memory_limit=1024, **STREAMED).prepare(GRAPH).match(walk_query(GRAPH, 3, seed=1))
    assert result.status is Status.OOM
    assert "of 1,024 bytes" in result.reason and "168 bytes" not in result.reason, result.reason
    assert "device allocation of 14,592 bytes" in result.reason, result.reason
    enough = SGSI(device_memory_limit=14_592, **STREAMED).prepare(GRAPH)      # the slots fit now
    assert "32 signature rows" not in (enough.prepare_error or "")
