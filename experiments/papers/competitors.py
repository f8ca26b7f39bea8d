"""The papers' other competitors as engines: the authors' builds of STMatch, T-DFS, BEEP, G2Miner and GSI.

``make competitors`` builds them with ``experiments/competitors/build.sh`` from pinned snapshots
(``docs/competitors.md``; never copied into this repository). Each engine here runs its binary once
per query as a subprocess: it writes the data graph and the query in the binary's own input
format, reads the count and the printed search time back from its output, and declares what the
binary cannot take as ``unsupported`` with the reason. The count is the binary's; comparing it
with the cpu engine's is the harness's check, as for every engine.

The time limit is the search's, as in :mod:`experiments.papers.authors`: the process runs under
the limit plus a measured start-up allowance, and a query is ``timeout`` when the printed search
time passed the limit or the process was killed at limit plus allowance.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time
from abc import abstractmethod
from pathlib import Path

import numpy as np

from common.engine.registry import register
from common.engine.result import MatchResult, Status
from common.graph.io import write_gmatch_binary
from common.graph.model import Graph

from ..harness.core import Config
from .authors import PrintedSearchBinary, failure_line, probe_query
from .gsi_filter import GSILabelIds


def work_dir() -> Path:
    return Path(os.environ.get("COMPETITORS_WORK", "/tmp/competitors"))


def build_status() -> dict[str, str]:
    """``status.txt`` of the last ``make competitors``: system -> ``built ...`` or ``FAILED <first error>``."""
    path = work_dir() / "status.txt"
    if not path.exists():
        return {}
    rows = (line.split(" ", 1) for line in path.read_text().splitlines() if line.strip())
    return {row[0]: row[1] if len(row) > 1 else "" for row in rows}


# ------------------------------------------------------------------ input formats
def write_text_graph(graph: Graph, path, labels=None) -> None:
    """The ``t N M / v id label degree / e u v`` text the gMatch snapshot's readers take (labels overridable)."""
    src, dst, _ = graph.edges()
    labels = graph.labels if labels is None else labels
    lines = [f"t {graph.num_vertices} {graph.num_edges}"]
    lines += [f"v {v} {int(lab)} {int(d)}" for v, (lab, d) in enumerate(zip(labels, graph.degrees))]
    lines += [f"e {int(u)} {int(v)}" for u, v in zip(src, dst)]
    Path(path).write_text("\n".join(lines) + "\n")


def read_text_graph(path) -> tuple[list[int], list[tuple[int, int]]]:
    """STMatch's and T-DFS's reading of the text format (graph.h, pattern.h): (labels, edges)."""
    tokens = Path(path).read_text().split()
    assert tokens[0] == "t"
    n, i, labels, edges = int(tokens[1]), 3, [], []
    while i < len(tokens) and tokens[i] == "v":
        labels.append(int(tokens[i + 2]))
        i += 4
    while i < len(tokens) and tokens[i] == "e":
        edges.append((int(tokens[i + 1]), int(tokens[i + 2])))
        i += 3
    assert len(labels) == n and i == len(tokens)
    return labels, edges


def write_gsi_graph(graph: Graph, path, vertex_ids=None, edge_lines=None, copies: int = 1) -> None:
    """GSI's ``.g`` (io/IO.cpp): ``t # 0``, ``N M VL EL``, ``v id label``, ``e u v label``, ``t # -1``;
    vertex labels written as ``vertex_ids`` gives them (default: shifted by one, as GSI's labels
    start at 1; :class:`~experiments.papers.gsi_filter.GSILabelIds`), edge labels shifted by one.
    GSI's edges are directed (``Graph::addEdge`` adds one out- and one in-neighbour), so each
    undirected edge is written in both directions, for the data graph and the query alike: a
    directed embedding of that query is an undirected one. ``edge_lines``: a file of the ``e``
    lines written earlier by :func:`write_gsi_edges`, copied instead of written again. ``copies``:
    the graph that many times (``t # 0``, ``t # 1``, ...), as a query file of several queries."""
    vl = graph.labels.astype(np.int64) + 1 if vertex_ids is None else np.asarray(vertex_ids, dtype=np.int64)
    el_max = 1 if graph.edge_labels is None else int(graph.edge_labels.max()) + 1
    with open(path, "w") as out:
        for copy in range(copies):
            out.write(f"t # {copy}\n{graph.num_vertices} {2 * graph.num_edges} {int(vl.max(initial=1))} {el_max}\n")
            for lo in range(0, len(vl), _LINES_PER_WRITE):
                out.write("".join(f"v {v} {lab}\n" for v, lab in enumerate(vl[lo:lo + _LINES_PER_WRITE].tolist(), lo)))
            if edge_lines is None:
                _write_gsi_edges(graph, out)
            else:
                with open(edge_lines) as lines:
                    shutil.copyfileobj(lines, out)
        out.write("t # -1\n")


_LINES_PER_WRITE = 1 << 20      # lines formatted per write (a large graph's file is not built in memory)


def write_gsi_edges(graph: Graph, path) -> None:
    """The ``e`` lines of :func:`write_gsi_graph` alone (the part of a data file no label choice changes)."""
    with open(path, "w") as out:
        _write_gsi_edges(graph, out)


def _write_gsi_edges(graph: Graph, out) -> None:
    src, dst, elab = graph.edges()
    el = (np.zeros(len(src), dtype=np.int64) if elab is None else np.asarray(elab, dtype=np.int64)) + 1
    for lo in range(0, len(src), _LINES_PER_WRITE):
        rows = zip(src[lo:lo + _LINES_PER_WRITE].tolist(), dst[lo:lo + _LINES_PER_WRITE].tolist(),
                   el[lo:lo + _LINES_PER_WRITE].tolist())
        out.write("".join(f"e {u} {v} {lab}\ne {v} {u} {lab}\n" for u, v, lab in rows))


def read_gsi_graph(path) -> tuple[list[int], list[tuple[int, int, int]]]:
    """GSI's reading (IO::input): (vertex labels, edges with labels) of the first graph."""
    return read_gsi_graphs(path)[0]


def read_gsi_graphs(path) -> list[tuple[list[int], list[tuple[int, int, int]]]]:
    """(vertex labels, edges with labels) of every graph of a ``.g`` file, up to ``t # -1``."""
    graphs = []
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if f[0] == "t":
            if f[2] == "-1":
                break
            graphs.append(([], []))
        elif f[0] == "v":
            graphs[-1][0].append(int(f[2]))
        elif f[0] == "e":
            graphs[-1][1].append((int(f[1]), int(f[2]), int(f[3])))
    return graphs


def write_mtx_query(query: Graph, path) -> None:
    """BEEP's query (README): ``n n 2m`` then every edge in both directions, 0-based, sorted by source
    (``CSRCOO::from_edgelist`` asserts that order)."""
    src, dst, _ = query.edges()
    arcs = sorted((int(a), int(b)) for u, v in zip(src, dst) for a, b in ((u, v), (v, u)))
    rows = [f"{query.num_vertices} {query.num_vertices} {2 * query.num_edges}"]
    rows += [f"{a} {b}" for a, b in arcs]
    Path(path).write_text("\n".join(rows) + "\n")


# ------------------------------------------------------------------ G2Miner's named patterns
def _named(n: int, edges) -> Graph:
    return Graph.from_edges(n, [a for a, _ in edges], [b for _, b in edges])


def _clique(n: int) -> Graph:
    return _named(n, list(itertools.combinations(range(n), 2)))


G2MINER_PATTERNS = {
    "triangle": _clique(3),
    "4-clique": _clique(4),
    "5-clique": _clique(5),
    "rectangle": _named(4, [(0, 1), (1, 2), (2, 3), (3, 0)]),
    "diamond": _named(4, [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]),
    "house": _named(5, [(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (3, 4)]),
    "pentagon": _named(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]),
}
"""The patterns G2Miner has GPU kernels for: triangles (``tc_gpu_base``), k-cliques
(``clique_gpu_base``) and the four ``sgl_gpu_base`` names (src/sgl/gpu_base.cu; any other name
runs diamond's). gMatch's P1-P4 and P9 are among them (its Table 4)."""

G2MINER_PROGRAMS = {"triangle": ("tc", ()), "4-clique": ("clique", ("4",)), "5-clique": ("clique", ("5",))}
"""Pattern -> (the program's variant, its arguments after the graph); ``sgl`` with the name otherwise."""


def g2miner_program(name: str) -> tuple[str, tuple]:
    """The G2Miner program that lists pattern ``name`` and its arguments after the data file."""
    return G2MINER_PROGRAMS.get(name, ("sgl", (name,)))


def _edge_set(graph: Graph) -> set:
    src, dst, _ = graph.edges()
    return {frozenset((int(u), int(v))) for u, v in zip(src, dst)}


def automorphisms(graph: Graph) -> int:
    """Number of automorphisms of a small graph (brute force)."""
    return sum(1 for p in itertools.permutations(range(graph.num_vertices))
               if {frozenset((p[a], p[b])) for a, b in map(tuple, _edge_set(graph))} == _edge_set(graph))


def g2miner_pattern(query: Graph) -> str | None:
    """The name of the G2Miner pattern ``query`` is isomorphic to (None: none)."""
    edges = _edge_set(query)
    for name, pattern in G2MINER_PATTERNS.items():
        if (pattern.num_vertices, pattern.num_edges) != (query.num_vertices, query.num_edges):
            continue
        target = [tuple(e) for e in _edge_set(pattern)]
        if any({frozenset((p[a], p[b])) for a, b in target} == edges
               for p in itertools.permutations(range(query.num_vertices))):
            return name
    return None


# ------------------------------------------------------------------ output parsers
def _last(pattern: str, text: str) -> str | None:
    found = re.findall(pattern, re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text), flags=re.M)
    return found[-1] if found else None


def parse_stmatch(text: str):
    """cu_test.cu: ``%s\\t%f\\t%llu`` (pattern, kernel ms, count) and ``Result: %llu``."""
    count, ms = _last(r"^Result: (\d+)\s*$", text), _last(r"\t([0-9.]+)\t\d+\s*$", text)
    return (int(count) if count else None), (float(ms) if ms else None)


def parse_tdfs(text: str):
    """cu_test.cu: ``Execution time (ms): %f`` and ``Total matches: %llu``."""
    count, ms = _last(r"^Total matches: (\d+)\s*$", text), _last(r"^Execution time \(ms\): ([0-9.]+)\s*$", text)
    return (int(count) if count else None), (float(ms) if ms else None)


def parse_beep(text: str):
    """subgraph_matching.cuh: ``------------- Counter = N`` and ``final count time %f s`` (a Log line)."""
    count, s = _last(r"Counter = (\d+)\s*$", text), _last(r"final count time ([0-9.]+) s", text)
    return (int(count) if count else None), (float(s) * 1e3 if s else None)


def parse_g2miner(text: str):
    """main.cc and gpu_base.cu of sgl, triangle and clique: ``total_num = N``, ``total_num_triangles = N``
    or ``num_K-cliques = N``; ``runtime [cuda_base|base|gpu] = S sec``."""
    count = _last(r"^(?:total_num|total_num_triangles|num_\d+-cliques) = (\d+)\s*$", text)
    s = _last(r"^runtime \[[^\]]+\] = ([0-9.eE+-]+) sec", text)
    return (int(count) if count else None), (float(s) * 1e3 if s else None)


def parse_gsi_runs(text: str) -> list[tuple[int, float]]:
    """(count, search ms) of each query of one process, in order: its ``result: ROWS COLS`` lines
    (stdout) beside the ``query used: T ms`` lines the build adds (stderr)."""
    counts = re.findall(r"^result: (\d+) \d+\s*$", text, re.M)
    times = re.findall(r"^query used: (\d+) ms\s*$", text, re.M)
    return [(int(c), float(t)) for c, t in zip(counts, times)]


def parse_gsi(text: str):
    """io/IO.cpp and main/run.cpp: ``result: ROWS COLS`` (stdout) and ``match used: T ms`` (stderr)."""
    count, ms = _last(r"^result: (\d+) \d+\s*$", text), _last(r"^match used: (\d+) ms\s*$", text)
    return (int(count) if count else None), (float(ms) if ms else None)


# ------------------------------------------------------------------ the engines
class CompetitorBinary(PrintedSearchBinary):
    """One competitor's binary, run once per query (module docstring)."""

    name = ""
    system = ""
    binaries: dict = {}            # variant -> path under COMPETITORS_WORK/src
    env_var = ""
    max_query_vertices = None
    #: the process's seconds beside its search, (fixed, per million data edges), for the worst-case
    #: plan; None: not estimated. The competitors' fixed part is the CUDA context and process (the
    #: authors' GSI's, 0.3 s), their per-million part the one large graph they have run on here (gMatch
    #: Table 4's 4M-edge pk stand-in, medium, H200: STMatch 5.4 s, T-DFS 4.1, BEEP 2.9, G2Miner 0.42)
    START_UP_MODEL: tuple[float, float] | None = None

    @classmethod
    def planned_start_up_s(cls, num_edges: int) -> float | None:
        if cls.START_UP_MODEL is None:
            return None
        fixed, per_million = cls.START_UP_MODEL
        return fixed + per_million * num_edges / 1e6

    @classmethod
    def binary(cls, variant: str = "") -> Path:
        variant = variant or next(iter(cls.binaries))
        override = os.environ.get(f"{cls.env_var}_{variant.upper()}" if len(cls.binaries) > 1 else cls.env_var)
        return Path(override) if override else work_dir() / "src" / cls.binaries[variant]

    @classmethod
    def reason_missing(cls) -> str | None:
        """Why the binaries cannot run here (None: they can)."""
        missing = [cls.binary(v) for v in cls.binaries if not cls.binary(v).exists()]
        if not missing:
            return None
        status = build_status().get(cls.system, "")
        if status.startswith("FAILED"):
            return f"the {cls.name} column is skipped: make competitors failed to build it: {status[7:]}"
        if shutil.which("nvcc") is None:
            return f"the {cls.name} column is skipped: no CUDA toolkit here (nvcc not found)"
        return f"the {cls.name} column is skipped: {missing[0]} is not built (run make competitors)"

    def binary_for(self, variant: str) -> Path:
        """The binary this engine runs for ``variant`` on its data graph (a subclass with builds per
        data graph chooses among them)."""
        return self.binary(variant)

    # -------------------------------------------------------------- for subclasses
    def variant(self, query: Graph) -> str:
        return next(iter(self.binaries))

    @abstractmethod
    def write_inputs(self, query: Graph, variant: str) -> list[str]:
        """Write the inputs of one run; the binary's arguments."""

    @abstractmethod
    def parse(self, text: str, query: Graph):
        """(count, search ms) from the binary's output; None where not printed."""

    def system_reason(self, query: Graph) -> str:
        return ""

    # -------------------------------------------------------------- the run
    def unsupported_reason(self, query: Graph, *, homomorphic: bool = False) -> str:
        return super().unsupported_reason(query, homomorphic=homomorphic) or self.system_reason(query)

    def _prepare(self, data) -> None:
        self._share_inputs(self.system, [self.binary(variant) for variant in self.binaries])

    def _data_file(self, key: str, suffix: str, writer) -> Path:
        """The data graph in one format, written once in this process."""
        written = self._inputs.written
        if key not in written:
            path = self._folder / f"data-{key}{suffix}"
            writer(path)
            written[key] = path
        return written[key]

    def labelled(self) -> bool:
        return self.data.num_vertices > 0 and int(self.data.labels.min()) != int(self.data.labels.max())

    def _run(self, query: Graph, process_limit_s: float | None):
        """One run: (count, search ms, wall s, killed, return code, output)."""
        variant = self.variant(query)
        out, wall, killed, rc = self._launch([str(self.binary_for(variant))] + self.write_inputs(query, variant),
                                             process_limit_s)
        count, ms = self.parse(out, query)
        return count, ms, wall, killed, rc, out

    def _launch(self, argv: list[str], process_limit_s: float | None):
        """The binary's process, killed (its whole session) at ``process_limit_s``: (output, wall s,
        killed, return code)."""
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   cwd=self._folder, start_new_session=True)
        try:
            out, _ = process.communicate(timeout=process_limit_s)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, _ = process.communicate()
            killed = True
        return out or "", time.perf_counter() - start, killed, process.returncode

    def startup_probe(self) -> Graph | None:
        """The query of the start-up probe: three vertices (:func:`three_vertex_probe`), as every
        competitor takes them (STMatch and T-DFS never end on two; BEEP sizes its work rows by
        the query's vertices less two)."""
        return three_vertex_probe(self.data)

    def _probe_overhead_s(self) -> float | None:
        """On :meth:`startup_probe`'s query, where the binary takes it."""
        probe = self.startup_probe()
        if probe is None or self.unsupported_reason(probe):
            return None
        count, ms, wall, killed, _, _ = self._run(probe, self.probe_limit_s)
        return max(0.0, wall - ms / 1e3) if count is not None and ms is not None and not killed else None

    def _match(self, query, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        if collect or limit is not None:
            return MatchResult(self.name, 0, Status.UNSUPPORTED,
                               reason=f"{self.name} only counts embeddings (no limit or collect)")
        process_limit = self._process_limit(timeout_s)
        count, ms, wall, killed, rc, out = self._run(query, process_limit)
        stats = {"wall_ms": round(wall * 1e3, 1), "binary": str(self.binary_for(self.variant(query)))}
        if process_limit is not None:
            stats["process_limit_s"] = round(process_limit, 3)
        if killed:
            return self._killed(process_limit, timeout_s, stats)
        if count is None:
            return MatchResult(self.name, 0, Status.ERROR,
                               reason=f"the binary printed no count (rc {rc}): {failure_line(out)}")
        phases = {"enumerate": (ms or 0.0) / 1e3}
        if ms is not None:
            stats["startup_ms"] = round(wall * 1e3 - ms, 1)
            self._learn_overhead(max(0.0, wall - ms / 1e3))
        return self._judged(count, phases, timeout_s, stats)


def three_vertex_probe(data: Graph) -> Graph | None:
    """A cheap 3-vertex query of the data graph: on an unlabelled graph a triangle where it has one
    (far fewer matches than its paths), else :func:`path_probe`."""
    if data.num_vertices and int(data.labels.min()) == int(data.labels.max()):
        label = int(data.labels[0])
        for u in np.argsort(data.degrees, kind="stable")[:4096]:          # low degrees first: cheap to scan
            near = data.neighbors_of(int(u))
            for i, v in enumerate(near):
                if any(data.has_edge(int(v), int(w)) for w in near[i + 1:]):
                    return Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[label] * 3, name="startup-probe")
    return path_probe(data)


def path_probe(data: Graph) -> Graph | None:
    """A 3-vertex path query over the data graph's rarest edge label pair and its rarest-labelled
    neighbour there (None where no vertex has two neighbours)."""
    edge = probe_query(data)
    if edge is None:
        return None
    labels = data.labels.astype(np.int64)
    a, b = (int(x) for x in edge.labels)
    frequency = np.bincount(labels)
    for u in np.flatnonzero(labels == a):
        for v in data.neighbors_of(int(u)):
            if labels[v] != b:
                continue
            ends = [(int(w), int(x)) for x in (u, v) for w in data.neighbors_of(int(x)) if w not in (u, v)]
            if ends:
                w, x = min(ends, key=lambda e: frequency[labels[e[0]]])
                third = int(labels[w])
                middle = 0 if x == u else 1           # the path's middle: the end w hangs from
                return Graph.from_edges(3, [middle, middle], [1 - middle, 2], labels=[a, b, third],
                                        name="startup-probe")
    return None


class TextGraphBinary(CompetitorBinary):
    """A binary that reads ``DATA.graph QUERY.graph`` in the t/v/e text format, with a build per
    labelling; its unlabelled build expects every vertex to carry :attr:`unlabelled_label`.

    Both such binaries (STMatch and T-DFS, one code base) leave their search loop only from the
    first level of a pattern of three or more vertices: on a two-vertex pattern the last level's
    step lowers the level below zero and the loop never ends (``match`` in ``src/gpu_match.cu``).
    Two-vertex queries are unsupported."""

    unlabelled_label = 0
    min_query_vertices = 3

    def system_reason(self, query):
        if query.num_vertices < self.min_query_vertices:
            return (f"{self.name} takes at least {self.min_query_vertices} query vertices: its search loop "
                    "never ends on a two-vertex pattern (src/gpu_match.cu, match)")
        return ""

    def variant(self, query):
        return "labelled" if self.labelled() else "unlabelled"

    def write_inputs(self, query, variant):
        query_file = self._folder / "query.graph"
        if variant == "labelled":
            data = self._data_file("labelled", ".graph", lambda p: write_text_graph(self.data, p))
            write_text_graph(query, query_file)
        else:
            fill = self.unlabelled_label
            data = self._data_file("unlabelled", ".graph", lambda p: write_text_graph(
                self.data, p, np.full(self.data.num_vertices, fill, int)))
            write_text_graph(query, query_file, np.full(query.num_vertices, fill, int))
        return [str(data), str(query_file)]


class STMatchAuthors(TextGraphBinary):
    """STMatch (SC 2022) as the gMatch authors set it up: ``exe DATA.graph QUERY.graph``.

    A stack slot holds GRAPH_DEGREE vertices (src/config.h), fixed at compile time and sized by the
    gMatch authors to each graph's largest degree: ``make competitors`` builds one binary per degree
    of ``STMATCH_DEGREES`` (``<config>_d<DEGREE>.exe``) and the engine runs the smallest that holds
    the data graph's largest degree."""
    START_UP_MODEL = (0.3, 1.3)

    name, system, env_var = "stmatch-authors", "stmatch", "STMATCH_BIN"
    binaries = {"unlabelled": "stmatch/bin/fig_local_global_unroll_d4096.exe",
                "labelled": "stmatch/bin/table_edge_lb_d4096.exe"}
    max_query_vertices = 5          # PAT_SIZE (src/config.h): fixed-size pattern arrays
    unlabelled_label = 0            # the unlabelled build sets the pattern's labels to 0
    default_degree = 4096           # GRAPH_DEGREE of a binary whose name does not say (an override)

    @classmethod
    def built_degrees(cls, variant: str) -> dict[int, Path]:
        """GRAPH_DEGREE -> binary, of the builds of ``variant`` beside the default one."""
        path = cls.binary(variant)
        named = re.fullmatch(r"(.*)_d(\d+)\.exe", path.name)
        if named is None:
            return {cls.default_degree: path}
        found = {int(m.group(1)): p for p in path.parent.glob(f"{named.group(1)}_d*.exe")
                 if (m := re.fullmatch(re.escape(named.group(1)) + r"_d(\d+)\.exe", p.name))}
        return found or {int(named.group(2)): path}

    def _prepare(self, data) -> None:
        super()._prepare(data)
        self._builds = {variant: self.built_degrees(variant) for variant in self.binaries}   # once, not per query

    def graph_degree(self, variant: str) -> int | None:
        """The smallest built GRAPH_DEGREE that holds the data graph's largest degree (None: none does)."""
        return min((d for d in self._builds[variant] if d >= self.data.max_degree), default=None)

    def binary_for(self, variant):
        degree = self.graph_degree(variant)
        return self.binary(variant) if degree is None else self._builds[variant][degree]

    def system_reason(self, query):
        if self.labelled():
            return (f"{self.name} runs on unlabelled graphs only: its labelled build's counts differ from cpu's "
                    "(docs/competitors.md, the check); gMatch compares it on unlabelled graphs (Table 4)")
        variant = self.variant(query)
        if self.graph_degree(variant) is None:
            built = ", ".join(f"{d:,}" for d in sorted(self._builds[variant]))
            return (f"{self.name} copies a neighbour list into a stack slot of GRAPH_DEGREE vertices (src/config.h), "
                    f"fixed at build: this data graph's largest degree is {self.data.max_degree:,}, the builds here "
                    f"hold {built} (make competitors with STMATCH_DEGREES)")
        return super().system_reason(query)

    def parse(self, text, query):
        return parse_stmatch(text)


class TDFSAuthors(TextGraphBinary):
    """T-DFS (ICDE 2024) as the gMatch authors set it up: ``exe DATA.graph QUERY.graph``."""
    START_UP_MODEL = (0.3, 1.0)

    name, system, env_var = "tdfs-authors", "tdfs", "TDFS_BIN"
    binaries = {"unlabelled": "tdfs/bin/table_edge_ulb.exe", "labelled": "tdfs/bin/table_edge_lb.exe"}
    max_query_vertices = 5          # PAT_SIZE (src/config.h)
    unlabelled_label = 1            # the unlabelled build gives every pattern vertex label 1

    def parse(self, text, query):
        return parse_tdfs(text)


class BEEPAuthors(CompetitorBinary):
    """BEEP (ICPP 2023): ``exe -g DATA.graph -t QUERY.mtx -d 0 -m sgm``; unlabelled only.

    It breaks the query's symmetry with nauty's automorphism group and prints each subgraph once;
    the count is that times the query's automorphisms, as for G2Miner.
    """
    START_UP_MODEL = (0.3, 0.65)

    name, system, env_var = "beep-authors", "beep", "BEEP_BIN"
    binaries = {"": "beep/build/exe/src/main.cu.exe"}

    def system_reason(self, query):
        if self.labelled():
            return f"{self.name} matches unlabelled graphs only (its readers drop vertex labels)"
        if query.num_vertices > 1 and int(query.degrees.max()) < query.num_vertices - 1:
            return (f"{self.name} extends matches from a central query vertex adjacent to all others; "
                    "the query has none (gMatch Table 4: N/A on P4, P5)")
        return ""

    def write_inputs(self, query, variant):
        data = self._data_file("text", ".graph", lambda p: write_text_graph(self.data, p))
        write_mtx_query(query, self._folder / "query.mtx")
        return ["-g", str(data), "-t", str(self._folder / "query.mtx"), "-d", "0", "-m", "sgm"]

    def parse(self, text, query):
        count, ms = parse_beep(text)
        return (None if count is None else count * automorphisms(query)), ms


class G2MinerAuthors(CompetitorBinary):
    """G2Miner (OSDI 2022): ``sgl_gpu_base DATA.bin PATTERN``, ``tc_gpu_base DATA.bin`` or
    ``clique_gpu_base DATA.bin K``; the named unlabelled patterns of :data:`G2MINER_PATTERNS`.

    It lists each subgraph once (symmetry breaking); the count is that times the pattern's
    automorphisms, the number of embeddings the other engines count.
    """
    START_UP_MODEL = (0.3, 0.03)

    name, system, env_var = "g2miner-authors", "g2miner", "G2MINER_BIN"
    binaries = {"sgl": "g2miner/bin/sgl_gpu_base", "tc": "g2miner/bin/tc_gpu_base",
                "clique": "g2miner/bin/clique_gpu_base"}
    max_query_vertices = 5

    def system_reason(self, query):
        if self.labelled():
            return f"{self.name} matches unlabelled graphs only"
        if g2miner_pattern(query) is None:
            return (f"{self.name} has GPU kernels for {', '.join(G2MINER_PATTERNS)} only; "
                    "the query is none of them")
        return ""

    def variant(self, query):
        return g2miner_program(g2miner_pattern(query))[0]

    def write_inputs(self, query, variant):
        data = self._data_file("csr", ".bin", lambda p: write_gmatch_binary(self.data, p))
        return [str(data), *g2miner_program(g2miner_pattern(query))[1]]

    def parse(self, text, query):
        count, ms = parse_g2miner(text)
        if count is not None:
            count *= automorphisms(G2MINER_PATTERNS[g2miner_pattern(query)])
        return count, ms


class GSIAuthors(CompetitorBinary):
    """GSI (ICDE 2020), pkumod/GSI: ``GSI.exe DATA.g QUERY.g OUT 0``; vertex and edge labels.

    Its ``main/run.cpp`` loads the data graph once and matches every query of the query file in
    turn, so a query's timed repeats are one process over a file holding the query that many
    times (:meth:`_match_repeats`); the build prints each query's time (``query used: T ms``,
    timed as its ``match used`` times them all)."""

    name, system, env_var = "gsi-authors", "gsi", "GSI_BIN"
    supports_edge_labels = True
    repeats_in_one_call = True
    binaries = {"": "gsi/GSI.exe"}
    max_query_vertices = 12         # match/Match.cu asserts qsize <= 12 (its per-query arrays)

    def write_inputs(self, query, variant, copies: int = 1):
        """The query (``copies`` times over), and the data graph with ids that give the query's
        labels signature bits of their own (at most 12 labels: ``max_query_vertices``;
        docs/competitors.md): its vertex lines rewritten where the query's labels differ from the
        last run's, its edge lines once."""
        kept = tuple(np.unique(query.labels).tolist())
        ids = GSILabelIds(self.data.label_frequencies, kept=kept)
        data = self._folder / "data.g"
        if self._inputs.written.get("data.g labels") != kept:      # the labels its ids were chosen for
            edges = self._data_file("g-edges", ".g", lambda p: write_gsi_edges(self.data, p))
            write_gsi_graph(self.data, data, ids(self.data.labels), edge_lines=edges)
            self._inputs.written["data.g labels"] = kept
        write_gsi_graph(query, self._folder / "query.g", ids(query.labels), copies=copies)
        return [str(data), str(self._folder / "query.g"), os.devnull, "0"]

    def parse(self, text, query):
        return parse_gsi(text)

    #: fitted to its start-up on the H200 on three graphs (docs/decisions.md, "The authors' GSI: a
    #: query's repeats in one process")
    START_UP_MODEL = (0.3, 2.5)

    def _match_repeats(self, query, repeats, *, timeout_s):
        """One process over ``repeats`` copies of the query, killed at ``repeats`` limits plus the
        start-up room; each copy judged on its printed time (``startup_ms``: the process's wall
        less every copy's search)."""
        process_limit = None if timeout_s is None else repeats * timeout_s + self.wall_beyond_limit_s()
        argv = [str(self.binary_for(""))] + self.write_inputs(query, "", copies=repeats)
        out, wall, killed, rc = self._launch(argv, process_limit)
        runs = parse_gsi_runs(out)
        stats = {"wall_ms": round(wall * 1e3, 1), "binary": str(self.binary_for("")), "runs_in_one_process": repeats}
        if process_limit is not None:
            stats["process_limit_s"] = round(process_limit, 3)
        if runs:
            searched_s = sum(ms for _, ms in runs) / 1e3
            stats["startup_ms"] = round((wall - searched_s) * 1e3, 1)
            if len(runs) == repeats:
                self._learn_overhead(max(0.0, wall - searched_s))
        judged = [self._judged(count, {"enumerate": ms / 1e3}, timeout_s, dict(stats)) for count, ms in runs]
        if killed and len(runs) < repeats:
            judged.append(self._killed(process_limit, timeout_s, dict(stats)))
        elif not judged:
            reason = f"the binary printed no count and time per query (rc {rc}): {failure_line(out)}"
            if re.search(r"^match used:", out, re.M):
                reason = "the binary prints no time per query (query used: T ms): rebuild it with make competitors"
            judged.append(MatchResult(self.name, 0, Status.ERROR, reason=reason))
        return judged


GSI_AUTHORS_NOTE = ("GSI (authors): pkumod/GSI (make competitors) built as its Makefile builds it, with nvcc -G "
                    "(device code unoptimised; built without it, it finds no row on sm_90: its warps share "
                    "shared memory without __syncwarp); its printed match time (rows written to /dev/null), "
                    "the limit on it (start-up apart); it tells vertex labels apart by one hash bit of 32, so "
                    "each query's labels are written as ids with bits of their own (docs/competitors.md)")
"""What the reports say of the authors' GSI column where it is built."""


COMPETITORS = {cls.name: cls for cls in (STMatchAuthors, TDFSAuthors, BEEPAuthors, G2MinerAuthors, GSIAuthors)}


def competitor_reason(engine: str) -> str | None:
    """Why the competitor behind ``engine`` cannot run here (None: it can)."""
    return COMPETITORS[engine].reason_missing()


def competitor_configs(engine: str, label: str) -> tuple:
    """``(Config(label, engine),)``, optional: a column on every host (so the claims and the
    generated results README do not depend on the host), run where the binary is built."""
    return (Config(label, engine, optional=True),)


def not_built_claim(label: str) -> str:
    """A claim's reason where ``label``'s column is absent (the same on every host; the notes say why)."""
    return f"{label} is not built here (make competitors; the experiment's notes name the reason)"


def competitors_note(*engines: str) -> str:
    """The reasons of those of ``engines`` that cannot run here, one clause each ("" when all can)."""
    return "; ".join(reason for reason in map(competitor_reason, engines) if reason)


for _name, _cls in COMPETITORS.items():
    if _cls.reason_missing() is None:
        register(_name, _cls)
