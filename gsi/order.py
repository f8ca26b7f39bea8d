"""GSI's join order (GSI Algorithm 2; SGSI Algorithm 1) and the
linking edges of every join iteration.

``score(u) = |C(u)| / deg(u)``; the start is the argmin; after a vertex u_c is joined, each
query edge (u_c, u') multiplies ``score(u')`` by ``freq(L(u_c u'))``; the next vertex is the
argmin among unjoined vertices adjacent to the joined set. Choices where the paper is silent:
``freq`` is the relative frequency ``|E_l| / |E|`` of the edge label in the data graph (the
``score="paper"`` default); ``score="code"`` is the released code's variant (initial score
|C(u)|, each neighbour multiplied by 0.9). Ties go to the smaller query vertex id. In a directed
query a pair joined by two arcs multiplies twice.

Each join iteration gets its linking edges (u', u) with u' already joined: the column of u' in
the intermediate table, the edge-label partition to read (out-partition of v' for an arc
u' -> u, in-partition for u -> u') and the label. The first edge e0 is the one whose partition
is smallest in the data graph (the paper's "minimum freq(l)"); ties keep query order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.graph.model import Graph

SCORES = ("paper", "code")


@dataclass(frozen=True)
class JoinStep:
    """Joining query vertex ``vertex``: linking edges as (column, partition, edge label)."""

    vertex: int
    edges: tuple[tuple[int, int, int], ...]   # edges[0] is e0


@dataclass(frozen=True)
class JoinPlan:
    order: tuple[int, ...]      # query vertices in column order
    steps: tuple[JoinStep, ...]  # one per column after the first


def _arcs(query: Graph):
    """(a, b, label, direction of the arc seen from a: 0 out / 1 in) for both endpoints."""
    src, dst, elab = query.edges()
    elab = np.zeros(src.size, np.int64) if elab is None else elab
    back = 1 if query.directed else 0
    arcs = [[] for _ in range(query.num_vertices)]
    for a, b, l in zip(src.tolist(), dst.tolist(), elab.tolist()):
        arcs[a].append((b, int(l), 0))
        arcs[b].append((a, int(l), back))
    return arcs


def join_plan(query: Graph, candidate_sizes, partition_of, partition_edges: np.ndarray,
              total_edges: int, score: str = "paper") -> JoinPlan:
    """The join order and linking edges; ``partition_of(label, direction)`` names a partition.
    (Plain Python floats and lists: a query has at most 64 vertices, and numpy's per-call cost
    was most of a small query's planning.)"""
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
    nq = query.num_vertices
    arcs = _arcs(query)
    sizes = [float(x) for x in np.asarray(candidate_sizes).tolist()]
    if score == "paper":
        scores = [c / max(len(a), 1) for c, a in zip(sizes, arcs)]
    else:
        scores = sizes
    total = max(int(total_edges), 1)
    entries = [int(x) for x in np.asarray(partition_edges).tolist()]

    def entries_of(p):
        return entries[p] if p < len(entries) else 0

    column: dict[int, int] = {}
    order: list[int] = []
    steps: list[JoinStep] = []
    frontier: set[int] = set()
    current = min(range(nq), key=scores.__getitem__)
    while True:
        if order:
            edges = []
            for b, l, d in arcs[current]:
                if b in column:
                    # arc seen from `current` with direction d; from b it has the other direction
                    d_from_b = 0 if not query.directed else 1 - d
                    edges.append((column[b], partition_of(l, d_from_b), l))
            edges.sort(key=lambda e: entries_of(e[1]))
            steps.append(JoinStep(current, tuple(edges)))
        column[current] = len(order)
        order.append(current)
        if len(order) == nq:
            break
        for b, l, _ in arcs[current]:
            if b not in column:
                scores[b] *= 0.9 if score == "code" else entries_of(partition_of(l, 0)) / total
                frontier.add(b)
        frontier.discard(current)
        current = min(sorted(frontier), key=scores.__getitem__)
    return JoinPlan(tuple(order), tuple(steps))
