"""Datasets, query sets and scales of the experiments.

A :class:`Dataset` is a paper's data graph: a real file from the data folder when there is one
(HPRD, yeast, GitHub, Enron, wiki-Vote), else a same-size R-MAT **stand-in** with the paper's
|V|, |E| and label counts, named as a stand-in in every output. Labels are assigned as the
paper says (power law for GSI/EGSM, uniform for gMatch), with a fixed seed.

A :class:`QuerySpec` is a query set: query files with their exact counts, or queries generated
from the data graph (induced random walks, GSI walks with an edge target, STwig's N nodes + 2N
edges, the patterns P1-P9).

A :class:`Scale` shrinks both: ``tiny`` (simulator, seconds: every graph becomes a few dozen
vertices, every query 3-4 vertices, two rows per table), ``small`` (a few minutes of GPU time
per paper: stand-ins capped at about a million edges, 2-3 queries per set, time limits of
0.5-1 s, two or three rows per table; each paper module narrows it per experiment),
``medium`` (the quick set that judges the papers' claims: at most 30 minutes worst case on one
GPU, at least 20 queries per set, 3 timed runs per query, stand-ins capped at 4M edges, limits of
0.25-1 s; each paper module sets its ``MEDIUM``), ``large`` (the headline experiments only, each
opting in with its ``LARGE`` setting: at least 50 queries per set, limits of at least 10 s, 3
timed runs per query, stand-ins of up to 256M edges with the paper's average degree; at most 8
GPU-hours worst case), ``full`` (the paper's settings).

At ``medium`` and ``large`` a query's timed runs share its limit (``Scale.repeats_share_limit``):
a repeat runs only while the runs so far and one more fit in the limit, so a query costs at most
about one limit however many runs it gets (docs/decisions.md, "Repeats within the limit").

Every stand-in is drawn from its own seed (``Dataset.graph_seed``, derived from the dataset's
name unless given), so two datasets of a table are never one graph under two names; a
``with_`` variant (other labels, another size) keeps its dataset's seed. Stand-ins above
:data:`CACHE_MIN_EDGES` edges are cached on disk (:func:`graph_cache_dir`), and a run draws
the ones it will load in the background, several at a time (:class:`StandinPrefetch`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import threading
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from itertools import zip_longest
from pathlib import Path

import numpy as np
import pandas as pd

from common.graph.generate import (
    classify_density,
    pattern,
    power_law_labels,
    query_set,
    random_walk_query,
    rmat,
    uniform_labels,
)
from common.graph.io import load_graph, load_query_set, natural_key, read_expected_counts
from common.graph.model import Graph
from common.graph.paths import data_dir as _data_dir

GB = 1 << 30


def data_dir() -> Path:
    """The real-data folder: ``$GPUSM_DATA``, else the checkout's ``data/`` (common.graph.paths)."""
    return _data_dir()


@dataclass(frozen=True)
class Scale:
    """How much of a paper's setting to run (module docstring)."""

    name: str
    max_edges: int | None            # stand-ins larger than this are shrunk (same average degree)
    queries_per_set: int | None      # None: the paper's count
    max_query_vertices: int | None   # generated queries larger than this are shrunk
    time_limit_s: float | None       # cap on the paper's time limit
    real_data: bool                  # False: real graphs are replaced by tiny stand-ins too
    max_points: int | None = None    # rows (datasets / sweep values) kept per experiment
    repeats: int | None = None       # timed runs per query (median kept); None: the experiment's own
    repeats_share_limit: bool = False  # a query's timed runs together stay within about one limit
    keep_degree: bool = False        # shrunk stand-ins keep the paper's average degree
    opt_in: bool = False             # only experiments that set this scale (scale_at) run at it


LARGE_MAX_EDGES = 64_000_000
"""The largest stand-in at the ``large`` scale: 64M undirected edges, drawn in about two minutes on the
device's host (once per machine: :func:`standin_edges` caches it), so that a task that draws one still
answers queries within a 10-minute device call; one H200 holds far more (docs/decisions.md, "The
large scale"). The papers' larger graphs are shrunk to it at their average degree."""
LARGE_MIN_QUERIES = 50
LARGE_MIN_LIMIT_S = 10.0
"""What every experiment at the ``large`` scale runs at least: queries per set and seconds per query."""


SCALES = {
    "tiny": Scale("tiny", max_edges=120, queries_per_set=2, max_query_vertices=4,
                  time_limit_s=120.0, real_data=False, max_points=2),
    # Sized by the worst-case plan (``python -m experiments --all --plan --gpus 0,1,2,3``) to
    # fit 7.5 minutes per GPU on four GPUs; each paper module narrows it further (``SMALL``).
    "small": Scale("small", max_edges=1_200_000, queries_per_set=3, max_query_vertices=None,
                   time_limit_s=1.0, real_data=True, max_points=2),
    # Sized by the worst-case plan (``python -m experiments --all --plan --scale medium --gpus 0``)
    # to fit 30 minutes on one GPU; each paper module sets its own ``MEDIUM``.
    "medium": Scale("medium", max_edges=4_000_000, queries_per_set=20, max_query_vertices=None,
                    time_limit_s=1.0, real_data=True, max_points=None, repeats=3, repeats_share_limit=True),
    # The headline experiments (each opts in with its ``LARGE``), sized by the worst-case plan
    # (``python -m experiments --all --plan --scale large --gpus 0,1,2,3``) to at most 8 GPU-hours.
    "large": Scale("large", max_edges=LARGE_MAX_EDGES, queries_per_set=50, max_query_vertices=None,
                   time_limit_s=10.0, real_data=True, max_points=None, repeats=3, repeats_share_limit=True,
                   keep_degree=True, opt_in=True),
    "full": Scale("full", max_edges=None, queries_per_set=None, max_query_vertices=None,
                  time_limit_s=None, real_data=True),
}


SIMULATOR_RUN_S = {"tiny": 0.05}
"""Seconds one query run (a timed repeat or a warm-up) takes in Numba's CUDA simulator at a scale
whose graphs are shrunk to a few dozen vertices, measured (:func:`simulator_seconds`)."""
SIMULATOR_OVERRUN_S = 2.0
"""Seconds past its time limit a query on a real-size graph (``small`` and up) runs in the
simulator: there nearly every query times out, and the deadline is checked between kernel
launches, each of which takes seconds in the simulator (:func:`simulator_seconds`)."""
SIMULATOR_SET_S = 1.5
"""Seconds a set spends in the simulator outside its experiments: the worker's start and imports."""
SIMULATOR_EXPERIMENT_S = 0.6
"""Seconds an experiment spends in the simulator outside its queries: its data graphs and query
sets built and prepared, its reports written."""


def simulator_seconds(lines, scale: Scale | str) -> float:
    """About how long plan ``lines`` (:func:`experiments.harness.core.plan`) take in the simulator.

    A GPU plan's worst case assumes every query runs to its limit plus a compile allowance; the
    simulator compiles nothing, finishes tiny queries in a fraction of a second and overruns the
    limit on real-size ones. So each run (``runs`` x ``repeats``, plus one warm-up per
    ``warmup_s / limit_s``) costs :data:`SIMULATOR_RUN_S` at ``tiny``, else its limit plus
    :data:`SIMULATOR_OVERRUN_S`; the set adds :data:`SIMULATOR_SET_S`, each experiment
    :data:`SIMULATOR_EXPERIMENT_S`.
    The constants were fitted to runs of ``--scale tiny`` and ``small`` on a 2-core machine
    (docs/decisions.md, "The simulator's plan").
    """
    scale = get_scale(scale) if isinstance(scale, str) else scale
    total = SIMULATOR_SET_S
    for line in lines:
        warmups = round(line.warmup_s / line.limit_s) if line.limit_s else 0
        runs = line.runs * line.repeats + warmups
        each = SIMULATOR_RUN_S.get(scale.name)
        total += SIMULATOR_EXPERIMENT_S + runs * (each if each is not None else line.limit_s + SIMULATOR_OVERRUN_S)
    return total


def get_scale(name: str) -> Scale:
    try:
        return SCALES[name]
    except KeyError:
        raise ValueError(f"unknown scale {name!r}; choose one of {sorted(SCALES)}") from None


@dataclass(frozen=True)
class Dataset:
    """A paper's data graph (module docstring).

    ``path`` is relative to :func:`data_dir` (None for a graph that is not available offline);
    ``num_vertices``/``num_edges``/``vertex_labels`` are the paper's figures, used for the
    stand-in; ``relabel=False`` keeps a real file's own labels, and ``vertex_labels <= 1`` makes
    the graph unlabelled.
    """

    name: str
    num_vertices: int
    num_edges: int
    vertex_labels: int = 1
    relabel: bool = True
    edge_labels: int = 0
    label_distribution: str = "power_law"     # or "uniform"
    path: str | None = None
    symmetrize: bool = False
    rmat_abcd: tuple = (0.57, 0.19, 0.19, 0.05)
    seed: int = 1                             # of the labels
    label_exponent: float = 1.0               # power_law: P(label k) ~ (k+1)^-exponent (0: uniform)
    graph_seed: int | None = None             # of the stand-in's edges; None: from the name

    def __post_init__(self):
        if self.graph_seed is None:           # stored, so that with_() variants keep it
            object.__setattr__(self, "graph_seed", name_seed(self.name))

    def load(self, scale: Scale) -> Graph:
        """The graph this experiment runs on at ``scale`` (cached per process).

        Only the scale's ``max_edges`` and ``real_data`` shape a graph, so experiments whose
        scales differ elsewhere (per-experiment overrides) share the cached graph.
        """
        return _load_dataset(self, scale.max_edges, scale.real_data, scale.keep_degree)

    def with_(self, **changes) -> "Dataset":
        return replace(self, **changes)


def name_seed(name: str) -> int:
    """A stand-in's seed from its dataset's name (CRC-32): each dataset its own graph."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _assign_labels(n: int, count: int, distribution: str, seed: int, exponent: float = 1.0) -> np.ndarray:
    if distribution == "power_law":
        return power_law_labels(n, count, exponent, seed=seed)
    if distribution == "uniform":
        return uniform_labels(n, count, seed=seed)
    raise ValueError(f"unknown label distribution {distribution!r}")


def standin_size(dataset: Dataset, max_edges: int | None, keep_degree: bool = False) -> tuple[int, int]:
    """(|V|, |E|) of ``dataset``'s R-MAT stand-in under ``max_edges``: with ``keep_degree`` the
    paper's average degree (|V| shrunk with |E|), else at most degree 6 on the shrunk graph."""
    n, m = dataset.num_vertices, dataset.num_edges
    if max_edges is not None and m > max_edges:
        n = int(n * max_edges / m) if keep_degree else max(int(n * max_edges / m), min(n, max_edges // 3))
        n = max(n, 2)
        m = max_edges
    return n, min(m, n * (n - 1) // 2)


def graph_key(dataset: Dataset, scale: Scale) -> tuple:
    """What identifies the graph ``dataset`` becomes at ``scale`` (without building it): two
    datasets with equal keys run on the same graph."""
    if dataset.path is not None and scale.real_data:
        labels = (dataset.vertex_labels, dataset.label_distribution, dataset.seed, dataset.label_exponent) \
            if dataset.relabel else ()
        return ("file", dataset.path, dataset.symmetrize, labels, dataset.edge_labels)
    n, m = standin_size(dataset, scale.max_edges, scale.keep_degree)
    labels = min(dataset.vertex_labels, max(1, n // 4))
    return ("rmat", n, m, dataset.rmat_abcd, dataset.graph_seed, dataset.seed, labels,
            dataset.label_distribution if labels > 1 else "", dataset.label_exponent if labels > 1 else 0,
            dataset.edge_labels)


def graph_size(dataset: Dataset, scale: Scale) -> str:
    """The size of the graph run at ``scale``: ``nV/mE`` for a stand-in, the file name otherwise."""
    key = graph_key(dataset, scale)
    return f"{key[1]:,}V/{key[2]:,}E" if key[0] == "rmat" else str(key[1])


CACHE_MIN_EDGES = 2_000_000
"""Stand-ins with more edges than this are kept on disk after they are first drawn (:func:`graph_cache_dir`)."""


def graph_cache_dir() -> Path:
    """Where large stand-ins are cached: ``$GPUSM_GRAPH_CACHE``, else ``.cache/graphs`` in the checkout
    (ignored by git, so it stays on a machine between runs)."""
    configured = os.environ.get("GPUSM_GRAPH_CACHE")
    return Path(configured).expanduser() if configured else Path(__file__).resolve().parents[2] / ".cache" / "graphs"


def standin_edges(n: int, m: int, abcd: tuple, seed: int) -> Graph:
    """The unlabelled R-MAT stand-in of ``n`` vertices and ``m`` edges drawn from ``seed``; above
    :data:`CACHE_MIN_EDGES` edges read from (or written to) the disk cache (:func:`cached_standin`)."""
    if m <= CACHE_MIN_EDGES:
        a, b, c, d = abcd
        return rmat(n, m, a, b, c, d, seed=seed)
    return cached_standin(n, m, abcd, seed)


def cached_standin(n: int, m: int, abcd: tuple, seed: int) -> Graph:
    """The R-MAT stand-in read from the disk cache, or drawn and written there: one writer at a
    time per stand-in (a lock file beside it); a writer killed mid-write leaves a temporary file
    that the next writer removes, never a partial cache file."""
    path = standin_cache_path(n, m, abcd, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)      # another process drawing it: wait, then read it
        if path.exists():
            with np.load(path) as saved:
                return Graph(saved["offsets"], saved["neighbors"], np.zeros(n, np.int32),
                             name=f"rmat_n{n}_m{m}_s{seed}", meta=_cached_meta(saved), validate=False)
        _remove_partial_writes(path)
        a, b, c, d = abcd
        graph = rmat(n, m, a, b, c, d, seed=seed)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
        np.savez(temp, offsets=graph.offsets, neighbors=graph.neighbors,
                 meta=np.array(repr(sorted(graph.meta.items()))))
        os.replace(temp, path)
    return graph


def _remove_partial_writes(path: Path) -> None:
    """Remove the temporary files of writers of ``path`` that were killed (hold its lock)."""
    for partial_write in path.parent.glob(f".{path.name}.*.tmp.npz"):
        partial_write.unlink(missing_ok=True)


def standin_cache_path(n: int, m: int, abcd: tuple, seed: int) -> Path:
    """Where :func:`standin_edges` keeps the stand-in of these parameters."""
    key = hashlib.sha256(repr(("rmat", n, m, tuple(abcd), seed)).encode()).hexdigest()[:20]
    return graph_cache_dir() / f"rmat-{n}-{m}-{key}.npz"


def standin_spec(dataset: Dataset, scale: Scale) -> tuple | None:
    """(n, m, abcd, seed) of the stand-in ``dataset`` becomes at ``scale`` where it is kept in the
    disk cache (more than :data:`CACHE_MIN_EDGES` edges); None for a file or a smaller stand-in."""
    if dataset.path is not None and scale.real_data:
        return None
    n, m = standin_size(dataset, scale.max_edges, scale.keep_degree)
    return (n, m, tuple(dataset.rmat_abcd), dataset.graph_seed) if m > CACHE_MIN_EDGES else None


PREFETCH_BYTES_PER_EDGE = 128
"""Peak memory of drawing one stand-in, per edge (measured about 90 bytes: the candidate keys,
their sort and the CSR build), for :class:`StandinPrefetch`'s number of processes."""


class StandinPrefetch:
    """Draws the disk-cached stand-ins a run will load, in the background, in the order it will
    load them: up to ``processes`` Python processes at a time (one core left to the run, and no
    more draws at once than half the host's memory holds at :data:`PREFETCH_BYTES_PER_EDGE`),
    each drawing one missing stand-in into the cache (:func:`cached_standin`, under its lock), so
    the run, reaching that graph, waits on the lock for the draw under way, or reads the file,
    rather than drawing it alone on one core; the graphs are the ones the run would draw (same
    function, same seeds). Leaving the ``with`` block stops the draws still running (a run that
    ends early, at its budget, does not wait for graphs it never reached) and removes what they
    had half written. One stand-in, or none missing: no process."""

    def __init__(self, specs, processes: int | None = None):
        seen, self.specs = set(), []
        for spec in specs:
            if spec is not None and spec not in seen and not standin_cache_path(*spec).exists():
                seen.add(spec)
                self.specs.append(spec)
        if processes is None:
            largest = max((spec[1] for spec in self.specs), default=1)
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            fit = memory // 2 // (PREFETCH_BYTES_PER_EDGE * largest)
            processes = min(max(1, (os.cpu_count() or 2) - 1), max(1, fit))
        self.processes = max(1, min(int(processes), len(self.specs)))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: list[subprocess.Popen] = []

    def __enter__(self) -> StandinPrefetch:
        if len(self.specs) > 1:
            self._thread = threading.Thread(target=self._draw_all, name="stand-in prefetch", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        for spec in self.specs:                  # the draws stopped mid-write: their temporary files
            path = standin_cache_path(*spec)
            with open(path.with_name(f".{path.name}.lock"), "w") as lock:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                _remove_partial_writes(path)

    def _draw_all(self) -> None:
        """Start a process per stand-in, ``processes`` at a time, until all ended or told to stop."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        waiting = list(self.specs)
        while (waiting or self._running) and not self._stop.is_set():
            self._running = [p for p in self._running if p.poll() is None]
            while waiting and len(self._running) < self.processes:
                n, m, abcd, seed = waiting.pop(0)
                code = ("from experiments.harness.workloads import cached_standin; "
                        f"cached_standin({n}, {m}, {tuple(abcd)!r}, {seed})")
                self._running.append(subprocess.Popen([sys.executable, "-c", code], env=env,
                                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self._stop.wait(0.05)
        for process in self._running:
            process.kill()
        for process in self._running:
            process.wait()
        self._running = []

    def describe(self) -> str:
        edges = sum(spec[1] for spec in self.specs)
        return (f"drawing {len(self.specs)} stand-ins ({edges / 1e6:,.0f}M edges) in the background, "
                f"{self.processes} at a time")


def _cached_meta(saved) -> dict:
    """The generator's metadata of a cached stand-in (as :func:`standin_edges` saved it)."""
    import ast

    return dict(ast.literal_eval(str(saved["meta"])))


@lru_cache(maxsize=6)
def _load_dataset(dataset: Dataset, max_edges: int | None, real_data: bool, keep_degree: bool = False) -> Graph:
    real = dataset.path is not None and real_data
    if real:
        path = data_dir() / dataset.path
        if not path.exists():
            raise FileNotFoundError(f"dataset {dataset.name}: {path} not found (set GPUSM_DATA)")
        graph = load_graph(path, symmetrize=dataset.symmetrize)
        origin = f"{dataset.path}"
    else:
        n, m = standin_size(dataset, max_edges, keep_degree)
        graph = standin_edges(n, m, dataset.rmat_abcd, dataset.graph_seed)
        origin = f"R-MAT stand-in {n}V/{m}E"
    n = graph.num_vertices
    meta = dict(graph.meta, dataset=dataset.name, origin=origin, stand_in=not real)
    if dataset.relabel or not real:
        # A stand-in keeps about 4 vertices per label, so that its queries are not all trivial.
        count = dataset.vertex_labels if real else min(dataset.vertex_labels, max(1, n // 4))
        labels = (np.zeros(n, np.int32) if count <= 1
                  else _assign_labels(n, count, dataset.label_distribution, dataset.seed,
                                      dataset.label_exponent))
        graph = graph.replace(labels=labels)
    if dataset.edge_labels > 1:
        src, dst, _ = graph.edges()
        elabels = _assign_labels(len(src), dataset.edge_labels, dataset.label_distribution,
                                 dataset.seed + 1)
        graph = Graph.from_edges(n, src, dst, labels=graph.labels, edge_labels=elabels,
                                 directed=graph.directed)
    name = dataset.name if real else f"{dataset.name} ({origin})"
    return graph.replace(name=name, meta=meta)


@dataclass(frozen=True)
class QuerySpec:
    """A query set: files (``glob`` under the data folder, ``counts`` file) or generated.

    ``kind``: ``files``, ``induced`` (EGSM/gMatch random walk, induced; ``shape`` ``sparse`` or
    ``dense`` keeps only queries of that density class), ``walk`` (GSI random walk;
    ``num_edges`` targets |E(Q)|), ``stwig`` (N vertices and about 2N edges cut out of the data
    graph, sizes ``sizes``: :func:`stwig_data_query`), ``shape`` (``path``, ``tree`` or
    ``cycle`` cut out of the data graph: :func:`shaped_query`), ``patterns`` (``names`` of
    P1-P9, unlabelled). Every generated query but the patterns has at least one match: the
    embedding it was cut from.
    """

    kind: str
    size: int = 12
    count: int = 100
    glob: str = ""
    counts: str = ""
    num_edges: int | None = None
    sizes: tuple = ()
    names: tuple = ()
    max_known_count: int | None = None     # files: keep queries whose known count is at most this
    seed: int = 11
    shape: str = ""                        # shape: path | tree | cycle; induced: "" | sparse | dense

    def count_at(self, scale: Scale) -> int:
        """How many queries the set has at ``scale`` (without building them, except query files)."""
        count = self.count if scale.queries_per_set is None else min(self.count, scale.queries_per_set)
        if self.kind == "files" and scale.real_data:
            return len(self._files(count)[0])
        if self.kind == "patterns":
            return len(self.names[:count])
        return count

    def build(self, data: Graph, dataset: Dataset, scale: Scale) -> tuple[list[Graph], dict[str, int]]:
        """The queries at ``scale`` and the exact counts known for them (by query name)."""
        count = self.count if scale.queries_per_set is None else min(self.count, scale.queries_per_set)
        if self.kind == "files" and scale.real_data:
            return self._files(count)
        if self.kind == "patterns":
            return [pattern(n) for n in self.names[:count]], {}
        size = self.size
        if scale.max_query_vertices is not None:
            size = min(size, scale.max_query_vertices)
        if self.kind == "stwig":
            sizes = [min(s, size) if scale.max_query_vertices else s for s in (self.sizes or (size,))]
            return [stwig_data_query(data, sizes[i % len(sizes)], seed=self.seed + i)
                    .replace(name=f"stwig_{sizes[i % len(sizes)]}_{i}") for i in range(count)], {}
        if self.kind == "shape":
            return [shaped_query(data, size, self.shape, seed=self.seed + i)
                    .replace(name=f"{self.shape}_{size}_{i}") for i in range(count)], {}
        if self.kind not in ("walk", "induced", "files"):
            raise ValueError(f"unknown query kind {self.kind!r}")
        if self.kind == "induced" and self.shape:
            return density_class_queries(data, count, size, self.shape, seed=self.seed), {}
        edges = self.num_edges if scale.max_query_vertices is None else None
        if self.kind == "walk" and edges is not None:
            generated = query_set(data, count, size, seed=self.seed, method="gsi", num_edges=edges)
        else:
            generated = query_set(data, count, size, seed=self.seed,
                                  method="walk" if self.kind == "walk" else "induced")
        return list(generated.queries), {}

    def key(self, scale: Scale) -> tuple:
        """What identifies the queries :meth:`build` makes at ``scale`` on a given graph."""
        count = self.count if scale.queries_per_set is None else min(self.count, scale.queries_per_set)
        size = self.size if scale.max_query_vertices is None else min(self.size, scale.max_query_vertices)
        sizes = tuple(min(s, size) if scale.max_query_vertices else s for s in (self.sizes or (size,)))
        if self.kind == "files" and scale.real_data:
            return ("files", self.glob, self.counts, self.max_known_count, count)
        if self.kind == "patterns":
            return ("patterns", self.names[:count])
        edges = self.num_edges if scale.max_query_vertices is None else None
        return (self.kind, size, sizes if self.kind == "stwig" else (), count, self.seed, self.shape,
                edges if self.kind == "walk" else None)

    def _files(self, count: int) -> tuple[list[Graph], dict[str, int]]:
        root = data_dir()
        source = root / self.glob
        files = sorted(root.glob(self.glob), key=lambda p: natural_key(p.name)) if "*" in self.glob else source
        if not files:
            raise FileNotFoundError(f"no query files match {source}")
        queries = load_query_set(files)
        known = read_counts(root / self.counts) if self.counts else {}
        if self.max_known_count is not None:
            queries = [q for q in queries if q.name in known and known[q.name] <= self.max_known_count]
        queries = queries[:count]
        return queries, {q.name: known[q.name] for q in queries if q.name in known}


def _cut_starts(data: Graph, seed: int, any_vertex: bool = False) -> tuple[np.random.Generator, np.ndarray]:
    """The random generator and the start vertices of a query cut out of ``data`` (vertices with
    an edge, or all with ``any_vertex``); ValueError for directed or edgeless data."""
    if data.directed:
        raise ValueError("query generators take undirected data graphs")
    starts = np.arange(data.num_vertices) if any_vertex else np.flatnonzero(data.degrees > 0)
    if starts.size == 0:
        raise ValueError(f"data graph {data.name!r} has no edges")
    return np.random.default_rng(seed), starts


def _neighbours(data: Graph, v: int) -> np.ndarray:
    return data.neighbors[data.offsets[v]:data.offsets[v + 1]]


def _cut_query(data: Graph, order: list[int], edges: list[tuple[int, int]], name: str, meta: dict) -> Graph:
    """The query on data vertices ``order`` with ``edges`` (pairs of positions in ``order``),
    carrying the data's vertex labels and, where it has them, the data edges' labels."""
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    elab = None
    if data.edge_labels is not None:     # each data edge's label, from the source's sorted adjacency
        elab = np.array([data.edge_labels[data.offsets[order[a]]
                                          + int(np.searchsorted(_neighbours(data, order[a]), order[b]))]
                         for a, b in edges], dtype=np.int32)
    labels = data.labels[np.asarray(order, dtype=np.int64)]
    return Graph.from_edges(len(order), src, dst, labels, elab, name=name, meta=meta)


def stwig_data_query(data: Graph, num_vertices: int, *, seed: int, max_tries: int = 100) -> Graph:
    """An STwig §5 query cut out of ``data``: N vertices and 2N of the edges among them (all of
    them where there are fewer), with the data's labels.

    The paper's sentence ("N nodes, generated by adding 2N edges randomly") does not say where
    the labels and edges come from; random graphs with random labels
    (:func:`common.graph.generate.stwig_query`) have no match on the paper's R-MAT graphs, so the
    queries are cut out of the data graph and each has at least the embedding it was cut from.
    A random walk's vertices on these graphs have hardly more than N - 1 edges among them, so
    the vertex set grows greedily: from a random vertex, each step adds a neighbour of the set
    with the most edges into it (ties broken at random). The query keeps the N - 1 edges that
    reached each vertex and random other edges among the N vertices, up to 2N in all.
    """
    k = int(num_vertices)
    if k < 1:
        raise ValueError(f"num_vertices must be >= 1, got {k}")
    rng, starts = _cut_starts(data, seed, any_vertex=k == 1)
    neighbours = partial(_neighbours, data)
    for _ in range(max_tries):
        order = [int(starts[rng.integers(starts.size)])]
        index = {order[0]: 0}
        links: dict[int, int] = {}
        parent: dict[int, int] = {}
        tree = []
        while len(order) < k:
            for w in neighbours(order[-1]).tolist():
                if w not in index:
                    links[w] = links.get(w, 0) + 1
                    parent.setdefault(w, len(order) - 1)
            if not links:
                break
            best = max(links.values())
            ties = [w for w, c in links.items() if c == best]
            v = ties[int(rng.integers(len(ties)))]
            del links[v]
            index[v] = len(order)
            tree.append((parent[v], index[v]))
            order.append(v)
        if len(order) < k:
            continue
        pairs = [(a, b) for a in range(k) for b in range(a + 1, k)
                 if (a, b) not in tree and (b, a) not in tree
                 and _adjacent(neighbours(order[a]), order[b])]
        extra = [pairs[i] for i in rng.permutation(len(pairs))[:max(0, 2 * k - len(tree))]]
        meta = {"generator": "stwig_data", "num_vertices": k, "num_edges_target": 2 * k, "seed": int(seed),
                "data": data.name, "data_vertices": order}
        return _cut_query(data, order, tree + extra, f"stwig_{k}_s{seed}", meta)
    raise ValueError(f"no connected {k}-vertex query found in {data.name!r} after {max_tries} random starts")


def _adjacent(sorted_neighbours: np.ndarray, v: int) -> bool:
    i = int(np.searchsorted(sorted_neighbours, v))
    return i < sorted_neighbours.size and int(sorted_neighbours[i]) == v


SHAPES = ("path", "tree", "cycle")
"""Query shapes of EGSM Fig. 11(e/f) that :func:`shaped_query` cuts out of a data graph (the
other two, sparse and dense, are induced queries split by average degree: :func:`density_class_queries`)."""


def shaped_query(data: Graph, num_vertices: int, shape: str, *, seed: int, max_tries: int = 200) -> Graph:
    """A ``path``, ``tree`` or ``cycle`` query of ``num_vertices`` vertices cut out of ``data``.

    EGSM §6.3 names the shapes but not how they were made. Here: a path is a self-avoiding
    random walk (its k - 1 steps are the edges); a tree grows from a random vertex by attaching a
    random neighbour of a random tree vertex (its k - 1 discovery edges); a cycle is a
    self-avoiding walk whose last vertex is adjacent to its first (the k steps and the closing
    edge). Labels come from ``data``, so each query has at least the embedding it was cut
    from. ValueError when no such subgraph is found in ``max_tries`` random starts.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown query shape {shape!r}; choose one of {SHAPES}")
    k = int(num_vertices)
    if k < (3 if shape == "cycle" else 2):
        raise ValueError(f"a {shape} query needs at least {3 if shape == 'cycle' else 2} vertices, got {k}")
    rng, starts = _cut_starts(data, seed)
    neighbours = partial(_neighbours, data)
    for _ in range(max_tries):
        order = [int(starts[rng.integers(starts.size)])]
        seen = {order[0]: 0}
        edges = []
        for _ in range(50 * k):
            if len(order) == k:
                break
            u = order[-1] if shape != "tree" else order[int(rng.integers(len(order)))]
            fresh = [int(v) for v in neighbours(u) if int(v) not in seen]
            if not fresh:
                if shape != "tree":
                    break                      # a path or cycle that cannot go on: start again
                continue
            v = fresh[int(rng.integers(len(fresh)))]
            seen[v] = len(order)
            edges.append((seen[u], seen[v]))
            order.append(v)
        if len(order) < k:
            continue
        if shape == "cycle":
            if order[0] not in set(int(v) for v in neighbours(order[-1])):
                continue
            edges.append((k - 1, 0))
        meta = {"generator": f"{shape}_query", "num_vertices": k, "seed": int(seed), "data": data.name,
                "data_vertices": order}
        return _cut_query(data, order, edges, f"{shape}_{k}_s{seed}", meta)
    raise ValueError(f"no {shape} of {k} vertices found in {data.name!r} after {max_tries} random starts")


def density_class_queries(data: Graph, count: int, num_vertices: int, density: str, *, seed: int,
                          max_draws: int = 50) -> list[Graph]:
    """``count`` induced random-walk queries (:func:`common.graph.generate.query_set`, ``induced``) of the
    density class ``density`` (sparse: average degree < 3, dense: >= 3; gMatch Fig. 14a, EGSM
    Fig. 11e), drawn in batches until enough are found. ValueError after ``max_draws * count`` draws.
    """
    if density not in ("sparse", "dense"):
        raise ValueError(f"density must be 'sparse' or 'dense', got {density!r}")
    kept, batch = [], 0
    while len(kept) < count:
        if batch * max(count, 1) >= max_draws * max(count, 1):
            raise ValueError(f"only {len(kept)} of {count} {density} {num_vertices}-vertex queries found "
                             f"in {max_draws * count} draws on {data.name!r}")
        drawn = query_set(data, max(count, 1), num_vertices, seed=seed + 7919 * batch, method="induced").queries
        kept += [q for q in drawn if classify_density(q) == density]
        batch += 1
    return [q.replace(name=f"{density}_{num_vertices}_{i}") for i, q in enumerate(kept[:count])]


def read_counts(path: Path) -> dict[str, int]:
    """Exact counts by query name: a counts file (:func:`common.graph.io.read_expected_counts`) or an
    authors' results CSV (``query,count,search_ms,...,status``; rows with a status other than
    ``ok`` have no count and are left out)."""
    if Path(path).suffix != ".csv":
        return read_expected_counts(path)
    return {name: int(row["count"]) for name, row in read_authors_csv(path).items() if row["status"] == "ok"}


def read_authors_csv(path: Path) -> dict[str, dict]:
    """The gMatch authors' results per query (``count``, ``search_ms``, ``wall_ms``, ``status``);
    a file without a status column (every query solved) reads as status ``ok``."""
    frame = pd.read_csv(path)
    if "status" not in frame:
        frame["status"] = "ok"
    return {row["query"]: row for row in frame.to_dict("records")}


# ---------------------------------------------------------------------- the real graphs
HPRD = Dataset("HPRD", 9460, 34998, vertex_labels=307, relabel=False, path="hprd/HPRD.graph")
YEAST = Dataset("yeast", 3112, 12519, vertex_labels=71, relabel=False, path="yeast/yeast.graph")
GITHUB = Dataset("GitHub", 37700, 289003, vertex_labels=16, relabel=False, path="gmatch_test/data.graph")
ENRON = Dataset("Enron", 36692, 183831, vertex_labels=16, path="snap/email-Enron.txt.gz",
                symmetrize=True)

HPRD_DENSE_16 = QuerySpec("files", size=16, glob="hprd/queries", counts="hprd/expected_counts_1_100.txt")
GITHUB_Q = QuerySpec("files", size=7, count=11, glob="gmatch_test/queries",
                     counts="gmatch_test/expected_counts.txt")
GITHUB_RW12 = QuerySpec("files", size=12, count=30, glob="gmatch_test/rw12/q12_*.graph",
                        counts="gmatch_test/rw12/authors_gmatch_h200.csv")
"""30 random-walk 12-vertex GitHub queries with the gMatch authors' counts (H200 build, 8 s limit);
those they did not finish have no count."""
GMATCH_AUTHORS = {"github": "gmatch_test/authors_gmatch_h200.csv", "rw12": "gmatch_test/rw12/authors_gmatch_h200.csv"}
"""The gMatch authors' own results (count, search_ms) for GitHub Q_0-Q_10 and rw12."""


def load_set(dataset: Dataset, spec: QuerySpec) -> tuple[Graph, list[Graph], dict[str, int]]:
    """(data graph, queries, exact counts by query name) of one query set at full scale."""
    data = dataset.load(SCALES["full"])
    queries, known = spec.build(data, dataset, SCALES["full"])
    return data, queries, known


def yeast_queries(kind: str, max_known_count: int | None = 10**7) -> QuerySpec:
    """yeast's ``query_<kind>_*`` set (e.g. ``dense_8``), keeping queries with a known count <= the cap."""
    size = int(kind.rsplit("_", 1)[1])
    return QuerySpec("files", size=size, glob=f"yeast/queries/query_{kind}_*.graph",
                     counts="yeast/expected_counts.txt", max_known_count=max_known_count)


def scaled_sweep(points: tuple, scale_name: str, largest: int | None = None) -> tuple:
    """A data-size sweep at ``scale_name``: stand-ins shrunk in proportion, the largest to the scale's cap.

    Capping every point at ``max_edges`` would make all sizes equal; this keeps their ratios.
    """
    cap = SCALES[scale_name].max_edges
    largest = largest or max(p.dataset.num_edges for p in points)
    return tuple(replace(p, dataset=p.dataset.with_(
        num_vertices=max(16, p.dataset.num_vertices * cap // largest),
        num_edges=max(16, p.dataset.num_edges * cap // largest))) for p in points)


# ---------------------------------------------------------------------- checks and benchmarks
YEAST_KINDS = ("dense_8", "sparse_8", "dense_16")
"""The yeast query sets the checks and benchmarks use (known counts <= 10^7)."""
FULL = SCALES["full"]

KNOWN_COUNTS = {
    "hprd": (HPRD, (HPRD_DENSE_16,)),
    "yeast": (YEAST, tuple(yeast_queries(kind) for kind in YEAST_KINDS)),
    "github": (GITHUB, (GITHUB_Q,)),
    "rw12": (GITHUB, (GITHUB_RW12,)),
}
"""Query sets with exact counts from outside gpusm: HPRD dense-16, yeast, GitHub Q_0-Q_10, and
the gMatch authors' rw12 counts (rw12 queries they did not finish are kept, without a count)."""

CROSS_CHECKED = {
    "patterns": (GITHUB.with_(name="GitHub (unlabelled)", vertex_labels=1, relabel=True),
                 (QuerySpec("patterns", count=9, names=tuple(f"P{i}" for i in range(1, 10))),)),
    "enron": (ENRON, (QuerySpec("induced", size=8, count=20, seed=8),)),
}
"""Query sets without exact counts (P1-P9 on unlabelled GitHub, up to ~10^10; random induced
8-vertex queries on Enron with 16 power-law labels): the engines are checked against each other."""

CHECK_SETS = {**KNOWN_COUNTS, **CROSS_CHECKED}


@dataclass(frozen=True)
class CheckSet:
    """A data graph and its queries, each with its exact count (None: not known, cross-checked)."""

    name: str
    data: Graph
    queries: list[tuple[Graph, int | None]]


def check_set(name: str, count: int | None = None, smallest: bool = False) -> CheckSet:
    """The query set ``name`` of :data:`CHECK_SETS` at full scale (real data).

    ``count`` keeps that many queries (per yeast kind: taken in turn from the kinds), the first
    ones, or with ``smallest`` those with the fewest known embeddings (then fewest vertices).
    """
    if name not in CHECK_SETS:
        raise ValueError(f"unknown check set {name!r}; choose from {', '.join(CHECK_SETS)}")
    dataset, specs = CHECK_SETS[name]
    data = dataset.load(FULL)
    groups = []
    for spec in specs:
        queries, known = spec.build(data, dataset, FULL)
        pairs = [(q, known.get(q.name)) for q in queries]
        if smallest:
            pairs.sort(key=lambda p: (p[1] is None, p[1] or 0, p[0].num_vertices, p[0].num_edges))
        groups.append(pairs)
    pairs = [p for row in zip_longest(*groups) for p in row if p is not None]
    return CheckSet(name, data, pairs if count is None else pairs[:count])


# ---------------------------------------------------------------------- gMatch's slow-path families
@dataclass(frozen=True)
class QueryFamily:
    """A seeded family of induced random-walk queries (:func:`heavy_family`): ``num_vertices``
    vertices, between ``min_edges`` and ``max_edges`` edges, and ``member`` true of the query."""

    num_vertices: int
    min_edges: int
    max_edges: int | None
    member: object = None        # Graph -> bool, None: every query of the size and edge range
    what: str = ""

    def holds(self, query: Graph) -> bool:
        """Whether ``query`` belongs to the family."""
        edges = query.num_edges
        if query.num_vertices != self.num_vertices or edges < self.min_edges:
            return False
        if self.max_edges is not None and edges > self.max_edges:
            return False
        return self.member is None or bool(self.member(query))


def cycle_length(query: Graph) -> int:
    """The length of the one cycle of a connected query with as many edges as vertices (the core
    left once degree-one vertices are peeled off, repeatedly); 0 for a query without that shape."""
    n = query.num_vertices
    if query.num_edges != n or not query.is_connected():
        return 0
    degree = np.diff(query.offsets).astype(np.int64)
    alive = np.ones(n, np.bool_)
    peel = [u for u in range(n) if degree[u] == 1]
    while peel:
        u = peel.pop()
        alive[u] = False
        for w in query.neighbors[query.offsets[u]:query.offsets[u + 1]]:
            if alive[w]:
                degree[w] -= 1
                if degree[w] == 1:
                    peel.append(int(w))
    return int(alive.sum())


def no_countable_leaf(query: Graph) -> bool:
    """Whether gMatch's plan (:func:`gmatch.order.build_plan`, leaves deferred) has no countable
    leaf: its count mode can only count the last position."""
    from gmatch.order import build_plan

    return build_plan(query, defer_leaves=True).free_leaves == 0


HEAVY_FAMILIES = {
    "dense12": QueryFamily(12, 18, None, what="12 vertices, at least 18 edges: a dense query with few "
                           "embeddings, whose cost is the probe and the candidate graph, not the leaves"),
    "cyclic8": QueryFamily(8, 8, 10, lambda q: _longest_cycle_at_least(q, 5),
                           what="8 vertices, 8 to 10 edges and a cycle of at least five vertices: deep "
                           "levels with wide rows, where leaf counting does not reach the cost"),
    "pendant-cycle": QueryFamily(8, 8, 8, lambda q: 4 <= cycle_length(q) <= 6,
                                 what="8 vertices and 8 edges: one cycle of 4 to 6 vertices with pendant "
                                 "trees (huge counts from few rows: the data-graph probe's worst case)"),
    "noleaf12": QueryFamily(12, 12, 17, no_countable_leaf,
                            what="12 vertices, 12 to 17 edges and no countable leaf: count mode "
                            "counts only the last position"),
}
"""Query families that expose gMatch's slow paths on GitHub (induced random-walk queries, seeded;
each family's ``what`` says which path)."""


def _longest_cycle_at_least(query: Graph, length: int) -> bool:
    """Whether ``query`` has a simple cycle of at least ``length`` vertices (a DFS over simple
    paths; the families' queries have at most 12 vertices)."""
    n = query.num_vertices
    adj = [set(query.neighbors[query.offsets[u]:query.offsets[u + 1]].tolist()) for u in range(n)]

    def extend(path: list[int], seen: set[int]) -> bool:
        for w in adj[path[-1]]:
            if w == path[0] and len(path) >= length:
                return True
            if w not in seen and w > path[0]:       # the cycle's smallest vertex starts it
                seen.add(w)
                path.append(w)
                if extend(path, seen):
                    return True
                path.pop()
                seen.discard(w)
        return False

    return any(extend([u], {u}) for u in range(n))


def heavy_family(data: Graph, family: str, count: int = 50, *, seed: int = 2026,
                 max_draws: int = 200) -> list[Graph]:
    """The first ``count`` induced random-walk queries (:func:`common.graph.generate.random_walk_query`,
    seeds ``seed``, ``seed + 1``, ...) of ``data`` that belong to :data:`HEAVY_FAMILIES`'s
    ``family``, named ``<family>_<i>``. ValueError after ``max_draws * count`` draws."""
    if family not in HEAVY_FAMILIES:
        raise ValueError(f"unknown query family {family!r}; choose from {', '.join(HEAVY_FAMILIES)}")
    spec = HEAVY_FAMILIES[family]
    kept: list[Graph] = []
    for draw in range(max_draws * max(count, 1)):
        if len(kept) == count:
            return kept
        query = random_walk_query(data, spec.num_vertices, seed=seed + draw)
        if not spec.holds(query):
            continue
        kept.append(query.replace(name=f"{family}_{len(kept)}",
                                  meta=dict(query.meta, family=family, family_seed=seed)))
    if len(kept) < count:
        raise ValueError(f"only {len(kept)} of {count} {family} queries in {max_draws * count} draws")
    return kept
