"""Parts of a query (common/engine/part.py, planned by common/graph/roots.py): the counts of ``cpu``, ``gmatch`` and
``egsm`` over a partition of the data vertices add up to the whole count, the embeddings of the
parts are the whole set, every part's root image lies in its range, and ``limit`` holds per part;
the residue classes of the branch vertex (``cpu``, ``gmatch``), alone and inside a root range,
partition the embeddings the same way. ``cpu`` runs real HPRD / yeast / GitHub queries; the GPU
engines run tiny random graphs in the simulator."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

import common
from _paths import DATA
from common.engine.deadline import Deadline
from common.engine.part import WHOLE, Part, check_branch_part, check_root_range
from common.engine.registry import create_engine
from common.engine.result import Status
from common.gpu.timers import PhaseTimer
from common.gpu.watch import LaunchWatch
from common.graph.bitmasks import neighbour_masks
from common.graph.generate import random_walk_query, rmat
from common.graph.model import Graph
from common.graph.roots import (
    cuts_below_root,
    label_degree_candidates,
    plan_split,
    range_work,
    split_tasks,
    work_ranges,
)
from egsm.order import first_vertex
from egsm.order import plan as egsm_plan
from gmatch.engine import GMatch
from gmatch.enumerate import C_SEED, CTRL_SIZE
from gmatch.filter import PartGraphs, build_candidate_graph, label_sorted_adjacency, part_bits
from gmatch.order import build_plan


def rows(embeddings) -> list[tuple]:
    return sorted(map(tuple, np.asarray(embeddings).tolist()))


def split_and_compare(engine, query, ranges, whole_count=None):
    """Run ``query`` over every range on one prepared engine; check the parts against the whole."""
    whole = engine.match(query, collect=True, part=WHOLE)
    assert whole.status is Status.OK
    root = engine.root_vertex(query)
    total, parts = 0, []
    for lo, hi in ranges:
        part = Part(root_range=(lo, hi))
        counted = engine.match(query, part=part)
        listed = engine.match(query, collect=True, part=part)
        assert counted.status is Status.OK and counted.count == listed.count
        assert np.all((listed.embeddings[:, root] >= lo) & (listed.embeddings[:, root] < hi))
        total += counted.count
        parts.append(listed.embeddings)
    assert total == whole.count
    if whole_count is not None:
        assert total == whole_count
    assert rows(np.concatenate(parts)) == rows(whole.embeddings)
    return whole.count


def branch_split_and_compare(engine, query, parts: int, root_range=None, whole_count=None, below: int = 1):
    """Run ``query`` over the ``parts`` residue classes of its branch vertex, each cut again into
    the ``below`` classes of its second branch vertex (inside ``root_range`` when given); the
    parts' counts and embeddings must be the whole's and, without symmetry breaking, each part's
    count the whole's embeddings in its classes."""
    whole = engine.match(query, collect=True, part=Part(root_range))
    assert whole.status is Status.OK
    first, second = engine.branch_vertices(query)
    total, listed_parts = 0, []
    for j in range(parts):
        for k in range(below):
            part = Part(root_range, (j, parts) if below == 1 else ((j, parts), (k, below)))
            counted = engine.match(query, part=part)
            listed = engine.match(query, collect=True, part=part)
            assert counted.status is Status.OK and counted.count == listed.count
            assert counted.stats["branch_part"] == ([[j, parts]] if below == 1 else [[j, parts], [k, below]])
            if not getattr(engine, "symmetry_breaking", False):    # else a class holds canonical matches
                assert np.all(listed.embeddings[:, first] % parts == j)
                assert np.all(listed.embeddings[:, second] % below == k)
                inside = (whole.embeddings[:, first] % parts == j) & (whole.embeddings[:, second] % below == k)
                assert counted.count == np.sum(inside)
            total += counted.count
            listed_parts.append(listed.embeddings)
    assert total == whole.count
    if whole_count is not None:
        assert total == whole_count
    assert rows(np.concatenate(listed_parts)) == rows(whole.embeddings)
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
    with pytest.raises(ValueError, match="root_range"):
        Part(root_range="4:1")


def test_check_branch_part():
    assert check_branch_part(None) is None
    assert check_branch_part((0, 3)) == ((0, 3),)
    assert check_branch_part("2/5") == ((2, 5),)
    assert check_branch_part("2/5,0/2") == check_branch_part([(2, 5), (0, 2)]) == ((2, 5), (0, 2))
    assert check_branch_part(((1, 2),)) == ((1, 2),)
    for bad in ((3, 3), (-1, 2), (0, 0), "a/b", "1:2", (1,), 4, (), "0/2,1/2,0/2", ((0, 2), (2, 2)), "0/2,"):
        with pytest.raises(ValueError):
            check_branch_part(bad)
    with pytest.raises(ValueError, match="branch_part"):
        create_engine("gmatch", branch_part=(2, 1))
    assert Part("3:9", "2/5,0/2") == Part((3, 9), [(2, 5), (0, 2)])
    assert Part("3:9", "2/5").stats() == {"root_range": [3, 9], "branch_part": [[2, 5]]}
    assert Part().whole and Part().stats() == {} and not Part(branch_part=(0, 2)).whole


def test_a_part_is_refused_by_an_engine_that_does_not_declare_it(tiny12):
    """Only an engine that declares ``supports_parts`` takes a part (``supports_branch_parts``: a
    branch part); the whole query is every engine's; a part that is not a Part is a TypeError."""
    query = random_walk_query(tiny12, 3, seed=1)
    gsi = create_engine("gsi").prepare(tiny12)
    assert not gsi.supports_parts and gsi.match(query, part=WHOLE).count == gsi.match(query).count > 0
    with pytest.raises(ValueError, match="gsi does not answer parts of a query"):
        gsi.match(query, part=Part(root_range=(0, 4)))
    with pytest.raises(ValueError, match="gsi does not answer parts of a query"):
        gsi.root_vertex(query)
    egsm = create_engine("egsm").prepare(tiny12)
    assert egsm.supports_parts and not egsm.supports_branch_parts
    with pytest.raises(ValueError, match="egsm takes no branch_part"):
        egsm.match(query, part=Part(branch_part=(0, 2)))
    with pytest.raises(TypeError, match="part must be a common.engine.part.Part"):
        egsm.match(query, part=(0, 4))
    with pytest.raises(TypeError, match="declares supports_parts but does not define root_vertex"):
        type("Rootless", (common.Engine,), {"supports_parts": True, "_match": lambda self, q, **o: None})


def test_split_tasks_cut_a_hub_below_the_root():
    n = 100
    cands = np.arange(0, 100, 2)
    weights = np.ones(cands.size)
    weights[10] = 1000                                      # candidate 20 holds most of the work
    tasks, work = split_tasks(cands, weights, n, 8, branch=True)
    hub = [(rng, part) for rng, part in tasks if rng[0] <= 20 < rng[1]]
    share = (weights + 1).sum() / 8
    assert len(hub) == min(8, int(np.ceil(1001 / share))) > 1
    assert sorted(part for _, part in hub) == [((j, len(hub)),) for j in range(len(hub))]
    assert sum(work) == pytest.approx((weights + 1).sum())
    assert all(part is None for rng, part in tasks if not rng[0] <= 20 < rng[1])
    ranges = sorted({rng for rng, _ in tasks})
    assert ranges == work_ranges(cands, weights, n, 8)      # the ranges still cover [0, n)
    plain, plain_work = split_tasks(cands, weights, n, 8, branch=False)
    assert plain == [(rng, None) for rng in ranges] and len(plain_work) == len(ranges)
    even, _ = split_tasks(cands, np.ones(cands.size), n, 5, branch=True)
    assert all(part is None for _, part in even)


def test_split_tasks_cut_a_hub_below_the_hub():
    """With where the work lies below the hub (``below``), a branch class holding a hub of its own
    is cut again at the second branch vertex; the classes' estimates add up to the hub's work."""
    n = 100
    cands = np.arange(0, 100, 2)
    weights = np.ones(cands.size)
    weights[10] = 1000                                      # root candidate 20: the hub
    found = np.array([3, 5, 7, 9, 11])                      # its branch candidates; 7 holds most
    found_work = np.array([1.0, 1.0, 50.0, 1.0, 1.0])
    asked = []

    def below(v):
        asked.append(v)
        return found, found_work
    tasks, work = split_tasks(cands, weights, n, 8, branch=True, below=below)
    assert asked == [20]
    hub = [(part, w) for (rng, part), w in zip(tasks, work) if rng[0] <= 20 < rng[1]]
    m = hub[0][0][0][1]
    share = (weights + 1).sum() / 8
    heavy = 7 % m
    deep = sorted(part[1] for part, _ in hub if part[0] == (heavy, m))
    assert len(deep) == min(8, int(np.ceil(1001 * 50 / 54 / share))) > 1
    assert deep == [(k, len(deep)) for k in range(len(deep))]
    assert all(len(part) == 1 for part, _ in hub if part[0][0] != heavy)
    assert sorted({part[0] for part, _ in hub}) == [(j, m) for j in range(m)]
    assert sum(w for _, w in hub) == pytest.approx(1001)
    assert sum(w for part, w in hub if part[0] == (heavy, m)) == pytest.approx(1001 * 50 / 54)
    assert sum(work) == pytest.approx((weights + 1).sum())


def test_cuts_below_root_tells_whether_plan_split_has_branch_parts():
    """The hub test the engine makes before a whole search is the one plan_split's parts answer,
    on random walks of graphs with hubs (labelled or not) and of a ring (no hub)."""
    seen = set()
    ring = Graph.from_edges(64, np.arange(64), (np.arange(64) + 1) % 64, name="ring")   # no hub
    for data in (rmat(512, 3000, seed=3, labels=4), rmat(512, 3000, seed=4), ring):
        for seed in range(8):
            query = random_walk_query(data, 4 + seed % 4, seed=seed)
            order = build_plan(query, True).order
            root, branch = int(order[0]), int(order[1])
            for parts in (2, 4, 8):
                tasks, _ = plan_split(data, query, root, branch, parts)
                has = any(part is not None for _, part in tasks)
                assert cuts_below_root(data, query, root, parts) == has, (seed, parts)
                seen.add(has)
    assert seen == {True, False}                            # both answers were asked for


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


@pytest.mark.parametrize("folder,data_file,name", [
    ("hprd", "HPRD.graph", "query_dense_16_5"),
    ("yeast", "yeast.graph", "query_dense_4_1"),
    ("gmatch_test", "data.graph", "Q_0"),
])
def test_cpu_branch_parts_equal_whole_on_real_data(folder, data_file, name):
    data = common.load_graph(DATA / folder / data_file)
    engine = create_engine("cpu").prepare(data)
    query = common.load_graph(DATA / folder / "queries" / f"{name}.graph")
    branch_split_and_compare(engine, query, 3, whole_count=expected(folder, name))
    half = (0, data.num_vertices // 2)                    # a root range cut again below its root
    inside = branch_split_and_compare(engine, query, 2, root_range=half)
    assert inside == engine.match(query, part=Part(root_range=half)).count
    branch_split_and_compare(engine, query, 2, whole_count=expected(folder, name), below=3)


def test_cpu_limit_and_empty_range():
    data = common.load_graph(DATA / "hprd" / "HPRD.graph")
    query = common.load_graph(DATA / "hprd" / "queries" / "query_dense_16_2.graph")
    engine = create_engine("cpu", root_range=(0, data.num_vertices)).prepare(data)
    assert engine.match(query).count == 80                 # the default part: the constructor's
    assert engine.match(query, part=Part(root_range=(5, 5))).count == 0
    first_half = Part(root_range=(0, data.num_vertices // 2))
    half = engine.match(query, part=first_half).count
    limited = engine.match(query, limit=1, collect=True, part=first_half)
    assert half >= 1 and limited.status is Status.LIMIT and limited.count == 1
    assert limited.embeddings[0, engine.root_vertex(query)] < data.num_vertices // 2


@pytest.fixture(scope="module")
def tiny(tiny12):
    data = tiny12
    return data, random_walk_query(data, 4, seed=2, name="walk4")


@pytest.mark.parametrize("name,options", [
    ("gmatch", dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0)),
    ("gmatch", dict(seed_pool=8, blocks=2, warps_per_block=2, candidate_graph=False)),
    ("egsm", dict()),
])
@pytest.mark.slow_cases("egsm-options2", "gmatch-options0", "gmatch-options1")
def test_gpu_engines_split_equals_whole(name, options, tiny):
    data, query = tiny
    reference = create_engine("cpu").prepare(data).match(query).count
    assert reference > 0
    engine = create_engine(name, **options).prepare(data)
    split_and_compare(engine, query, [(0, 4), (4, 9), (9, 12)], reference)


@pytest.mark.parametrize("options", [
    dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0),
    dict(seed_pool=8, blocks=2, warps_per_block=2, candidate_graph=False),
    dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-4),
    dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0, leaf_counting=False, count_last=False),
    dict(seed_pool=8, blocks=2, warps_per_block=2, probe_s=0, symmetry_breaking=False),
])
@pytest.mark.slow_cases("options1", "options2", "options3", "options4")
def test_gmatch_branch_parts_equal_whole(options, tiny):
    """Leaf counting, the counted last position, the data-graph probe and its switch to a
    deferred-leaf plan all keep the branch vertex's restriction; the branch vertex of a star
    (centre 1) is a leaf that leaf deferral moves last."""
    data, query = tiny
    star = common.Graph.from_edges(4, [0, 1, 1], [1, 2, 3], labels=[1, 1, 0, 0], name="star")
    assert build_plan(star, True).order[1] == build_plan(star, True, defer_leaves=True).order[-1]
    engine = create_engine("gmatch", **options).prepare(data)
    cpu = create_engine("cpu").prepare(data)
    for q in (query, star):
        reference = cpu.match(q).count
        assert reference > 0
        branch_split_and_compare(engine, q, 3, whole_count=reference)
    branch_split_and_compare(engine, query, 2, root_range=(0, 6))
    branch_split_and_compare(engine, query, 2, whole_count=cpu.match(query).count, below=2)


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


@pytest.mark.slow
def test_gmatch_hub_parts_count_a_hub_root_in_parts(hub200):
    """Past its probe, a count-only query whose root has a hub runs as root ranges and branch
    parts on one engine (alone and after a batch); the parts add up to the reference."""
    # walk4-2 counts its last position (one row's length), walk5-1 a leaf: hub parts count positions
    queries = [random_walk_query(hub200, k, seed=s, name=f"walk{k}-{s}") for k, s in ((4, 2), (5, 1))]
    cpu = create_engine("cpu").prepare(hub200)
    engine = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6,
                           hub_parts=4, hub_after_s=0).prepare(hub200)   # a probe too short to finish
    for query in queries:
        reference = cpu.match(query).count
        result = engine.match(query)
        assert result.status is Status.OK and result.count == reference > 0
        assert result.stats["hub_parts"] > 1 and sum(result.stats["part_counts"]) == reference
        assert engine.default_part.whole
        assert "hub_parts" not in engine.match(query, collect=True).stats      # collect: one search
    batched = engine.match_batch(queries)
    assert [r.count for r in batched] == [cpu.match(q).count for q in queries]
    for r in batched:               # cut into parts exactly when its batch did not finish it
        assert (r.stats.get("hub_parts", 0) > 1) == bool(r.stats.get("batch_tried"))
    for after, cut in ((1e-6, True), (600.0, False)):    # the whole search first: stopped, or finished
        late = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6,
                             hub_parts=4, hub_after_s=after, hub_whole_s=0).prepare(hub200)
        result = late.match(queries[0])
        assert result.status is Status.OK and result.count == cpu.match(queries[0]).count
        assert ("hub_parts" in result.stats) is cut
        if cut:
            assert 0 < result.stats["hub_whole_seconds"] <= sum(result.phases.values())
            assert sum(result.stats["part_counts"]) == result.count
    on_gpu = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6, hub_parts=4,
                           hub_after_s=1e-6, hub_whole_s=0, candidate_graph_build="gpu").prepare(hub200)
    for query in queries:                        # the whole graph built on the device, its parts' on the host
        result = on_gpu.match(query)
        assert result.status is Status.OK and result.count == cpu.match(query).count
        assert "hub_parts" in result.stats and sum(result.stats["part_counts"]) == result.count
    every = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6, hub_parts=4,
                          hub_after_s=0, leaf_counting=False, count_last=False).prepare(hub200)
    result = every.match(queries[0])             # every position enumerated: no parts
    assert result.count == cpu.match(queries[0]).count and "hub_parts" not in result.stats
    with pytest.raises(ValueError, match="hub_after_s"):
        create_engine("gmatch", hub_parts=4, hub_after_s=-1)
    with pytest.raises(ValueError, match="hub_whole_s"):
        create_engine("gmatch", hub_parts=4, hub_whole_s=-1)
    off = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-4,
                        hub_parts=0).prepare(hub200)
    assert "hub_parts" not in off.match(queries[0]).stats
    with pytest.raises(ValueError, match="hub_parts"):
        create_engine("gmatch", hub_parts=1)


def test_gmatch_whole_search_predicts_its_end_from_the_seeds_taken(hub200):
    """At the end of a hub query's slice, the seeds taken beyond one fetch per warp are the share
    done: the launch runs on to the query's deadline when that share predicts its end within
    ``hub_whole_s``; a prediction within twice that is made again one slice later and kept
    within 1.5 times it; anything else is cut (also when nothing is done yet or the pool is
    too small). A launch kept to the deadline is stopped there."""
    engine = create_engine("gmatch", blocks=2, warps_per_block=2, hub_whole_s=1.0,
                           hub_after_s=0.05).prepare(hub200)
    keep, row = Deadline(60.0), np.zeros(CTRL_SIZE, np.int64)

    def ask(extend, taken, elapsed):
        row[C_SEED] = taken
        engine._d_ctrls[0].copy_to_device(row)
        return extend(elapsed)

    shape = {}
    extend = engine._whole_extension(100, 10, keep, shape)
    assert ask(extend, 55, 0.4) == keep.at                            # 0.4 s for half: 0.8 s
    assert shape == {"hub_whole_predicted_s": pytest.approx(0.8), "hub_whole_looks": 1}
    assert ask(extend, 100, 60.0) is None                             # the deadline passed
    for taken, elapsed, predicted in ((55, 1.1, 2.2), (10, 0.1, math.inf)):
        shape = {}
        assert ask(engine._whole_extension(100, 10, keep, shape), taken, elapsed) is None
        assert shape["hub_whole_predicted_s"] == pytest.approx(predicted)
    for taken, elapsed, predicted, kept in ((82, 1.0, 1.25, True), (46, 0.7, 1.75, False)):
        shape = {}
        extend = engine._whole_extension(100, 10, keep, shape)
        before = time.perf_counter()
        later = ask(extend, 55, 0.6)                                  # 1.2 s: look again
        assert before + 0.05 <= later <= time.perf_counter() + 0.05
        assert ask(extend, taken, elapsed) == (keep.at if kept else None)
        assert shape == {"hub_whole_predicted_s": pytest.approx(predicted), "hub_whole_looks": 2}
        assert ask(extend, 100, 60.0) is None
    assert engine._whole_extension(20, 10, keep, {})(0.1) is None       # the first fetch is the pool


@pytest.mark.parametrize("kept", [True, False])
def test_gmatch_hub_query_kept_whole_or_cut_counts_alike(hub200, monkeypatch, kept):
    """A hub query whose whole search is let run on past its slice ends as one search (no
    parts); one that is cut ends as parts; both count the reference. The slice is made to end
    as the whole launch starts, so the extension is asked on any device."""
    def extension(self, seeds, in_flight, keep_whole, shape):
        def extend(elapsed):
            shape["hub_whole_predicted_s"] = 0.0 if kept else math.inf
            return keep_whole.earlier(math.inf) if kept else None
        return extend

    def run_past_the_slice(self, kernel, griddim, blockdim, args, deadline, flag, extend=None):
        return watched(self, kernel, griddim, blockdim, args, deadline if extend is None else 0.0, flag, extend)

    watched = LaunchWatch.run
    monkeypatch.setattr(GMatch, "_whole_extension", extension)
    monkeypatch.setattr(LaunchWatch, "run", run_past_the_slice)
    query = random_walk_query(hub200, 5, seed=1)                 # counts a leaf (hub parts count positions)
    reference = create_engine("cpu").prepare(hub200).match(query).count
    engine = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6,
                           hub_parts=4, hub_after_s=600).prepare(hub200)
    result = engine.match(query)
    assert result.status is Status.OK and result.count == reference > 0
    assert ("hub_parts" in result.stats) is not kept
    assert result.stats["hub_whole_predicted_s"] == (0.0 if kept else math.inf)


def test_gmatch_part_graphs_are_the_device_filters_parts(hub200):
    """A part's candidate graph, built on a host thread from the whole query's filter bits, is the
    one built from the bits the device filter leaves with the part's root range and branch part;
    a build told to stop returns None."""
    query = random_walk_query(hub200, 5, seed=2)
    engine = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2).prepare(hub200)
    plan, _ = engine._plan(query, True, True, PhaseTimer(), WHOLE)
    whole = engine._d_cand.copy_to_host()
    tasks, _ = plan_split(hub200, query, engine.root_vertex(query), engine.branch_vertices(query)[0], 4)
    tasks.append((tasks[0][0], ((0, 2), (1, 3))))          # and a part cut at both branch vertices
    assert any(part is not None for _, part in tasks[:-1])
    at = engine._branch_positions(plan, query)
    graphs = PartGraphs(hub200, whole, plan, tasks, at, 1 << 30, label_sorted_adjacency(hub200))
    try:
        for i, (root_range, branch_part) in enumerate(tasks):
            engine._plan(query, True, True, PhaseTimer(), Part(root_range, branch_part))
            device = engine._d_cand.copy_to_host()
            assert np.array_equal(part_bits(whole, root_range, branch_part, at), device)
            built, fresh = graphs.graph(i, None), build_candidate_graph(hub200, device, plan)
            for field in ("cand_set", "sizes", "offsets", "entries", "bitmap"):
                assert np.array_equal(getattr(built, field), getattr(fresh, field)), field
    finally:
        graphs.stop()
    assert build_candidate_graph(hub200, whole, plan) is not None
    assert build_candidate_graph(hub200, whole, plan, stop=np.ones(1, np.int64)) is None


def test_gmatch_a_part_whose_graph_is_late_times_out(hub200, monkeypatch):
    """A part still waiting for its candidate graph at the deadline ends the call with status
    timeout (no exception), and the parts after it are not searched."""
    def late(self, i, timeout_s):
        raise TimeoutError

    monkeypatch.setattr(PartGraphs, "graph", late)
    query = random_walk_query(hub200, 4, seed=2)                 # counts its last position: hub parts
    engine = create_engine("gmatch", seed_pool=8, blocks=2, warps_per_block=2, probe_s=1e-6,
                           hub_parts=4, hub_after_s=0).prepare(hub200)
    result = engine.match(query, timeout_s=60)
    assert result.status is Status.TIMEOUT
    assert result.stats["hub_parts"] > 1 and result.stats["hub_parts_finished"] == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_gmatch_part_graph_builders_run_in_a_forked_child():
    """A child forked after the parent used the part-graph threads gets threads of its own (it
    inherits the pool object, whose threads do not exist in the child)."""
    from gmatch import filter as gmatch_filter

    assert gmatch_filter._builders().submit(int, "3").result(timeout=30) == 3
    pid = os.fork()
    if pid == 0:                                     # the child: exit 0 only if the pool ran the job
        try:
            ok = gmatch_filter._builders().submit(int, "7").result(timeout=10) == 7
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
