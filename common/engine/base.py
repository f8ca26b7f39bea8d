"""The engine contract: one base class, a registry, and :func:`match` (docs/design.md, "The engine contract").

An engine is a class whose constructor takes its options (variants and ablations are options,
never copies), whose :meth:`Engine.prepare` builds the data-graph state it reuses across a
query set, and whose :meth:`Engine.match` answers one query. Subclasses implement
``_prepare`` and ``_match``; the base class does the checks every engine needs, so that a query
an engine cannot take becomes status ``unsupported`` and a device-memory overflow becomes
status ``oom``, never a crash.

An engine that declares ``supports_parts`` answers a part of a query per call,
``match(query, part=Part(root_range=(lo, hi)))`` (:mod:`common.engine.part`: the split protocol of
``common.distributed.match_split``), and names the query vertex a part restricts
(:meth:`Engine.root_vertex`; with ``supports_branch_parts`` also :meth:`Engine.branch_vertices`);
its ``_match`` and ``_match_batch`` take the call's ``part``. Any other engine refuses a part.

A GPU engine allocates every device array through one
``common.gpu.budget.DeviceMemoryBudget(self.device_memory_limit)`` kept as ``self.budget`` and created
in ``_prepare`` (so that the limit emulates the papers' 11/12/24 GB cards and overflowing it
raises :class:`~common.errors.DeviceOutOfMemory`), keeps its grow-and-reuse buffers in a
``common.gpu.pool.BufferPool`` over that budget, times its phases with ``common.gpu.timers.PhaseTimer``,
and reports the budget's peak as ``MatchResult.peak_device_bytes``; the base class resets the
peak before every query, so the peak is that query's own.

Compiling is not searching: a query that times out while Numba compiled kernels for it (the
first query of a kernel variant in a process) is run again, up to :data:`COMPILE_RERUNS` times,
now that they are compiled, so ``timeout_s`` bounds the search, not the compiler. Such a
result carries ``stats["compile_reruns"]``; its wall time includes the compile and the first try.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from ..errors import DeviceOutOfMemory
from ..gpu.compile_clock import compile_clock
from ..graph.model import Graph
from .part import WHOLE, Part
from .result import MatchResult, Status

#: the kinds of query an engine may declare in :attr:`Engine.limitations`
QUERY_KINDS = ("edge_labels", "directed", "homomorphic", "disconnected")

#: times a query that timed out while kernels were compiled for it is run again
COMPILE_RERUNS = 3


class Engine(ABC):
    """Base class of every engine. Subclasses set the class attributes that describe what they take.

    Parameters
    ----------
    device_memory_limit : int, str or None
        Device-memory budget in bytes (or "11G"), to emulate a smaller GPU; None: the whole device.
    """

    name: ClassVar[str] = ""
    supports_edge_labels: ClassVar[bool] = False
    supports_directed: ClassVar[bool] = False
    supports_homomorphic: ClassVar[bool] = False
    supports_disconnected: ClassVar[bool] = False
    max_query_vertices: ClassVar[int | None] = None
    uses_device: ClassVar[bool] = True        # False: a CPU engine (its times are host times)
    #: query kinds (:data:`QUERY_KINDS`) the engine answers ``unsupported``, each with the reason
    #: (the paper's section); ``supports_<kind>`` follows from it unless the class sets it itself
    limitations: ClassVar[dict[str, str]] = {}
    #: checks of the contract (:mod:`common.engine.check`) the engine passes otherwise or fails, with
    #: the reason: ``statistics`` (no matching order or candidate sets to report), ``deadline_cap``
    #: (may stop at a relation cap near the deadline), ``simulator_launch`` (a launch the CUDA
    #: simulator cannot stop before it polls the stop flag), ``simulator_<check>`` (a check failed
    #: only in the simulator), or a check's name (a check it fails today)
    contract_notes: ClassVar[dict[str, str]] = {}
    #: the engine this one is a variant of (SGSI of GSI, the CPU STwig of STwig): left out of the
    #: side-by-side comparisons, which run each algorithm once
    variant_of: ClassVar[str | None] = None
    #: top-level packages holding the engine's CUDA kernels (the kernel cache keys on their source)
    kernel_packages: ClassVar[tuple[str, ...]] = ()
    #: engine options whose kernels the defaults do not reach on ``gpusm warmup``'s workload, each a
    #: warm-up process of its own (the defaults first)
    warmup_variants: ClassVar[tuple[dict, ...]] = ({},)
    #: whether the kernels are specialised by query size (warm-up runs one process per size group)
    warmup_by_query_size: ClassVar[bool] = False
    #: whether ``match`` answers a part of a query (``part=Part(root_range=...)``, :mod:`.part`);
    #: such an engine names its root with :meth:`root_vertex`
    supports_parts: ClassVar[bool] = False
    #: whether its parts may also cut below the root (``Part(branch_part=...)``,
    #: :meth:`branch_vertices`)
    supports_branch_parts: ClassVar[bool] = False
    #: whether :meth:`match_repeats` times a query's runs in one call for less than a :meth:`match`
    #: each (an external binary that loads the data graph once per process), by :meth:`_match_repeats`
    repeats_in_one_call: ClassVar[bool] = False
    #: whether an untimed first run makes later runs faster (kernels compiled or loaded, pools grown):
    #: the harness and the benches warm such an engine up once per query size before timing it
    warm_up_helps: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        unknown = set(vars(cls).get("limitations", {})) - set(QUERY_KINDS)
        if unknown:
            raise TypeError(f"{cls.__name__}.limitations: {sorted(unknown)} are not query kinds {QUERY_KINDS}")
        for kind in QUERY_KINDS if "limitations" in vars(cls) else ():
            if f"supports_{kind}" not in vars(cls):
                setattr(cls, f"supports_{kind}", kind not in cls.limitations)
        if cls.supports_branch_parts and not cls.supports_parts:
            raise TypeError(f"{cls.__name__}: supports_branch_parts needs supports_parts")
        for flag, method in (("supports_parts", "root_vertex"), ("supports_branch_parts", "branch_vertices"),
                             ("repeats_in_one_call", "_match_repeats")):
            if getattr(cls, flag) and getattr(cls, method) is getattr(Engine, method):
                raise TypeError(f"{cls.__name__} declares {flag} but does not define {method}()")

    def __init__(self, *, device_memory_limit: int | str | None = None):
        self.device_memory_limit = None if device_memory_limit is None else memory_bytes(device_memory_limit)
        self.data: Graph | None = None
        self.budget = None                       # a GPU engine's DeviceMemoryBudget (set in _prepare)
        self.prepare_error: str | None = None    # why prepare() could not fit (every match is oom)
        #: the part a ``match`` without ``part=`` answers (an engine that supports parts sets it
        #: from its options ``root_range`` and ``branch_part``)
        self.default_part: Part = WHOLE

    # ------------------------------------------------------------------ public API
    def prepare(self, data: Graph) -> "Engine":
        """Build the data-graph state reused by every later :meth:`match` call; returns self."""
        if not isinstance(data, Graph):
            raise TypeError(f"prepare() takes a Graph, got {type(data).__name__}")
        self.data = data
        self.prepare_error = None
        try:
            self._prepare(data)
        except DeviceOutOfMemory as exc:          # the contract: an overflow is status oom, never a crash
            self.prepare_error = f"prepare: {exc}"
        return self

    def match(self, query: Graph, *, limit: int | None = None, collect: bool = False,
              timeout_s: float | None = None, homomorphic: bool = False, part: Part | None = None) -> MatchResult:
        """Count (and with ``collect``, list) the embeddings of ``query`` in the prepared data graph
        (with ``part``, an engine that ``supports_parts``: those of that part, :mod:`.part`; None:
        :attr:`default_part`).

        Embeddings name data vertices by the input's own ids: a graph whose ids were compacted on
        reading (SNAP lists, networkx graphs) carries them in ``meta["original_ids"]``.
        """
        return self.match_batch([query], limit=limit, collect=collect, timeout_s=timeout_s,
                                homomorphic=homomorphic, part=part)[0]

    def match_batch(self, queries, *, limit: int | None = None, collect: bool = False,
                    timeout_s: float | None = None, homomorphic: bool = False,
                    part: Part | None = None) -> list[MatchResult]:
        """:meth:`match` for each query, in order; ``limit``, ``collect``, ``timeout_s`` and
        ``part`` hold per query. An engine that overrides ``_match_batch`` answers many small
        queries together (shared launches and copies); the others answer them one at a time."""
        if self.data is None:
            raise RuntimeError(f"{type(self).__name__}.match() called before prepare(data)")
        queries = list(queries)
        limit = self._checked_arguments(limit, timeout_s)
        part = self._checked_part(part)
        results: list[MatchResult | None] = []
        pending: list[int] = []
        for i, query in enumerate(queries):
            results.append(self._answer_without_search(query, collect, homomorphic))
            if results[-1] is None:
                pending.append(i)
        if pending:
            options = dict(limit=limit, collect=collect, timeout_s=timeout_s, homomorphic=homomorphic)
            if self.supports_parts:
                options["part"] = part
            before = compile_clock.seconds
            started = time.perf_counter()
            answered = self._search_batch([queries[i] for i in pending], options)
            wall = time.perf_counter() - started if len(pending) == 1 else None
            batch_compiled = timeout_s is not None and compile_clock.seconds > before
            for i, result in zip(pending, answered):
                compiled, reruns = batch_compiled, 0
                while compiled and result.status is Status.TIMEOUT and reruns < COMPILE_RERUNS:
                    before = compile_clock.seconds
                    result = self._search_batch([queries[i]], options)[0]
                    compiled, reruns = compile_clock.seconds > before, reruns + 1
                if reruns:
                    result.stats["compile_reruns"] = reruns
                if result.status is Status.TIMEOUT and timeout_s is not None:
                    note_overrun(result, timeout_s, wall if not reruns else None)
                results[i] = result
        for query, result in zip(queries, results):
            result.query = query.name
            result.embeddings = to_original_ids(self.data, result.embeddings)
        return results

    def match_repeats(self, query: Graph, repeats: int, *, timeout_s: float | None = None) -> list[MatchResult]:
        """``repeats`` timed runs of ``query`` (its count, as :meth:`match`), each judged against
        ``timeout_s``, in order; the list ends after the first run that is not ``ok``
        (:meth:`_match_repeats`: one :meth:`match` per run, or one call of the engine's own for
        them all where it declares :attr:`repeats_in_one_call`)."""
        if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
            raise ValueError(f"repeats must be a whole number of runs, at least 1, got {repeats!r}")
        if self.data is None:
            raise RuntimeError(f"{type(self).__name__}.match_repeats() called before prepare(data)")
        self._checked_arguments(None, timeout_s)
        known = self._answer_without_search(query, False, False)
        if known is not None:
            return [known]
        runs = self._match_repeats(query, int(repeats), timeout_s=timeout_s)
        ended = next((i + 1 for i, run in enumerate(runs) if run.status is not Status.OK), len(runs))
        if not 1 <= ended <= repeats:
            raise RuntimeError(f"{self.name}._match_repeats gave {len(runs)} runs for {repeats}")
        for run in runs[:ended]:
            run.query = query.name
        return runs[:ended]

    def _search_batch(self, queries: list, options: dict) -> list[MatchResult]:
        """``_match_batch`` with the peak reset first and an overflow as status oom."""
        if self.budget is not None:
            self.budget.reset_peak()
        try:
            return self._match_batch(queries, **options)
        except DeviceOutOfMemory as exc:
            return [MatchResult(self.name, 0, Status.OOM, reason=str(exc)) for _ in queries]
        finally:
            self._release_working_memory()

    def _checked_arguments(self, limit, timeout_s) -> int | None:
        if limit is not None:
            whole = not isinstance(limit, bool) and float(limit).is_integer()
            if not whole or not 1 <= int(limit) <= np.iinfo(np.int64).max:
                raise ValueError(f"limit must be a positive whole number of embeddings (at most 2**63-1), got {limit}")
            limit = int(limit)
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        return limit

    def _checked_part(self, part) -> Part | None:
        """The part a call answers: ``part``, else :attr:`default_part`; a TypeError for anything
        but a :class:`~.part.Part`, a ValueError for a part this engine does not declare it takes."""
        if part is None:
            return self.default_part
        if not isinstance(part, Part):
            raise TypeError(f"part must be a common.engine.part.Part, got {type(part).__name__}")
        if not part.whole and not self.supports_parts:
            raise ValueError(f"{self.name} does not answer parts of a query (it does not declare supports_parts); "
                             f"match it whole")
        if part.branch_part is not None and not self.supports_branch_parts:
            raise ValueError(f"{self.name} takes no branch_part (it does not declare supports_branch_parts): "
                             f"only a root_range")
        return part

    def root_vertex(self, query: Graph, *, homomorphic: bool = False) -> int:
        """The query vertex a part's ``root_range`` restricts (an engine that ``supports_parts``)."""
        raise ValueError(f"{self.name} does not answer parts of a query (it does not declare supports_parts)")

    def branch_vertices(self, query: Graph, *, homomorphic: bool = False) -> tuple[int, ...]:
        """The query vertices a part's ``branch_part`` levels restrict, in level order (an engine
        that ``supports_branch_parts``)."""
        raise ValueError(f"{self.name} takes no branch_part (it does not declare supports_branch_parts)")

    def _answer_without_search(self, query: Graph, collect: bool, homomorphic: bool) -> MatchResult | None:
        """The checks every engine needs: a bad query raises; an answer known without a search
        (unsupported, prepare out of memory, a label the data lacks) is returned; None otherwise."""
        if not isinstance(query, Graph):
            raise TypeError(f"match() takes a query Graph, got {type(query).__name__}")
        if query.num_vertices == 0:
            raise ValueError(f"query {query.name!r} has no vertices")
        if query.directed != self.data.directed:
            kind = "directed" if query.directed else "undirected"
            other = "directed" if self.data.directed else "undirected"
            raise ValueError(f"query {query.name!r} is {kind} but the data graph is {other}")
        if query.meta.get("dropped_self_loops"):
            raise ValueError(f"query {query.name!r} had {query.meta['dropped_self_loops']} self-loop(s), "
                             "dropped when it was read: queries cannot have self-loops")
        reason = self.unsupported_reason(query, homomorphic=homomorphic)
        if reason:
            return MatchResult.unsupported(self.name, reason, query=query.name)
        if self.prepare_error is not None:
            return MatchResult(self.name, 0, Status.OOM, reason=self.prepare_error, query=query.name)
        if not _labels_present(self.data, query):
            empty = np.zeros((0, query.num_vertices), dtype=np.int32) if collect else None
            return MatchResult(self.name, 0, Status.OK, embeddings=empty, query=query.name,
                               stats={"note": "a query label does not occur in the data graph"})
        return None

    def unsupported_reason(self, query: Graph, *, homomorphic: bool = False) -> str:
        """Why this engine cannot take ``query`` on the prepared data graph ('' if it can); a
        declared limitation's reason follows in parentheses."""
        data = self.data
        kinds = {"edge_labels": ((query.has_edge_labels or data.has_edge_labels), "edge labels"),
                 "directed": (data.directed, "directed graphs"),
                 "homomorphic": (homomorphic, "homomorphic matching")}
        for kind, (asked, what) in kinds.items():
            if asked and not getattr(self, f"supports_{kind}"):
                return self._cited(f"{self.name} does not support {what}", kind)
        if self.max_query_vertices is not None and query.num_vertices > self.max_query_vertices:
            return (f"{self.name} takes at most {self.max_query_vertices} query vertices, "
                    f"query has {query.num_vertices}")
        if not self.supports_disconnected and not query.is_connected():
            return self._cited(f"{self.name} requires a connected query", "disconnected")
        return ""

    def wall_beyond_limit_s(self) -> float:
        """Seconds one :meth:`match` may take past its ``timeout_s`` by design, outside the search
        the limit bounds (an external binary's start-up: :mod:`experiments.papers.authors`); a
        harness waiting on a worker adds them to its hard limit. None here: every phase of these
        engines honours the deadline."""
        return 0.0

    @classmethod
    def planned_start_up_s(cls, num_edges: int) -> float | None:
        """Seconds a worst-case plan counts for each run beside its limit on a data graph of
        ``num_edges`` edges, before anything is measured: none here (every phase honours the
        deadline); None for an engine that cannot say (an external binary whose start-up grows
        with the graph it loads and is not modelled)."""
        return 0.0

    def _cited(self, message: str, kind: str) -> str:
        reason = self.limitations.get(kind)
        return f"{message} ({reason})" if reason else message

    # ------------------------------------------------------------------ for subclasses
    def _prepare(self, data: Graph) -> None:
        """Build device-resident (or CPU) state for ``data``."""

    def _release_working_memory(self) -> None:
        """After each call's queries: give back working memory beyond what the engine keeps
        between queries (docs/design.md, "Device memory"); by default nothing."""

    @abstractmethod
    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        """Answer one query; the base class has already checked it (see :meth:`match`). An engine
        that ``supports_parts`` also takes ``part``, the :class:`~.part.Part` to answer."""

    def _match_repeats(self, query: Graph, repeats: int, *, timeout_s) -> list[MatchResult]:
        """The runs of :meth:`match_repeats` (the query already checked): up to ``repeats`` results,
        each judged against ``timeout_s``; here one :meth:`match` each until one is not ``ok``. An
        engine that declares :attr:`repeats_in_one_call` answers them in one call of its own."""
        runs = []
        while len(runs) < repeats and (not runs or runs[-1].status is Status.OK):
            runs.append(self.match(query, timeout_s=timeout_s))
        return runs

    def _match_batch(self, queries: list[Graph], **options) -> list[MatchResult]:
        """Answer checked queries (see :meth:`match_batch`; ``options``: ``limit``, ``collect``,
        ``timeout_s``, ``homomorphic`` and, for an engine that ``supports_parts``, ``part``); by
        default one at a time, each with its own peak and its own out-of-memory status."""
        out = []
        for i, query in enumerate(queries):
            if i and self.budget is not None:
                self.budget.reset_peak()
            try:
                out.append(self._match(query, **options))
            except DeviceOutOfMemory as exc:
                out.append(MatchResult(self.name, 0, Status.OOM, reason=str(exc)))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def deadline_slack(timeout_s: float) -> float:
    """How far past ``timeout_s`` an engine may stop on a GPU: one second or 10%, the larger."""
    return max(1.0, 0.1 * timeout_s)


def note_overrun(result: MatchResult, timeout_s: float, wall: float | None = None) -> None:
    """Record how far a timed-out query ran past its deadline (``stats["deadline_overrun_s"]``:
    wall time when known, else the phases' sum). Past :func:`deadline_slack` under the CUDA
    simulator, the reason says why: a kernel launch there runs to its end once started (kernels
    that poll the stop flag excepted), so the overrun is the launch that was running."""
    from ..gpu.backend import BACKEND

    elapsed = result.seconds if wall is None else wall
    overrun = max(0.0, elapsed - timeout_s)
    result.stats["deadline_overrun_s"] = round(overrun, 3)
    if overrun > deadline_slack(timeout_s) and BACKEND == "simulator":
        note = (f"{overrun:.1f} s past the deadline: the CUDA simulator ran a kernel launch to its end "
                "(a launch cannot be stopped there before it polls the stop flag)")
        result.reason = f"{result.reason}; {note}" if result.reason else note


_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def memory_bytes(value) -> int:
    """Bytes (at least 1, rounded down) from a number or a size such as '11G', '512MB', '1.5GiB'
    (binary units); anything else is a ValueError that says what it got."""
    import re

    number = None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]?)(?:I?B)?\s*", value.upper())
        if m:
            number = float(m.group(1)) * _SIZE_UNITS[m.group(2)]
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        number = float(value)
    if number is None or not np.isfinite(number) or number < 1:
        raise ValueError(f"device_memory_limit must be at least one byte: a number of bytes or a "
                         f"size such as 11G or 512M, got {value!r}")
    return int(number)


def to_original_ids(data: Graph, embeddings: np.ndarray | None) -> np.ndarray | None:
    """Map embedding rows from internal ids ``0..n-1`` to ``data.meta["original_ids"]`` when present."""
    ids = data.meta.get("original_ids")
    if embeddings is None or ids is None:
        return embeddings
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu" and ids.size and ids.max() <= np.iinfo(embeddings.dtype).max:
        ids = ids.astype(embeddings.dtype, copy=False)
    return ids[embeddings]


def _labels_present(data: Graph, query: Graph) -> bool:
    """False when a query vertex or edge label cannot occur in the data graph (count is 0)."""
    def present(labels: np.ndarray, frequencies: np.ndarray) -> bool:
        return bool(labels.max() < frequencies.size and frequencies[labels].min() > 0)

    # The data side's frequencies are cached on the Graph: no per-query pass over the data.
    if not present(query.labels, data.label_frequencies):
        return False
    return query.edge_labels is None or present(query.edge_labels, data.edge_label_frequencies)
