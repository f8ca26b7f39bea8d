"""STwig query decomposition and the join plan (Lin et al. 2014 §3.2; Sun et al., PVLDB 2012).

A query is covered edge-disjointly by STwigs (two-level trees: a root query vertex and its leaf
query vertices), in an order ``<o_1..o_n>`` where every ``o_i`` (i >= 2) is rooted at a leaf of
an earlier STwig (§3.2). The paper gives only these goals; the greedy is Sun et al.'s
2-approximation of the minimum vertex cover, as we reconstruct it:

* score ``f(v) = remaining_degree(v) / freq(label(v))`` (freq: data vertices with that label);
* repeatedly take the uncovered query edge ``(v, u)`` of largest ``f(v) + f(u)``, restricted to
  edges with an endpoint in ``S`` (the leaves seen so far that still have uncovered edges) once
  ``S`` is non-empty; root one STwig at ``v`` with all its uncovered edges, then, if ``u`` still
  has uncovered edges, one at ``u``.

Choices where the paper is silent:

* leaves are query vertices, not a label set (two leaves may share a label);
* ``f`` uses the *remaining* (uncovered) degree; ties are broken by the smaller vertex id;
* ``v`` (the first root of a pair) is the endpoint in ``S``; if both or neither are in ``S``,
  the one with the larger ``f`` (then the smaller id);
* a query without edges (one vertex) is one STwig with no leaves.

The join plan (:func:`join_plan`) follows §4.1/§4.3: the first STwig's relation is the probe
relation ``R_p1`` (p_1 = 1, the unpruned and largest relation) and the others are build
relations joined right-deep in an order that keeps every prefix connected (each build relation
has at least one join key). The paper says the order of R_p2..R_pn is chosen by "result-size
prediction" without giving the method; :func:`estimated_order` is our estimate (the default,
``join_order="estimate"``); ``join_order="stwig"`` keeps the STwig order (ablation). Query
vertices get ``imResult`` slots in the order they become bound, so that the vertices bound
before sub-join ``k`` are exactly the slots ``0..first_new_slot[k]-1`` (this makes the
injectivity check a loop over a prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def decompose(query: Graph, label_frequencies: np.ndarray) -> list[Twig]:
    """Sun et al.'s greedy STwig decomposition of a connected query (see the module docstring)."""
    nq = query.num_vertices
    if query.num_edges == 0:
        if nq != 1:
            raise ValueError("STwig decomposition needs a connected query")
        return [Twig(0, ())]
    adjacency: list[set[int]] = [set() for _ in range(nq)]
    for a, b in _query_edges(query):
        adjacency[a].add(b)
        adjacency[b].add(a)
    # Python floats: numpy's per-scalar cost was most of a small query's decomposition
    freq = np.maximum(np.asarray(label_frequencies, dtype=np.float64)[query.labels], 1.0).tolist()

    def score(x: int) -> float:
        return len(adjacency[x]) / freq[x]

    twigs: list[Twig] = []
    seen: set[int] = set()

    def take_star(x: int) -> None:
        leaves = tuple(sorted(adjacency[x]))
        for leaf in leaves:
            adjacency[leaf].discard(x)
        adjacency[x].clear()
        twigs.append(Twig(x, leaves))
        seen.update(leaves)

    while any(adjacency):
        best, best_key = None, None
        for a in range(nq):
            for b in adjacency[a]:
                if b < a:
                    continue
                if seen and a not in seen and b not in seen:
                    continue
                key = (score(a) + score(b), -a, -b)
                if best_key is None or key > best_key:
                    best, best_key = (a, b), key
        if best is None:
            raise ValueError("STwig decomposition needs a connected query")
        a, b = best
        in_a, in_b = a in seen, b in seen
        if in_a != in_b:
            v, u = (a, b) if in_a else (b, a)
        else:
            v, u = (a, b) if (score(a), -a) >= (score(b), -b) else (b, a)
        take_star(v)
        if adjacency[u]:
            take_star(u)
        seen.difference_update({v, u})
        seen = {x for x in seen if adjacency[x]}
    return twigs


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


def join_plan(twigs: list[Twig], num_query_vertices: int, order: list[int] | None = None) -> JoinPlan:
    """Slots and key/new columns of the right-deep join of R_1 with the build relations of
    ``order`` (STwig indices 1..n-1; default the STwig order). Each build relation in ``order``
    must share a query vertex with R_1 and the relations before it."""
    order = list(range(1, len(twigs))) if order is None else list(order)
    if sorted(order) != list(range(1, len(twigs))):
        raise ValueError(f"join order {order} is not a permutation of the build STwigs 1..{len(twigs) - 1}")
    slot: dict[int, int] = {}
    for x in twigs[0].columns:
        slot[x] = len(slot)
    builds = [twigs[i] for i in order]
    width = max([len(t.columns) for t in builds], default=1)
    rows = max(len(builds), 1)
    # built in Python lists (numpy's per-element cost was most of a small query's plan)
    keycol, keyslot, newcol = ([[0] * width for _ in range(rows)] for _ in range(3))
    nkeys, nnew, first_new = ([0] * rows for _ in range(3))
    for k, twig in enumerate(builds):
        if not any(x in slot for x in twig.columns):
            raise ValueError(f"STwig {twig} shares no vertex with the relations joined before it")
        first_new[k] = len(slot)
        for c, x in enumerate(twig.columns):
            if x in slot:
                keycol[k][nkeys[k]], keyslot[k][nkeys[k]] = c, slot[x]
                nkeys[k] += 1
            else:
                newcol[k][nnew[k]] = c
                nnew[k] += 1
        for c in newcol[k][:nnew[k]]:
            slot[twig.columns[c]] = len(slot)
    if len(slot) != num_query_vertices:
        raise ValueError("the STwigs do not cover every query vertex")
    vertex_of_slot = np.empty(num_query_vertices, np.int64)
    vertex_of_slot[list(slot.values())] = list(slot.keys())
    keycol, keyslot, newcol = (np.array(a, np.int32) for a in (keycol, keyslot, newcol))
    nkeys, nnew, first_new = (np.array(a, np.int64) for a in (nkeys, nnew, first_new))
    return JoinPlan(tuple(twigs), tuple(order), vertex_of_slot, nkeys, nnew, first_new, keycol, keyslot, newcol)


def estimated_order(twigs: list[Twig], rows: list[int], distinct: list[list[int]]) -> list[int]:
    """The paper's "order of leaves" by result-size prediction (§4.1; the estimate of Garcia-Molina,
    Ullman and Widom, which the paper cites without detail): greedily join next the build
    relation, among those sharing a vertex with what is bound, that adds the fewest results per
    intermediate tuple, |R| / prod over its key columns a of V(R, a) (V = distinct values);
    ties by STwig index. ``rows[t]`` / ``distinct[t][c]``: rows and per-column distinct values of R_t."""
    bound = set(twigs[0].columns)
    remaining = list(range(1, len(twigs)))
    order = []
    while remaining:
        def fanout(t: int) -> float:
            estimate = float(rows[t])
            for c, x in enumerate(twigs[t].columns):
                if x in bound:
                    estimate /= max(1, distinct[t][c])
            return estimate
        joinable = [t for t in remaining if any(x in bound for x in twigs[t].columns)]
        best = min(joinable, key=lambda t: (fanout(t), t))
        order.append(best)
        remaining.remove(best)
        bound.update(twigs[best].columns)
    return order
