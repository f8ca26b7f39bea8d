"""GSI's per-query fixed cost: launches per join level with the fused one-block
kernels, exact counts with them, pooled buffers, and the stats both engines report."""

from __future__ import annotations

import pytest

from common.result import Status
from gsi.engine import GSI
from gsi.sgsi import SGSI
from test_gsi import DIRECTED, UNDIRECTED, reference, walk_query


@pytest.mark.parametrize("graph", [UNDIRECTED, DIRECTED], ids=["undirected", "directed"])
def test_small_tables_take_three_launches_per_level_and_count_exactly(graph, kernel_calls):
    engine = GSI().prepare(graph)
    q = walk_query(graph, 5, seed=1)
    launched = kernel_calls["launches"]
    launched.clear()                                  # from here on: the query's launches only
    got = engine.match(q)
    want = reference(graph, q).count
    assert got.status is Status.OK and got.count == want > 0
    levels = q.num_vertices - 1
    # fill + filter + compact, then per level: counts_scan, first edge (+ intersect), scan_link
    assert launched.count("counts_scan") == levels
    assert launched.count("scan_link") == levels
    assert "intersect" not in launched and "row_counts" not in launched and "link" not in launched
    assert len(launched) <= 3 + 3 * levels, launched


def test_one_warp_blocks_count_and_collect_exactly(kernel_calls):
    engine = GSI(block_threads=32, max_blocks=2).prepare(UNDIRECTED)
    q = walk_query(UNDIRECTED, 4, seed=0)
    launched = kernel_calls["launches"]
    launched.clear()                                  # from here on: the query's launches only
    got = engine.match(q, collect=True)
    want = reference(UNDIRECTED, q, collect=True)
    assert got.count == want.count
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert "counts_scan" in launched


def test_buffers_come_from_the_pool_and_results_carry_order_and_candidate_sizes():
    engine = GSI().prepare(UNDIRECTED)
    names = set(engine.budget.live())
    assert {"gsi GBA", "gsi counts", "gsi table 0"} <= names
    for q in (walk_query(UNDIRECTED, 4, seed=0), walk_query(UNDIRECTED, 6, seed=1)):
        r = engine.match(q)
        assert sorted(r.stats["order"]) == list(range(q.num_vertices))
        assert len(r.stats["candidate_sizes"]) == q.num_vertices
        assert r.count == reference(UNDIRECTED, q).count
    sgsi = SGSI(block_threads=32, max_blocks=1).prepare(UNDIRECTED)
    assert "sgsi candidate bitsets" in sgsi.budget.live()
    q = walk_query(UNDIRECTED, 4, seed=0)
    r = sgsi.match(q)
    assert r.count == reference(UNDIRECTED, q).count
    assert sorted(r.stats["order"]) == list(range(4)) and len(r.stats["candidate_sizes"]) == 4
    assert not any(hasattr(engine, name) for name in ("_plan_state", "_count", "_rows_out", "_iter_rows"))
    assert not any(hasattr(engine, name) for name in ("_d_qcount", "_h_hist"))
