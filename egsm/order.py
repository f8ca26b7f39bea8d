r"""Vertex grouping for the hybrid BFS-DFS (paper §5.3, VertexGrouping) and the variants' groups.

The order *inside* a group is chosen on the fly by each warp (adaptive, §5.5) or by the static
CuTS rule (``enumerate.select_next``); this module decides the groups on the host, from the query
and the filtered relation sizes:

1. Core = 2-core of Q; a tree query's core is its edge with the largest d(u) + d(u').
2. Dense group V_d: the vertices of the core's 4-cliques, largest connected component of the
   subgraph they induce; else the core triangle, else the core edge, of largest degree sum.
3. Sparse groups: the connected components of core \ V_d, ascending by the smallest
   |R(u_d, u_s)| over their edges to V_d.
4. Tree groups: the components of V(Q) \ core, ascending by |R(u_c, u_t)| of the attaching edge.

u0 (the vertex of V_d of largest query degree) starts alone in group 0. Variants: ``dfs`` = {u0}
then every other vertex in one group; ``bfs`` = one vertex per group, greedily by the smallest
|R(u_placed, u)|. Compiled host code (``numba.njit``) over neighbour bitmasks
(``common.graph.bitmasks``); groups come back as masks. docs/decisions.md ("EGSM's grouping") gives
the choices where the paper is silent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from common.graph.bitmasks import bits, lowest_bit, popcount

MODES = ("bfs-dfs", "dfs", "bfs")
_NO_EDGE = np.iinfo(np.int64).max     # the key of a group without an edge to its anchor


@dataclass(frozen=True)
class Plan:
    """Vertex groups, in stage order; ``groups[0] == [first_vertex]``."""

    groups: list[list[int]]
    first_vertex: int
    dense: list[int]
    core: list[int]

    def stage_masks(self) -> list[int]:
        """Mapped-vertex bitmap after each stage."""
        out, mask = [], 0
        for group in self.groups:
            for u in group:
                mask |= 1 << u
            out.append(mask)
        return out


@njit(cache=True, nogil=True)
def two_core(nbr):
    """The 2-core (mask): strip degree-1 vertices until none is left."""
    n = nbr.size
    alive = (np.int64(1) << n) - 1
    changed = True
    while changed:
        changed = False
        for u in range(n):
            if (alive >> u) & 1 and popcount(nbr[u] & alive) < 2:
                alive &= ~(np.int64(1) << u)
                changed = True
    return alive


@njit(cache=True, nogil=True)
def components(vertices, nbr):
    """Connected components (masks) of the subgraph induced by ``vertices``, by smallest id."""
    out = np.empty(popcount(vertices), np.int64)
    count = 0
    left = vertices
    while left:
        comp = left & -left
        frontier = comp
        while frontier:
            u = lowest_bit(frontier)
            frontier &= frontier - 1
            new = nbr[u] & left & ~comp
            comp |= new
            frontier |= new
        out[count] = comp
        count += 1
        left &= ~comp
    return out[:count]


@njit(cache=True, nogil=True)
def max_degree_edge(vertices, nbr):
    """The edge (mask) inside ``vertices`` of largest degree sum (ties: smallest ids)."""
    best, best_sum = np.int64(0), -1
    rest = vertices
    while rest:
        a = lowest_bit(rest)
        rest &= rest - 1
        later = nbr[a] & vertices & ~((np.int64(2) << a) - 1)
        while later:
            b = lowest_bit(later)
            later &= later - 1
            total = popcount(nbr[a]) + popcount(nbr[b])
            if total > best_sum:
                best, best_sum = (np.int64(1) << a) | (np.int64(1) << b), total
    return best


@njit(cache=True, nogil=True)
def dense_vertices(core, nbr):
    """V_d (mask): the largest component of the core's 4-clique vertices (ties: smallest first
    vertex); else the core triangle, else the core edge, of largest degree sum."""
    n = nbr.size
    in_cliques = np.int64(0)
    for a in range(n):
        if not (core >> a) & 1:
            continue
        na = nbr[a] & core
        later_b = na & ~((np.int64(2) << a) - 1)
        while later_b:
            b = lowest_bit(later_b)
            later_b &= later_b - 1
            common = na & nbr[b] & core & ~((np.int64(2) << b) - 1)
            rest = common
            while rest:
                c = lowest_bit(rest)
                rest &= rest - 1
                fourth = common & nbr[c] & ~((np.int64(2) << c) - 1)
                if fourth:
                    in_cliques |= (np.int64(1) << a) | (np.int64(1) << b) | (np.int64(1) << c) | fourth
    if in_cliques:
        best = np.int64(0)
        for comp in components(in_cliques, nbr):
            if popcount(comp) > popcount(best):       # components come by smallest id
                best = comp
        return best
    best, best_sum = np.int64(0), -1
    for a in range(n):
        if not (core >> a) & 1:
            continue
        later_b = nbr[a] & core & ~((np.int64(2) << a) - 1)
        while later_b:
            b = lowest_bit(later_b)
            later_b &= later_b - 1
            later_c = nbr[a] & nbr[b] & core & ~((np.int64(2) << b) - 1)
            while later_c:
                c = lowest_bit(later_c)
                later_c &= later_c - 1
                total = popcount(nbr[a]) + popcount(nbr[b]) + popcount(nbr[c])
                if total > best_sum:
                    best = (np.int64(1) << a) | (np.int64(1) << b) | (np.int64(1) << c)
                    best_sum = total
    if best:
        return best
    return max_degree_edge(core, nbr)


@njit(cache=True, nogil=True)
def _shape(nbr):
    everyone = (np.int64(1) << nbr.size) - 1
    core = two_core(nbr)
    if not core:
        core = max_degree_edge(everyone, nbr)
    dense = dense_vertices(core, nbr)
    u0, most = -1, -1
    rest = dense
    while rest:                          # largest degree, then smallest id
        u = lowest_bit(rest)
        rest &= rest - 1
        if popcount(nbr[u]) > most:
            u0, most = u, popcount(nbr[u])
    return core, dense, u0, components(core & ~dense, nbr), components(everyone & ~core, nbr)


@dataclass(frozen=True)
class Shape:
    """What VertexGrouping takes from the query alone (steps 1-2 and the components of steps
    3-4), as masks: the engine computes it while the index kernels run; only the groups' order
    needs the relation sizes."""

    core: int
    dense: int
    first_vertex: int
    sparse: np.ndarray      # components of the core minus V_d
    trees: np.ndarray       # components of V(Q) minus the core


def query_shape(nbr: np.ndarray) -> Shape:
    """The :class:`Shape` of a connected query with at least one edge (``nbr``: its neighbour
    masks, int64)."""
    return Shape(*_shape(nbr))


def first_vertex(nbr: np.ndarray) -> int:
    """u0 of :func:`plan` in every mode, from the query alone (no relation sizes): the vertex
    a part's ``root_range`` restricts (:mod:`common.engine.part`)."""
    return query_shape(nbr).first_vertex


@njit(cache=True, nogil=True)
def _edge_key(group, anchor, nbr, rel):
    """Smallest |R(a, u)| over the edges from ``anchor`` into ``group``."""
    key = _NO_EDGE
    rest = group
    while rest:
        u = lowest_bit(rest)
        rest &= rest - 1
        from_anchor = nbr[u] & anchor
        while from_anchor:
            key = min(key, rel[lowest_bit(from_anchor), u])
            from_anchor &= from_anchor - 1
    return key


@njit(cache=True, nogil=True)
def _sorted_by_edge(groups, anchor, nbr, rel):
    """``groups`` ascending by (:func:`_edge_key`, smallest vertex) (insertion sort: few)."""
    out = groups.copy()
    keys = np.empty(out.size, np.int64)
    for i in range(out.size):
        keys[i] = _edge_key(out[i], anchor, nbr, rel)
    for i in range(1, out.size):
        j = i
        while j > 0 and (keys[j], lowest_bit(out[j])) < (keys[j - 1], lowest_bit(out[j - 1])):
            keys[j], keys[j - 1] = keys[j - 1], keys[j]
            out[j], out[j - 1] = out[j - 1], out[j]
            j -= 1
    return out


@njit(cache=True, nogil=True)
def _union(masks):
    out = np.int64(0)
    for mask in masks:
        out |= mask
    return out


@njit(cache=True, nogil=True)
def _group_masks(nbr, rel, mode, core, dense, u0, sparse, trees):
    """The groups (masks) in stage order; ``mode`` indexes :data:`MODES`."""
    n = nbr.size
    first = np.int64(1) << u0
    out = np.empty(n + 1, np.int64)
    out[0] = first
    count = 1
    sparse = _sorted_by_edge(sparse, dense, nbr, rel)
    trees = _sorted_by_edge(trees, core, nbr, rel)
    if mode == 0:                       # bfs-dfs: {u0}, V_d minus u0, sparse, trees
        for group in np.concatenate((np.array([dense & ~first]), sparse, trees)):
            if group:
                out[count] = group
                count += 1
    elif mode == 1:                     # dfs: {u0}, then everything else
        out[count] = ((np.int64(1) << n) - 1) & ~first
        count += int(n > 1)
    else:                               # bfs: greedy, one vertex per group
        placed = first
        blocks = np.array([dense & ~first, _union(sparse), _union(trees)])
        for block in blocks:
            left = block
            while left:
                best, best_key = -1, _NO_EDGE
                rest = left
                while rest:
                    u = lowest_bit(rest)
                    rest &= rest - 1
                    if nbr[u] & placed:
                        key = _edge_key(np.int64(1) << u, placed, nbr, rel)
                        if best < 0 or key < best_key:
                            best, best_key = u, key
                if best < 0:
                    raise ValueError("a group is not connected to the placed vertices")
                out[count] = np.int64(1) << best
                count += 1
                placed |= np.int64(1) << best
                left &= ~(np.int64(1) << best)
    return out[:count]


def plan(nbr: np.ndarray, rel: np.ndarray, mode: str = "bfs-dfs", shape: Shape | None = None) -> Plan:
    """Groups of a connected query with at least one edge; ``nbr``: its neighbour masks (int64),
    ``rel[u, a]`` = |R(u, a)| (an int64 matrix); ``shape``: the query's :func:`query_shape`,
    when already computed."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    shape = query_shape(nbr) if shape is None else shape
    masks = _group_masks(nbr, rel, MODES.index(mode), shape.core, shape.dense, shape.first_vertex,
                         shape.sparse, shape.trees)
    return Plan(groups=[bits(m) for m in masks.tolist()], first_vertex=shape.first_vertex,
                dense=bits(shape.dense), core=bits(shape.core))


__all__ = ["MODES", "Plan", "Shape", "plan", "query_shape", "first_vertex", "two_core", "components",
           "dense_vertices"]
