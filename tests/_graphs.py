"""Graph builders and the reference oracle that several test modules share."""

from __future__ import annotations

import numpy as np

from common.cpu.reference import ReferenceMatcher
from common.graph.model import Graph


def random_graph(n: int, m: int, num_labels: int, num_edge_labels: int, directed: bool, seed: int, *,
                 label_base: int = 0, edge_label_base: int = 0) -> Graph:
    """A seeded random graph of ``m`` drawn vertex pairs (duplicates and self-loops dropped) with
    uniform vertex labels ``label_base + [0, num_labels)`` and, when ``num_edge_labels`` > 1 or
    ``edge_label_base`` is set, uniform edge labels ``edge_label_base + [0, num_edge_labels)``."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    key = src * n + dst if directed else np.minimum(src, dst) * n + np.maximum(src, dst)
    _, first = np.unique(key, return_index=True)
    labelled_edges = num_edge_labels > 1 or (edge_label_base and num_edge_labels)
    elab = edge_label_base + rng.integers(0, num_edge_labels, m)[first] if labelled_edges else None
    return Graph.from_edges(n, src[first], dst[first], label_base + rng.integers(0, num_labels, n), elab,
                            directed=directed, name=f"rand{n}_{m}_s{seed}{'_dir' if directed else ''}")


def with_spokes(base: Graph, hub_degree: int, seed: int, edge_labels: int = 1) -> Graph:
    """``base`` plus vertex 0 joined to ``hub_degree`` others (a long neighbour list)."""
    n, directed = base.num_vertices, base.directed
    src, dst, elab = base.edges()
    rng = np.random.default_rng(seed)
    spokes = rng.choice(np.arange(1, n), hub_degree, replace=False)
    src = np.concatenate([src, np.zeros(hub_degree, np.int64)])
    dst = np.concatenate([dst, spokes])
    keep = np.unique(np.minimum(src, dst) * n + np.maximum(src, dst), return_index=True)[1] if not directed \
        else np.unique(src * n + dst, return_index=True)[1]
    if elab is not None:
        elab = np.concatenate([elab, rng.integers(0, edge_labels, hub_degree)])[keep]
    return Graph.from_edges(n, src[keep], dst[keep], base.labels, elab, directed=directed,
                            name=f"hub{n}_{base.num_edges}_s{seed}")


def hub_on_a_path(leaves: int) -> Graph:
    """A hub (the only vertex of label 1) joined to ``leaves`` label-0 vertices on a path."""
    src = [0] * leaves + list(range(1, leaves))
    dst = list(range(1, leaves + 1)) + list(range(2, leaves + 1))
    return Graph.from_edges(leaves + 1, src, dst, [1] + [0] * leaves, name=f"hub{leaves}")


def two_hubs(directed: bool) -> Graph:
    """Two hubs of degree ~40 with edge labels: neighbour lists span several 32-element batches,
    rows share their linking vertex (duplicate removal) and exceed small LB thresholds."""
    rng = np.random.default_rng(5)
    n = 48
    src = list(rng.integers(0, n, 60))
    dst = list(rng.integers(0, n, 60))
    elab = list(rng.integers(0, 2, 60))
    for hub in (0, 1):
        for v in range(2, n):
            if rng.random() < 0.9:
                out = rng.random() < 0.8
                src.append(hub if out else v)
                dst.append(v if out else hub)
                elab.append(0)
    src, dst, elab = np.array(src), np.array(dst), np.array(elab)
    key = src * n + dst if directed else np.minimum(src, dst) * n + np.maximum(src, dst)
    _, first = np.unique(key, return_index=True)
    return Graph.from_edges(n, src[first], dst[first], rng.integers(0, 3, n), elab[first],
                            directed=directed)



def hub_and_extra_edges(extra_edges: int, labelled: bool) -> Graph:
    """200 vertices, vertex 0 adjacent to all and ``extra_edges`` random ones among the rest
    (seeded): a root whose work sits on one hub. ``labelled``: 2 random labels, else one."""
    rng = np.random.default_rng(5)
    n = 200
    src = np.concatenate([np.zeros(n - 1, np.int64), rng.integers(1, n, extra_edges)])
    dst = np.concatenate([np.arange(1, n), rng.integers(1, n, extra_edges)])
    labels = rng.integers(0, 2, n).astype(np.int32) if labelled else np.zeros(n, np.int32)
    return Graph.from_edges(n, src, dst, labels=labels, name="hub")


_REFERENCES: dict[int, tuple[Graph, ReferenceMatcher]] = {}


def reference(graph: Graph, query: Graph, **options):
    """The CPU reference's answer (``ReferenceMatcher``, prepared once per graph) to ``query``."""
    if id(graph) not in _REFERENCES:         # holds the graph: its id is not reused while cached
        _REFERENCES[id(graph)] = (graph, ReferenceMatcher().prepare(graph))
    return _REFERENCES[id(graph)][1].match(query, **options)
