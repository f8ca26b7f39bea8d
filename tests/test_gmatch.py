"""gMatch engine (gmatch/): every variant's counts equal the CPU reference's on small labelled and
unlabelled graphs (random queries, P1-P9, cliques, automorphic and 20-32 vertex queries), a skewed
case that forces work stealing, collect/limit/timeout/OOM semantics, the plan's automorphism
group and symmetry breaking, and 64-bit counts. Kernels run in the CUDA simulator here."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from _graphs import hub_on_a_path, reference
from common.cpu.reference import ReferenceMatcher
from common.engine.result import Status
from common.gpu.backend import BACKEND
from common.gpu.runtime import cuda
from common.graph.generate import PATTERNS, pattern, random_walk_query, rmat, uniform_labels
from common.graph.model import Graph
from gmatch import GMatch
from gmatch.filter import build_candidate_graph
from gmatch.order import all_automorphisms, build_plan

#: small launch shapes and pools so the simulator stays fast; BFS still runs a level or two.
SMALL = dict(seed_pool=8, blocks=2, warps_per_block=2, idle_stats=True, probe_s=0)
VARIANTS = {
    "fine-batch": dict(),
    "fine-data-graph": dict(candidate_graph=False),
    "fine-no-leaf-counting": dict(leaf_counting=False),
    "fine-enumerate-every-position": dict(leaf_counting=False, count_last=False),
    "fine-enumerate-without-leaf-checks": dict(leaf_counting=False, count_last=False, leaf_checks=False),
    "fine-probe-finishes": dict(probe_s=100.0),         # auto: the data-graph probe answers
    "fine-probe-stops": dict(probe_s=1e-4),             # auto: probe stopped, then the index
    "coarse-data-graph": dict(granularity="coarse", unroll=2, candidate_graph=False),
    "fine-naive": dict(batch=False),
    "fine-block-stealing": dict(work_stealing="block"),
    "fine-mailbox-stealing": dict(work_stealing="mailbox"),
    "fine-no-stealing": dict(work_stealing=False),
    "fine-candidate-graph": dict(candidate_graph=True),
    "fine-candidate-graph-built-on-host": dict(candidate_graph=True, candidate_graph_build="host"),
    "fine-probe-stops-built-on-host": dict(probe_s=1e-4, candidate_graph_build="host"),
    "coarse-candidate-graph": dict(granularity="coarse", unroll=2, candidate_graph=True),
    "fine-one-root": dict(roots_per_fetch=1, seed_pool=1),
    "coarse-naive": dict(granularity="coarse"),
    "coarse-unroll-2": dict(granularity="coarse", unroll=2),
    "coarse-unroll-4": dict(granularity="coarse", unroll=4),
    "coarse-unroll-8": dict(granularity="coarse", unroll=8),
}


#: Engines ``engine`` prepared, by (data graph, options); each entry keeps its graph alive, so the
#: graph's id is not reused while the entry exists.
_PREPARED: dict[tuple, tuple[Graph, GMatch]] = {}


def engine(data: Graph, **options) -> GMatch:
    """A GMatch of the SMALL launch shapes and ``options``, prepared on ``data`` once per test
    process and shared by the tests that ask for the same graph and options (a prepared engine
    answers any number of queries; prepare zero-fills the 65,536-entry block-to-query map, about
    a second and a half of simulated launch)."""
    options = {**SMALL, **options}
    key = (id(data), tuple(sorted(options.items())))
    if key not in _PREPARED:
        _PREPARED[key] = (data, GMatch(**options).prepare(data))
    return _PREPARED[key][1]


@pytest.fixture(scope="module")
def labelled():
    return rmat(24, 60, seed=3, labels=uniform_labels(24, 3, seed=4), name="rmat-labelled")


@pytest.fixture(scope="module")
def unlabelled():
    return rmat(16, 40, seed=5, name="rmat-unlabelled")


@pytest.fixture(scope="module")
def reference_of():
    return reference


# ------------------------------------------------------------------------------ variants
@pytest.mark.slow_cases("coarse-candidate-graph",
                        "coarse-data-graph",
                        "coarse-naive",
                        "coarse-unroll-2",
                        "coarse-unroll-4",
                        "coarse-unroll-8",
                        "fine-data-graph",
                        "fine-enumerate-every-position",
                        "fine-naive",
                        "fine-one-root",
                        "fine-probe-finishes",
                        "fine-probe-stops")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_equals_the_reference(variant, labelled, unlabelled, reference_of):
    for data, sizes in ((labelled, ((3, 1), (4, 2), (5, 3))), (unlabelled, ((3, 1), (4, 2)))):
        gm = engine(data, **VARIANTS[variant])
        for k, seed in sizes:
            query = random_walk_query(data, k, seed=seed, name=f"walk{k}-{seed}")
            result = gm.match(query)
            assert result.status is Status.OK
            assert result.count == reference_of(data, query).count, (variant, data.name, k)
            assert 0.0 <= result.stats["idle_rate"] <= 1.0
            if variant == "fine-probe-finishes" and data is labelled:
                assert result.stats["probe_finished"] and not result.stats["candidate_graph"]
            if variant.startswith("fine-probe-stops") and data is labelled:
                assert result.stats["candidate_graph"] and "probe" in result.phases
                stages = result.stats["probe_direct_ms"] + result.stats["probe_look_ms"]
                assert stages >= 1e3 * result.phases["probe"] > 0            # the stages hold the phase
                assert 0 <= result.stats["probe_pool_ms"] <= result.stats["probe_look_ms"]
                assert result.stats["probe_pool_rows"] >= 0 and result.stats["probe_pool_growths"] >= 0
                assert result.stats["probe_past_end_ms"] >= 0


@pytest.mark.slow_cases("fine", "unroll-4")
@pytest.mark.parametrize("options", [dict(), dict(granularity="coarse", unroll=4)], ids=["fine", "unroll-4"])
def test_patterns_p1_to_p9_on_an_unlabelled_graph(options, unlabelled, reference_of):
    gm = engine(unlabelled, **options)
    for name in PATTERNS:
        query = pattern(name)
        assert gm.match(query).count == reference_of(unlabelled, query).count, name


@pytest.mark.parametrize("seed_pool", [1, 3, 10**4])
def test_seed_pool_size_changes_nothing_but_the_split(seed_pool, labelled, reference_of):
    gm = engine(labelled, seed_pool=seed_pool)
    query = random_walk_query(labelled, 5, seed=3, name="walk5-3")
    result = gm.match(query)
    assert result.count == reference_of(labelled, query).count
    assert result.stats["seed_width"] >= 1
    if seed_pool == 10**4:          # the BFS runs down to the last-but-one position
        assert result.stats["seed_width"] == query.num_vertices - 1 - result.stats["counted_leaves"]


def skewed_graph() -> Graph:
    """One hub (the only vertex of label 1) adjacent to 20 label-0 vertices that are densely
    linked: all the work hangs under a single seed."""
    rng = np.random.default_rng(7)
    src, dst = [], []
    for v in range(1, 21):
        src.append(0)
        dst.append(v)
    for a in range(1, 21):
        for b in range(a + 1, 21):
            if rng.random() < 0.3:
                src.append(a)
                dst.append(b)
    labels = np.zeros(21, dtype=np.int32)
    labels[0] = 1
    return Graph.from_edges(21, src, dst, labels, name="skewed")


WHEEL = Graph.from_edges(5, [0, 0, 0, 0, 1, 2, 3, 4], [1, 2, 3, 4, 2, 3, 4, 1], [1, 0, 0, 0, 0],
                         name="wheel")


def one_seed(data: Graph, **options) -> GMatch:
    """One seed per fetch and in the pool; the last position enumerated (enough work to steal);
    one launch (no hub parts: the simulator's launches outlast ``hub_after_s``)."""
    return GMatch(**{"seed_pool": 1, "roots_per_fetch": 1, "count_last": False, "hub_parts": 0,
                     **options}).prepare(data)


@pytest.mark.slow
def test_in_block_work_stealing_moves_work_from_the_one_busy_warp(reference_of):
    data = skewed_graph()
    # wheel: hub (label 1) + a 4-cycle rim of label 0; the hub has the largest degree, so it is
    # matched first and the seed pool holds exactly one seed.
    expected = reference_of(data, WHEEL).count
    for scope in ("block", "global"):
        stealing = one_seed(data, blocks=1, warps_per_block=4, work_stealing=scope)
        result = stealing.match(WHEEL)
        assert result.stats["seeds"] == 1
        assert result.count == expected, scope
        assert result.stats["steals"] > 0 and result.stats["global_steals"] == 0, scope
    alone = one_seed(data, blocks=1, warps_per_block=4, work_stealing=False).match(WHEEL)
    assert alone.count == expected and alone.stats["steals"] == alone.stats["global_steals"] == 0
    collected = stealing.match(WHEEL, collect=True)
    reference = reference_of(data, WHEEL, collect=True)
    assert sorted(map(tuple, collected.embeddings)) == sorted(map(tuple, reference.embeddings))


@pytest.mark.slow
def test_one_hub_row_is_split_between_warps(reference_of):
    """All the work is one task group: the row of a hub (the only seed). Idle warps get the upper
    half of its untouched tasks (in-group split), in the block through shared memory and, with
    a row long enough to outlast a busy warp's first looks at the mailbox, through the global
    mailbox."""
    edge = Graph.from_edges(2, [0], [1], [1, 0], name="hub-edge")
    cherry = Graph.from_edges(3, [0, 0], [1, 2], [1, 0, 0], name="hub-cherry")
    # the cherry's 80-leaf row (6,320 embeddings) gives 8-10 steals in the simulator, as 150 leaves'
    # 22,350 did; the mailbox keeps its 1,200 (600 leaves gave a single global steal at times)
    cases = [(150, edge, "block"), (150, edge, "global"), (80, cherry, "block"), (80, cherry, "global"),
             (1200, edge, "mailbox")]
    for leaves, query, scope in cases:             # the hub is position 0 of both queries
        data = hub_on_a_path(leaves)
        expected = reference_of(data, query).count
        gm = one_seed(data, blocks=1, warps_per_block=3, work_stealing=scope, candidate_graph=True,
                      probe_s=0, leaf_counting=False)
        result = gm.match(query)
        assert result.stats["seeds"] == 1
        assert result.count == expected, (query.name, scope)
        assert result.stats["steals"] + result.stats["global_steals"] > 0, (query.name, scope)
        if scope == "mailbox":
            assert result.stats["global_steals"] > 0
    whole_groups = one_seed(hub_on_a_path(150), blocks=1, warps_per_block=3, work_stealing="block",
                            candidate_graph=True, probe_s=0, split_groups=False).match(edge)
    assert whole_groups.count == 150 and whole_groups.stats["steals"] == 0    # one group: nothing to give


def test_a_gift_of_the_last_level_carries_its_checks(reference_of):
    """The only splittable level is the last: the hub's row at position 3, whose one same-label
    test (position 3 against position 1's image, the hub's neighbour A, last in the row) is in the
    level above's checks row. A steal hands the row's upper half, A included, to another warp:
    in the block, across blocks, and through the global record (mailbox); a gift without the
    checks row would count A as an image of position 3 (one match too many)."""
    query = Graph.from_edges(4, [0, 0, 1, 0], [1, 2, 2, 3], [1, 0, 3, 0], name="hub-tail-query")
    for leaves, scope in ((300, "block"), (300, "global"), (1200, "mailbox")):
        a = leaves + 2                             # hub 0, B 1, the leaves, A last
        data = Graph.from_edges(leaves + 3, [0, 0, 1] + [0] * leaves, [a, 1, a] + list(range(2, leaves + 2)),
                                [1, 3] + [0] * (leaves + 1), name=f"hub-tail{leaves}")
        result = one_seed(data, blocks=2, warps_per_block=2, work_stealing=scope, candidate_graph=True,
                          probe_s=0, leaf_counting=False).match(query)
        assert result.count == reference_of(data, query).count == leaves, scope
        assert result.stats["steals"] + result.stats["global_steals"] > 0, scope


@pytest.mark.slow
def test_stealing_through_the_global_mailbox_across_blocks(reference_of):
    """One seed, several blocks: the other warps post requests in the global mailbox and get half
    of a level's task groups through global memory. The simulator runs blocks one after another,
    so warps of later blocks start after the work is done (the late-start termination path), and
    the hand-over protocol itself is exercised by 'mailbox' (every hand-over through the global
    mailbox and global memory, also between warps of one block)."""
    data = skewed_graph()
    expected = reference_of(data, WHEEL).count
    for blocks, warps in ((3, 2), (2, 3)):
        mailbox = one_seed(data, blocks=blocks, warps_per_block=warps, work_stealing="mailbox")
        result = mailbox.match(WHEEL)
        assert result.stats["seeds"] == 1 and result.stats["blocks"] == blocks
        assert result.count == expected, (blocks, warps)
        assert result.stats["global_steals"] > 0 and result.stats["steals"] == 0
        assert result.stats["steal_buffer_bytes"] > 0
    collected = mailbox.match(WHEEL, collect=True)
    reference = reference_of(data, WHEEL, collect=True)
    assert sorted(map(tuple, collected.embeddings)) == sorted(map(tuple, reference.embeddings))
    limited = mailbox.match(WHEEL, limit=5)
    assert (limited.count, limited.status) == (5, Status.LIMIT)
    both = one_seed(data, blocks=3, warps_per_block=2).match(WHEEL)      # default scope: global
    assert both.count == expected and both.stats["work_stealing"] == "global"
    assert one_seed(data, blocks=2, warps_per_block=2, work_stealing=True).work_stealing == "global"


def test_fine_blocks_fit_the_static_shared_memory_limit():
    """Every compiled stack depth's block (its warps' stacks and checks rows, the plan rows, the
    block's warp states) stays under the 48 KB of static shared memory a CUDA block may declare
    (the simulator does not enforce it), and 12-level stacks keep 8 warps per block."""
    from gmatch.engine import CHECKS_BYTES, LEVEL_BYTES, STACK_LEVELS, fine_warps
    from gmatch.enumerate import SQ_ROWS

    for levels in STACK_LEVELS:
        warps = fine_warps(levels)
        block = warps * (levels * LEVEL_BYTES + CHECKS_BYTES + 4 + 4) + SQ_ROWS * 32 * 4 + 2 * 4
        assert block <= 48 * 1024, (levels, warps, block)
    assert fine_warps(12) == 8


def test_memory_statistics(labelled):
    query = random_walk_query(labelled, 5, seed=3, name="walk5-3")
    fine = engine(labelled).match(query).stats
    assert fine["max_stack_bytes"] == fine["stack_shared_bytes"] > 0 and fine["stack_global_bytes"] == 0
    assert fine["seed_pool_bytes"] == 4 * fine["seeds"] * fine["seed_width"] > 0
    coarse = engine(labelled, granularity="coarse", unroll=4).match(query).stats
    assert coarse["max_stack_bytes"] == coarse["stack_global_bytes"] > 0
    assert coarse["stack_shared_bytes"] == 0 and coarse["steal_buffer_bytes"] == 0


# ------------------------------------------------------------------------------ candidate graph
def ldf_bits(data: Graph, plan) -> np.ndarray:
    """Label + degree candidate bits per data vertex (a superset of what the GPU filter keeps)."""
    bits = np.zeros(data.num_vertices, dtype=np.uint32)
    for d in range(plan.size):
        ok = (data.labels == plan.labels[d]) & (data.degrees >= plan.degrees[d])
        bits[ok] |= np.uint32(1 << d)
    return bits


def test_candidate_graph_lists_and_bitmaps_are_the_candidate_adjacency(reference_of):
    """Host build on 60 vertices (|C(u)| > 32: multi-word bitsets): every row is
    C(d) ∩ N(C(j)[i]) sorted, its bitset marks exactly those, and refinement keeps every image of
    every embedding while pruning the rest."""
    data = rmat(60, 150, seed=12, name="rmat60")
    query = pattern("P3")
    plan = build_plan(query)
    cg = build_candidate_graph(data, ldf_bits(data, plan), plan)
    members = [cg.cand_set[cg.cand_base[d]:cg.cand_base[d] + cg.sizes[d]] for d in range(plan.size)]
    assert max(len(m) for m in members) > 32
    for d in range(plan.size):
        assert np.array_equal(members[d], np.flatnonzero((cg.cand_bits >> np.uint32(d)) & 1))
    checked = 0
    for d in range(1, plan.size):
        for j in range(d):
            if not (int(plan.backward[d]) >> j) & 1:
                continue
            row_base, word_base = cg.edges[:, d, j]
            for i, x in enumerate(members[j]):
                row = row_base + i
                listed = cg.entries[cg.offsets[row]:cg.offsets[row + 1]]        # ranks in C(d)
                adjacent = np.intersect1d(data.neighbors[data.offsets[x]:data.offsets[x + 1]], members[d])
                assert np.array_equal(members[d][listed], adjacent)
                words = cg.bitmap[word_base + i * cg.words[d]: word_base + (i + 1) * cg.words[d]]
                bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:len(members[d])]
                assert np.array_equal(np.flatnonzero(bits), listed)
                checked += 1
    assert checked > 0
    images = reference_of(data, query, collect=True).embeddings[:, plan.order]
    for d in range(plan.size):
        assert np.isin(images[:, d], members[d]).all()
    hub = Graph.from_edges(5, [0, 0, 0, 0, 1], [1, 2, 3, 4, 2], name="hub+edge")
    tri_plan = build_plan(pattern("P1"))
    pruned = build_candidate_graph(hub, ldf_bits(hub, tri_plan), tri_plan)
    assert pruned.sizes.tolist() == [3, 3, 3]          # the leaves 3 and 4 are in no triangle


@pytest.mark.slow
@pytest.mark.parametrize("case", ["rmat60-P3", "labelled-walks", "hub+edge-P1", "empty-position"])
def test_candidate_graph_built_on_the_gpu_equals_the_host_build(case):
    """The device build (gmatch.candidate_graph) gives the host build's arrays: refined bits,
    candidate sets, row offsets, entries, bitsets (multi-word ones included), edge table and
    sizes; and the query parameter block the host build writes."""
    from gmatch.filter import QP_CBASE, QP_CSIZE, QP_WORDS, pack_candidate_graph, pack_query

    if case == "rmat60-P3":
        graphs = [(rmat(60, 150, seed=12, name="rmat60"), pattern("P3"))]
    elif case == "labelled-walks":
        data = rmat(40, 120, seed=3, labels=uniform_labels(40, 3, seed=4), name="rmat40-labelled")
        graphs = [(data, random_walk_query(data, k, seed=k, name=f"walk{k}")) for k in (3, 5, 7)]
    elif case == "hub+edge-P1":
        graphs = [(Graph.from_edges(5, [0, 0, 0, 0, 1], [1, 2, 3, 4, 2], name="hub+edge"), pattern("P1"))]
    else:                                        # a position whose candidates refinement empties
        graphs = [(Graph.from_edges(6, [0, 1, 3, 4], [1, 2, 4, 5], labels=[0, 1, 2, 0, 1, 1], name="paths"),
                   Graph.from_edges(3, [0, 1], [1, 2], labels=[0, 1, 2], name="path012"))]
    for data, query in graphs:
        plan = build_plan(query)
        bits = ldf_bits(data, plan)
        host = build_candidate_graph(data, bits, plan)
        gm = GMatch(**SMALL, candidate_graph=True, candidate_graph_build="gpu").prepare(data)
        builder = gm._device_build
        qp = pack_query(plan, query)
        d_bits = cuda.to_device(bits.copy())
        graph, stats = builder.build(plan, qp, gm._d_qp, d_bits, 1 << 30)
        row_off, entries, bitmap, cand_set, edges, refined = (a.copy_to_host() for a in graph)
        rows = host.offsets.size
        assert np.array_equal(refined, host.cand_bits), query.name
        assert np.array_equal(cand_set[:host.cand_set.size], host.cand_set), query.name
        assert np.array_equal(row_off[:rows], host.offsets), query.name
        assert np.array_equal(entries[:host.offsets[-1]], host.entries[:host.offsets[-1]]), query.name
        assert np.array_equal(bitmap[:host.bitmap.size], host.bitmap), query.name
        assert np.array_equal(edges, host.edges.reshape(-1)), query.name
        assert stats["candidate_graph_sizes"] == host.sizes.tolist()
        assert stats["candidate_edges"] == int(host.offsets[-1])
        expected = pack_query(plan, query)
        pack_candidate_graph(expected, host)
        for row in (QP_WORDS, QP_CBASE, QP_CSIZE):
            assert np.array_equal(qp[row], expected[row]), (query.name, row)
        assert builder.build(plan, pack_query(plan, query), gm._d_qp, cuda.to_device(bits.copy()), 0) == (None, {})


def test_candidate_graph_counts_with_multi_word_bitmaps(reference_of):
    data = rmat(50, 160, seed=13, name="rmat50")
    cases = ((dict(), "P2"), (dict(), "P4"),
             (dict(work_stealing="mailbox", seed_pool=1, roots_per_fetch=1), "P1"))
    for options, name in cases:
        query = pattern(name)
        result = engine(data, candidate_graph=True, **options).match(query)
        assert result.count == reference_of(data, query).count, (name, options)
        assert max(result.stats["candidate_sizes"]) > 32
        assert 0 < result.stats["candidate_graph_build_ms"] <= 1e3 * result.phases["index"]
    collected = engine(data, candidate_graph=True).match(pattern("P1"), collect=True)
    expected = reference_of(data, pattern("P1"), collect=True).embeddings
    assert sorted(map(tuple, collected.embeddings)) == sorted(map(tuple, expected))


@pytest.mark.parametrize("build", ["host", "gpu"])
def test_candidate_graph_that_would_not_fit_falls_back_to_the_data_graph(build, reference_of, monkeypatch):
    data = rmat(50, 160, seed=13, name="rmat50")
    plan = build_plan(pattern("P2"))
    assert build_candidate_graph(data, ldf_bits(data, plan), plan, max_bitmap_bytes=4) is None
    monkeypatch.setattr(GMatch, "_max_bitmap_bytes", lambda self: 4)
    limited = engine(data, candidate_graph=True, candidate_graph_build=build).match(pattern("P2"))
    assert limited.count == reference_of(data, pattern("P2")).count
    assert limited.stats["candidate_graph"] is False


def test_a_device_build_out_of_device_memory_builds_on_the_host(reference_of, monkeypatch):
    """The device build's own arrays not fitting is no failure: the host builds the graph, and the
    statistics say so."""
    from common.errors import DeviceOutOfMemory
    from gmatch.candidate_graph import DeviceCandidateGraph

    def starved(self, *args, **kwargs):
        raise DeviceOutOfMemory(1 << 20, 0, 1024, what="label-sorted neighbours")

    monkeypatch.setattr(DeviceCandidateGraph, "build", starved)
    data = rmat(50, 160, seed=13, name="rmat50")
    result = engine(data, candidate_graph=True, candidate_graph_build="gpu").match(pattern("P2"))
    assert result.count == reference_of(data, pattern("P2")).count and result.stats["candidate_graph"]
    assert result.stats["candidate_graph_build_fallback"].startswith(
        "built on the host: device allocation of 1,048,576 bytes for label-sorted neighbours")


def test_the_device_builds_adjacency_counts_only_in_the_peaks_of_the_queries_that_build():
    """The label-sorted adjacency the first device build uploads stays on the device, as a pooled
    buffer: a query that ends in the probe has the same peak before and after a build, and a
    query that builds counts it."""
    data = rmat(40, 120, seed=3, labels=uniform_labels(40, 3, seed=4), name="rmat40-labelled")
    query = random_walk_query(data, 3, seed=3, name="walk3")
    gm = GMatch(**{**SMALL, "probe_s": 60.0}, candidate_graph_build="gpu").prepare(data)
    probed = gm.match(query)
    assert probed.stats["probe_finished"] and not probed.stats["candidate_graph"]
    built = gm.match(query, collect=True)
    assert built.stats["candidate_graph"] and built.count == probed.count
    adjacency = 2 * 4 * data.neighbors.size
    assert built.peak_device_bytes >= probed.peak_device_bytes + adjacency
    assert gm.match(query).peak_device_bytes == probed.peak_device_bytes
    assert gm.match(query, collect=True).peak_device_bytes == built.peak_device_bytes


# ------------------------------------------------------------------------------ leaf counting
def star_with_leaves(labels):
    """A path 0-1-2 (labels 0, 1, 0) with leaves hung on vertex 1 and 2 of the given labels."""
    src, dst = [0, 1], [1, 2]
    for i, _ in enumerate(labels):
        src.append(1 + i % 2)
        dst.append(3 + i)
    return Graph.from_edges(3 + len(labels), src, dst, labels=[0, 1, 0, *labels],
                            name=f"leaves{list(labels)}")


@pytest.fixture(scope="module")
def leafy():
    return rmat(40, 160, seed=21, labels=uniform_labels(40, 5, seed=22), name="rmat40-5")


@pytest.mark.parametrize("labels, counted", [
    ((2, 3, 4), 4),     # vertex 0 (label 0 like the core's vertex 2) and the three hung leaves
    ((2, 2, 3), 3),     # of two leaves labelled 2 the first is counted, the other enumerated
    ((0, 3), 1),        # vertex 0 and the leaf labelled 0 on vertex 1 are symmetric: enumerated
    ((1,), 1)])         # a leaf with its own neighbour's label (vertices 0 and 2 symmetric)
@pytest.mark.slow_cases("labels0-4", "labels1-3", "labels2-1")
def test_free_leaves_are_counted_and_equal_enumeration(labels, counted, leafy, reference_of):
    query = star_with_leaves(labels)
    expected = reference_of(leafy, query).count
    assert expected > 0
    counted_run = engine(leafy).match(query)
    enumerated = engine(leafy, leaf_counting=False, count_last=False).match(query)
    assert counted_run.count == enumerated.count == expected
    assert counted_run.stats["counted_leaves"] == counted
    assert enumerated.stats["counted_leaves"] == 0
    assert engine(leafy, candidate_graph=False).match(query).stats["counted_leaves"] == 0
    plan = build_plan(query, defer_leaves=True)
    assert plan.free_leaves == counted
    tail = plan.order[query.num_vertices - counted:]
    assert all(query.degrees[u] == 1 for u in tail)


def test_each_search_runs_the_kernel_of_its_own_leaf_step(leafy, reference_of, monkeypatch):
    """The fine kernel is compiled per leaf step and the engine picks the one a search needs:
    one per match, the leaf product, the counted last position, or output under collect/limit;
    every count equals the reference's."""
    import gmatch.engine
    from gmatch.enumerate import LEAF_LAST, LEAF_ONE, LEAF_OUTPUT, LEAF_PRODUCT

    launched = []
    compiled = gmatch.engine.fine_kernel

    def spy(*args):
        launched.append(args[8])
        return compiled(*args)

    monkeypatch.setattr(gmatch.engine, "fine_kernel", spy)
    query = star_with_leaves((2, 3, 4))
    expected = reference_of(leafy, query).count
    cases = [(dict(leaf_counting=False, count_last=False), {}, {LEAF_ONE}),
             (dict(count_last=False), {}, {LEAF_PRODUCT}),
             (dict(leaf_counting=False), {}, {LEAF_LAST}),
             (dict(leaf_counting=False, count_last=False), dict(limit=expected // 2), {LEAF_OUTPUT}),
             (dict(), dict(collect=True), {LEAF_ONE, LEAF_OUTPUT})]    # a count sizes the output first
    for options, run, leaves in cases:
        launched.clear()
        result = engine(leafy, candidate_graph=True, **options).match(query, **run)
        assert set(launched) == leaves, (options, run, launched)
        assert result.count == run.get("limit", expected), (options, run)
    launched.clear()
    assert engine(leafy, candidate_graph=False).match(query).count == expected
    assert set(launched) == {LEAF_ONE}


@pytest.mark.slow
def test_leaf_counting_with_symmetry_limit_and_collect(leafy, reference_of):
    """Counted leaves with limit and collect (which enumerate every leaf) and with a symmetric
    core (a triangle of one label: its restriction stays on the core)."""
    query = star_with_leaves((2, 3))
    reference = reference_of(leafy, query, collect=True)
    gm = engine(leafy)
    full = gm.match(query)
    assert full.count == reference.count and full.stats["counted_leaves"] == 3
    collected = gm.match(query, collect=True)
    assert collected.stats["counted_leaves"] == 0
    assert sorted(map(tuple, collected.embeddings)) == sorted(map(tuple, reference.embeddings))
    limited = gm.match(query, limit=7)
    assert (limited.count, limited.status) == (min(7, reference.count), Status.LIMIT)
    tri = Graph.from_edges(4, [0, 1, 2, 0], [1, 2, 0, 3], labels=[0, 0, 0, 2], name="tri+leaf")
    result = gm.match(tri)                     # vertices 1 and 2 are symmetric: one restriction
    assert result.count == reference_of(leafy, tri).count > 0
    assert result.stats["counted_leaves"] == 1 and result.stats["automorphisms"] == 2


# ------------------------------------------------------------------------------ counting the last position
def _shapes():
    """Queries whose last position has one to four backward neighbours, restrictions (symmetric
    shapes) and same-label earlier positions: (name, n, edges, labels over {0, 1})."""
    return [
        ("triangle", 3, [(0, 1), (1, 2), (2, 0)], [0, 0, 0]),
        ("triangle-01", 3, [(0, 1), (1, 2), (2, 0)], [0, 1, 0]),
        ("path3", 3, [(0, 1), (1, 2)], [0, 0, 0]),
        ("square", 4, [(0, 1), (1, 2), (2, 3), (3, 0)], [0, 0, 0, 0]),
        ("square-0101", 4, [(0, 1), (1, 2), (2, 3), (3, 0)], [0, 1, 0, 1]),
        ("diamond", 4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)], [0, 0, 0, 0]),
        ("K4", 4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], [0, 0, 0, 0]),
        ("K4-0011", 4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], [0, 0, 1, 1]),
        ("star3", 4, [(0, 1), (0, 2), (0, 3)], [0, 0, 0, 0]),
        ("pentagon", 5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)], [0, 0, 0, 0, 0]),
        ("house", 5, [(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (3, 4)], [0, 1, 0, 1, 0]),
        ("K5-minus-edge", 5, [(a, b) for a in range(5) for b in range(a + 1, 5) if (a, b) != (3, 4)],
         [0, 0, 0, 0, 1]),
        ("wheel4", 5, [(0, 1), (1, 2), (2, 3), (3, 0), (4, 0), (4, 1), (4, 2), (4, 3)], [0, 0, 0, 0, 0]),
        ("tailed-triangle", 4, [(0, 1), (1, 2), (2, 0), (2, 3)], [1, 1, 0, 0]),
    ]


@pytest.fixture(scope="module")
def wide():
    """An unlabelled-looking graph of 80 vertices in two labels: candidate sets of 30-50
    vertices, so the last position's rows span two bitmap words (the bitmap AND and its cut at
    the symmetry bound inside a word) and hub rows are long enough to prefer the AND."""
    return rmat(80, 420, seed=31, labels=uniform_labels(80, 2, seed=32), name="rmat80-2")


#: counts up to which the shapes' test also enumerates every position (all shapes but the house)
ENUMERATED_UP_TO = 20_000


@pytest.mark.slow_cases("K4-0011",
                        "K4",
                        "K5-minus-edge",
                        "diamond",
                        "house",
                        "pentagon",
                        "square-0101",
                        "square",
                        "star3",
                        "tailed-triangle",
                        "triangle-01",
                        "triangle",
                        "wheel4")
@pytest.mark.parametrize("name, n, edges, labels", _shapes(), ids=[s[0] for s in _shapes()])
def test_last_position_is_counted_and_equals_enumeration(name, n, edges, labels, wide, reference_of):
    query = Graph.from_edges(n, [a for a, _ in edges], [b for _, b in edges], labels, name=name)
    expected = reference_of(wide, query).count
    counted = engine(wide, candidate_graph=True).match(query)
    assert counted.count == expected
    if expected <= ENUMERATED_UP_TO:      # the simulator runs an enumeration lane by lane
        enumerated = engine(wide, candidate_graph=True, leaf_counting=False, count_last=False).match(query)
        assert enumerated.count == expected and enumerated.stats["counted_leaves"] == 0
    leaves = build_plan(query, defer_leaves=True).free_leaves
    one_row = int(build_plan(query).backward[-1]).bit_count() == 1      # the last position: one row's length
    assert counted.stats["counted_leaves"] == (leaves or int(one_row))
    only_last = engine(wide, candidate_graph=True, leaf_counting=False).match(query)
    assert only_last.count == expected and only_last.stats["counted_leaves"] == int(one_row)


@pytest.mark.slow
def test_counting_the_last_position_on_random_walk_queries(leafy, reference_of):
    """Random-walk queries of 3-7 vertices (induced: cycles and chords) on a five-label graph,
    over the probe-then-index path of ``candidate_graph="auto"`` too; limit and collect still
    enumerate."""
    counted = engine(leafy, leaf_counting=False)
    enumerated = engine(leafy, leaf_counting=False, count_last=False)
    auto = engine(leafy, leaf_counting=False, candidate_graph="auto", probe_s=1e-4)
    for k, seed in [(3, 1), (4, 2), (5, 3), (5, 4), (6, 5), (7, 6)]:
        query = random_walk_query(leafy, k, seed=seed)
        expected = reference_of(leafy, query).count
        result = counted.match(query)
        assert result.count == expected, query.name
        assert result.stats["counted_leaves"] == int(int(build_plan(query).backward[-1]).bit_count() == 1)
        assert auto.match(query).count == expected, query.name
        assert enumerated.match(query).count == expected, query.name
    query = random_walk_query(leafy, 4, seed=2)
    reference = reference_of(leafy, query, collect=True)
    collected = counted.match(query, collect=True)
    assert collected.stats["counted_leaves"] == 0
    assert sorted(map(tuple, collected.embeddings)) == sorted(map(tuple, reference.embeddings))
    limit = max(1, reference.count // 2)
    limited = counted.match(query, limit=limit)
    assert (limited.count, limited.status) == (limit, Status.LIMIT)


# ------------------------------------------------------------------------------ shapes
@pytest.mark.slow
def test_cliques_and_repeated_labels(reference_of):
    rng = np.random.default_rng(2)
    pairs = [(a, b) for a in range(11) for b in range(a + 1, 11) if rng.random() < 0.6]
    data = Graph.from_edges(11, [a for a, _ in pairs], [b for _, b in pairs],
                            rng.integers(0, 2, 11), name="dense")
    gm = engine(data)
    k4 = pattern("P2")
    k4_two_labels = Graph.from_edges(4, [0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3], [0, 0, 1, 1], name="K4-01")
    path = Graph.from_edges(4, [0, 1, 2], [1, 2, 3], [1, 0, 0, 1], name="path-1001")
    for query in (k4, pattern("P9"), k4_two_labels, path):
        expected = reference_of(data, query).count
        assert gm.match(query).count == expected, query.name
        assert engine(data, granularity="coarse", unroll=2).match(query).count == expected


@pytest.mark.slow
def test_large_queries_of_22_and_32_vertices(reference_of):
    data = rmat(30, 60, seed=9, labels=uniform_labels(30, 3, seed=10), name="rmat30")
    query22 = random_walk_query(data, 22, seed=4, name="walk22")
    expected = reference_of(data, query22).count
    for pool in (1, 8):         # one seed level (a 21-level DFS stack) or a deep BFS
        result = engine(data, seed_pool=pool).match(query22)
        assert result.count == expected and result.stats["stack_levels"] == 24
    # a 32-cycle inside a 40-vertex graph with a few chords: |Aut(C32)| = 64
    n = 40
    src = list(range(32)) + [0, 5, 10, 33, 34, 35, 36]
    dst = [(i + 1) % 32 for i in range(32)] + [16, 21, 26, 1, 2, 3, 4]
    data32 = Graph.from_edges(n, src, dst, name="cycle32+")
    cycle = Graph.from_edges(32, list(range(32)), [(i + 1) % 32 for i in range(32)], name="C32")
    assert build_plan(cycle).automorphisms == 64
    result = engine(data32).match(cycle)
    assert result.count == reference_of(data32, cycle).count
    assert result.stats["stack_levels"] == 32


@pytest.mark.slow
def test_count_is_unique_embeddings_times_automorphisms():
    """A 10-leaf star in an 11-leaf star: 11!/1! embeddings (the permutation count, an analytic
    oracle), found as 11 unique ones times |Aut| = 10!."""
    hub = Graph.from_edges(12, [0] * 11, list(range(1, 12)), name="star11")
    star = Graph.from_edges(11, [0] * 10, list(range(1, 11)), name="star10")
    result = engine(hub).match(star)
    assert result.stats["automorphisms"] == math.factorial(10)
    assert result.stats["unique_embeddings"] == math.comb(11, 10)
    assert result.count == math.perm(11, 10)
    small = Graph.from_edges(5, [0] * 4, list(range(1, 5)), name="star4")
    assert engine(hub).match(small).count == ReferenceMatcher().prepare(hub).match(small).count


# ------------------------------------------------------------------------------ plan
@pytest.mark.parametrize("name", PATTERNS)
def test_automorphism_group_and_restrictions(name):
    query = pattern(name)
    plan = build_plan(query)
    self_matches = ReferenceMatcher().prepare(query).match(query).count
    assert plan.automorphisms == self_matches == len(all_automorphisms(query))
    # RI order is connected: every position after the first has an earlier neighbour
    assert all(plan.backward[d] != 0 for d in range(1, plan.size))
    # restrictions point backwards only
    assert all(int(plan.restrict[d]) < (1 << d) for d in range(plan.size))
    unbroken = build_plan(query, symmetry_breaking=False)
    assert unbroken.automorphisms == 1 and not unbroken.restrict.any()


def test_symmetry_breaking_off_enumerates_every_embedding(unlabelled, reference_of):
    gm = engine(unlabelled, symmetry_breaking=False)
    for name in ("P1", "P3"):
        query = pattern(name)
        result = gm.match(query)
        assert result.count == result.stats["unique_embeddings"] == reference_of(unlabelled, query).count


# ------------------------------------------------------------------------------ collect / limit
@pytest.mark.slow_cases("unroll-2")
@pytest.mark.parametrize("options", [dict(), dict(granularity="coarse", unroll=2)], ids=["fine", "unroll-2"])
def test_collect_returns_every_ordered_embedding(options, labelled, unlabelled, reference_of):
    cases = [(unlabelled, pattern("P4")), (unlabelled, pattern("P2")),
             (labelled, random_walk_query(labelled, 4, seed=2, name="walk4-2"))]
    for data, query in cases:
        result = engine(data, **options).match(query, collect=True)
        expected = reference_of(data, query, collect=True).embeddings
        assert result.embeddings.dtype == np.int32 and result.embeddings.shape == (result.count, query.num_vertices)
        assert sorted(map(tuple, result.embeddings)) == sorted(map(tuple, expected)), query.name


def test_limit_counts_ordered_embeddings(unlabelled, reference_of):
    gm = engine(unlabelled)
    query = pattern("P1")                         # |Aut| = 6: the limit is not a multiple
    total = reference_of(unlabelled, query).count
    assert total > 20
    result = gm.match(query, limit=20)
    assert (result.count, result.status) == (20, Status.LIMIT)
    collected = gm.match(query, limit=20, collect=True)
    assert collected.status is Status.LIMIT and collected.embeddings.shape == (20, 3)
    everything = {tuple(row) for row in reference_of(unlabelled, query, collect=True).embeddings}
    assert len({tuple(row) for row in collected.embeddings}) == 20
    assert {tuple(row) for row in collected.embeddings} <= everything
    over = gm.match(query, limit=total + 5)
    assert (over.count, over.status) == (total, Status.OK)
    coarse = engine(unlabelled, granularity="coarse").match(query, limit=7)
    assert (coarse.count, coarse.status) == (7, Status.LIMIT)


def test_single_vertex_query(labelled):
    query = Graph.from_edges(1, [], [], [2], name="one")
    result = engine(labelled).match(query, collect=True)
    expected = np.flatnonzero(labelled.labels == 2)
    assert result.count == expected.size
    assert sorted(result.embeddings[:, 0].tolist()) == expected.tolist()


# ------------------------------------------------------------------------------ statuses and errors
def test_timeout_and_out_of_memory(labelled):
    query = random_walk_query(labelled, 4, seed=2, name="walk4-2")
    assert engine(labelled).match(query, timeout_s=1e-9).status is Status.TIMEOUT
    gm = GMatch(seed_pool=8, blocks=2, warps_per_block=2, granularity="coarse", unroll=8)
    budget_after_prepare = GMatch(seed_pool=8).prepare(labelled).budget.peak
    gm.device_memory_limit = budget_after_prepare + 64
    gm.prepare(labelled)
    result = gm.match(query)
    assert result.status is Status.OOM and "coarse" in result.reason
    starved = GMatch(device_memory_limit=64).prepare(labelled)      # prepare's overflow: oom, no raise
    result = starved.match(query)
    assert result.status is Status.OOM and result.reason.startswith("prepare: ")


def path_query(n: int) -> Graph:
    return Graph.from_edges(n, list(range(n - 1)), list(range(1, n)), name=f"path{n}")


@pytest.mark.parametrize("options", [dict(), dict(work_stealing="mailbox"), dict(work_stealing="block"),
                                     dict(work_stealing=False), dict(granularity="coarse", unroll=2)],
                         ids=["global", "mailbox", "block", "no-stealing", "unroll-2"])
@pytest.mark.slow_cases("block", "global", "mailbox", "no-stealing", "unroll-2")
def test_timeout_stops_a_running_launch(options, reference_of):
    """10-vertex paths in K_20 from one-vertex seeds: 20!/10! = 6.7e11 embeddings, minutes on a GPU
    and far longer in the simulator, in a single DFS launch. A 0.3 s timeout must stop it inside
    the launch (not only between launches, which would return 'ok' after the whole search),
    with every warp of every block leaving, and the next query on the
    same engine must count exactly (the stop flag is cleared)."""
    n, k = 20, 10
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    clique = Graph.from_edges(n, [a for a, _ in pairs], [b for _, b in pairs], name="K20")
    gm = one_seed(clique, blocks=2, warps_per_block=2, **options)
    gm.match(path_query(k), timeout_s=1e-9)                      # compile for this size first
    start = time.perf_counter()
    result = gm.match(path_query(k), timeout_s=0.3)
    assert result.status is Status.TIMEOUT
    assert time.perf_counter() - start < 10.0
    assert result.count < np.prod(np.arange(n - k + 1, n + 1, dtype=np.float64))
    small = path_query(3)
    assert gm.match(small, timeout_s=60).count == reference_of(clique, small).count
    assert gm.match(small).count == reference_of(clique, small).count


def test_unsupported_inputs_and_bad_options(labelled):
    gm = engine(labelled)
    edge_labelled = Graph.from_edges(3, [0, 1], [1, 2], [0, 0, 0], [1, 2], name="elab")
    assert gm.match(edge_labelled).status is Status.UNSUPPORTED
    big = Graph.from_edges(33, list(range(32)), list(range(1, 33)), name="path33")
    assert gm.match(big).status is Status.UNSUPPORTED
    disconnected = Graph.from_edges(4, [0, 2], [1, 3], name="two-edges")
    assert gm.match(disconnected).status is Status.UNSUPPORTED
    assert gm.match(pattern("P1"), homomorphic=True).status is Status.UNSUPPORTED
    directed = Graph.from_edges(3, [0, 1], [1, 2], directed=True)
    assert GMatch().prepare(directed).match(Graph.from_edges(2, [0], [1], directed=True)).status \
        is Status.UNSUPPORTED
    for bad in (dict(granularity="medium"), dict(unroll=3), dict(unroll=2), dict(seed_pool=0),
                dict(roots_per_fetch=0), dict(warps_per_block=0), dict(blocks=0),
                dict(work_stealing="grid")):
        with pytest.raises(ValueError):
            GMatch(**bad)


@pytest.mark.parametrize("bad,needle", [
    (dict(max_registers=8), "max_registers must be in 16..255, got 8"),
    (dict(batch_queries=0), "batch_queries must be positive, got 0"),
    (dict(candidate_graph="yes"), "candidate_graph must be 'auto', True or False, got 'yes'"),
    (dict(probe_s=-1), "probe_s must be non-negative, got -1"),
    (dict(probe_s=float("nan")), "probe_s must be non-negative, got nan"),
    (dict(hub_parts=1), "hub_parts must be 0 (off) or at least 2, got 1"),
    (dict(hub_after_s=-0.5), "hub_after_s must be non-negative, got -0.5"),
    (dict(hub_whole_s=-2), "hub_whole_s must be non-negative, got -2"),
])
def test_a_bad_option_names_itself(bad, needle):
    with pytest.raises(ValueError) as error:
        GMatch(**bad)
    assert str(error.value) == needle


def test_options_are_grouped_in_read_only_records():
    """Each keyword lands, normalised, in its record and reads back under its own name; the
    records are frozen and the flat names cannot be set past the constructor."""
    from dataclasses import FrozenInstanceError, fields

    from gmatch.options import RECORDS
    gm = GMatch(granularity="coarse", unroll=4, work_stealing=True, seed_pool=7.0, blocks=3,
                symmetry_breaking=0, probe_s=1, hub_parts=0, batch_queries=2.0)
    assert (gm.search.granularity, gm.search.unroll, gm.search.work_stealing) == ("coarse", 4, False)
    assert gm.search.seed_pool == 7 and type(gm.search.seed_pool) is int and gm.search.blocks == 3
    assert gm.counting.symmetry_breaking is False and gm.index.probe_s == 1.0 and type(gm.probe_s) is float
    assert gm.hubs.hub_parts == 0 and gm.search.batch_queries == 2
    assert GMatch(work_stealing=True).work_stealing == "global"
    for record, options in RECORDS.items():
        for field in fields(options):
            assert getattr(gm, field.name) == getattr(getattr(gm, record), field.name)
    names = [field.name for options in RECORDS.values() for field in fields(options)]
    assert len(names) == len(set(names)) == 22
    assert GMatch(candidate_graph_build="gpu").index.candidate_graph_build == "gpu"
    with pytest.raises(ValueError, match="candidate_graph_build must be 'host' or 'gpu', got 'cpu'"):
        GMatch(candidate_graph_build="cpu")
    with pytest.raises(AttributeError):
        gm.probe_s = 0.5
    with pytest.raises(FrozenInstanceError):
        gm.index.probe_s = 0.5


# ------------------------------------------------------------------------------ batches
@pytest.mark.slow
def test_batches_equal_one_query_at_a_time(labelled, unlabelled, reference_of):
    """match_batch (one filter and one DFS launch for many queries, blocks split among them)
    gives every query the count, status and statistics keys of a lone match()."""
    for data in (labelled, unlabelled):
        queries = [random_walk_query(data, size, seed=seed, name=f"w{size}-{seed}")
                   for size, seed in ((3, 1), (4, 2), (5, 3), (4, 6), (2, 7))]
        queries.append(Graph.from_edges(1, [], [], labels=[int(data.labels[0])], name="one"))
        gm = GMatch(warps_per_block=2, probe_s=100.0).prepare(data)
        batched = gm.match_batch(queries)
        for query, result in zip(queries, batched):
            expected = reference_of(data, query)
            assert (result.status, result.count) == (Status.OK, expected.count), query.name
            assert result.stats["batch_size"] == len(queries), query.name
            assert len(result.stats["candidate_sizes"]) == query.num_vertices
            assert sorted(result.stats["order"]) == list(range(query.num_vertices))
        lone = [gm.match(q) for q in queries]
        assert [r.count for r in lone] == [r.count for r in batched]
        for alone, together in zip(lone, batched):
            if alone.stats.get("probe_finished"):          # the same filter ran: the same |C(u)|
                assert alone.stats["candidate_sizes"] == together.stats["candidate_sizes"]


@pytest.mark.slow
def test_a_batch_mixing_unsupported_limited_timed_out_and_heavy_queries(labelled, hubs, reference_of):
    """Per-query meaning in a batch: an unsupported query says why, a limit cuts its own query,
    a query the batch window does not finish is answered alone (its own deadline), and a query
    past its deadline times out, while its neighbours in the batch stay exact."""
    disconnected = Graph.from_edges(4, [0, 2], [1, 3], labels=[0, 0, 1, 1], name="disconnected")
    small = [random_walk_query(labelled, 3, seed=s, name=f"w3-{s}") for s in (1, 2, 3)]
    queries = [small[0], disconnected, small[1], small[2]]
    gm = GMatch(warps_per_block=2, probe_s=100.0).prepare(labelled)
    results = gm.match_batch(queries, limit=2)
    assert results[1].status is Status.UNSUPPORTED and "connected" in results[1].reason
    for i in (0, 2, 3):
        full = reference_of(labelled, queries[i]).count
        assert results[i].count == min(2, full)
        assert results[i].status is (Status.LIMIT if full >= 2 else Status.OK)
    # a batch window too short for anything: every query is answered alone, still exact
    rushed = GMatch(warps_per_block=2, probe_s=1e-9).prepare(labelled).match_batch(small)
    assert [r.count for r in rushed] == [reference_of(labelled, q).count for q in small]
    assert all(r.status is Status.OK for r in rushed)
    # a deadline nothing can meet: each query times out on its own, with a lower bound, unless
    # the GPU finished it before the stop reached it (then it is exact, status ok: on an H200
    # these 3-vertex queries do)
    late = GMatch(warps_per_block=2).prepare(labelled).match_batch(small, timeout_s=1e-9)
    for q, r in zip(small, late):
        full = reference_of(labelled, q).count
        assert (r.status is Status.TIMEOUT and r.count <= full) or (r.status is Status.OK and r.count == full)
    # ... while queries long on any backend (one-label 9- and 10-cycles on a graph with hubs:
    # no leaves to count, ~10^12 embeddings and more) time out in a batch, each on its own deadline
    cycles = [Graph.from_edges(k, list(range(k)), [(i + 1) % k for i in range(k)], labels=[0] * k, name=f"cycle{k}")
              for k in (9, 10)]
    began = time.perf_counter()
    heavy = GMatch(warps_per_block=2).prepare(hubs).match_batch(cycles, timeout_s=0.5)
    assert [r.status for r in heavy] == [Status.TIMEOUT, Status.TIMEOUT]
    assert time.perf_counter() - began < 60                         # compiles included


@pytest.mark.slow
def test_batch_falls_back_to_single_queries_where_it_does_not_apply(labelled, reference_of):
    queries = [random_walk_query(labelled, 4, seed=s, name=f"w4-{s}") for s in (1, 2)]
    for options in (dict(candidate_graph=True), dict(granularity="coarse"), dict(batch_queries=1)):
        results = GMatch(warps_per_block=2, **options).prepare(labelled).match_batch(queries)
        assert [r.count for r in results] == [reference_of(labelled, q).count for q in queries]
        assert all("batch_size" not in r.stats for r in results), options
    collected = GMatch(warps_per_block=2).prepare(labelled).match_batch(queries, collect=True)
    for query, result in zip(queries, collected):
        assert result.embeddings.shape == (reference_of(labelled, query).count, query.num_vertices)


# ------------------------------------------------------------------------------ filter
def _filter_both_ways(data: Graph, queries: list[Graph]):
    """The LDF/NLF bits and |C(d)| row of a batch of ``queries``, from the filter kernel (launched
    in the simulator) and from :func:`gmatch.filter.filter_host`."""
    from gmatch.filter import FILTER_THREADS, QP_CCOUNT, QP_ROWS, filter_host, filter_kernel, pack_query
    from gmatch.order import MAX_QUERY_VERTICES

    qps = np.zeros((len(queries), QP_ROWS, MAX_QUERY_VERTICES), np.int32)
    for b, query in enumerate(queries):
        qps[b] = pack_query(build_plan(query, True), query)
    graph = (np.asarray(data.offsets, np.int64), np.asarray(data.neighbors, np.int32),
             np.asarray(data.labels, np.int32))
    d_qps, d_cands = cuda.to_device(qps), cuda.device_array((len(queries), data.num_vertices), np.uint32)
    filter_kernel[(2, len(queries)), FILTER_THREADS](*(cuda.to_device(a) for a in graph), d_qps, d_cands)
    host_qps, host_cands = qps.copy(), np.full((len(queries), data.num_vertices), 7, np.uint32)
    filter_host(*graph, host_qps, host_cands)
    return (d_cands.copy_to_host(), d_qps.copy_to_host()[:, QP_CCOUNT]), (host_cands, host_qps[:, QP_CCOUNT])


def test_host_filter_equals_the_filter_kernel(labelled, unlabelled):
    # a hub of 40 neighbours (more than one 32-neighbour chunk) and labels the queries need
    hub = Graph.from_edges(45, [0] * 40 + [1, 2, 3, 41, 42], list(range(1, 41)) + [2, 3, 1, 43, 44],
                           labels=[0, 1, 2, 1] * 11 + [2], name="hub")
    for data in (labelled, unlabelled, hub):
        queries = [random_walk_query(data, k, seed=s, name=f"w{k}-{s}") for k, s in ((3, 1), (4, 2), (5, 3))]
        queries.append(Graph.from_edges(4, [0, 0, 0], [1, 2, 3], labels=[0, 1, 1, 2], name="star"))
        (kernel_bits, kernel_counts), (host_bits, host_counts) = _filter_both_ways(data, queries)
        np.testing.assert_array_equal(host_bits, kernel_bits, err_msg=data.name)
        np.testing.assert_array_equal(host_counts, kernel_counts, err_msg=data.name)
        assert kernel_bits.any(), data.name


@pytest.mark.skipif(BACKEND != "simulator", reason="the simulator's host filter: a GPU runs the kernel")
def test_simulated_filter_runs_on_the_host(monkeypatch):
    """A 4-vertex yeast query: its filter ran the kernel for ~46 s in the simulator."""
    from _paths import DATA
    from common.graph.io import load_graph, read_expected_counts
    from gmatch import engine as gmatch_engine

    class NoKernel:
        def __getitem__(self, launch_shape):
            raise AssertionError("the filter kernel was launched in the simulator")

    monkeypatch.setattr(gmatch_engine, "filter_kernel", NoKernel())
    yeast = load_graph(DATA / "yeast" / "yeast.graph")
    expected = read_expected_counts(DATA / "yeast" / "expected_counts.txt")
    gm = GMatch().prepare(yeast)
    for name in ("query_dense_4_1", "query_dense_4_2"):
        result = gm.match(load_graph(DATA / "yeast" / "queries" / f"{name}.graph"))
        assert result.count == expected[name]


# ------------------------------------------------------------------------------ count or enumerate the last position
def test_the_last_position_is_counted_only_where_it_is_one_rows_length():
    """counted_positions: countable leaves first; else the last position where it has one backward
    neighbour (its row's length); a last position with several is enumerated, as is every
    position of a query under three vertices."""
    from gmatch.filter import counted_positions

    path = Graph.from_edges(3, [0, 1], [1, 2], name="path3")                 # last: one backward neighbour
    triangle = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], name="triangle")    # last: two
    tailed = Graph.from_edges(4, [0, 1, 2, 0], [1, 2, 0, 3], [0, 0, 0, 1], name="tailed")  # a countable leaf
    assert counted_positions(build_plan(path), False, True) == (1, True)
    assert counted_positions(build_plan(triangle), True, True) == (0, False)
    assert counted_positions(build_plan(triangle), False, False) == (0, False)
    leafy = build_plan(tailed, defer_leaves=True)
    assert leafy.free_leaves == 1 and counted_positions(leafy, True, True) == (1, False)
    assert counted_positions(build_plan(Graph.from_edges(2, [0], [1])), False, True) == (0, False)


@pytest.mark.slow
def test_count_mode_enumerates_a_last_position_with_several_backward_neighbours(wide, reference_of):
    """Count mode without leaf counting: exact counts; the last position is counted (one counted
    position in the statistics) exactly where it has one backward neighbour."""
    gm = GMatch(**{**SMALL, "seed_pool": 64}, candidate_graph=True, leaf_counting=False).prepare(wide)
    seen = set()
    for name, n, edges, labels in _shapes():
        query = Graph.from_edges(n, [a for a, _ in edges], [b for _, b in edges], labels, name=name)
        expected = reference_of(wide, query).count
        if expected > ENUMERATED_UP_TO:
            continue
        result = gm.match(query)
        assert result.count == expected, name
        one_row = n >= 3 and int(build_plan(query).backward[-1]).bit_count() == 1
        assert result.stats["counted_leaves"] == (1 if one_row else 0), name
        seen.add(one_row)
    assert seen == {True, False}


@pytest.mark.slow
@pytest.mark.parametrize("last_backward", [1, 2])
def test_a_hub_query_is_cut_into_parts_only_where_its_plan_counts_a_position(last_backward, hub200, reference_of,
                                                                           monkeypatch):
    """Hub parts count positions: a hub query whose last position has two backward neighbours
    (enumerated, no countable leaf) runs as one launch to its deadline, as in enumeration mode;
    one whose last position is one row's length is cut into parts past ``hub_after_s``. The seed
    pool is given all the time it needs (the simulator builds it slower than any ``hub_after_s``
    a GPU needs)."""
    from common.engine.deadline import Deadline

    seed_pool = GMatch._seed_pool
    monkeypatch.setattr(GMatch, "_seed_pool", lambda self, qp, graph, indexed, deadline, target, **kw:
                        seed_pool(self, qp, graph, indexed, Deadline(None), target, **kw))
    query = next(q for q in (random_walk_query(hub200, 5, seed=s, name=f"walk5-{s}") for s in range(2, 40))
                 if int(build_plan(q).backward[-1]).bit_count() == last_backward)
    gm = GMatch(seed_pool=1024, blocks=2, warps_per_block=2, probe_s=1e-6, leaf_counting=False,
                hub_parts=4, hub_after_s=1e-3, hub_whole_s=1e-9).prepare(hub200)
    result = gm.match(query)
    assert result.status is Status.OK and result.count == reference_of(hub200, query).count
    assert ("hub_parts" in result.stats) is (last_backward == 1)
    assert result.stats["counted_leaves"] == (1 if last_backward == 1 else 0)


def test_a_probe_pool_level_past_its_rows_ends_the_probe(labelled, unlabelled, reference_of, monkeypatch):
    """The probe's bounded BFS pool (gmatch.balance): a level of more rows than PROBE_POOL_ROWS
    stops the fill unfinished (no buffer grows) and the probe hands the query to the candidate
    graph; counts stay exact."""
    import gmatch.engine as gmatch_engine
    from common.engine.deadline import Deadline
    from common.engine.part import WHOLE
    from common.gpu.timers import PhaseTimer

    gm = GMatch(warps_per_block=2, blocks=2, probe_s=0).prepare(unlabelled)
    query = random_walk_query(unlabelled, 5, seed=2, name="walk5")
    gm._begin_query()
    _, qp = gm._plan(query, False, False, PhaseTimer(), WHOLE)
    _, rows, width, stopped, _, overflowed = gm._seed_pool(qp, gm._data_graph, False, Deadline(None), 10**6)
    sizes = gm._d_levels.copy_to_host()[:width]              # rows of widths 1, 2, ... of the free BFS
    assert width >= 2 and sizes[width - 1] == rows and sizes[1] > 1 and not (stopped or overflowed)
    monkeypatch.setattr(gmatch_engine, "PROBE_POOL_ROWS", int(sizes[1]) - 1)
    _, rows, width, stopped, growths, overflowed = gm._seed_pool(qp, gm._data_graph, False, Deadline(None), 10**6,
                                                                 bounded=True)
    assert (rows, width, stopped, growths, overflowed) == (int(sizes[0]), 1, True, 0, True)
    monkeypatch.setattr(gmatch_engine, "PROBE_POOL_ROWS", 1)  # every probe pool overflows at its first level
    monkeypatch.setattr(gmatch_engine, "DIRECT_SHARE", 0.0)   # the first stage ends at once: the look runs
    for data in (labelled, unlabelled):
        gm = GMatch(warps_per_block=2, blocks=2, probe_s=1.0).prepare(data)
        for k, seed in ((4, 2), (5, 3)):
            q = random_walk_query(data, k, seed=seed)
            result = gm.match(q)
            assert result.count == reference_of(data, q).count
            if data is labelled:                                 # the probe runs before a candidate graph
                assert result.stats["probe_pool_overflow"] and not result.stats.get("probe_finished", False)


@pytest.mark.parametrize("predictions, small_pool, answers", [
    ((1e-4, 2e-4), False, ["again", "until", None]),     # two looks agree on a short launch: on to the end
    ((1e-4, 0.01), False, ["again", None]),               # the second look predicts a long one: stop there
    ((1e-4, 1000.0), False, ["again", None]),             # ... or no end in time
    ((1000.0,), False, [None]),                           # the first look predicts no end in time: stop
    ((), True, ["until", None]),                          # a pool the BFS could not grow: on to the end
])
def test_the_probe_runs_on_past_its_look_only_where_two_looks_predict_its_end(predictions, small_pool, answers):
    """gMatch's probe (docs/decisions.md, "gMatch: a data-graph probe before the candidate graph"):
    its second stage runs on past its look to ``until`` only where the share of seeds taken
    predicts the end by then at the look, and again after as long again since the launch a
    launch of at most ``RUN_ON_SHARE`` of ``probe_s``."""
    from gmatch.engine import RUN_ON_SHARE

    gm = GMatch()
    assert 2e-4 < RUN_ON_SHARE * gm.probe_s < 0.01          # the cases' short and long launches
    made = iter(predictions)
    gm._predicted_s = lambda seeds, in_flight, elapsed: next(made)
    in_flight = 1000
    until = time.perf_counter() + 60.0
    shape = {}
    extend = gm._probe_extension(1500 if small_pool else 10**6, in_flight, until, shape)
    assert shape == {"probe_ran_on": False}
    elapsed = 0.5
    for answer in answers:
        now = time.perf_counter()
        got = extend(elapsed)
        if answer is None:
            assert got is None
        elif answer == "until":
            assert got == until
        else:                                             # looks again after as long again since the launch
            assert now + elapsed <= got < min(until, time.perf_counter() + elapsed + 1.0)
        elapsed *= 2
    assert next(made, None) is None                       # every prediction was asked for
    assert shape["probe_ran_on"] is ("until" in answers)  # the statistic names the bet
    assert [shape.get(f"probe_look{k}_predicted_ms") for k in (1, 2)] == \
        [1e3 * predictions[k] if k < len(predictions) else None for k in (0, 1)]   # and the looks' predictions


def test_the_hub_check_is_asked_once_per_root_label_and_degree(hub200, monkeypatch):
    """Whether a query would be cut below its root depends only on the root's label and degree:
    the engine asks :func:`common.graph.roots.cuts_below_root` once per pair, with its answer."""
    import gmatch.engine as gmatch_engine
    from common.engine.part import WHOLE
    from common.graph.roots import cuts_below_root

    asked = []

    def counted(data, query, root, parts):
        asked.append(root)
        return cuts_below_root(data, query, root, parts)

    monkeypatch.setattr(gmatch_engine, "cuts_below_root", counted)
    gm = GMatch(seed_pool=8, blocks=2, warps_per_block=2, hub_parts=4).prepare(hub200)
    queries = [random_walk_query(hub200, k, seed=s, name=f"walk{k}-{s}") for k in (3, 4, 5) for s in range(4)]
    keys = set()
    for query in queries:
        root = gm.root_vertex(query)
        keys.add((int(query.labels[root]), int(query.degrees[root])))
        assert gm._has_hub_parts(query, WHOLE) == cuts_below_root(hub200, query, root, 4)
    assert len(asked) == len(keys) < len(queries)
