"""The one graph type every engine reads: a validated CSR with vertex and optional edge labels.

Conventions (docs/design.md, "What is counted"):

* Vertices are ``0..n-1``; labels are int32 in ``0..MAX_LABEL`` (2^24 - 1).
* Undirected graphs store each edge in both endpoints' lists; ``num_edges`` counts it once.
  Directed graphs store out-neighbours in the CSR and derive the in-CSR on demand.
* Neighbour lists are sorted ascending, with no duplicates and no self-loops.
* ``edge_labels is None`` means every edge has label 0. A graph built with all-zero edge labels
  stores ``None``, so "unlabelled edges" has exactly one representation (the yeast query files,
  which write ``e u v 0``, load as edge-unlabelled).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from functools import cached_property

import numpy as np

from .bitmasks import connected, neighbour_masks


class InvalidGraphError(ValueError):
    """A graph's arrays violate the CSR invariants listed in the module docstring."""


#: Largest vertex or edge label: label-indexed arrays (frequencies, label offsets, signature
#: groups) are as long as the largest label, so labels must be small consecutive-ish integers.
MAX_LABEL = (1 << 24) - 1


def _check_labels(name: str, labels: np.ndarray) -> None:
    if labels.size == 0:
        return
    low, high = int(labels.min()), int(labels.max())
    if low < 0:
        raise InvalidGraphError(f"{name} must be non-negative, got {low}")
    if high > MAX_LABEL:
        raise InvalidGraphError(f"{name} must be at most {MAX_LABEL:,} (label-indexed arrays are as long "
                                f"as the largest label), got {high:,}: renumber the labels 0..L-1")


def _as_int_array(name: str, values, dtype) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidGraphError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise InvalidGraphError(f"{name} must hold integers, got dtype {array.dtype}")
    if array.size and np.dtype(dtype).itemsize < array.dtype.itemsize:
        info = np.iinfo(dtype)
        if array.min() < info.min or array.max() > info.max:
            raise InvalidGraphError(f"{name} does not fit in {np.dtype(dtype).name}")
    return np.ascontiguousarray(array, dtype=dtype)


@dataclass(frozen=True, eq=False)
class Graph:
    """A labelled graph in CSR form: ``neighbors[offsets[v]:offsets[v+1]]`` are v's
    (out-)neighbours, sorted.

    Build one with :meth:`from_edges` (which sorts, deduplicates and drops self-loops), read one
    with :func:`common.load_graph`, or pass ready CSR arrays, which are validated as they are
    (``validate=False`` skips the check, for arrays that trusted code built valid).

    Parameters
    ----------
    offsets : numpy.ndarray
        ``num_vertices + 1`` row offsets into ``neighbors``.
    neighbors : numpy.ndarray
        The (out-)neighbours of every vertex, each row sorted; an undirected edge is in both rows.
    labels : numpy.ndarray
        One integer label per vertex.
    edge_labels : numpy.ndarray, optional
        One label per entry of ``neighbors`` (None: unlabelled edges).
    directed : bool
        Whether ``neighbors`` holds out-neighbours of a directed graph.
    name : str
        Shown in reports and used as a query's name.
    meta : dict
        Where the graph came from (``source``, ``format``, ``original_ids``, ...).
    validate : bool
        Check the CSR arrays (default True).

    :meth:`replace` returns a copy with some fields changed.

    Examples
    --------
    >>> from common import Graph
    >>> triangle = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 1])
    >>> triangle
    Graph(3 vertices, 3 edges, 2 labels, undirected)
    >>> triangle.num_vertices, triangle.num_edges
    (3, 3)
    """

    offsets: np.ndarray
    neighbors: np.ndarray
    labels: np.ndarray
    edge_labels: np.ndarray | None = None
    directed: bool = False
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False)
    validate: InitVar[bool] = True

    def __post_init__(self, validate: bool):
        offsets = _as_int_array("offsets", self.offsets, np.int64)
        neighbors = _as_int_array("neighbors", self.neighbors, np.int32)
        labels = _as_int_array("labels", self.labels, np.int32)
        edge_labels = self.edge_labels
        if edge_labels is not None:
            edge_labels = _as_int_array("edge_labels", edge_labels, np.int32)
            if edge_labels.shape != neighbors.shape:
                raise InvalidGraphError(
                    f"edge_labels has {edge_labels.size} entries but neighbors has {neighbors.size}")
            _check_labels("edge labels", edge_labels)
            if not edge_labels.any():
                edge_labels = None
        for name, value in (("offsets", offsets), ("neighbors", neighbors), ("labels", labels),
                            ("edge_labels", edge_labels)):
            if value is not None:
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "directed", bool(self.directed))
        _check_labels("vertex labels", labels)
        if validate:
            self._validate()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(cls, num_vertices: int, src, dst, labels=None, edge_labels=None, *,
                   directed: bool = False, name: str = "", meta: dict | None = None) -> "Graph":
        """Build from edge arrays: drops self-loops and duplicate edges, sorts neighbour lists.

        For an undirected graph ``(u, v)`` and ``(v, u)`` are the same edge. A duplicate edge
        given with two different labels is an error (multigraphs are not supported).
        ``labels=None`` gives every vertex label 0.
        """
        n = int(num_vertices)
        if n < 0:
            raise InvalidGraphError(f"num_vertices must be >= 0, got {n}")
        src = _as_int_array("src", src, np.int64)
        dst = _as_int_array("dst", dst, np.int64)
        if src.shape != dst.shape:
            raise InvalidGraphError(f"src has {src.size} entries but dst has {dst.size}")
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            bad = np.flatnonzero((src < 0) | (src >= n) | (dst < 0) | (dst >= n))[0]
            raise InvalidGraphError(
                f"edge {bad} ({src[bad]}, {dst[bad]}) has an endpoint outside 0..{n - 1}")
        elab = None if edge_labels is None else _as_int_array("edge_labels", edge_labels, np.int32)
        if elab is not None and elab.shape != src.shape:
            raise InvalidGraphError(f"edge_labels has {elab.size} entries but there are {src.size} edges")
        if labels is None:
            labels = np.zeros(n, dtype=np.int32)
        labels = _as_int_array("labels", labels, np.int32)
        if labels.size != n:
            raise InvalidGraphError(f"labels has {labels.size} entries for {n} vertices")

        keep = src != dst
        src, dst = src[keep], dst[keep]
        if elab is not None:
            elab = elab[keep]
        if not directed:
            src, dst = np.minimum(src, dst), np.maximum(src, dst)
        key, elab = _unique_edges(src * n + dst, elab, n)
        if not directed:
            src, dst = np.divmod(key, n) if n else (key, key)
            key = np.concatenate([key, dst * n + src])
            if elab is not None:
                elab = np.concatenate([elab, elab])
            if elab is None:
                key.sort()
            else:
                order = np.argsort(key, kind="stable")
                key, elab = key[order], elab[order]
        src, dst = np.divmod(key, n) if n else (key, key)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
        # Valid by construction: skip the O(E log E) symmetry check of __post_init__.
        return cls(offsets, dst.astype(np.int32), labels,
                   None if elab is None else elab.astype(np.int32),
                   directed=directed, name=name, meta=dict(meta or {}), validate=False)

    @classmethod
    def from_networkx(cls, graph, vertex_label: str | None = "label", edge_label: str | None = None,
                      **options) -> "Graph":
        """From a networkx Graph/DiGraph, labels from the named attributes (:func:`common.interop.from_networkx`)."""
        from .interop import from_networkx
        return from_networkx(graph, vertex_label, edge_label, **options)

    @classmethod
    def from_scipy(cls, matrix, labels=None, **options) -> "Graph":
        """From a scipy.sparse adjacency matrix and a label array (:func:`common.interop.from_scipy`)."""
        from .interop import from_scipy
        return from_scipy(matrix, labels, **options)

    def to_networkx(self, vertex_label: str | None = "label", edge_label: str | None = "label"):
        """A networkx Graph/DiGraph with labels in the named attributes (:func:`common.interop.to_networkx`)."""
        from .interop import to_networkx
        return to_networkx(self, vertex_label, edge_label)

    # ------------------------------------------------------------------ validation
    def _validate(self):
        n = self.labels.size
        offsets, nbrs = self.offsets, self.neighbors
        if offsets.size != n + 1:
            raise InvalidGraphError(f"offsets has {offsets.size} entries for {n} vertices (need n+1)")
        if offsets[0] != 0 or offsets[-1] != nbrs.size:
            raise InvalidGraphError(
                f"offsets must run from 0 to len(neighbors)={nbrs.size}, got {offsets[0]}..{offsets[-1]}")
        degrees = np.diff(offsets)
        if degrees.size and degrees.min() < 0:
            raise InvalidGraphError(f"offsets decrease at vertex {int(np.argmin(degrees))}")
        if nbrs.size == 0:
            return
        if nbrs.min() < 0 or nbrs.max() >= n:
            raise InvalidGraphError(f"a neighbour id lies outside 0..{n - 1}")
        rows = np.repeat(np.arange(n, dtype=np.int32), degrees)
        if np.any(rows == nbrs):
            raise InvalidGraphError(f"vertex {int(rows[rows == nbrs][0])} has a self-loop")
        same_row = rows[1:] == rows[:-1]
        if np.any(same_row & (nbrs[1:] <= nbrs[:-1])):
            v = int(rows[1:][same_row & (nbrs[1:] <= nbrs[:-1])][0])
            raise InvalidGraphError(f"neighbour list of vertex {v} is not strictly increasing")
        if not self.directed:
            # Rows are sorted and rows strictly increasing, so ``key`` is sorted: the adjacency is
            # symmetric iff the reversed keys sort to the same array.
            key = rows.astype(np.int64) * n + nbrs
            rkey = nbrs.astype(np.int64) * n + rows
            if self.edge_labels is None:
                if not np.array_equal(key, np.sort(rkey)):
                    raise InvalidGraphError("undirected graph's adjacency is not symmetric")
                return
            order = np.argsort(rkey, kind="stable")
            if not np.array_equal(key, rkey[order]):
                raise InvalidGraphError("undirected graph's adjacency is not symmetric")
            if not np.array_equal(self.edge_labels, self.edge_labels[order]):
                raise InvalidGraphError("an undirected edge has different labels in its two directions")

    # ------------------------------------------------------------------ sizes
    @property
    def num_vertices(self) -> int:
        return int(self.labels.size)

    @property
    def num_edges(self) -> int:
        """Edges counted once (an undirected edge is stored twice in the CSR)."""
        return int(self.neighbors.size if self.directed else self.neighbors.size // 2)

    @property
    def has_edge_labels(self) -> bool:
        return self.edge_labels is not None

    # ------------------------------------------------------------------ derived arrays
    @cached_property
    def degrees(self) -> np.ndarray:
        """Out-degree for directed graphs, degree otherwise (int32)."""
        return np.diff(self.offsets).astype(np.int32)

    @cached_property
    def max_degree(self) -> int:
        return int(self.degrees.max()) if self.num_vertices else 0

    @cached_property
    def num_labels(self) -> int:
        """One more than the largest vertex label (labels index arrays of this length)."""
        return int(self.labels.max()) + 1 if self.num_vertices else 0

    @cached_property
    def label_frequencies(self) -> np.ndarray:
        """``label_frequencies[l]`` = number of vertices with label l (int64, length num_labels)."""
        return np.bincount(self.labels, minlength=self.num_labels).astype(np.int64)

    @cached_property
    def label_offsets(self) -> np.ndarray:
        """CSR over labels: vertices with label l are ``vertices_by_label[label_offsets[l]:label_offsets[l+1]]``."""
        offsets = np.zeros(self.num_labels + 1, dtype=np.int64)
        np.cumsum(self.label_frequencies, out=offsets[1:])
        return offsets

    @cached_property
    def vertices_by_label(self) -> np.ndarray:
        """Vertex ids grouped by label, ascending within a label (int32)."""
        return np.argsort(self.labels, kind="stable").astype(np.int32)

    @cached_property
    def edge_label_frequencies(self) -> np.ndarray:
        """``edge_label_frequencies[l]`` = number of stored (directed) CSR entries with edge label l."""
        if self.edge_labels is None:
            return np.array([self.neighbors.size], dtype=np.int64)
        return np.bincount(self.edge_labels, minlength=self.num_edge_labels).astype(np.int64)

    @cached_property
    def num_edge_labels(self) -> int:
        return int(self.edge_labels.max()) + 1 if self.edge_labels is not None and self.edge_labels.size else 1

    @cached_property
    def in_csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(offsets, neighbors, edge_labels) of the reversed graph; the graph itself if undirected."""
        if not self.directed:
            return self.offsets, self.neighbors, self.edge_labels
        rows = np.repeat(np.arange(self.num_vertices, dtype=np.int32), self.degrees)
        order = np.lexsort((rows, self.neighbors))
        offsets = np.zeros(self.num_vertices + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.neighbors, minlength=self.num_vertices), out=offsets[1:])
        elab = None if self.edge_labels is None else self.edge_labels[order]
        return offsets, rows[order], elab

    @property
    def average_degree(self) -> float:
        """Average number of edge endpoints per vertex, 2|E|/|V| for undirected graphs."""
        if not self.num_vertices:
            return 0.0
        return (2.0 if not self.directed else 1.0) * self.num_edges / self.num_vertices

    # ------------------------------------------------------------------ access
    def neighbors_of(self, v: int) -> np.ndarray:
        return self.neighbors[self.offsets[v]:self.offsets[v + 1]]

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(src, dst, edge_labels) with each edge once (``src < dst`` when undirected)."""
        rows = np.repeat(np.arange(self.num_vertices, dtype=np.int32), self.degrees)
        keep = slice(None) if self.directed else rows < self.neighbors
        elab = None if self.edge_labels is None else self.edge_labels[keep]
        return rows[keep], self.neighbors[keep], elab

    def has_edge(self, u: int, v: int) -> bool:
        row = self.neighbors_of(u)
        i = np.searchsorted(row, v)
        return bool(i < row.size and row[i] == v)

    def is_connected(self) -> bool:
        """Weakly connected (the empty graph counts as connected): a compiled BFS over bitmasks
        for a query-sized graph (<= 64 vertices, where numpy's per-call cost would dominate), a
        vectorised BFS otherwise."""
        n = self.num_vertices
        if n <= 1:
            return True
        if n <= 64:
            return bool(connected(neighbour_masks(self.offsets, self.neighbors)))
        csrs = [(self.offsets, self.neighbors)]
        if self.directed:
            csrs.append(self.in_csr[:2])
        seen = np.zeros(n, dtype=bool)
        seen[0] = True
        frontier = np.zeros(1, dtype=np.int64)
        while frontier.size:
            reached = np.concatenate([gather_rows(o, nb, frontier) for o, nb in csrs])
            frontier = reached[~seen[reached]]  # may repeat a vertex within one level: harmless
            seen[frontier] = True
        return bool(seen.all())

    def replace(self, *, name: str | None = None, meta: dict | None = None, labels=None) -> "Graph":
        """The same adjacency (shared, not re-validated) with a new name, meta or vertex labels."""
        if labels is not None and np.shape(labels) != (self.num_vertices,):
            raise InvalidGraphError(f"labels has shape {np.shape(labels)} for {self.num_vertices} vertices")
        return Graph(self.offsets, self.neighbors, self.labels if labels is None else labels,
                     self.edge_labels, directed=self.directed,
                     name=self.name if name is None else name,
                     meta=dict(self.meta if meta is None else meta), validate=False)

    def same_structure(self, other: "Graph") -> bool:
        """Equal vertices, labels, adjacency, edge labels and direction (names and meta ignored)."""
        def eq(a, b):
            return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
        return (self.directed == other.directed and np.array_equal(self.offsets, other.offsets)
                and np.array_equal(self.neighbors, other.neighbors)
                and np.array_equal(self.labels, other.labels) and eq(self.edge_labels, other.edge_labels))

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        elab = f", {self.num_edge_labels} edge labels" if self.has_edge_labels else ""
        name = f"{self.name!r}: " if self.name else ""
        return (f"Graph({name}{self.num_vertices} vertices, {self.num_edges} edges, "
                f"{self.num_labels} labels{elab}, {kind})")


def gather_rows(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Concatenation of ``values[offsets[r]:offsets[r+1]]`` for r in rows, without a Python loop."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return values[:0]
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return values[shift + np.arange(total)]


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` by sorting (numpy 2.4's ``np.unique`` hashes, which is slower on large arrays)."""
    values = np.sort(values)
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _unique_edges(key: np.ndarray, elab: np.ndarray | None, n: int):
    """Sorted distinct edge keys ``src * n + dst``; a repeated edge with two labels is an error."""
    if elab is None:
        return sorted_unique(key), None
    order = np.argsort(key, kind="stable")
    key, elab = key[order], elab[order]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    clash = ~first[1:] & (elab[1:] != elab[:-1])
    if np.any(clash):
        i = int(np.flatnonzero(clash)[0]) + 1
        u, v = divmod(int(key[i]), n)
        raise InvalidGraphError(f"edge ({u}, {v}) is given twice with labels {elab[i - 1]} and {elab[i]}")
    return key[first], elab[first]
