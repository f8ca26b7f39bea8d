"""``peak_device_bytes`` is a query's own: the same query reports the same peak on a fresh engine
and after a larger query grew the engine's buffers (the pool keeps them, each query counts its
own demand; gMatch's seed pool, steal mailbox and hand-over records included)."""

from __future__ import annotations

import pytest

from common import create_engine
from common.cpu.reference import ReferenceMatcher
from common.graph.generate import query_set, rmat

#: engine, options: gMatch with a small seed pool, so the larger query grows it
ENGINES = [("gsi", {}), ("sgsi", {}), ("egsm", {}), ("gmatch", {"seed_pool": 8}), ("stwig", {})]


@pytest.fixture(scope="module")
def workload():
    data = rmat(120, 500, seed=3, labels=2)
    small = list(query_set(data, 1, 3, seed=1))[0]
    large = list(query_set(data, 1, 6, seed=2))[0]
    return data, small, large


@pytest.mark.parametrize("name, options", ENGINES, ids=[name for name, _ in ENGINES])
def test_peak_device_bytes_is_the_query_s_own(workload, name, options):
    data, small, large = workload
    fresh = create_engine(name, **options).prepare(data).match(small)
    engine = create_engine(name, **options).prepare(data)
    grown = engine.match(large)
    again = engine.match(small)
    reference = ReferenceMatcher().prepare(data)
    assert fresh.count == again.count == reference.match(small).count
    assert grown.count == reference.match(large).count
    assert grown.peak_device_bytes > fresh.peak_device_bytes > 0
    assert again.peak_device_bytes == fresh.peak_device_bytes
