"""CPU engines that wrap the matchers users already have: networkx and python-igraph.

They let the side-by-side comparison (``experiments/papers/compare.py``, ``gpusm demo --peers``) put
gpusm's engines beside what a Python user would otherwise call, every count checked against the
``cpu`` reference. Both count ordered, label-preserving, non-induced embeddings (docs/design.md)
and are registered as ``networkx`` and ``igraph`` when the package is importable
(``pip install -e '.[peers]'``).

- ``networkx``: VF2, ``GraphMatcher.subgraph_monomorphisms_iter`` (``DiGraphMatcher`` for
  directed graphs) with labels matched by ``node_match`` / ``edge_match``; ``timeout_s`` is
  checked inside the label test, so a query stops within one VF2 state of its deadline.
- ``igraph``: ``method="lad"`` is ``get_subisomorphisms_lad(query, domains, induced=False)``
  with label domains (no edge labels); ``method="vf2"`` is ``count_subisomorphisms_vf2`` with
  vertex and edge colours. With ``timeout_s`` a query runs in a forked child process killed at
  the deadline (status ``timeout``, count 0).

Neither supports ``homomorphic=True``; times are host wall-clock times in the ``enumerate`` phase.
docs/decisions.md ("The peers") says why VF2 and why a child process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection

import numpy as np

from ..engine.base import Engine
from ..engine.deadline import Deadline, Stop
from ..engine.result import MatchResult, Status
from ..graph.model import Graph


def installed_peers() -> list[str]:
    """The peer engines registered here: those of ``common.engine.registry.PEER_ENGINES`` whose
    package is importable."""
    from ..engine.registry import PEER_ENGINES, available_engines

    return [name for name in PEER_ENGINES if name in available_engines()]


def _rows(mappings: list, nq: int, collect: bool) -> np.ndarray | None:
    if not collect:
        return None
    return np.asarray(mappings, dtype=np.int32).reshape(-1, nq)


class NetworkXMatcher(Engine):
    """networkx's VF2 subgraph monomorphisms with label matching (module docstring); registry name ``networkx``.

    Parameters
    ----------
    device_memory_limit : int or None
        Accepted and ignored: a CPU engine.
    """

    name = "networkx"
    limitations = {"homomorphic": "networkx's VF2 counts monomorphisms only"}
    contract_notes = {"statistics": "networkx does not expose VF2's order or candidate sets"}
    uses_device = False

    def __init__(self, *, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        self._graph = None

    @staticmethod
    def _to_networkx(graph: Graph):
        import networkx as nx

        out = nx.DiGraph() if graph.directed else nx.Graph()
        out.add_nodes_from((v, {"label": int(label)}) for v, label in enumerate(graph.labels.tolist()))
        src, dst, elab = graph.edges()
        if elab is None:
            out.add_edges_from(zip(src.tolist(), dst.tolist()), label=0)
        else:
            out.add_edges_from((u, v, {"label": e}) for u, v, e in zip(src.tolist(), dst.tolist(), elab.tolist()))
        return out

    def _prepare(self, data: Graph) -> None:
        self._graph = self._to_networkx(data)

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        from networkx.algorithms import isomorphism as iso

        start = time.perf_counter()
        deadline = Deadline(timeout_s, start)

        def same_label(a: dict, b: dict) -> bool:
            deadline.check()
            return a["label"] == b["label"]

        pattern = self._to_networkx(query)
        kind = iso.DiGraphMatcher if query.directed else iso.GraphMatcher
        edge_labelled = query.has_edge_labels or self.data.has_edge_labels
        edge_match = (lambda a, b: a["label"] == b["label"]) if edge_labelled else None
        matcher = kind(self._graph, pattern, node_match=same_label, edge_match=edge_match)
        nq = query.num_vertices
        count, status, reason, mappings = 0, Status.OK, "", []
        try:
            for mapping in matcher.subgraph_monomorphisms_iter():   # data vertex -> query vertex
                count += 1
                if collect:
                    row = [0] * nq
                    for d, q in mapping.items():
                        row[q] = d
                    mappings.append(row)
                if limit is not None and count >= limit:
                    status = Status.LIMIT
                    break
        except Stop:
            status, reason = Status.TIMEOUT, f"networkx search passed its {timeout_s:g} s deadline"
        return MatchResult(self.name, count, status, reason=reason, embeddings=_rows(mappings, nq, collect),
                           phases={"enumerate": time.perf_counter() - start},
                           stats={"algorithm": "networkx VF2 subgraph_monomorphisms_iter"})


def _igraph_count(data, pattern, method: str, domains, colours, collect: bool):
    """(count, mappings or None): one igraph call (run here, or in the child of :meth:`IGraphMatcher._match`)."""
    if method == "lad":
        found = data.get_subisomorphisms_lad(pattern, domains=domains, induced=False)
        return len(found), (found if collect else None)
    if collect:
        found = data.get_subisomorphisms_vf2(pattern, **colours)
        return len(found), found
    return data.count_subisomorphisms_vf2(pattern, **colours), None


def _child(connection, data, pattern, method, domains, colours, collect) -> None:
    try:
        connection.send(("ok", _igraph_count(data, pattern, method, domains, colours, collect)))
    except BaseException as exc:                      # noqa: BLE001 - reported to the parent
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        connection.close()


class IGraphMatcher(Engine):
    """python-igraph's LAD (``method="lad"``) or VF2 (``method="vf2"``) subisomorphisms, non-induced
    (module docstring); registry name ``igraph``.

    Parameters
    ----------
    method : {"lad", "vf2"}
        LAD with labels as domains (no edge labels), or VF2 with vertex and edge colours; both
        non-induced.
    device_memory_limit : int or None
        Accepted and ignored: a CPU engine.
    """

    name = "igraph"
    limitations = {"edge_labels": "igraph's LAD (the default method) takes no edge labels",
                   "homomorphic": "igraph's LAD and VF2 count monomorphisms only",
                   "disconnected": "igraph's LAD needs a connected pattern"}
    supports_edge_labels = True        # vf2 only: lad answers unsupported (unsupported_reason)
    contract_notes = {"statistics": "igraph does not expose LAD's order or domains"}
    uses_device = False
    METHODS = ("lad", "vf2")

    def __init__(self, *, method: str = "lad", device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if method not in self.METHODS:
            raise ValueError(f"unknown igraph method {method!r}; choose one of {self.METHODS}")
        self.method = method
        self._graph = None

    @staticmethod
    def _to_igraph(graph: Graph):
        import igraph

        src, dst, elab = graph.edges()
        out = igraph.Graph(n=graph.num_vertices, edges=list(zip(src.tolist(), dst.tolist())),
                           directed=graph.directed)
        return out, (None if elab is None else elab.tolist())

    def unsupported_reason(self, query: Graph, *, homomorphic: bool = False) -> str:
        if self.method == "lad" and (query.has_edge_labels or self.data.has_edge_labels):
            return "igraph's LAD does not take edge labels (method='vf2' does)"
        return super().unsupported_reason(query, homomorphic=homomorphic)

    def _prepare(self, data: Graph) -> None:
        self._graph, self._edge_colours = self._to_igraph(data)

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        start = time.perf_counter()
        pattern, pattern_colours = self._to_igraph(query)
        data = self.data
        domains, colours = None, {}
        if self.method == "lad":
            offsets, members = data.label_offsets, data.vertices_by_label
            domains = [members[offsets[label]:offsets[label + 1]].tolist() for label in query.labels.tolist()]
        else:
            colours = {"color1": data.labels.tolist(), "color2": query.labels.tolist()}
            if self._edge_colours is not None or pattern_colours is not None:
                colours["edge_color1"] = self._edge_colours or [0] * self._graph.ecount()
                colours["edge_color2"] = pattern_colours or [0] * pattern.ecount()
        args = (self._graph, pattern, self.method, domains, colours, collect)
        if timeout_s is None:
            count, mappings = _igraph_count(*args)
        else:
            outcome = self._in_child(args, timeout_s)
            if outcome is None:
                return MatchResult(self.name, 0, Status.TIMEOUT, phases={"enumerate": time.perf_counter() - start},
                                   reason=f"igraph {self.method} ran past {timeout_s:g} s; "
                                          "its child process was killed")
            count, mappings = outcome
        status = Status.OK
        if limit is not None and count >= limit:
            count, status = limit, Status.LIMIT
            mappings = None if mappings is None else mappings[:limit]
        return MatchResult(self.name, count, status, embeddings=_rows(mappings or [], query.num_vertices, collect),
                           phases={"enumerate": time.perf_counter() - start},
                           stats={"algorithm": f"igraph {self.method}"})

    @staticmethod
    def _in_child(args, timeout_s: float):
        """Run :func:`_igraph_count` in a forked child; None when it is still running at the deadline.

        ``os.fork`` itself where the platform has it: multiprocessing refuses children to a daemonic
        process, which the experiments' runner worker and Dask's workers are; elsewhere a spawned
        multiprocessing child."""
        if hasattr(os, "fork"):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:                                               # the child
                os.close(read_fd)
                _child(Connection(write_fd, readable=False), *args)
                os._exit(0)
            os.close(write_fd)
            receive = Connection(read_fd, writable=False)

            def alive() -> bool:
                return os.waitpid(pid, os.WNOHANG) == (0, 0)

            def kill_and_reap() -> int | None:          # the child is not reaped yet: a zombie at worst
                os.kill(pid, signal.SIGKILL)
                return os.waitpid(pid, 0)[1]
        else:
            context = multiprocessing.get_context("spawn")
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_child, args=(send, *args), daemon=True)
            child.start()
            send.close()
            alive = child.is_alive

            def kill_and_reap() -> int | None:
                child.kill()
                child.join()
                return child.exitcode
        try:
            if not receive.poll(max(timeout_s, 0.0)):
                kill_and_reap()
                return None
            kind, value = receive.recv()
        except EOFError:
            kind, value = "error", f"the igraph child process died (exit status {kill_and_reap()})"
        else:
            if alive():
                kill_and_reap()
        finally:
            receive.close()
        if kind == "error":
            raise RuntimeError(value)
        return value

