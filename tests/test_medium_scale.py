"""The medium scale: its plan fits two GPUs, its cells have >= 20 queries, its generated queries match."""

from __future__ import annotations

import pytest

from common import create_engine
from experiments import PAPERS, experiments_of
from experiments.harness.core import plan_set
from experiments.harness.workloads import (
    SHAPES,
    Dataset,
    QuerySpec,
    density_class_queries,
    get_scale,
    shaped_query,
    stwig_data_query,
)

MEDIUM = get_scale("medium")
PAPER_SETS = tuple(p for p in PAPERS if p != "compare")


def test_medium_plan_fits_thirty_minutes_on_one_gpu(monkeypatch):
    from test_large_scale import without_external_binaries

    without_external_binaries(monkeypatch)           # gpusm's engines, external binaries built here or not
    worst = {paper: sum(line.worst_s for line in plan_set(paper, MEDIUM)) for paper in PAPERS}
    assert sum(worst.values()) <= 30 * 60
    for paper in PAPERS:
        assert all(line.jobs > 0 for line in plan_set(paper, MEDIUM)), paper


def test_with_every_external_binary_the_medium_plan_fits_seventy_five_minutes(monkeypatch):
    """The external columns (each timed run a process that loads the graph) add about 40 minutes of
    start-up, most of it gMatch Table 4's one-pattern processes on 4M-edge stand-ins (the columns
    no claim compares run one timed run a query there)."""
    from test_large_scale import with_every_external_binary

    with_every_external_binary(monkeypatch)
    assert sum(line.worst_s for paper in PAPERS for line in plan_set(paper, MEDIUM)) <= 75 * 60


def test_medium_cells_have_twenty_queries_sweep_ends_and_judging_limits():
    for experiment in experiments_of():
        here = experiment.scale_for(MEDIUM)
        points = experiment.points_for(MEDIUM)
        if experiment.figure == "lines":                       # sweeps keep their end points
            declared = [p.x for p in experiment.points if p.x is not None]
            kept = [p.x for p in points]
            assert declared[0] in kept and declared[-1] in kept, experiment.name
        for point in points:
            spec = point.queries
            if spec.kind not in ("files", "patterns") and experiment.paper in PAPER_SETS:
                assert spec.count_at(here) >= 20, (experiment.name, point.label)
        if experiment.paper in PAPER_SETS:
            assert 0.25 <= experiment.time_limit_for(MEDIUM) <= 2.0, experiment.name


def test_medium_repeats_every_query_three_times_within_its_limit():
    assert all(e.repeats_for(MEDIUM) == 3 for e in experiments_of())
    assert MEDIUM.repeats_share_limit
    assert all(e.repeats_for(get_scale("small")) == 1 for e in experiments_of())


def test_medium_stand_ins_stay_within_four_million_edges():
    from experiments.harness.workloads import _load_dataset

    for experiment in experiments_of():
        for point in experiment.points_for(MEDIUM):
            d = point.dataset
            if d.path is None:
                # the size _load_dataset builds (without building it)
                assert min(d.num_edges, experiment.scale_for(MEDIUM).max_edges) <= 4_000_000
    assert _load_dataset.cache_info() is not None


@pytest.fixture(scope="module")
def labelled():
    data = Dataset("test-rmat", 400, 2400, vertex_labels=4, edge_labels=2, seed=3)
    return data.load(get_scale("small"))


def test_stwig_queries_are_cut_from_the_data_graph_and_every_one_has_a_match(labelled):
    cpu = create_engine("cpu").prepare(labelled)
    edges = 0
    for i, n in enumerate((5, 6, 7, 8)):
        query = stwig_data_query(labelled, n, seed=i)
        assert query.num_vertices == n and query.is_connected()
        assert n - 1 <= query.num_edges <= 2 * n
        assert cpu.match(query).count >= 1
        edges += query.num_edges
    assert edges > 5 + 6 + 7 + 8                  # denser than trees: the vertex set grows greedily
    spec = QuerySpec("stwig", sizes=(5, 6), count=4)
    queries, _ = spec.build(labelled, Dataset("test-rmat", 400, 2400), get_scale("small"))
    assert [q.name for q in queries] == ["stwig_5_0", "stwig_6_1", "stwig_5_2"]   # small: 3 per set
    assert all(cpu.match(q).count >= 1 for q in queries)


@pytest.mark.parametrize("shape", SHAPES)
def test_shaped_queries_have_their_shape_and_a_match(labelled, shape):
    cpu = create_engine("cpu").prepare(labelled)
    for seed in range(3):
        query = shaped_query(labelled, 6, shape, seed=seed)
        degrees = sorted(int(d) for d in query.degrees)
        assert query.num_vertices == 6 and query.is_connected()
        assert query.num_edges == (6 if shape == "cycle" else 5)
        if shape == "path":
            assert degrees == [1, 1, 2, 2, 2, 2]
        if shape == "cycle":
            assert degrees == [2] * 6
        assert cpu.match(query).count >= 1


def test_density_classes_split_at_average_degree_three(labelled):
    cpu = create_engine("cpu").prepare(labelled)
    for density in ("sparse", "dense"):
        queries = density_class_queries(labelled, 3, 7, density, seed=2)
        assert len(queries) == 3
        for q in queries:
            assert (q.average_degree >= 3) == (density == "dense")
            assert cpu.match(q).count >= 1


def test_bad_shapes_and_sizes_are_refused_by_name(labelled):
    with pytest.raises(ValueError, match="unknown query shape 'star'"):
        shaped_query(labelled, 5, "star", seed=1)
    with pytest.raises(ValueError, match="cycle query needs at least 3"):
        shaped_query(labelled, 2, "cycle", seed=1)
    with pytest.raises(ValueError, match="density must be"):
        density_class_queries(labelled, 2, 6, "medium", seed=1)
