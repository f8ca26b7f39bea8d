"""Every engine reports the statistics every search result must carry (docs/statistics.md):
``order`` (the matching order, a permutation of the query vertices) and ``candidate_sizes``
(|C(u)| per query vertex, each at least the number of distinct images u takes)."""

from __future__ import annotations

import pytest

from common import create_engine
from common.graph.generate import power_law_labels, query_set, rmat

ENGINES = ("cpu", "gsi", "sgsi", "egsm", "gmatch", "stwig", "stwig-cpu")


@pytest.fixture(scope="module")
def workload():
    data = rmat(64, 220, seed=5, labels=power_law_labels(64, 3, 1.0, seed=6), name="stats-rmat")
    queries = list(query_set(data, 2, 4, seed=9, method="induced").queries)
    return data, queries


@pytest.mark.parametrize("name", ENGINES)
def test_required_statistics_are_present_with_one_entry_per_query_vertex(name, workload):
    data, queries = workload
    engine = create_engine(name).prepare(data)
    reference = create_engine("cpu").prepare(data)
    for query in queries:
        result = engine.match(query, collect=True)
        assert str(result.status) == "ok", (name, query.name, result.reason)
        assert result.count == reference.match(query).count > 0
        stats = result.stats
        missing = {"order", "candidate_sizes"} - set(stats)
        assert not missing, f"{name} reports no {sorted(missing)}"
        order = [int(u) for u in stats["order"]]
        assert sorted(order) == list(range(query.num_vertices)), (name, order)
        sizes = [int(s) for s in stats["candidate_sizes"]]
        assert len(sizes) == query.num_vertices, (name, sizes)
        images = result.embeddings
        for u in range(query.num_vertices):       # every image of u is a candidate of u
            assert sizes[u] >= len(set(images[:, u].tolist())), (name, u, sizes)
