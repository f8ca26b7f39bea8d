"""Root ranges (common/roots.py): the counts of ``cpu``, ``gmatch`` and ``egsm`` over a
partition of the data vertices add up to the whole count, the embeddings of the parts are the
whole set, every part's root image lies in its range, and ``limit`` holds per part. ``cpu`` runs
real HPRD / yeast / GitHub queries; the GPU engines run tiny random graphs in the simulator."""

from __future__ import annotations

import numpy as np
import pytest

import common
from _paths import DATA
from common.bitmasks import neighbour_masks
from common.engine import create_engine
from common.generate import random_walk_query, rmat, uniform_labels
from common.result import Status
from common.roots import check_root_range, label_degree_candidates, range_work, work_ranges
from egsm.order import first_vertex
from egsm.order import plan as egsm_plan
from gmatch.plan import build_plan


def rows(embeddings) -> list[tuple]:
    return sorted(map(tuple, np.asarray(embeddings).tolist()))


def split_and_compare(engine, query, ranges, whole_count=None):
    """Run ``query`` over every range on one prepared engine; check the parts against the whole."""
    engine.root_range = None
    whole = engine.match(query, collect=True)
    assert whole.status is Status.OK
    root = engine.root_vertex(query)
    total, parts = 0, []
    for lo, hi in ranges:
        engine.root_range = (lo, hi)
        counted = engine.match(query)
        listed = engine.match(query, collect=True)
        assert counted.status is Status.OK and counted.count == listed.count
        assert np.all((listed.embeddings[:, root] >= lo) & (listed.embeddings[:, root] < hi))
        total += counted.count
        parts.append(listed.embeddings)
    engine.root_range = None
    assert total == whole.count
    if whole_count is not None:
        assert total == whole_count
    assert rows(np.concatenate(parts)) == rows(whole.embeddings)
    return whole.count


def expected(folder: str, name: str) -> int:
    counts = DATA / folder / ("expected_counts.txt" if folder != "hprd" else "expected_counts_1_100.txt")
    for line in counts.read_text().split("\n"):
        key, _, value = line.replace(":", " ").partition(" ")
        if key.removesuffix(".graph") == name:
            return int(value)
    raise KeyError(name)


def test_check_root_range():
    assert check_root_range(None) is None
    assert check_root_range((2, 5)) == (2, 5)
    assert check_root_range("3:9") == (3, 9)
    for bad in ((5, 2), (-1, 3), "a:b", (1,), 7):
        with pytest.raises(ValueError):
            check_root_range(bad)
    with pytest.raises(ValueError, match="root_range"):
        create_engine("cpu", root_range=(4, 1))


def test_work_ranges_partition_and_balance():
    n = 100
    cands = np.arange(0, 100, 2)
    weights = np.ones(cands.size)
    weights[10] = 1000                                      # one heavy candidate: a range of its own
    ranges = work_ranges(cands, weights, n, 8)
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:]))
    assert all(lo < hi for lo, hi in ranges)
    assert 2 <= len(ranges) <= 8
    assert any(lo <= 20 < hi and np.sum((cands >= lo) & (cands < hi)) == 1 for lo, hi in ranges)
    even = work_ranges(cands, np.ones(cands.size), n, 5)
    sizes = [int(np.sum((cands >= lo) & (cands < hi))) for lo, hi in even]
    assert len(even) == 5 and max(sizes) - min(sizes) <= 1
    assert work_ranges(cands[:1], np.ones(1), n, 4) == [(0, n)]


def test_range_work_sums_each_ranges_candidates():
    cands = np.arange(0, 100, 2)
    weights = np.ones(cands.size)
    weights[10] = 1000                                      # candidate 20
    ranges = work_ranges(cands, weights, 100, 8)
    work = range_work(cands, weights, ranges)
    assert work.sum() == (weights + 1).sum()
    for (lo, hi), w in zip(ranges, work):
        assert w == (weights[(cands >= lo) & (cands < hi)] + 1).sum()
    assert ranges[int(np.argmax(work))][0] <= 20 < ranges[int(np.argmax(work))][1]


@pytest.mark.parametrize("folder,data_file,queries", [
    ("hprd", "HPRD.graph", ["query_dense_16_2", "query_dense_16_5"]),
    ("yeast", "yeast.graph", ["query_dense_4_1", "query_dense_4_2"]),
    ("gmatch_test", "data.graph", ["Q_0", "Q_1"]),
])
def test_cpu_split_equals_whole_on_real_data(folder, data_file, queries):
    data = common.load_graph(DATA / folder / data_file)
    engine = create_engine("cpu").prepare(data)
    n = data.num_vertices
    for name in queries:
        query = common.load_graph(DATA / folder / "queries" / f"{name}.graph")
        root = engine.root_vertex(query)
        cands = label_degree_candidates(data, int(query.labels[root]), int(query.degrees[root]))
        by_work = work_ranges(cands, data.degrees[cands], n, 6)
        by_id = [(lo, min(lo + n // 4 + 1, n)) for lo in range(0, n, n // 4 + 1)]
        for ranges in (by_work, by_id):
            split_and_compare(engine, query, ranges, expected(folder, name))


def test_cpu_limit_and_empty_range():
    data = common.load_graph(DATA / "hprd" / "HPRD.graph")
    query = common.load_graph(DATA / "hprd" / "queries" / "query_dense_16_2.graph")
    engine = create_engine("cpu", root_range=(0, data.num_vertices)).prepare(data)
    assert engine.match(query).count == 80
    engine.root_range = (5, 5)
    assert engine.match(query).count == 0
    engine.root_range = (0, data.num_vertices // 2)
    half = engine.match(query).count
    limited = engine.match(query, limit=1, collect=True)
    assert half >= 1 and limited.status is Status.LIMIT and limited.count == 1
    assert limited.embeddings[0, engine.root_vertex(query)] < data.num_vertices // 2


@pytest.fixture(scope="module")
def tiny():
    data = rmat(12, 30, seed=3, labels=uniform_labels(12, 2, seed=4), name="tiny")
    return data, random_walk_query(data, 4, seed=2, name="walk4")


@pytest.mark.parametrize("name,options", [
    ("gmatch", dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0)),
    ("gmatch", dict(seed_pool=8, blocks=2, warps_per_block=2, candidate_graph=False)),
    ("egsm", dict()),
])
def test_gpu_engines_split_equals_whole(name, options, tiny):
    data, query = tiny
    reference = create_engine("cpu").prepare(data).match(query).count
    assert reference > 0
    engine = create_engine(name, **options).prepare(data)
    split_and_compare(engine, query, [(0, 4), (4, 9), (9, 12)], reference)


def test_root_vertex_is_plan_independent(tiny):
    """gMatch's position 0 is one vertex with and without leaf deferral; EGSM's u0 is the plan's."""
    data, _ = tiny
    for k, seed in ((3, 1), (4, 2), (5, 3), (6, 4)):
        query = random_walk_query(rmat(40, 120, seed=9), k, seed=seed)
        assert build_plan(query, True).order[0] == build_plan(query, True, defer_leaves=True).order[0]
        nbr = neighbour_masks(query.offsets, query.neighbors)
        rel = 1 + np.add.outer(np.arange(k), np.arange(k))
        for mode in ("bfs-dfs", "dfs", "bfs"):
            assert egsm_plan(nbr, rel, mode).first_vertex == first_vertex(nbr)
