"""GSI's per-query fixed cost: one launch for the join of small tables (and three per level
without it), exact counts either way and where the one-launch join hands over to the
level-by-level join, pooled buffers, and the stats both engines report."""

from __future__ import annotations

import pytest

from _graphs import reference
from common.engine.result import Status
from gsi.engine import GSI
from gsi.sgsi import SGSI
from test_gsi import DIRECTED, UNDIRECTED, walk_query


@pytest.mark.parametrize("graph", [UNDIRECTED, DIRECTED], ids=["undirected", "directed"])
def test_small_tables_take_one_launch_for_the_whole_join_and_count_exactly(graph, kernel_calls):
    q = walk_query(graph, 5, seed=1)
    want = reference(graph, q).count
    levels = q.num_vertices - 1
    engine = GSI().prepare(graph)
    launched = kernel_calls["launches"]
    launched.clear()                                  # from here on: the query's launches only
    got = engine.match(q)
    assert got.status is Status.OK and got.count == want > 0
    # (the simulator's memset is a kernel, the GPU's a driver call)
    assert [k for k in launched if k != "_fill_kernel"] == ["filter_kernel", "fused_join"]
    assert got.stats["slices"] == levels
    # level by level (fuse_rows=0): per level counts_scan, first edge (+ intersect), scan_link
    engine = GSI(fuse_rows=0).prepare(graph)
    launched.clear()
    got = engine.match(q)
    assert got.status is Status.OK and got.count == want
    assert launched.count("counts_scan") == levels
    assert launched.count("scan_link") == levels
    assert "intersect" not in launched and "row_counts" not in launched and "link" not in launched
    assert len(launched) <= 3 + 3 * levels, launched


def _embeddings(result):
    return sorted(map(tuple, result.embeddings.tolist()))


@pytest.mark.parametrize("graph,fuse_rows,reenters,walks",
                         [(UNDIRECTED, (3, 5), True, ((4, 1), (5, 2), (6, 0))),
                          (DIRECTED, (2,), False, ((3, 0), (4, 1), (5, 2), (6, 0)))],
                         ids=["undirected", "directed"])
@pytest.mark.slow_cases("directed", "undirected")
def test_one_launch_join_stops_where_tables_grow_and_matches_the_level_by_level_join(graph, fuse_rows, reenters,
                                                                                      walks, kernel_calls):
    """Small ``fuse_rows`` (these walks' tables have a few rows) make the one-launch join stop
    after its first tables (the host copies the table it stopped at and goes on level by level),
    and, where a later table is small again, take the rest back (a second launch): counts,
    embeddings, per-level rows, slices and statuses equal fuse_rows=0's and the reference's, with
    and without collect and limit. The undirected walks stop at their first table (5 rows over
    fuse_rows 3), at a middle one (8 over 5; 6 over 3 and 5) and re-enter (2 rows after 5)."""
    engines = {rows: GSI(fuse_rows=rows).prepare(graph) for rows in (0, *fuse_rows, None)}
    launched = kernel_calls["launches"]
    resumed = reentered = 0
    for q in [walk_query(graph, k, seed=s) for k, s in walks]:
        want = reference(graph, q, collect=True)
        base = engines[0].match(q, collect=True)
        assert base.count == want.count and _embeddings(base) == _embeddings(want)
        for rows, engine in engines.items():
            launched.clear()
            got = engine.match(q, collect=True)
            assert got.status is Status.OK and got.count == want.count, (rows, q.name)
            assert _embeddings(got) == _embeddings(want), (rows, q.name)
            assert got.stats["rows_per_iteration"] == base.stats["rows_per_iteration"], (rows, q.name)
            assert got.stats["slices"] == base.stats["slices"], (rows, q.name)
            resumed += "fused_join" in launched and "counts_scan" in launched
            reentered += launched.count("fused_join") > 1
            counted = engine.match(q)
            assert counted.count == want.count and counted.stats["rows_per_iteration"] == \
                base.stats["rows_per_iteration"]
            if want.count > 2 and rows != 0:
                limited = engine.match(q, limit=2, collect=True)
                assert limited.status is Status.LIMIT and limited.count == 2
                assert set(_embeddings(limited)) <= set(_embeddings(want))
    assert resumed > 0                                # some joins went on level by level
    assert (reentered > 0) == reenters                # and some came back to one launch


@pytest.mark.slow
def test_one_launch_join_stopped_before_its_first_level(monkeypatch, kernel_calls):
    """A GBA bound of 0 stops the launch before level 0's first edge: the host copies C(u_start)
    from the launch's table and joins level by level, exactly."""
    import gsi.engine
    monkeypatch.setattr(gsi.engine, "FUSE_GBA_PER_ROW", 0)
    engine = GSI().prepare(UNDIRECTED)
    launched = kernel_calls["launches"]
    for q in (walk_query(UNDIRECTED, 4, seed=0), walk_query(UNDIRECTED, 5, seed=3)):
        launched.clear()
        got, want = engine.match(q, collect=True), reference(UNDIRECTED, q, collect=True)
        assert [k for k in launched if k != "_fill_kernel"][:3] == ["filter_kernel", "fused_join", "counts_scan"]
        assert got.count == want.count > 0 and _embeddings(got) == _embeddings(want)
    assert GSI(fuse_rows=0).prepare(UNDIRECTED).match(q).stats["rows_per_iteration"] == \
        engine.match(q).stats["rows_per_iteration"]
    with pytest.raises(ValueError, match="fuse_rows"):
        GSI(fuse_rows=-1)


def test_one_warp_blocks_count_and_collect_exactly(kernel_calls):
    q = walk_query(UNDIRECTED, 4, seed=0)
    want = reference(UNDIRECTED, q, collect=True)
    launched = kernel_calls["launches"]
    for fuse_rows, kernel in ((None, "fused_join"), (0, "counts_scan")):
        engine = GSI(block_threads=32, max_blocks=2, fuse_rows=fuse_rows).prepare(UNDIRECTED)
        launched.clear()                              # from here on: the query's launches only
        got = engine.match(q, collect=True)
        assert got.count == want.count
        assert _embeddings(got) == _embeddings(want)
        assert kernel in launched


@pytest.mark.slow
def test_buffers_come_from_the_pool_and_results_carry_order_and_candidate_sizes():
    engine = GSI().prepare(UNDIRECTED)
    names = set(engine.budget.live())
    assert {"gsi GBA", "gsi counts", "gsi table 0"} <= names
    for q in (walk_query(UNDIRECTED, 4, seed=0), walk_query(UNDIRECTED, 6, seed=1)):
        r = engine.match(q)
        assert sorted(r.stats["order"]) == list(range(q.num_vertices))
        assert len(r.stats["candidate_sizes"]) == q.num_vertices
        assert r.count == reference(UNDIRECTED, q).count
    sgsi = SGSI(block_threads=32, max_blocks=1, out_of_core=True).prepare(UNDIRECTED)
    assert "sgsi candidate bitsets" in sgsi.budget.live()
    q = walk_query(UNDIRECTED, 4, seed=0)
    r = sgsi.match(q)
    assert r.count == reference(UNDIRECTED, q).count and r.stats["mode"] == "out-of-core"
    assert sorted(r.stats["order"]) == list(range(4)) and len(r.stats["candidate_sizes"]) == 4
    assert not any(hasattr(engine, name) for name in ("_plan_state", "_count", "_rows_out", "_iter_rows"))
    assert not any(hasattr(engine, name) for name in ("_d_qcount", "_h_hist"))
