"""The side-by-side comparison behind ``gpusm demo``: agreement with the reference is really checked."""

import pytest

from common import engine as engine_module
from common.generate import query_set, rmat
from common.reference import ReferenceMatcher
from experiments.compare import compare_engines, summarize


class OffByOne(ReferenceMatcher):
    """The reference, but every count is one too high: a wrong engine."""

    name = "off-by-one"

    def _match(self, query, **kwargs):
        result = super()._match(query, **kwargs)
        result.count += 1
        return result


@pytest.fixture
def wrong_engine_registered():
    engine_module.register("off-by-one", OffByOne)
    yield
    del engine_module._REGISTRY["off-by-one"]


def test_a_wrong_engine_is_reported_as_disagreeing(wrong_engine_registered):
    data = rmat(128, 512, seed=1, labels=3)
    queries = query_set(data, 3, 3, seed=2).queries
    raw = compare_engines(data, queries, ["cpu", "off-by-one"])
    assert raw[raw.engine == "cpu"]["agrees"].isna().all()
    assert not raw[raw.engine == "off-by-one"]["agrees"].any()
    table = summarize(raw).set_index("engine")
    assert table.loc["off-by-one", "agrees with cpu"] == "0/3"
    assert table.loc["cpu", "agrees with cpu"] == "(reference)"
    assert table.loc["off-by-one", "total embeddings"] == table.loc["cpu", "total embeddings"] + 3
