"""The engine contract every engine inherits: checks, unsupported status, oom status, registry."""

import numpy as np
import pytest

import common
from common import DeviceOutOfMemory, Engine, Graph, MatchResult, Status


class EchoEngine(Engine):
    """A minimal engine for contract tests: reports what it was asked, or runs out of memory."""

    name = "echo"
    max_query_vertices = 3

    def __init__(self, *, fail_with_oom=False, device_memory_limit=None):
        super().__init__(device_memory_limit=device_memory_limit)
        self.fail_with_oom = fail_with_oom
        self.calls = []

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        self.calls.append((query.name, limit, collect, timeout_s))
        if self.fail_with_oom:
            raise DeviceOutOfMemory(1 << 30, 0, 1 << 20, what="intermediate table")
        return MatchResult(self.name, count=42)


def path_graph(n, labels=None, edge_labels=None, directed=False, name="q"):
    return Graph.from_edges(n, np.arange(n - 1), np.arange(1, n), labels=labels,
                            edge_labels=edge_labels, directed=directed, name=name)


@pytest.fixture
def data():
    return path_graph(6, labels=[0, 1, 0, 1, 0, 1], name="data")


def test_match_requires_prepare(data):
    with pytest.raises(RuntimeError, match="before prepare"):
        EchoEngine().match(path_graph(2))


def test_result_carries_the_query_name_and_arguments(data):
    engine = EchoEngine().prepare(data)
    result = engine.match(path_graph(2, labels=[0, 1], name="q2"), limit=5, collect=True, timeout_s=1.0)
    assert (result.count, result.status, result.query) == (42, Status.OK, "q2")
    assert engine.calls == [("q2", 5, True, 1.0)]


@pytest.mark.parametrize("query, reason", [
    (path_graph(4, labels=[0, 1, 0, 1]), "at most 3 query vertices"),
    (path_graph(2, labels=[0, 1], edge_labels=[3]), "does not support edge labels"),
    (Graph.from_edges(3, [0], [1], labels=[0, 1, 0]), "requires a connected query"),
])
def test_queries_the_engine_cannot_take_are_unsupported_not_errors(data, query, reason):
    engine = EchoEngine().prepare(data)
    result = engine.match(query)
    assert result.status is Status.UNSUPPORTED and reason in result.reason
    assert engine.calls == []


def test_homomorphic_is_unsupported_unless_declared(data):
    result = EchoEngine().prepare(data).match(path_graph(2, labels=[0, 1]), homomorphic=True)
    assert result.status is Status.UNSUPPORTED and "homomorphic" in result.reason


def test_device_out_of_memory_becomes_status_oom(data):
    result = EchoEngine(fail_with_oom=True).prepare(data).match(path_graph(2, labels=[0, 1]))
    assert result.status is Status.OOM and "intermediate table" in result.reason


def test_a_query_label_missing_from_the_data_gives_zero_without_running(data):
    engine = EchoEngine().prepare(data)
    for labels in ([0, 7], [0, 2]):          # 7: beyond every data label; 2: absent from data
        result = engine.match(path_graph(2, labels=labels), collect=True)
        assert result.count == 0 and result.status is Status.OK
        assert result.embeddings.shape == (0, 2)
    assert engine.calls == []


@pytest.mark.parametrize("kwargs, problem", [
    ({"limit": 0}, "limit must be a positive"),
    ({"timeout_s": -1}, "timeout_s must be positive"),
])
def test_bad_arguments_raise(data, kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        EchoEngine().prepare(data).match(path_graph(2, labels=[0, 1]), **kwargs)


def test_direction_mismatch_raises(data):
    with pytest.raises(ValueError, match="query 'q' is directed but the data graph is undirected"):
        EchoEngine().prepare(data).match(path_graph(2, directed=True))


def test_device_memory_limit_must_be_positive():
    with pytest.raises(ValueError, match="device_memory_limit"):
        EchoEngine(device_memory_limit=0)


def test_registry_lists_and_creates_engines():
    assert "cpu" in common.available_engines()
    assert common.create_engine("cpu").name == "cpu"
    with pytest.raises(ValueError, match="unknown engine 'nope'; registered engines: cpu, gsi") as caught:
        common.create_engine("nope")
    assert isinstance(caught.value, common.UnknownEngineError) and not isinstance(caught.value, KeyError)


def test_register_adds_an_engine_by_class():
    common.register("echo-test", EchoEngine)
    try:
        assert common.engine_class("echo-test") is EchoEngine
        assert common.match(path_graph(4, labels=[0, 1, 0, 1]), path_graph(2, labels=[0, 1]),
                            engine="echo-test").count == 42
    finally:
        from common.engine import registry as engine_module
        del engine_module._REGISTRY["echo-test"]


def test_result_row_is_flat():
    result = MatchResult("cpu", 7, phases={"filter": 0.5, "enumerate": 1.5}, stats={"order": [1, 0], "rows": 3})
    row = result.to_row()
    assert row["count"] == 7 and row["seconds"] == 2.0 and row["filter_s"] == 0.5 and row["rows"] == 3
    assert "order" not in row


def test_match_takes_paths_as_the_readme_shows():
    from _paths import DATA

    hprd = DATA / "hprd"
    expected = common.read_expected_counts(hprd / "expected_counts_1_100.txt")["query_dense_16_3"]
    result = common.match(str(hprd / "HPRD.graph"), hprd / "queries" / "query_dense_16_3.graph",
                          engine="cpu", collect=True)
    assert result.count == expected and result.embeddings.shape == (expected, 16)
    assert result.query == "query_dense_16_3"
    with pytest.raises(TypeError, match="expected a Graph or a path"):
        common.match(42, hprd / "queries" / "query_dense_16_3.graph")


class CompilingEngine(Engine):
    """Times out whenever Numba compiles during the search (a fresh function each time ``compile``
    is set), as a first query whose kernels compile past its deadline does."""

    name = "compiling-test"

    def __init__(self, compiles: int, always_late: bool = False):
        super().__init__()
        self.compiles, self.always_late, self.tries = compiles, always_late, 0

    def _prepare(self, data):
        pass

    def _match(self, query, *, limit, collect, timeout_s, homomorphic):
        import numba

        self.tries += 1
        if self.tries <= self.compiles:
            numba.njit(lambda x: x + 1)(self.tries)          # a new function: compiled now
            return MatchResult(self.name, 0, Status.TIMEOUT)
        return MatchResult(self.name, 7, Status.TIMEOUT if self.always_late else Status.OK)


def test_a_query_that_timed_out_while_kernels_compiled_runs_again(data):
    engine = CompilingEngine(compiles=2).prepare(data)
    result = engine.match(Graph.from_edges(2, [0], [1], labels=[0, 1]), timeout_s=1.0)
    assert (result.status, result.count, engine.tries) == (Status.OK, 7, 3)
    assert result.stats["compile_reruns"] == 2


def test_reruns_are_bounded_and_a_genuine_timeout_stays_one(data):
    query = Graph.from_edges(2, [0], [1], labels=[0, 1])
    endless = CompilingEngine(compiles=100).prepare(data)
    result = endless.match(query, timeout_s=1.0)
    assert result.status is Status.TIMEOUT and endless.tries == 1 + common.engine.base.COMPILE_RERUNS
    late = CompilingEngine(compiles=0, always_late=True).prepare(data)      # nothing compiles
    result = late.match(query, timeout_s=1.0)
    assert result.status is Status.TIMEOUT and late.tries == 1 and "compile_reruns" not in result.stats
    without_deadline = CompilingEngine(compiles=1).prepare(data)
    assert without_deadline.match(query).status is Status.TIMEOUT and without_deadline.tries == 1


def test_the_compile_clock_counts_this_backends_compiles_once():
    """On a GPU a new CUDA kernel's compile is counted (numba-cuda fires no event for it: the
    wrapped CUDADispatcher.compile), in the simulator a CPU function's; a second call adds nothing."""
    import numba
    from numba import cuda

    from common.gpu.compile_clock import compile_clock

    if numba.config.ENABLE_CUDASIM:
        function = numba.njit(lambda x: x * 3)
        run = lambda: function(2)  # noqa: E731
    else:
        @cuda.jit
        def kernel(out):
            out[0] = 3

        out = cuda.device_array(1, np.int64)
        run = lambda: kernel[1, 1](out)  # noqa: E731
    before = compile_clock.seconds
    run()
    compiled = compile_clock.seconds
    run()
    assert compiled > before and compile_clock.seconds == compiled


def test_limitations_declared_on_the_class_give_its_supports_flags_and_reasons():
    from common.engine import registry
    from common.engine.registry import engine_class

    class OnlyConnected(Engine):
        name = "only-connected"
        limitations = {"disconnected": "joins along query edges (a paper §1)"}

        def _match(self, query, **options):
            raise AssertionError("never reached: the query is unsupported")

    assert OnlyConnected.supports_edge_labels and OnlyConnected.supports_homomorphic
    assert not OnlyConnected.supports_disconnected
    engine = OnlyConnected().prepare(Graph.from_edges(4, [0, 2], [1, 3]))
    result = engine.match(Graph.from_edges(4, [0, 2], [1, 3]))
    assert result.status.value == "unsupported"
    assert result.reason == "only-connected requires a connected query (joins along query edges (a paper §1))"
    with pytest.raises(TypeError, match="not query kinds"):
        type("Bad", (Engine,), {"limitations": {"colour": "no"}, "_match": lambda self, q, **o: None})
    # the registry's lists follow the declarations
    assert engine_class("sgsi").variant_of == "gsi" and "sgsi" not in registry.compared_engines()
    assert set(registry.gpu_engines()) == {n for n in registry.BUILTIN_ENGINES if engine_class(n).uses_device}
