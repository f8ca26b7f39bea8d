"""Conversions between :class:`~common.graph.model.Graph` and networkx / scipy.sparse, and
:func:`as_graph` (a Graph from a Graph, a path or a networkx graph).

Vertex and edge labels come from attributes the caller names. Integer labels ``>= 0`` are kept
as they are; any other label values (strings, tuples, ...) get integer codes in order of first
appearance, recorded in ``meta["vertex_label_codes"]`` / ``meta["edge_label_codes"]``. A query is
encoded against its data graph's labels (``like=``, or the codes as ``label_codes=``): a label the
data graph has takes its code, any other a code no data label has, so it matches nothing. Node ids
that are not exactly ``0..n-1`` are compacted, the originals kept in ``meta["original_ids"]``,
which is what embeddings are reported in (:func:`common.engine.base.to_original_ids`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import numpy as np

from ..errors import InvalidGraphError
from .model import Graph

_DEFAULT = "label"


class _Absent:
    pass


def is_networkx_graph(obj) -> bool:
    """True for networkx Graph/DiGraph objects (checked without importing networkx)."""
    return type(obj).__module__.startswith("networkx.") and hasattr(obj, "adj") and hasattr(obj, "nodes")


def _all_plain(values: list) -> bool:
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in values)


def _encode(values: list, what: str, codes: Mapping | None, fresh: int = 0) -> tuple[np.ndarray, dict | None]:
    """Integer labels for ``values``. Without ``codes``: kept when all are ints >= 0, else coded
    in order of first appearance. With ``codes`` (label -> code): a label in it takes its code,
    any other a new code from ``max(fresh, largest code + 1)`` up."""
    if codes is None and _all_plain(values):
        return np.asarray(values, dtype=np.int64).reshape(-1), None
    table = dict(codes or {})
    start = max([fresh, *(code + 1 for code in table.values())])
    out = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        try:
            code = table.get(value)
            if code is None:
                code = table[value] = start
                start += 1
        except TypeError:
            raise InvalidGraphError(f"{what} {value!r} is not hashable") from None
        out[i] = code
    return out, {value: table[value] for value in dict.fromkeys(values)}


def _label_table(data: Graph, edges: bool) -> tuple[dict, int]:
    """``data``'s labels as (label -> code, first code no data label has)."""
    codes = data.meta.get("edge_label_codes" if edges else "vertex_label_codes")
    frequencies = data.edge_label_frequencies if edges else data.label_frequencies
    if codes:
        return dict(codes), frequencies.size
    return {int(code): int(code) for code in np.flatnonzero(frequencies)}, frequencies.size


def _attribute(items: Iterable, attr, what: str, key) -> list:
    """``data[attr]`` of each (item, data); every item must have it (the default name may be absent on all)."""
    items = list(items)
    values = [data.get(attr, _Absent) for *_, data in items]
    missing = [key(item) for item, value in zip(items, values) if value is _Absent]
    if missing and len(missing) == len(values) and attr == _DEFAULT:
        return [0] * len(values)
    if missing:
        raise InvalidGraphError(f"{what} {missing[0]!r} has no attribute {attr!r} "
                                f"({len(missing)} of {len(values)} lack it)")
    return values


def from_networkx(graph, vertex_label: str | None = _DEFAULT, edge_label: str | None = None, *,
                  name: str | None = None, label_codes: Mapping | None = None,
                  edge_label_codes: Mapping | None = None, like: Graph | None = None) -> Graph:
    """A :class:`Graph` from a networkx ``Graph`` or ``DiGraph`` (module docstring).

    ``vertex_label``/``edge_label`` name the node and edge attributes holding labels (None: no
    labels); the default ``"label"`` may be absent from every node (then the graph is unlabelled).
    ``like`` is the data graph a query is read for (its labels' codes); ``label_codes`` /
    ``edge_label_codes`` give the codes directly. A data graph's self-loops are dropped (no query
    can use one); a query's (``like`` given) are refused. Multigraphs are refused.
    """
    if not is_networkx_graph(graph):
        raise TypeError(f"expected a networkx Graph or DiGraph, got {type(graph).__name__}")
    if graph.is_multigraph():
        raise InvalidGraphError("multigraphs are not supported: convert to a Graph or DiGraph first")
    loops = [u for u, v in graph.edges() if u == v]
    if loops and like is not None:
        raise InvalidGraphError(f"the query has {len(loops)} self-loop(s), the first on node {loops[0]!r}: "
                                "queries cannot have self-loops")
    nodes = list(graph.nodes)
    n = len(nodes)
    identity = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in nodes) and \
        sorted(int(v) for v in nodes) == list(range(n))
    index = {v: int(v) for v in nodes} if identity else {v: i for i, v in enumerate(nodes)}
    order = sorted(nodes, key=index.__getitem__)
    meta: dict = {"source": "networkx"}
    if loops:
        meta["dropped_self_loops"] = len(loops)
    if not identity:
        ids = np.empty(n, dtype=object)
        ids[:] = order
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in order):
            ids = ids.astype(np.int64)
        meta["original_ids"] = ids
    labels = None
    if vertex_label is not None:
        values = _attribute(((v, graph.nodes[v]) for v in order), vertex_label, "node", key=lambda item: item[0])
        labels, table = _encode(values, "vertex label", *_codes(like, False, label_codes, values))
        if table is not None:
            meta["vertex_label_codes"] = table
    edges = [(u, v, data) for u, v, data in graph.edges(data=True) if u != v]
    src = np.fromiter((index[u] for u, _, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[v] for _, v, _ in edges), dtype=np.int64, count=len(edges))
    elab = None
    if edge_label is not None:
        values = _attribute(edges, edge_label, "edge", key=lambda item: item[:2])
        elab, table = _encode(values, "edge label", *_codes(like, True, edge_label_codes, values))
        if table is not None:
            meta["edge_label_codes"] = table
    if name is None:
        name = str(graph.graph.get("name", "") or "")
    return Graph.from_edges(n, src, dst, labels, elab, directed=graph.is_directed(), name=name, meta=meta)


def _codes(like: Graph | None, edges: bool, codes: Mapping | None, values: list) -> tuple[Mapping | None, int]:
    """(codes, first free code) for :func:`_encode`: the given codes, else ``like``'s labels
    (None when there is no ``like``, or when ``like`` and the values are plain integers)."""
    if codes is not None or like is None:
        return codes, 0
    if not like.meta.get("edge_label_codes" if edges else "vertex_label_codes") and _all_plain(values):
        return None, 0                 # the same integers as the data graph's: kept as they are
    return _label_table(like, edges)


def to_networkx(graph: Graph, vertex_label: str | None = _DEFAULT, edge_label: str | None = _DEFAULT):
    """A networkx ``Graph`` (``DiGraph`` if directed) with labels in the named attributes.

    Nodes are ``meta["original_ids"]`` when present, else ``0..n-1``; labels that were coded on
    the way in are decoded. Edge labels are written only when the graph has them.
    """
    import networkx as nx

    out = nx.DiGraph() if graph.directed else nx.Graph()
    if graph.name:
        out.graph["name"] = graph.name
    ids = graph.meta.get("original_ids")
    nodes = list(range(graph.num_vertices)) if ids is None else [_plain(v) for v in np.asarray(ids)]
    names = _decoder(graph.meta.get("vertex_label_codes"))
    for v, label in zip(nodes, graph.labels.tolist()):
        out.add_node(v, **({} if vertex_label is None else {vertex_label: names(label)}))
    src, dst, elab = graph.edges()
    enames = _decoder(graph.meta.get("edge_label_codes"))
    if elab is None or edge_label is None:
        out.add_edges_from((nodes[u], nodes[v]) for u, v in zip(src.tolist(), dst.tolist()))
    else:
        out.add_edges_from((nodes[u], nodes[v], {edge_label: enames(e)})
                           for u, v, e in zip(src.tolist(), dst.tolist(), elab.tolist()))
    return out


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _decoder(codes: Mapping | None):
    if not codes:
        return int
    back = {code: value for value, code in codes.items()}
    return lambda code: back.get(code, code)


def from_scipy(matrix, labels=None, *, directed: bool = False, edge_labels: bool = False,
               name: str = "", meta: dict | None = None) -> Graph:
    """A :class:`Graph` from a square scipy.sparse adjacency matrix (or array) and a label array.

    Every stored non-zero ``(i, j)`` is an edge; for an undirected graph ``(i, j)`` and ``(j, i)``
    are the same edge, so a symmetric or a triangular matrix both work. ``edge_labels=True``
    reads the entries' integer values as edge labels (then a pair stored twice must agree).
    The diagonal is ignored.
    """
    import scipy.sparse as sp

    if not sp.issparse(matrix):
        raise TypeError(f"expected a scipy.sparse matrix or array, got {type(matrix).__name__}")
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise InvalidGraphError(f"the adjacency matrix must be square, got shape {matrix.shape}")
    coo = sp.coo_matrix(matrix)
    coo.eliminate_zeros()
    coo.sum_duplicates()
    elab = None
    if edge_labels:
        values = coo.data
        if not np.all(np.equal(np.mod(values, 1), 0)) or (values.size and values.min() < 0):
            raise InvalidGraphError("edge_labels=True needs non-negative integer entries")
        elab = values.astype(np.int64)
    n = coo.shape[0]
    return Graph.from_edges(n, coo.row, coo.col, labels, elab, directed=directed, name=name,
                            meta=dict(meta or {}, source="scipy.sparse"))


def as_graph(graph_or_path, vertex_label="label", edge_label=None, like: Graph | None = None) -> Graph:
    """A Graph from a Graph, a file path or a networkx graph (a query takes ``like``'s label codes)."""
    if isinstance(graph_or_path, Graph):
        return graph_or_path
    if isinstance(graph_or_path, (str, os.PathLike)):
        from .io import load_graph

        return load_graph(graph_or_path)
    if is_networkx_graph(graph_or_path):
        return from_networkx(graph_or_path, vertex_label, edge_label, like=like)
    raise TypeError(f"expected a Graph or a path (or a networkx graph), got {type(graph_or_path).__name__}")
