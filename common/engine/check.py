"""The engine contract as checks (docs/design.md, "The engine contract"): :func:`check_engine`
runs them on an engine class, as scikit-learn's ``check_estimator`` runs its checks on an
estimator, outside any test framework.

    from common.engine.check import check_engine
    check_engine(MyEngine)            # an AssertionError naming the first check it fails

Each check compares the engine with the ``cpu`` reference on small graphs (:class:`Workload`):

- ``declaration``: the class describes itself as the base class asks (name, limitations, notes);
- ``counts_<kind>``: counts of labelled, edge-labelled, directed, homomorphic and disconnected
  queries, or status ``unsupported`` with a reason naming the kind the class declares it lacks;
- ``limit`` (status ``limit``, count equal to the limit) and ``collect`` (every row an
  embedding, rows distinct, as many rows as the count);
- ``deadline`` (status ``timeout``, a lower bound, within the slack of the deadline) and ``oom``
  (a device-memory limit too small for the data graph: status ``oom``);
- ``query_size`` (a query past ``max_query_vertices`` is ``unsupported``) and ``bad_input``
  (bad queries, arguments and options raise errors naming the problem);
- ``statistics``: the order and candidate sizes every search reports, under names
  docs/statistics.md lists;
- ``peak``: ``peak_device_bytes`` of a query is its own, whatever ran before;
- ``batch``: ``match_batch`` answers as ``match`` does, query by query;
- ``two_engines``: two engines of the class prepared on two graphs in one process both answer;
- ``parts``: on a class that declares ``supports_parts``, the parts of a partition of the root's
  data vertices (and, with ``supports_branch_parts``, of its branch vertex's residue classes) add
  up to the whole count and their embeddings to the whole set (:mod:`common.engine.part`); any
  other class refuses a part.

What an engine cannot do is declared once, on its class: ``limitations`` (query kinds answered
``unsupported``), ``uses_device`` (False: a device-memory limit is accepted and ignored) and
``contract_notes``: ``statistics``, ``deadline_cap`` and ``simulator_launch`` change what a check
accepts (:attr:`common.engine.base.Engine.contract_notes`); a note named after a check
(``simulator_<check>``: in the CUDA simulator only) declares it a known failure, which must fail:
a known failure that passes is an AssertionError too, so that the note goes once it is fixed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..graph.generate import power_law_labels, query_set, random_walk_query, rmat
from ..graph.model import Graph
from .base import QUERY_KINDS, Engine, deadline_slack
from .part import WHOLE, Part
from .registry import create_engine, engine_class, instantiate
from .result import Status

#: Query kinds of the counts checks, with the words an ``unsupported`` reason must contain.
KIND_WORDS = {"edge_labels": "edge label", "directed": "directed", "homomorphic": "homomorphic",
              "disconnected": "connected"}
#: ``contract_notes`` that change what a check accepts rather than declare a known failure.
MODIFIERS = ("statistics", "deadline_cap", "simulator_launch")


@dataclass(frozen=True)
class CheckOutcome:
    """One check's outcome on an engine class: ``passed``, or ``known failure`` (failed as its
    class declares, ``reason`` the declaration)."""

    check: str
    outcome: str
    reason: str = ""


# ---------------------------------------------------------------------- graphs
def with_edge_labels(graph: Graph, num_labels: int, seed: int) -> Graph:
    """``graph`` with uniform random edge labels ``0..num_labels-1``."""
    src, dst, _ = graph.edges()
    labels = np.random.default_rng(seed).integers(0, num_labels, src.size)
    return Graph.from_edges(graph.num_vertices, src, dst, labels=graph.labels, edge_labels=labels,
                            name=f"{graph.name}-edge-labelled")


def directed_twin(graph: Graph, seed: int) -> Graph:
    """``graph`` with each edge given a direction at random (a tenth of them both)."""
    src, dst, _ = graph.edges()
    rng = np.random.default_rng(seed)
    flip = rng.random(src.size) < 0.5
    both = rng.random(src.size) < 0.1
    s, d = np.where(flip, dst, src), np.where(flip, src, dst)
    return Graph.from_edges(graph.num_vertices, np.concatenate([s, d[both]]), np.concatenate([d, s[both]]),
                            labels=graph.labels, directed=True, name=f"{graph.name}-directed")


def oriented(query: Graph, directed_data: Graph) -> Graph:
    """``query`` (cut out of the undirected twin of ``directed_data``) with each edge directed as
    the data edge it was cut from, so that the query keeps its embedding."""
    image = np.asarray(query.meta["data_vertices"])
    arcs = {(s, d) for s, d, _ in edge_set(directed_data)}
    src, dst, _ = query.edges()
    pairs = [(s, d) for a, b in zip(src.tolist(), dst.tolist()) for s, d in ((a, b), (b, a))
             if (int(image[s]), int(image[d])) in arcs]
    return Graph.from_edges(query.num_vertices, [s for s, _ in pairs], [d for _, d in pairs],
                            labels=query.labels, directed=True, name="directed")


def disjoint_union(a: Graph, b: Graph) -> Graph:
    """``a`` and ``b`` side by side (``b``'s vertices after ``a``'s)."""
    sa, da, _ = a.edges()
    sb, db, _ = b.edges()
    n = a.num_vertices
    return Graph.from_edges(n + b.num_vertices, np.concatenate([sa, sb + n]), np.concatenate([da, db + n]),
                            labels=np.concatenate([a.labels, b.labels]), name="disconnected")


def edge_set(graph: Graph) -> set:
    """``(source, target, edge label)`` of every arc (both ways for an undirected graph)."""
    src, dst, elab = graph.edges()
    elab = np.zeros(src.size, np.int64) if elab is None else elab
    edges = set(zip(src.tolist(), dst.tolist(), elab.tolist()))
    if not graph.directed:
        edges |= {(d, s, e) for s, d, e in edges}
    return edges


def assert_embeddings(data: Graph, query: Graph, rows: np.ndarray, *, homomorphic: bool = False) -> None:
    """Every row maps query vertex ``u`` to data vertex ``rows[:, u]`` keeping labels and edges
    (and edge labels, and direction), injectively unless ``homomorphic``; rows are distinct."""
    assert rows.ndim == 2 and rows.shape[1] == query.num_vertices, rows.shape
    assert rows.min(initial=0) >= 0 and rows.max(initial=0) < data.num_vertices
    assert (data.labels[rows] == query.labels[None, :]).all(), "a row maps a vertex to one of another label"
    data_edges = edge_set(data)
    for s, d, e in edge_set(query):
        missing = [(int(a), int(b)) for a, b in zip(rows[:, s], rows[:, d]) if (int(a), int(b), e) not in data_edges]
        assert not missing, f"query edge ({s}, {d}) maps to non-edges {missing[:3]}"
    if not homomorphic:
        assert all(len(set(row)) == query.num_vertices for row in rows.tolist()), "a row repeats a data vertex"
    assert len({tuple(row) for row in rows.tolist()}) == len(rows), "rows repeat"


def reference_counts(data: Graph, queries, homomorphic: bool = False) -> list[int]:
    """The ``cpu`` reference's count of each query."""
    cpu = create_engine("cpu").prepare(data)
    return [cpu.match(q, homomorphic=homomorphic).count for q in queries]


@dataclass
class Workload:
    """The checks' graphs, queries and reference counts, built on first use, and the engines
    prepared on them (:meth:`prepared`), shared by the checks that do not depend on what ran
    before. One workload may serve many :func:`check_engine` calls (the contract suite's)."""

    _kinds: dict | None = field(default=None, repr=False)
    _expected: dict | None = field(default=None, repr=False)
    _other: tuple | None = field(default=None, repr=False)
    _engines: dict = field(default_factory=dict, repr=False)

    @property
    def kinds(self) -> dict[str, tuple[Graph, list[Graph], bool]]:
        """Query kind -> (data graph, queries, homomorphic): a labelled R-MAT graph and its twins."""
        if self._kinds is None:
            data = rmat(24, 60, seed=5, labels=power_law_labels(24, 3, 1.0, seed=6), name="contract")
            labelled = list(query_set(data, 2, 3, seed=9, method="induced").queries)
            labelled.append(random_walk_query(data, 4, seed=3, induced=False, name="walk4"))
            edge_data = with_edge_labels(data, 2, seed=7)
            directed_data = directed_twin(data, seed=8)
            self._kinds = {
                "labelled": (data, labelled, False),
                "edge_labels": (edge_data, [random_walk_query(edge_data, 3, seed=4, name="edge-labelled")], False),
                "directed": (directed_data, [oriented(random_walk_query(data, 3, seed=4), directed_data)], False),
                "homomorphic": (data, [random_walk_query(data, 3, seed=2, induced=False, name="homomorphic")], True),
                "disconnected": (data, [disjoint_union(random_walk_query(data, 2, seed=1, name="a"),
                                                       random_walk_query(data, 2, seed=2, name="b"))], False),
            }
        return self._kinds

    @property
    def expected(self) -> dict[str, list[int]]:
        """Query kind -> the reference count of each of its queries (all positive)."""
        if self._expected is None:
            self._expected = {kind: reference_counts(graph, queries, hom)
                              for kind, (graph, queries, hom) in self.kinds.items()}
            assert all(c > 0 for counts in self._expected.values() for c in counts), self._expected
        return self._expected

    @property
    def labelled(self) -> tuple[Graph, list[Graph], list[int]]:
        """(the labelled data graph, its queries, their reference counts)."""
        data, queries, _ = self.kinds["labelled"]
        return data, queries, self.expected["labelled"]

    @property
    def other(self) -> tuple[Graph, list[int]]:
        """A second labelled graph and the reference counts of the labelled queries on it."""
        if self._other is None:
            other = rmat(32, 90, seed=15, labels=power_law_labels(32, 3, 1.0, seed=16), name="contract-other")
            self._other = other, reference_counts(other, self.labelled[1])
        return self._other

    @staticmethod
    def heavy() -> tuple[Graph, Graph]:
        """One label, 300 vertices, 3,000 R-MAT edges (hubs) and a 7-vertex star: millions of
        embeddings, long on any engine."""
        data = rmat(300, 3000, seed=3, name="small-hubs")
        leaves = 6
        star = Graph.from_edges(leaves + 1, np.zeros(leaves, np.int64), np.arange(1, leaves + 1),
                                labels=np.zeros(leaves + 1, np.int32), name="star6")
        return data, star

    def prepared(self, cls: type[Engine], kind: str = "labelled") -> Engine:
        """An engine of ``cls`` with default options, prepared on the data graph of ``kind``."""
        graph = self.kinds[kind][0]
        key = (cls, graph.name)
        if key not in self._engines:
            self._engines[key] = instantiate(cls, {}).prepare(graph)
        return self._engines[key]


def declared(cls: type[Engine], check: str) -> str:
    """The reason ``cls`` declares for ``check`` ('' when it declares none): a query kind it
    answers ``unsupported`` (``limitations``); ``oom`` for a class that holds no device memory
    (``uses_device`` False); any other name from ``contract_notes``."""
    if check in QUERY_KINDS:
        return cls.limitations.get(check, "")
    if check == "oom":
        return "" if cls.uses_device else "a CPU engine: no device memory"
    return cls.contract_notes.get(check, "")


def known_failure(cls: type[Engine], check: str) -> str:
    """The reason ``cls`` declares ``check`` a known failure ('' when it does not): a
    ``contract_notes`` entry named after the check, or ``simulator_<check>`` in the simulator."""
    from ..gpu.backend import BACKEND

    if check in MODIFIERS:
        return ""
    return cls.contract_notes.get(check, "") or (
        cls.contract_notes.get(f"simulator_{check}", "") if BACKEND == "simulator" else "")


# ---------------------------------------------------------------------- the checks
def check_declaration(cls: type[Engine], w: Workload) -> None:
    """The class is an :class:`Engine` with a name, and its notes name checks or modifiers."""
    assert isinstance(cls, type) and issubclass(cls, Engine), f"{cls!r} is not an Engine subclass"
    assert isinstance(cls.name, str) and cls.name, f"{cls.__name__}.name is empty: set the engine's name"
    assert isinstance(cls.uses_device, bool), f"{cls.__name__}.uses_device must be True or False"
    known = {*MODIFIERS, *CHECKS, *(f"simulator_{c}" for c in CHECKS)}
    unknown = sorted(set(cls.contract_notes) - known)
    assert not unknown, f"{cls.__name__}.contract_notes names {unknown}: neither checks nor {MODIFIERS}"


def _check_counts(kind: str):
    def check(cls: type[Engine], w: Workload) -> None:
        _, queries, homomorphic = w.kinds[kind]
        engine = w.prepared(cls, kind)
        for query, count in zip(queries, w.expected[kind]):
            result = engine.match(query, homomorphic=homomorphic)
            if declared(cls, kind):
                assert result.status is Status.UNSUPPORTED, (kind, result)
                assert KIND_WORDS[kind] in result.reason, (kind, result.reason)
            else:
                assert (result.status, result.count) == (Status.OK, count), (query.name, count, result)
    check.__doc__ = (f"Counts of the {kind.replace('_', '-')} queries equal the reference's"
                     + ("" if kind == "labelled" else ", or are unsupported as the class declares") + ".")
    return check


def check_limit(cls: type[Engine], w: Workload) -> None:
    """``limit`` stops at the limit (status ``limit``, valid rows); a larger one changes nothing."""
    data, queries, expected = w.labelled
    query, count = queries[0], expected[0]
    engine = w.prepared(cls)
    assert count >= 3
    for limit in (1, count - 1):
        result = engine.match(query, limit=limit, collect=True)
        assert (result.status, result.count) == (Status.LIMIT, limit), (limit, result)
        assert_embeddings(data, query, result.embeddings[:limit])
    result = engine.match(query, limit=count + 5)
    assert (result.status, result.count) == (Status.OK, count), result


def check_collect(cls: type[Engine], w: Workload) -> None:
    """``collect`` returns every embedding once, and only when asked."""
    data, queries, expected = w.labelled
    engine = w.prepared(cls)
    for query, count in zip(queries, expected):
        result = engine.match(query, collect=True)
        assert (result.status, result.count) == (Status.OK, count), (query.name, result)
        assert result.embeddings.shape == (count, query.num_vertices)
        assert_embeddings(data, query, result.embeddings)
        assert engine.match(query).embeddings is None


def _stopped_in_time(cls: type[Engine], result) -> bool:
    """TIMEOUT with a lower bound and an overrun, or (a class declaring ``deadline_cap``) OOM at
    its relation cap."""
    if result.status is Status.OOM and declared(cls, "deadline_cap"):
        return "max_relation_bytes" in result.reason
    return (result.status is Status.TIMEOUT and result.count >= 0
            and result.stats["deadline_overrun_s"] >= 0)


def check_deadline(cls: type[Engine], w: Workload) -> None:
    """A deadline is status ``timeout`` with a lower bound, reached within its slack once the
    kernels are compiled (in the simulator, a class declaring ``simulator_launch`` may run past
    it, and the result says so)."""
    from ..gpu.backend import BACKEND

    data, star = w.heavy()
    engine = instantiate(cls, {}).prepare(data)
    timeout = 0.5
    unbounded = BACKEND == "simulator" and bool(declared(cls, "simulator_launch"))
    result = engine.match(star, timeout_s=timeout)
    assert _stopped_in_time(cls, result), result
    if not unbounded:                     # once compiled: timed
        again = time.perf_counter()
        result = engine.match(star, timeout_s=timeout)
        wall = time.perf_counter() - again
        assert _stopped_in_time(cls, result), result
        assert wall < timeout + deadline_slack(timeout), f"stopped {wall:.2f} s after a {timeout} s deadline"
    else:
        assert (result.stats["deadline_overrun_s"] <= deadline_slack(timeout)
                or "the CUDA simulator ran a kernel launch to its end" in result.reason), result


def check_oom(cls: type[Engine], w: Workload) -> None:
    """A device-memory limit too small for the data graph is status ``oom`` (prepare raises
    nothing); an engine without device memory ignores it and counts exactly."""
    from ..api import match

    data, queries, expected = w.labelled
    engine = instantiate(cls, {"device_memory_limit": 4096}).prepare(data)
    result = engine.match(queries[0])
    if declared(cls, "oom"):
        assert (result.status, result.count) == (Status.OK, expected[0]), result
        return
    assert (result.status, result.count) == (Status.OOM, 0), result
    assert "device allocation of" in result.reason and "exceeds the budget" in result.reason, result.reason
    assert [r.status for r in engine.match_batch(queries)] == [Status.OOM] * len(queries)
    if _registered(cls):
        assert match(data, queries[0], engine=cls.name, device_memory_limit=4096).status is Status.OOM


def check_query_size(cls: type[Engine], w: Workload) -> None:
    """A query past ``max_query_vertices`` is ``unsupported`` with a reason saying so."""
    engine = w.prepared(cls)
    most = cls.max_query_vertices
    if most is None:
        assert engine.unsupported_reason(Graph.from_edges(70, np.arange(69), np.arange(1, 70))) == ""
        return
    n = most + 1
    path = Graph.from_edges(n, np.arange(n - 1), np.arange(1, n), labels=np.zeros(n, np.int32), name="long")
    result = engine.match(path)
    assert result.status is Status.UNSUPPORTED and result.count == 0, result
    assert f"at most {most} query vertices" in result.reason, result.reason


def _raises(error: type, pattern: str, call) -> None:
    try:
        call()
    except error as exc:
        assert re.search(pattern, str(exc)), f"{type(exc).__name__}({exc}) does not say {pattern!r}"
        return
    raise AssertionError(f"no {error.__name__} matching {pattern!r}")


def check_bad_input(cls: type[Engine], w: Workload) -> None:
    """Bad queries, arguments and options raise errors naming the problem."""
    engine = w.prepared(cls)
    query = w.labelled[1][0]
    _raises(RuntimeError, "before prepare", lambda: instantiate(cls, {}).match(query))
    _raises(TypeError, "takes a query Graph", lambda: engine.match("not a graph"))
    _raises(ValueError, "has no vertices", lambda: engine.match(Graph.from_edges(0, [], [], name="empty")))
    _raises(ValueError, "is directed but the data graph is undirected",
            lambda: engine.match(Graph.from_edges(2, [0], [1], directed=True, name="arc")))
    _raises(ValueError, "limit must be a positive", lambda: engine.match(query, limit=0))
    _raises(ValueError, "timeout_s must be positive", lambda: engine.match(query, timeout_s=0))
    _raises(ValueError, r"does not take these options \(no_such_option\)",
            lambda: instantiate(cls, {"no_such_option": 1}))
    _raises(ValueError, "device_memory_limit must be", lambda: instantiate(cls, {"device_memory_limit": "lots"}))


def documented_statistics() -> set[str] | None:
    """The statistic names docs/statistics.md lists (None where the docs are not installed)."""
    path = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"
    if not path.exists():
        return None
    return {name for row in re.findall(r"^\|\s*(`.*?)\s*\|", path.read_text(), flags=re.M)
            for name in re.findall(r"`(\w+)`", row)}


def check_statistics(cls: type[Engine], w: Workload) -> None:
    """Every search reports its order and candidate sizes (``order``, ``candidate_sizes``; not a
    class declaring ``statistics``), and only statistics docs/statistics.md lists."""
    data, queries, expected = w.labelled
    engine = w.prepared(cls)
    documented = documented_statistics()
    for query, count in zip(queries, expected):
        result = engine.match(query, collect=True)
        assert result.count == count, result
        if documented is not None:
            undocumented = set(result.stats) - documented
            assert not undocumented, f"reports {sorted(undocumented)}, not in docs/statistics.md"
        if declared(cls, "statistics"):
            assert not {"order", "candidate_sizes"} & set(result.stats)
            continue
        order = [int(u) for u in result.stats["order"]]
        assert sorted(order) == list(range(query.num_vertices)), order
        sizes = [int(s) for s in result.stats["candidate_sizes"]]
        assert len(sizes) == query.num_vertices, sizes
        frequencies = data.label_frequencies[query.labels]
        for u in range(query.num_vertices):       # every image of u is a candidate of u, of u's label
            assert len(set(result.embeddings[:, u].tolist())) <= sizes[u] <= frequencies[u], (u, sizes)


def check_peak(cls: type[Engine], w: Workload) -> None:
    """The peak of a query is the same on a fresh engine and after other queries (``collect``,
    ``limit``, a larger query, the same query) grew its buffers; the kernels are compiled before
    either is measured."""
    data, labelled, _ = w.labelled
    first, second = labelled[1], random_walk_query(data, 5, seed=12, induced=False, name="walk5")
    warm = instantiate(cls, {}).prepare(data)   # kernels compiled first: a compile inside a stage with a
    for query in (first, second):              # time budget (gMatch's probe) sends a query another way
        warm.match(query)
    fresh = [instantiate(cls, {}).prepare(data).match(second).peak_device_bytes]
    engine = instantiate(cls, {}).prepare(data)
    fresh.insert(0, engine.match(first).peak_device_bytes)
    assert (min(fresh) > 0) == cls.uses_device, fresh
    engine.match(second, collect=True)
    engine.match(random_walk_query(data, 6, seed=11, name="larger"), limit=5)
    again = [engine.match(first).peak_device_bytes, engine.match(second).peak_device_bytes]
    assert again == fresh, f"peaks {again} after other queries, {fresh} fresh"


def check_batch(cls: type[Engine], w: Workload) -> None:
    """``match_batch`` answers as ``match`` does, query by query, with ``limit`` per query;
    ``match_repeats`` gives one such answer per run."""
    _, queries, expected = w.labelled
    engine = w.prepared(cls)
    batch = engine.match_batch(queries, collect=True)
    assert [r.query for r in batch] == [q.name for q in queries]
    assert [(r.status, r.count) for r in batch] == [(Status.OK, c) for c in expected], batch
    for query, result in zip(queries, batch):
        single = engine.match(query, collect=True)
        assert sorted(map(tuple, result.embeddings.tolist())) == sorted(map(tuple, single.embeddings.tolist()))
    limited = engine.match_batch(queries, limit=1)
    assert [(r.status, r.count) for r in limited] == [(Status.LIMIT, 1)] * len(queries), limited
    runs = engine.match_repeats(queries[0], 2)
    assert [(r.status, r.count, r.query) for r in runs] == [(Status.OK, expected[0], queries[0].name)] * 2, runs


def check_two_engines(cls: type[Engine], w: Workload) -> None:
    """Two engines of the class prepared on two data graphs in one process (as a user comparing
    graphs would) answer every query exactly, in turns: neither keeps memory the other needs
    (docs/design.md, "Device memory")."""
    data, queries, expected = w.labelled
    other, other_counts = w.other
    first, second = instantiate(cls, {}).prepare(data), instantiate(cls, {}).prepare(other)
    for query, want, want_other in zip(queries, expected, other_counts):
        a, b = first.match(query), second.match(query)
        assert (a.status, a.count) == (Status.OK, want), (query.name, a.reason)
        assert (b.status, b.count) == (Status.OK, want_other), (query.name, b.reason)


def check_parts(cls: type[Engine], w: Workload) -> None:
    """A class declaring ``supports_parts``: the parts of a partition of the data vertices for its
    root (``root_range``) and, with ``supports_branch_parts``, of the residue classes of its branch
    vertex add up to the whole count, and their embeddings to the whole set. Any other class
    refuses a part with a ValueError saying so."""
    data, queries, expected = w.labelled
    engine = w.prepared(cls)
    query = queries[-1]
    if not cls.supports_parts:
        _raises(ValueError, "does not answer parts", lambda: engine.match(query, part=Part(root_range=(0, 1))))
        assert engine.match(query, part=WHOLE).count == expected[-1]
        return
    n = data.num_vertices
    assert 0 <= engine.root_vertex(query) < query.num_vertices
    cuts = [Part(root_range=r) for r in ((0, n // 3), (n // 3, n // 2), (n // 2, n))]
    if cls.supports_branch_parts:
        assert all(0 <= u < query.num_vertices for u in engine.branch_vertices(query))
        cuts += [Part(branch_part=(j, 2)) for j in range(2)]
    else:
        _raises(ValueError, "takes no branch_part", lambda: engine.match(query, part=Part(branch_part=(0, 2))))
    whole = engine.match(query, collect=True, part=WHOLE)
    assert whole.count == expected[-1], whole
    everything = sorted(map(tuple, whole.embeddings.tolist()))
    for by_branch in (False, True):
        chosen = [p for p in cuts if (p.branch_part is not None) == by_branch]
        if not chosen:
            continue
        rows = []
        for part in chosen:
            result = engine.match(query, collect=True, part=part)
            assert result.status is Status.OK and result.count == len(result.embeddings), (part, result)
            assert engine.match(query, part=part).count == result.count, part
            rows += map(tuple, result.embeddings.tolist())
        assert sorted(rows) == everything, f"the parts {chosen} are not the whole query's embeddings"


#: Every check by name, in the order :func:`check_engine` runs them.
CHECKS = {
    "declaration": check_declaration,
    **{f"counts_{kind}": _check_counts(kind) for kind in ("labelled", *KIND_WORDS)},
    "limit": check_limit,
    "collect": check_collect,
    "deadline": check_deadline,
    "oom": check_oom,
    "query_size": check_query_size,
    "bad_input": check_bad_input,
    "statistics": check_statistics,
    "peak": check_peak,
    "batch": check_batch,
    "two_engines": check_two_engines,
    "parts": check_parts,
}


def _registered(cls: type[Engine]) -> bool:
    try:
        return engine_class(cls.name) is cls
    except ValueError:
        return False


def check_engine(engine: type[Engine] | str, *, checks=None, workload: Workload | None = None) -> list[CheckOutcome]:
    """Run the contract's checks (module docstring) on an engine class (or a registered name).

    Parameters
    ----------
    engine : Engine subclass or str
        The class (it need not be registered), or the name it is registered under.
    checks : list of str, optional
        Names from :data:`CHECKS` (default: all, in their order).
    workload : Workload, optional
        Graphs and prepared engines shared with other calls (default: a new one).

    Returns
    -------
    list of CheckOutcome
        One per check run: ``passed``, or ``known failure`` as the class declares.

    Raises
    ------
    AssertionError
        Naming the class and the first check it fails (or the known failure that passed).
    """
    cls = engine_class(engine) if isinstance(engine, str) else engine
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; the checks: {', '.join(CHECKS)}")
    if "declaration" not in names:
        names.insert(0, "declaration")
    w = Workload() if workload is None else workload
    label = getattr(cls, "__name__", repr(cls))
    outcomes = []
    for name in names:
        expected = known_failure(cls, name) if name != "declaration" else ""
        try:
            CHECKS[name](cls, w)
        except Exception as exc:          # an assertion, or an error the check did not expect
            if expected:
                outcomes.append(CheckOutcome(name, "known failure", expected))
                continue
            detail = str(exc) if isinstance(exc, AssertionError) else f"{type(exc).__name__}: {exc}"
            raise AssertionError(f"{label} fails the contract check {name!r}: {detail}") from exc
        if expected:
            raise AssertionError(f"{label} passes the contract check {name!r}, which its contract_notes "
                                 f"declare a known failure ({expected}): drop the note")
        outcomes.append(CheckOutcome(name, "passed"))
    return outcomes


__all__ = ["check_engine", "CHECKS", "CheckOutcome", "Workload", "assert_embeddings", "declared", "known_failure"]
