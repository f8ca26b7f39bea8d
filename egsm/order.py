"""Vertex grouping for the hybrid BFS-DFS (paper §5.3, VertexGrouping) and the variants' groups.

The order *inside* a group is chosen on the fly by each warp (adaptive, §5.5) or by the static
CuTS rule; that code is in ``enumerate.py`` (``select_next``). This module decides the groups,
on the host, from the query and the filtered relation sizes.

VertexGrouping, as the paper:

1. Core = 2-core of Q (strip degree-1 vertices); a tree query's core is its edge with the
   largest d(u) + d(u').
2. Dense group V_d: the vertices of the core's 4-cliques, largest connected component of the
   subgraph they induce; without a 4-clique the core triangle of largest degree sum; without a
   triangle the core edge of largest degree sum.
3. Sparse groups: the connected components of core \\ V_d, ascending by the smallest |R(u_d, u_s)|
   over their edges to V_d.
4. Tree groups: the components of V(Q) \\ core, ascending by |R(u_c, u_t)| of the edge that
   attaches them to the core.

Choices where the paper is silent, recorded: ties break toward smaller vertex ids; u0 (the
first vertex) is the vertex of V_d of largest query degree (authors' code) and starts alone in
group 0, so its candidates (intersection of π_{u0} R(u0, .)) are materialised first (authors'
layout: {u0}, V_d \\ {u0}, sparse groups, tree groups). The authors' code builds V_d by merging
(3,4)-nuclei; this follows the paper's text (largest connected component of the 4-clique
vertices). Groups are sorted by |R| of the connecting edges as the paper says (the authors'
code sorts by edge counts first and uses |π_u R|).

Variants: ``dfs`` = {u0} then every other vertex in one group; ``bfs`` = one vertex per group,
greedy: inside the dense, then sparse, then tree block, the vertex adjacent to the placed ones
with the smallest |R(u_placed, u)|.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

MODES = ("bfs-dfs", "dfs", "bfs")


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


def two_core(adj: list[set[int]]) -> set[int]:
    degree = [len(a) for a in adj]
    alive = set(range(len(adj)))
    stack = [u for u in alive if degree[u] < 2]
    while stack:
        u = stack.pop()
        if u not in alive:
            continue
        alive.discard(u)
        for a in adj[u]:
            if a in alive:
                degree[a] -= 1
                if degree[a] < 2:
                    stack.append(a)
    return alive


def components(vertices: set[int], adj: list[set[int]]) -> list[list[int]]:
    """Connected components of the subgraph induced by ``vertices``, each sorted, by smallest id."""
    seen, out = set(), []
    for s in sorted(vertices):
        if s in seen:
            continue
        comp, stack = [], [s]
        seen.add(s)
        while stack:
            u = stack.pop()
            comp.append(u)
            for a in adj[u]:
                if a in vertices and a not in seen:
                    seen.add(a)
                    stack.append(a)
        out.append(sorted(comp))
    return out


def _bits(mask: int):
    """The set bits of ``mask``, ascending."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def dense_vertices(core: set[int], adj: list[set[int]]) -> list[int]:
    deg = [len(a) for a in adj]
    core_mask = sum(1 << u for u in core)
    nbr = [sum(1 << a for a in adj[u]) & core_mask for u in range(len(adj))]   # core neighbours
    in_cliques = 0                  # bitmap of the vertices of core 4-cliques a < b < c < d
    for a in sorted(core):
        for b in _bits(nbr[a] >> (a + 1) << (a + 1)):
            common = nbr[a] & nbr[b] >> (b + 1) << (b + 1)
            for c in _bits(common):
                fourth = common & nbr[c] >> (c + 1) << (c + 1)
                if fourth:
                    in_cliques |= 1 << a | 1 << b | 1 << c | fourth
    if in_cliques:
        comps = components(set(_bits(in_cliques)), adj)
        return max(comps, key=lambda comp: (len(comp), -comp[0]))
    best = None
    for a, b in combinations(sorted(core), 2):
        if b not in adj[a]:
            continue
        for c in sorted(adj[a] & adj[b] & core):
            if c > b:
                key = (deg[a] + deg[b] + deg[c], -a, -b, -c)
                if best is None or key > best[0]:
                    best = (key, [a, b, c])
    if best is not None:
        return best[1]
    return max_degree_edge(core, adj)


def max_degree_edge(vertices: set[int], adj: list[set[int]]) -> list[int]:
    deg = [len(a) for a in adj]
    best = None
    for a in sorted(vertices):
        for b in sorted(adj[a] & vertices):
            if b > a and (best is None or deg[a] + deg[b] > best[0]):
                best = (deg[a] + deg[b], [a, b])
    return best[1]


@dataclass(frozen=True)
class Shape:
    """What VertexGrouping takes from the query alone (steps 1-2 and the components of steps
    3-4): the engine computes it while the index kernels run; only the groups' order needs
    the relation sizes."""

    core: set[int]
    dense: list[int]
    first_vertex: int
    sparse: list[list[int]]      # components of the core minus V_d
    trees: list[list[int]]       # components of V(Q) minus the core


def query_shape(adj: list[set[int]]) -> Shape:
    """The :class:`Shape` of a connected query with at least one edge."""
    n = len(adj)
    core = two_core(adj) or set(max_degree_edge(set(range(n)), adj))
    dense = dense_vertices(core, adj)
    u0 = max(dense, key=lambda u: (len(adj[u]), -u))
    return Shape(core=core, dense=dense, first_vertex=u0, sparse=components(core - set(dense), adj),
                 trees=components(set(range(n)) - core, adj))


def first_vertex(adj: list[set[int]]) -> int:
    """u0 of :func:`plan` in every mode, from the query alone (no relation sizes): the vertex
    ``root_range`` restricts (issue 17)."""
    return query_shape(adj).first_vertex


def plan(adj: list[set[int]], rel: dict[tuple[int, int], int], mode: str = "bfs-dfs",
         shape: Shape | None = None) -> Plan:
    """Groups of a connected query with at least one edge; ``rel[(u, a)]`` = |R(u, a)|;
    ``shape``: the query's :func:`query_shape`, when already computed."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    n = len(adj)
    shape = query_shape(adj) if shape is None else shape
    core, dense, u0 = shape.core, shape.dense, shape.first_vertex
    dense_set = set(dense)

    def edge_key(group: list[int], anchor: set[int]) -> tuple:
        sizes = [rel[(a, u)] for u in group for a in adj[u] if a in anchor]
        return (min(sizes) if sizes else float("inf"), group[0])

    sparse = sorted(shape.sparse, key=lambda g: edge_key(g, dense_set))
    trees = sorted(shape.trees, key=lambda g: edge_key(g, core))
    if mode == "bfs-dfs":
        groups = [[u0], [u for u in dense if u != u0]] + sparse + trees
    elif mode == "dfs":
        groups = [[u0], [u for u in range(n) if u != u0]]
    else:
        placed = {u0}
        groups = [[u0]]
        for block in ([u for u in dense if u != u0], sum(sparse, []), sum(trees, [])):
            left = set(block)
            while left:
                options = [(min(rel[(a, u)] for a in adj[u] if a in placed), u)
                           for u in left if adj[u] & placed]
                _, u = min(options)
                groups.append([u])
                placed.add(u)
                left.discard(u)
    return Plan(groups=[g for g in groups if g], first_vertex=u0, dense=sorted(dense),
                core=sorted(core))


__all__ = ["MODES", "Plan", "Shape", "plan", "query_shape", "first_vertex", "two_core", "components",
           "dense_vertices"]
