"""STwig query decomposition and the join plan (Lin et al. 2014 §3.2; Sun et al., PVLDB 2012).

A query is covered edge-disjointly by STwigs (two-level trees: a root query vertex and its leaf
query vertices), in an order ``<o_1..o_n>`` where every ``o_i`` (i >= 2) is rooted at a leaf of
an earlier STwig (§3.2). The greedy is Sun et al.'s 2-approximation of the minimum vertex cover:
score ``f(v) = remaining_degree(v) / freq(label(v))``; repeatedly take the uncovered query edge
``(v, u)`` of largest ``f(v) + f(u)`` (once leaves with uncovered edges exist, one with an
endpoint among them), root one STwig at ``v`` with all its uncovered edges, then one at ``u`` if
it still has uncovered edges.

The join plan (:func:`join_plan`, §4.1/§4.3): the first STwig's relation is the probe relation
R_p1 (the unpruned, largest one); the others are build relations joined right-deep in an order
that keeps every prefix connected: :func:`estimated_order` (``join_order="estimate"``, our
result-size prediction, which the paper does not give) or the STwig order (``"stwig"``). Query
vertices get ``imResult`` slots in binding order, so the injectivity check is a loop over a
prefix. docs/decisions.md ("STwig's decomposition") gives the choices where the paper is silent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from common.graph import Graph


@dataclass(frozen=True)
class Twig:
    """One STwig: a root query vertex and its leaf query vertices (relation columns root, leaves...)."""

    root: int
    leaves: tuple[int, ...]

    @property
    def columns(self) -> tuple[int, ...]:
        return (self.root, *self.leaves)


def _query_edges(query: Graph) -> set[tuple[int, int]]:
    src, dst, _ = query.edges()
    return {(int(a), int(b)) for a, b in zip(src, dst)}


@njit(cache=True)
def _greedy_cover(offsets, neighbors, labels, label_frequencies):
    """The greedy of :func:`decompose` over an adjacency matrix: (roots, leaves, leaf counts,
    STwigs); -1 STwigs for a label outside ``label_frequencies``. Whenever S is non-empty one of
    its vertices still has an edge, so a pair is always found."""
    nq = labels.size
    adj = np.zeros((nq, nq), np.bool_)
    deg = np.zeros(nq, np.int64)
    freq = np.empty(nq, np.float64)
    for a in range(nq):
        if labels[a] < 0 or labels[a] >= label_frequencies.size:
            return np.empty(0, np.int64), np.empty((0, nq), np.int64), np.empty(0, np.int64), -1
        freq[a] = max(float(label_frequencies[labels[a]]), 1.0)
        for j in range(offsets[a], offsets[a + 1]):
            b = neighbors[j]
            if not adj[a, b]:
                adj[a, b] = adj[b, a] = True
                deg[a] += 1
                deg[b] += 1
    edges = deg.sum() // 2
    roots = np.empty(edges, np.int64)
    leaves = np.empty((edges, nq), np.int64)
    nleaves = np.zeros(edges, np.int64)
    seen = np.zeros(nq, np.bool_)
    nt = 0
    while edges > 0:
        any_seen = seen.any()
        best_a, best_b, best = -1, -1, 0.0
        for a in range(nq):                   # largest f(a) + f(b); ties: smaller a, then b
            if deg[a] == 0:
                continue
            for b in range(a + 1, nq):
                if not adj[a, b] or (any_seen and not seen[a] and not seen[b]):
                    continue
                key = deg[a] / freq[a] + deg[b] / freq[b]
                if best_a < 0 or key > best:
                    best_a, best_b, best = a, b, key
        v, u = best_a, best_b
        if seen[best_a] != seen[best_b]:
            if seen[best_b]:
                v, u = best_b, best_a
        elif deg[best_a] / freq[best_a] < deg[best_b] / freq[best_b]:
            v, u = best_b, best_a
        for x in (v, u):                       # a star at v, then at u if edges remain there
            if x == u and deg[u] == 0:
                break
            roots[nt] = x
            for y in range(nq):
                if adj[x, y]:
                    adj[x, y] = adj[y, x] = False
                    deg[y] -= 1
                    leaves[nt, nleaves[nt]] = y
                    nleaves[nt] += 1
                    seen[y] = True
            edges -= nleaves[nt]
            deg[x] = 0
            nt += 1
        seen[v] = seen[u] = False
        for x in range(nq):
            if deg[x] == 0:
                seen[x] = False
    return roots, leaves, nleaves, nt


def decompose(query: Graph, label_frequencies: np.ndarray) -> list[Twig]:
    """Sun et al.'s greedy STwig decomposition of a connected query (see the module docstring; the
    engine checks connectivity first). Compiled: in Python it was a tenth of a small query's time."""
    if query.num_edges == 0:
        if query.num_vertices != 1:
            raise ValueError("STwig decomposition needs a connected query")
        return [Twig(0, ())]
    roots, leaves, nleaves, nt = _greedy_cover(query.offsets, query.neighbors, query.labels,
                                               np.asarray(label_frequencies))
    if nt < 0:
        raise ValueError("a query label is outside the data graph's label frequencies")
    return [Twig(r, tuple(row[:k]))
            for r, row, k in zip(roots[:nt].tolist(), leaves[:nt].tolist(), nleaves[:nt].tolist())]


def check_twigs(query: Graph, twigs: list[Twig]) -> None:
    """Raise ValueError unless ``twigs`` cover the query's edges exactly once in a valid STwig order."""
    if not twigs:
        raise ValueError("a decomposition needs at least one STwig")
    nq = query.num_vertices
    covered: list[tuple[int, int]] = []
    for twig in twigs:
        cols = twig.columns
        if len(set(cols)) != len(cols) or min(cols) < 0 or max(cols) >= nq:
            raise ValueError(f"STwig {twig} repeats a vertex or names one outside 0..{nq - 1}")
        covered += [(min(twig.root, x), max(twig.root, x)) for x in twig.leaves]
    if len(covered) != len(set(covered)) or set(covered) != _query_edges(query):
        raise ValueError("the STwigs do not cover the query's edges exactly once")
    bound = set(twigs[0].columns)
    for twig in twigs[1:]:
        if twig.root not in bound:
            raise ValueError(f"STwig {twig}'s root is not a vertex of an earlier STwig")
        bound.update(twig.columns)
    if bound != set(range(nq)):
        raise ValueError("the STwigs do not cover every query vertex")


@dataclass(frozen=True)
class JoinPlan:
    """Where each query vertex lives in ``imResult`` and what each sub-join compares and binds.

    ``keycol[k, j]`` / ``keyslot[k, j]`` (j < nkeys[k]): record column and imResult slot of the
    j-th join key of build relation k (= STwig k+1); ``newcol[k, j]`` (j < nnew[k]): record
    column bound to slot ``first_new_slot[k] + j``. ``vertex_of_slot[s]``: query vertex in slot s.
    """

    twigs: tuple[Twig, ...]
    build_order: tuple[int, ...]
    vertex_of_slot: np.ndarray
    nkeys: np.ndarray
    nnew: np.ndarray
    first_new_slot: np.ndarray
    keycol: np.ndarray
    keyslot: np.ndarray
    newcol: np.ndarray

    @property
    def num_builds(self) -> int:
        return len(self.twigs) - 1

    @property
    def build_twigs(self) -> list[Twig]:
        return [self.twigs[i] for i in self.build_order]


def _column_table(twigs) -> tuple[np.ndarray, np.ndarray]:
    """The STwigs' columns as an (STwigs, widest) int64 table padded with -1, and their counts."""
    widths = [len(t.leaves) + 1 for t in twigs]
    width = max(widths)
    flat = []
    for t, w in zip(twigs, widths):
        flat += (t.root, *t.leaves, *(-1,) * (width - w))
    return np.array(flat, np.int64).reshape(len(twigs), width), np.array(widths, np.int64)


@njit(cache=True)
def _plan_arrays(columns, ncols, order, nq):
    """The arrays of :class:`JoinPlan` for build STwigs ``order`` (see :func:`join_plan`), and the
    position in ``order`` of the first STwig sharing no bound vertex (-1: none)."""
    slot = np.full(nq, -1, np.int64)
    bound = 0
    for c in range(ncols[0]):
        slot[columns[0, c]] = bound
        bound += 1
    width = 1
    for t in order:
        width = max(width, ncols[t])
    rows = max(order.size, 1)
    keycol = np.zeros((rows, width), np.int32)
    keyslot = np.zeros((rows, width), np.int32)
    newcol = np.zeros((rows, width), np.int32)
    nkeys = np.zeros(rows, np.int64)
    nnew = np.zeros(rows, np.int64)
    first_new = np.zeros(rows, np.int64)
    for k in range(order.size):
        t = order[k]
        first_new[k] = bound
        for c in range(ncols[t]):
            x = columns[t, c]
            if slot[x] >= 0:
                keycol[k, nkeys[k]] = c
                keyslot[k, nkeys[k]] = slot[x]
                nkeys[k] += 1
            else:
                newcol[k, nnew[k]] = c
                nnew[k] += 1
        if nkeys[k] == 0:
            return slot, nkeys, nnew, first_new, keycol, keyslot, newcol, k
        for j in range(nnew[k]):
            slot[columns[t, newcol[k, j]]] = bound
            bound += 1
    return slot, nkeys, nnew, first_new, keycol, keyslot, newcol, -1


def join_plan(twigs: list[Twig], num_query_vertices: int, order: list[int] | None = None) -> JoinPlan:
    """Slots and key/new columns of the right-deep join of R_1 with the build relations of
    ``order`` (STwig indices 1..n-1; default the STwig order). Each build relation in ``order``
    must share a query vertex with R_1 and the relations before it."""
    order = list(range(1, len(twigs))) if order is None else list(order)
    if sorted(order) != list(range(1, len(twigs))):
        raise ValueError(f"join order {order} is not a permutation of the build STwigs 1..{len(twigs) - 1}")
    columns, ncols = _column_table(twigs)
    if columns.max() >= num_query_vertices:
        raise ValueError("the STwigs name a vertex outside the query")
    slot, nkeys, nnew, first_new, keycol, keyslot, newcol, unjoinable = _plan_arrays(
        columns, ncols, np.array(order, np.int64), num_query_vertices)
    if unjoinable >= 0:
        raise ValueError(f"STwig {twigs[order[unjoinable]]} shares no vertex with the relations joined before it")
    if slot.min() < 0:
        raise ValueError("the STwigs do not cover every query vertex")
    vertex_of_slot = np.empty(num_query_vertices, np.int64)
    vertex_of_slot[slot] = np.arange(num_query_vertices)
    return JoinPlan(tuple(twigs), tuple(order), vertex_of_slot, nkeys, nnew, first_new, keycol, keyslot, newcol)


@njit(cache=True)
def _greedy_order(columns, ncols, rows, distinct):
    """The greedy of :func:`estimated_order` over column and distinct-value tables."""
    nt = ncols.size
    bound = np.zeros(columns.max() + 1, np.bool_)
    for c in range(ncols[0]):
        bound[columns[0, c]] = True
    done = np.zeros(nt, np.bool_)
    order = np.empty(nt - 1, np.int64)
    for k in range(nt - 1):
        best, best_fanout = -1, 0.0
        for t in range(1, nt):
            if done[t]:
                continue
            fanout, joinable = float(rows[t]), False
            for c in range(ncols[t]):
                if bound[columns[t, c]]:
                    fanout /= max(1, distinct[t, c])
                    joinable = True
            if joinable and (best < 0 or fanout < best_fanout):
                best, best_fanout = t, fanout
        if best < 0:                          # no STwig left shares a bound vertex
            return order[:k]
        order[k] = best
        done[best] = True
        for c in range(ncols[best]):
            bound[columns[best, c]] = True
    return order


def estimated_order(twigs: list[Twig], rows: list[int], distinct: list[list[int]]) -> list[int]:
    """The paper's "order of leaves" by result-size prediction (§4.1; the estimate of Garcia-Molina,
    Ullman and Widom, which the paper cites without detail): greedily join next the build
    relation, among those sharing a vertex with what is bound, that adds the fewest results per
    intermediate tuple, |R| / prod over its key columns a of V(R, a) (V = distinct values);
    ties by STwig index. ``rows[t]`` / ``distinct[t][c]``: rows and per-column distinct values of
    R_t. Compiled (in Python it was a tenth of a small query's time)."""
    columns, ncols = _column_table(twigs)
    table = np.zeros(columns.shape, np.int64)
    for t, values in enumerate(distinct):
        table[t, :len(values)] = values
    order = _greedy_order(columns, ncols, np.asarray(rows, np.int64), table).tolist()
    if len(order) != len(twigs) - 1:
        raise ValueError("the STwigs are not connected: some share no vertex with the others")
    return order


def compile_planning(query: Graph, label_frequencies: np.ndarray) -> None:
    """Compile the planning steps (numba) with the argument types of real calls, so that a
    query's first timed run does not: a decomposition of ``query`` (connected, at least one
    edge) and the order and plan of three STwigs."""
    decompose(query, label_frequencies)
    twigs = [Twig(0, (1,)), Twig(1, (2,)), Twig(2, (0,))]
    join_plan(twigs, 3, estimated_order(twigs, [1, 1, 1], [[1, 1]] * 3))
