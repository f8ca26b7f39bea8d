"""The side-by-side comparison behind ``gpusm demo``: agreement with the reference is really checked."""

import pytest

from common import engine as engine_module
from common.generate import query_set, rmat
from common.reference import ReferenceMatcher
from experiments.papers.compare import compare_engines, summarize


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
    assert (table.loc["off-by-one", "answered"], table.loc["off-by-one", "agreed"],
            table.loc["off-by-one", "disagreed"]) == (3, 0, 3)
    assert table.loc["cpu", "agreed"] == table.loc["cpu", "disagreed"] == "-"
    assert table.loc["off-by-one", "total embeddings"] == table.loc["cpu", "total embeddings"] + 3


class SkipsFirst(ReferenceMatcher):
    """The reference, but the first query of each run times out: unanswered, not wrong."""

    name = "skips-first"

    def _match(self, query, **kwargs):
        from common.result import MatchResult, Status
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 1:
            return MatchResult(self.name, 5, Status.TIMEOUT)
        return super()._match(query, **kwargs)


def test_unanswered_is_neither_agreed_nor_disagreed(wrong_engine_registered):
    engine_module.register("skips-first", SkipsFirst)
    try:
        data = rmat(128, 512, seed=1, labels=3)
        queries = query_set(data, 3, 3, seed=2).queries
        table = summarize(compare_engines(data, queries, ["cpu", "skips-first", "off-by-one"])).set_index("engine")
    finally:
        del engine_module._REGISTRY["skips-first"]
    row = table.loc["skips-first"]
    assert (row["queries"], row["answered"], row["agreed"], row["disagreed"]) == (3, 2, 2, 0)
    row = table.loc["off-by-one"]
    assert (row["answered"], row["agreed"], row["disagreed"]) == (3, 0, 3)


class TimesOutFirst(ReferenceMatcher):
    """The reference, but the first query of each run times out, with a reason."""

    name = "times-out-first"

    def _match(self, query, **kwargs):
        from common.result import MatchResult, Status
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 1:
            return MatchResult(self.name, 5, Status.TIMEOUT, reason="deadline passed while testing",
                               phases={"enumerate": 0.25})
        return super()._match(query, **kwargs)


def test_the_demo_names_each_unanswered_query_and_exits_3(monkeypatch, capsys):
    import experiments.papers.compare as compare
    from common.cli import EXIT_PARTIAL
    from experiments.gpusm import main

    engine_module.register("times-out-first", TimesOutFirst)
    monkeypatch.setattr(compare, "demo_engines", lambda peers=False: ["cpu", "times-out-first"])
    try:
        assert main(["demo", "--size", "tiny", "--timeout", "60"]) == EXIT_PARTIAL
    finally:
        del engine_module._REGISTRY["times-out-first"]
    out = capsys.readouterr().out
    assert "not answered:\n  times-out-first " in out
    line = out.split("not answered:\n  ")[1].splitlines()[0]
    assert line.endswith(": timeout (deadline passed while testing) after 0.2 s"), line
    assert "60 s allowed per query" in out


def test_the_demo_limit_defaults_to_the_backends():
    from common import BACKEND
    from experiments.gpusm import build_parser
    from experiments.papers.compare import DEMO_TIMEOUT_S

    assert build_parser().parse_args(["demo"]).timeout is None
    assert DEMO_TIMEOUT_S["simulator"] >= 10 * DEMO_TIMEOUT_S["gpu"]
    assert BACKEND in ("simulator", "gpu")
