"""One-call matching: :func:`match` and :func:`match_many` create and prepare an engine, convert
the inputs (Graphs, files, networkx graphs) and, with a Dask ``client``, run a query set on a
cluster (:mod:`common.distributed`)."""

from __future__ import annotations

from typing import Iterable

from .distributed import match_many as on_cluster
from .engine.registry import create_engine
from .engine.result import MatchResult
from .graph.interop import as_graph


def match(data, query, engine: str = "cpu", *, limit: int | None = None, collect: bool = False,
          timeout_s: float | None = None, homomorphic: bool = False, vertex_label: str | None = "label",
          edge_label: str | None = None, **engine_options) -> MatchResult:
    """Match one query against one data graph with a registered engine, in one call.

    Parameters
    ----------
    data, query : Graph, str, pathlib.Path or networkx.Graph
        Graphs, files of any supported format, or networkx graphs (labels from the node/edge
        attributes ``vertex_label``/``edge_label``; embeddings then name networkx nodes).
    engine : str
        A registered engine name (default "cpu").
    limit : int, optional
        Stop after this many embeddings (status ``limit``).
    collect : bool
        Also return the embeddings (``MatchResult.embeddings``).
    timeout_s : float, optional
        Per-query deadline; past it the status is ``timeout`` and ``count`` a lower bound.
    homomorphic : bool
        Drop injectivity (where the engine supports it).
    vertex_label, edge_label : str, optional
        networkx attribute names of the labels.
    **engine_options
        Constructor options, e.g. ``device_memory_limit``.

    Returns
    -------
    MatchResult

    Examples
    --------
    >>> from common import Graph, match
    >>> data = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 1])
    >>> result = match(data, Graph.from_edges(2, [0], [1], labels=[0, 1]), collect=True)
    >>> result.count, result.embeddings.tolist()
    (2, [[0, 2], [1, 2]])
    """
    data = as_graph(data, vertex_label, edge_label)
    prepared = create_engine(engine, **engine_options).prepare(data)
    return prepared.match(as_graph(query, vertex_label, edge_label, like=data), limit=limit,
                          collect=collect, timeout_s=timeout_s, homomorphic=homomorphic)


def match_many(data, queries: Iterable, engine: str = "cpu", *, limit: int | None = None,
               collect: bool = False, timeout_s: float | None = None, homomorphic: bool = False,
               vertex_label: str | None = "label", edge_label: str | None = None,
               client=None, **engine_options) -> list[MatchResult]:
    """Match a query set, preparing the data graph once; an engine with batches (``gmatch``,
    ``egsm``: :meth:`Engine.match_batch`) answers small queries together.

    Parameters
    ----------
    data : as for :func:`match`
    queries : iterable of Graph, paths or networkx graphs
    engine, limit, collect, timeout_s, homomorphic, vertex_label, edge_label, **engine_options
        As for :func:`match`; ``limit``, ``collect`` and ``timeout_s`` hold per query.
    client : dask.distributed.Client, optional
        Run every query as a task on the cluster, each worker preparing the data graph once
        (:func:`common.distributed.match_many`; the ``dask`` extra). Queries a dying cluster
        loses run again on the workers that come back; with none back,
        :class:`common.distributed.LostQueries` holds the answered ones and names the rest.

    Returns
    -------
    list of MatchResult
        One per query, in order.

    Examples
    --------
    >>> from common import Graph, match_many
    >>> data = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], labels=[0, 0, 1])
    >>> edge = Graph.from_edges(2, [0], [1], labels=[0, 1])
    >>> [r.count for r in match_many(data, [edge, data])]
    [2, 2]
    """
    if client is not None:
        return on_cluster(data, queries, engine, client=client, limit=limit, collect=collect,
                          timeout_s=timeout_s, homomorphic=homomorphic, vertex_label=vertex_label,
                          edge_label=edge_label, **engine_options)
    data = as_graph(data, vertex_label, edge_label)
    prepared = create_engine(engine, **engine_options).prepare(data)
    return prepared.match_batch([as_graph(q, vertex_label, edge_label, like=data) for q in queries],
                                limit=limit, collect=collect, timeout_s=timeout_s,
                                homomorphic=homomorphic)
