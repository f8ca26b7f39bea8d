"""The CPU reference matcher: a compiled backtracking matcher, the correctness oracle of every
GPU engine and the CPU baseline of the comparisons (docs/design.md, "GPU, simulator and CPU").

    engine = ReferenceMatcher().prepare(data)     # registry name "cpu"
    result = engine.match(query, timeout_s=10)

It counts ordered, injective (or, with ``homomorphic=True``, arbitrary), label-preserving,
non-induced embeddings, with optional edge labels and directed edges, in the filter / order /
enumerate framework of the SIGMOD'20 study (Sun and Luo, "In-Memory Subgraph Matching: An
In-depth Study", §3-§4):

* **filter** (:func:`_filter`, :func:`_refine`): label, degree, neighbour-label frequencies (NLF)
  and, by default, neighbourhood-consistency refinement to a fixpoint (GraphQL/CFL/DP-iso);
* **plan** (:func:`matching_order`): a connected greedy order, RI-like by default or GraphQL-like;
  a disconnected query is ordered one component after another;
* **enumerate** (:func:`_enumerate`): iterative backtracking over an explicit stack, the smallest
  label-restricted adjacency range scanned and the other ordered neighbours binary-searched; when
  only counting, a suffix of levels that cannot collide (:func:`_counting_tail`) is a product.
  The compiled function runs a bounded number of steps, so the driver enforces ``timeout_s``
  between chunks, grows the ``collect`` buffer and stops at ``limit``.

:meth:`ReferenceMatcher.prepare` re-sorts every adjacency row by ``label(w) * n + w``, so a
vertex's neighbours of one label are one range found by two binary searches.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..engine.base import Engine
from ..engine.deadline import Deadline, Stop
from ..engine.part import Part, branch_outside_mask, order_branch_vertices, outside_mask
from ..engine.result import MatchResult, Status
from ..graph.model import Graph
from ..graph.sorted_ranges import lower_bound

FILTERS = ("label", "degree", "nlf", "refine")
ORDERS = ("gql", "ri", "input")

# Return codes of _enumerate.
_DONE, _BUDGET, _LIMIT, _FULL, _CARRY = 0, 1, 2, 3, 4
# The count is kept in two limbs of base 2^62 (state[6] * 2^62 + state[1]), so that adding a
# product below 2^62 never overflows int64; a suffix product that reaches 2^62 is handed to the
# host (_CARRY), which multiplies the suffix's match counts as Python ints.
_LIMB = np.int64(1) << np.int64(62)
# Scan sources of a stack level: the candidate list, an out-row, an in-row.
_SRC_CAND, _SRC_OUT, _SRC_IN = 0, 1, 2

_COLLECT_START = 1024        # first capacity (rows) of a collect buffer; doubled when full
_COLLECT_MAX = 1 << 22       # largest single collect buffer


# ---------------------------------------------------------------------- compiled kernels
@njit(cache=True, nogil=True)
def _label_range(off, key, v, label, n):
    """[lo, hi) of v's neighbours with vertex label ``label`` in a label-keyed CSR."""
    start, stop = off[v], off[v + 1]
    base = np.int64(label) * n
    lo = lower_bound(key, start, stop, base)
    hi = lower_bound(key, lo, stop, base + n)
    return lo, hi


@njit(cache=True, nogil=True)
def _label_block(lab_off, lab):
    """[lo, hi) in ``vbl`` (vertices grouped by label) of the data vertices labelled ``lab``;
    empty for a label the data graph does not have."""
    if lab >= lab_off.shape[0] - 1:
        return 0, 0
    return lab_off[lab], lab_off[lab + 1]


@njit(cache=True, nogil=True)
def _has_edge(n, labels, out_off, out_key, out_el, in_off, in_key, in_el, a, b, el, use_el):
    """True if the data edge a -> b exists (with edge label ``el`` when ``use_el``).

    Searches the shorter of a's out-row and b's in-row (the same row twice when undirected).
    """
    a0, a1 = out_off[a], out_off[a + 1]
    b0, b1 = in_off[b], in_off[b + 1]
    if a1 - a0 <= b1 - b0:
        k = np.int64(labels[b]) * n + b
        i = lower_bound(out_key, a0, a1, k)
        if i == a1 or out_key[i] != k:
            return False
        return (not use_el) or out_el[i] == el
    k = np.int64(labels[a]) * n + a
    i = lower_bound(in_key, b0, b1, k)
    if i == b1 or in_key[i] != k:
        return False
    return (not use_el) or in_el[i] == el


@njit(cache=True, nogil=True)
def _filter(level, n, vbl, lab_off, out_off, out_key, in_off, in_key, directed,
            q_labels, q_out_deg, q_in_deg, nlf_off, nlf_lab, nlf_out, nlf_in):
    """Candidate bitmap (nq, n) of every query vertex.

    ``level`` 0 keeps label matches, 1 adds deg(v) >= deg(u) (in- and out-degree when
    directed), 2 adds NLF: for every label l, v has at least as many l-labelled (out-/in-)
    neighbours as u.
    """
    nq = q_labels.shape[0]
    cand = np.zeros((nq, n), np.uint8)
    for u in range(nq):
        b_lo, b_hi = _label_block(lab_off, q_labels[u])
        for i in range(b_lo, b_hi):
            v = vbl[i]
            if level >= 1:
                if out_off[v + 1] - out_off[v] < q_out_deg[u]:
                    continue
                if directed and in_off[v + 1] - in_off[v] < q_in_deg[u]:
                    continue
            if level >= 2:
                ok = True
                for k in range(nlf_off[u], nlf_off[u + 1]):
                    lo, hi = _label_range(out_off, out_key, v, nlf_lab[k], n)
                    if hi - lo < nlf_out[k]:
                        ok = False
                        break
                    if directed:
                        lo, hi = _label_range(in_off, in_key, v, nlf_lab[k], n)
                        if hi - lo < nlf_in[k]:
                            ok = False
                            break
                if not ok:
                    continue
            cand[u, v] = 1
    return cand


@njit(cache=True, nogil=True)
def _refine(cand, n, vbl, lab_off, out_off, out_key, out_nbr, out_el, in_off, in_key, in_nbr,
            in_el, use_el, q_labels, adj_off, adj_w, adj_dir, adj_el):
    """Neighbourhood-consistency refinement, run to a fixpoint (in place).

    v stays in C(u) only if, for every query edge (u, w), v has a neighbour x in C(w) across a
    data edge of the same direction and label: the arc-consistency rounds that GraphQL, CFL and
    DP-iso apply to their candidate sets, done here until nothing changes. Query edge k of u goes
    to ``adj_w[k]``, out of u when ``adj_dir[k] == 0``, into u when 1.
    """
    nq = q_labels.shape[0]
    changed = True
    while changed:
        changed = False
        for u in range(nq):
            b_lo, b_hi = _label_block(lab_off, q_labels[u])
            for i in range(b_lo, b_hi):
                v = vbl[i]
                if cand[u, v] == 0:
                    continue
                for k in range(adj_off[u], adj_off[u + 1]):
                    w = adj_w[k]
                    if adj_dir[k] == 0:
                        lo, hi = _label_range(out_off, out_key, v, q_labels[w], n)
                    else:
                        lo, hi = _label_range(in_off, in_key, v, q_labels[w], n)
                    supported = False
                    for j in range(lo, hi):
                        x = out_nbr[j] if adj_dir[k] == 0 else in_nbr[j]
                        if cand[w, x] == 0:
                            continue
                        if use_el and (out_el[j] if adj_dir[k] == 0 else in_el[j]) != adj_el[k]:
                            continue
                        supported = True
                        break
                    if not supported:
                        cand[u, v] = 0
                        changed = True
                        break


@njit(cache=True, nogil=True)
def _candidate_lists(cand, q_labels, vbl, lab_off):
    """The candidate bitmap's rows as sorted lists in CSR form: (offsets (nq+1), vertices)."""
    nq = q_labels.shape[0]
    cl_off = np.zeros(nq + 1, np.int64)
    for u in range(nq):
        b_lo, b_hi = _label_block(lab_off, q_labels[u])
        size = 0
        for i in range(b_lo, b_hi):
            size += cand[u, vbl[i]]
        cl_off[u + 1] = cl_off[u] + size
    cl = np.empty(cl_off[nq], np.int32)
    for u in range(nq):
        b_lo, b_hi = _label_block(lab_off, q_labels[u])
        j = cl_off[u]
        for i in range(b_lo, b_hi):
            v = vbl[i]
            if cand[u, v]:
                cl[j] = v
                j += 1
    return cl_off, cl


@njit(cache=True, nogil=True)
def _init_level(d, n, out_off, out_key, in_off, in_key, qv, qlab, bw_off, bw_p, bw_dir,
                cl_off, f, pos, end, src, skip):
    """Set the scan range of stack level d: the candidate list of its query vertex if it has no
    ordered neighbour, else the smallest label-restricted row among its ordered neighbours."""
    k0, k1 = bw_off[d], bw_off[d + 1]
    if k0 == k1:
        u = qv[d]
        src[d] = _SRC_CAND
        skip[d] = -1
        pos[d] = cl_off[u]
        end[d] = cl_off[u + 1]
        return
    best = np.int64(-1)
    for k in range(k0, k1):
        w = f[bw_p[k]]
        if bw_dir[k] == 0:
            lo, hi = _label_range(out_off, out_key, w, qlab[d], n)
        else:
            lo, hi = _label_range(in_off, in_key, w, qlab[d], n)
        if best < 0 or hi - lo < best:
            best = hi - lo
            pos[d] = lo
            end[d] = hi
            skip[d] = k
            src[d] = _SRC_OUT if bw_dir[k] == 0 else _SRC_IN
        if best == 0:
            break


@njit(cache=True, nogil=True)
def _enumerate(n, labels, out_off, out_key, out_nbr, out_el, in_off, in_key, in_nbr, in_el,
               use_el, homomorphic, qv, qlab, bw_off, bw_p, bw_dir, bw_el, cand, cl_off, cl,
               tail, state, pos, end, src, skip, f, used, limit, collect, out, budget, factor):
    """Backtracking over the matching order ``qv`` for at most ~``budget`` steps.

    The stack lives in the arrays passed in: ``state = [depth, count, started, product,
    matches, big, count_hi]`` (the count is ``count_hi * 2^62 + count``, count < 2^62;
    ``big`` marks a suffix product that passed 2^62), and per level the scan position
    ``pos``, its end ``end``, its source ``src`` (candidate list, out-row or in-row), the
    backward constraint ``skip`` the scan already satisfies, and the mapped data vertex ``f``
    (-1 when unmapped). Constraint k of level d says: the data vertex at level ``bw_p[k]``
    has an edge to (``bw_dir[k] == 0``) or from (1) the new vertex, with label ``bw_el[k]``.

    Levels ``tail..nq-1`` are counted, not pushed. With ``tail == nq-1`` the last level's
    matches are counted (and written to ``out`` when ``collect``) one by one. A smaller
    ``tail`` (counting only; see :func:`_counting_tail`) marks levels that depend on earlier
    levels only and cannot collide with each other: their numbers of matches multiply (each
    level's number is kept in ``factor`` too).

    Returns (code, rows written to ``out``): ``_DONE`` when the search is exhausted,
    ``_BUDGET`` when the step budget ran out, ``_LIMIT`` when the count reached ``limit``
    (-1: none), ``_FULL`` when ``out`` is full, ``_CARRY`` when a suffix's product passed 2^62:
    the host adds the product of ``factor[tail..nq-1]`` (a Python int) to its own count and
    calls again (the search resumes past that suffix).
    """
    nq = qv.shape[0]
    last = nq - 1
    multiply = tail < last
    if state[2] == 0:
        state[2] = 1
        state[0] = 0
        state[3] = 1
        _init_level(0, n, out_off, out_key, in_off, in_key, qv, qlab, bw_off, bw_p, bw_dir,
                    cl_off, f, pos, end, src, skip)
    d = state[0]
    count = state[1]
    product = state[3]
    matches = state[4]
    big = state[5]
    count_hi = state[6]
    steps = 0
    written = 0
    while d >= 0:
        if d < tail and f[d] >= 0:
            if not homomorphic:
                used[f[d]] = 0
            f[d] = -1
        u = qv[d]
        k0, k1 = bw_off[d], bw_off[d + 1]
        s = skip[d]
        source = src[d]
        found = -1
        while pos[d] < end[d]:
            if steps >= budget:
                state[0] = d
                state[1] = count
                state[3] = product
                state[4] = matches
                state[5] = big
                state[6] = count_hi
                return _BUDGET, written
            j = pos[d]
            pos[d] = j + 1
            steps += 1
            if source == _SRC_CAND:
                v = cl[j]
            elif source == _SRC_OUT:
                v = out_nbr[j]
                if use_el and out_el[j] != bw_el[s]:
                    continue
            else:
                v = in_nbr[j]
                if use_el and in_el[j] != bw_el[s]:
                    continue
            if cand[u, v] == 0 or (not homomorphic and used[v] != 0):
                continue
            ok = True
            for k in range(k0, k1):
                if k == s:
                    continue
                steps += 1
                w = f[bw_p[k]]
                if bw_dir[k] == 0:
                    ok = _has_edge(n, labels, out_off, out_key, out_el, in_off, in_key, in_el,
                                   w, v, bw_el[k], use_el)
                else:
                    ok = _has_edge(n, labels, out_off, out_key, out_el, in_off, in_key, in_el,
                                   v, w, bw_el[k], use_el)
                if not ok:
                    break
            if not ok:
                continue
            if multiply and d >= tail:
                matches += 1
            elif d == last:
                if collect:
                    if written == out.shape[0]:
                        pos[d] = j
                        state[0] = d
                        state[1] = count
                        state[6] = count_hi
                        return _FULL, written
                    for i in range(last):
                        out[written, qv[i]] = f[i]
                    out[written, u] = v
                    written += 1
                count += 1
                if count == _LIMB:
                    count = 0
                    count_hi += 1
                if count == limit and count_hi == 0:
                    state[0] = d
                    state[1] = count
                    state[6] = count_hi
                    return _LIMIT, written
            else:
                found = v
                break
        if multiply and d >= tail:
            factor[d] = matches
            if matches == 0:
                product = 0
                big = 0
            elif big == 0:
                if product >= _LIMB // matches:      # the product would reach 2^62: the host's
                    big = 1
                else:
                    product *= matches
            matches = 0
            if (product > 0 or big != 0) and d < last:
                d += 1
                _init_level(d, n, out_off, out_key, in_off, in_key, qv, qlab, bw_off, bw_p,
                            bw_dir, cl_off, f, pos, end, src, skip)
                continue
            if big != 0:                             # the host adds prod(factor[tail:])
                state[0] = tail - 1
                state[1] = count
                state[3] = 1
                state[4] = 0
                state[5] = 0
                state[6] = count_hi
                return _CARRY, written
            count += product                         # both below 2^62: no int64 overflow
            if count >= _LIMB:
                count -= _LIMB
                count_hi += 1
            product = 1
            d = tail - 1
            continue
        if found < 0:
            d -= 1
            continue
        f[d] = found
        if not homomorphic:
            used[found] = 1
        d += 1
        _init_level(d, n, out_off, out_key, in_off, in_key, qv, qlab, bw_off, bw_p, bw_dir,
                    cl_off, f, pos, end, src, skip)
    state[0] = d
    state[1] = count
    state[6] = count_hi
    return _DONE, written


# ---------------------------------------------------------------------- data-graph state
def _own(array, dtype) -> np.ndarray:
    """A writable C-contiguous copy: the kernels are compiled for writable arrays only, and
    Graph's arrays are read-only (a read-only array would be a second signature to compile)."""
    return np.array(array, dtype=dtype, order="C", copy=True)


def _label_keyed_csr(offsets: np.ndarray, neighbors: np.ndarray, edge_labels: np.ndarray | None,
                     labels: np.ndarray):
    """Re-sort every row by ``label(w) * n + w``; returns (offsets, keys, neighbors, edge_labels)."""
    n = labels.size
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    key = labels[neighbors].astype(np.int64) * n + neighbors
    order = np.lexsort((key, rows))
    elab = np.zeros(neighbors.size, np.int32) if edge_labels is None else edge_labels[order]
    return (_own(offsets, np.int64), _own(key[order], np.int64), _own(neighbors[order], np.int32),
            _own(elab, np.int32))


@dataclass(frozen=True)
class _DataArrays:
    """The prepared data graph: label-keyed out- and in-CSR (the same arrays when undirected)."""

    n: int
    directed: bool
    has_edge_labels: bool
    labels: np.ndarray
    vertices_by_label: np.ndarray
    label_offsets: np.ndarray
    out: tuple
    inn: tuple

    @classmethod
    def build(cls, data: Graph) -> "_DataArrays":
        labels = _own(data.labels, np.int32)
        out = _label_keyed_csr(data.offsets, data.neighbors, data.edge_labels, labels)
        inn = _label_keyed_csr(*data.in_csr, labels) if data.directed else out
        return cls(data.num_vertices, data.directed, data.has_edge_labels, labels,
                   _own(data.vertices_by_label, np.int32), _own(data.label_offsets, np.int64),
                   out, inn)


# ---------------------------------------------------------------------- query-side planning
def _query_degrees(query: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(out-degree, in-degree) of each query vertex (both the degree when undirected)."""
    out_deg = _own(query.degrees, np.int64)
    if not query.directed:
        return out_deg, out_deg
    return out_deg, np.diff(query.in_csr[0]).astype(np.int64)


def _query_nlf(query: Graph) -> tuple[np.ndarray, ...]:
    """Neighbour-label frequencies per query vertex as CSR: (offsets, label, out-count, in-count)."""
    nq, num_labels = query.num_vertices, query.num_labels
    rows = np.repeat(np.arange(nq, dtype=np.int64), query.degrees)
    key_out = rows * num_labels + query.labels[query.neighbors]
    key_in = key_out[:0]
    if query.directed:
        in_off, in_nbr, _ = query.in_csr
        in_rows = np.repeat(np.arange(nq, dtype=np.int64), np.diff(in_off))
        key_in = in_rows * num_labels + query.labels[in_nbr]
    keys = np.union1d(key_out, key_in)
    cnt_out = np.bincount(np.searchsorted(keys, key_out), minlength=keys.size)
    cnt_in = np.bincount(np.searchsorted(keys, key_in), minlength=keys.size)
    off = np.zeros(nq + 1, np.int64)
    np.cumsum(np.bincount(keys // num_labels, minlength=nq), out=off[1:])
    return off, _own(keys % num_labels, np.int32), _own(cnt_out, np.int64), _own(cnt_in, np.int64)


def _query_arcs(query: Graph) -> tuple[np.ndarray, ...]:
    """Every query edge seen from both endpoints, as CSR over the vertex it is seen from:
    (offsets, other endpoint, direction (0: out of the vertex, 1: into it), edge label)."""
    src, dst, elab = query.edges()
    elab = np.zeros(src.size, np.int32) if elab is None else elab
    back = 1 if query.directed else 0
    frm = np.concatenate([src, dst]).astype(np.int64)
    order = np.argsort(frm, kind="stable")
    to = np.concatenate([dst, src])[order]
    direction = np.concatenate([np.zeros(src.size, np.int64), np.full(src.size, back, np.int64)])[order]
    off = np.zeros(query.num_vertices + 1, np.int64)
    np.cumsum(np.bincount(frm, minlength=query.num_vertices), out=off[1:])
    elab = np.concatenate([elab, elab])[order]
    return off, _own(to, np.int64), _own(direction, np.int64), _own(elab, np.int32)


def _undirected_adjacency(query: Graph) -> list[set[int]]:
    src, dst, _ = query.edges()
    adj = [set() for _ in range(query.num_vertices)]
    for a, b in zip(src.tolist(), dst.tolist()):
        adj[a].add(b)
        adj[b].add(a)
    return adj


def matching_order(query: Graph, candidate_sizes, method: str = "gql", deadline: Deadline | None = None) -> list[int]:
    """Matching order of the query vertices; every vertex after the first of its connected
    component has an already-ordered neighbour, and components come one after another.

    ``"gql"`` (GraphQL-like): a component starts with the vertex of least ``|C(u)| / deg(u)``;
    next comes the unordered vertex with the most ordered neighbours (ties: fewest candidates,
    then higher degree). ``"ri"`` (RI-like): a component starts with its vertex of highest
    degree; next comes the vertex with the most ordered neighbours (ties: higher degree, then
    fewest candidates), which puts the dense core first and the tree-like fringe last.
    Remaining ties go to the lower id. ``"input"``: the query's own vertex order.
    A ``deadline`` (:class:`~common.engine.deadline.Deadline`) is checked per ordered vertex: past it,
    :class:`~common.engine.deadline.Stop` (each step scans the unordered vertices, so a large query takes a while).
    """
    nq = query.num_vertices
    if method == "input":
        return list(range(nq))
    if method not in ORDERS:
        raise ValueError(f"unknown order {method!r}; choose one of {ORDERS}")
    adj = _undirected_adjacency(query)
    sizes = [int(s) for s in candidate_sizes]
    degree = [len(a) for a in adj]
    if method == "gql":
        def first(x):
            return sizes[x] / max(degree[x], 1), x

        def following(x):
            return -ordered_nbrs[x], sizes[x], -degree[x], x
    else:
        def first(x):
            return -degree[x], sizes[x], x

        def following(x):
            return -ordered_nbrs[x], -degree[x], sizes[x], x
    ordered_nbrs = [0] * nq
    remaining = set(range(nq))
    order: list[int] = []
    while remaining:
        if deadline is not None:
            deadline.check()
        frontier = [u for u in remaining if ordered_nbrs[u] > 0]
        u = min(frontier, key=following) if frontier else min(remaining, key=first)
        order.append(u)
        remaining.discard(u)
        for w in adj[u]:
            ordered_nbrs[w] += 1
    return order


def _backward_constraints(query: Graph, order: list[int]):
    """Per level, the edges to already-ordered vertices: CSR (bw_off, bw_p, bw_dir, bw_el).

    bw_p is the level of the ordered endpoint; bw_dir 0 means the query edge runs from it to
    the new vertex (or is undirected), 1 means from the new vertex to it.
    """
    nq = query.num_vertices
    level = np.empty(nq, dtype=np.int64)
    level[np.asarray(order, dtype=np.int64)] = np.arange(nq)
    src, dst, elab = query.edges()
    elab = np.zeros(src.size, np.int32) if elab is None else elab
    per_level: list[list[tuple[int, int, int]]] = [[] for _ in range(nq)]
    for a, b, el in zip(level[src].tolist(), level[dst].tolist(), elab.tolist()):
        if a < b:
            per_level[b].append((a, 0, el))
        else:
            per_level[a].append((b, 1 if query.directed else 0, el))
    off = np.zeros(nq + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(c) for c in per_level])
    flat = [c for cons in per_level for c in sorted(cons)]
    arr = np.asarray(flat, dtype=np.int64).reshape(-1, 3)
    return off, _own(arr[:, 0], np.int64), _own(arr[:, 1], np.int64), _own(arr[:, 2], np.int32)


def _counting_tail(query: Graph, order: list[int], bw_off: np.ndarray, bw_p: np.ndarray,
                   homomorphic: bool, deadline: Deadline | None = None) -> int:
    """First level of the longest suffix of the order whose matches can be multiplied.

    Every ordered neighbour of a suffix level must lie before the suffix (so its matches
    depend on the prefix only), and, unless homomorphic, the suffix's labels must be pairwise
    distinct (so two suffix vertices never map to one data vertex). Level nq-1 always
    qualifies as the leaf level counted one by one; the prefix keeps at least one level.
    """
    nq = query.num_vertices
    labels = query.labels[np.asarray(order)]
    tail = nq - 1
    seen = {int(labels[tail])}
    while tail - 1 >= 1:
        if deadline is not None:
            deadline.check()
        d = tail - 1
        lab = int(labels[d])
        if not homomorphic and lab in seen:
            break
        # Moving the boundary below d: no later suffix level may depend on level d.
        if np.any(bw_p[bw_off[tail]:bw_off[nq]] == d):
            break
        seen.add(lab)
        tail = d
    return tail


# ---------------------------------------------------------------------- the engine
class ReferenceMatcher(Engine):
    """Compiled CPU backtracking matcher (module docstring); registry name ``"cpu"``.

    Parameters
    ----------
    filter : {"label", "degree", "nlf", "refine"}
        Candidate filter (:data:`FILTERS`); "refine" is NLF plus neighbourhood refinement to a
        fixpoint (:func:`_filter`, :func:`_refine`).
    order : {"ri", "gql", "input"}
        Matching order (:data:`ORDERS`, :func:`matching_order`).
    chunk_steps : int
        Search steps per compiled call: the granularity of ``timeout_s``.
    root_range : (int, int) or None
        The :attr:`default_part`'s: keep the embeddings whose first vertex of the order
        (:meth:`root_vertex`, chosen from the unrestricted candidates) maps into [lo, hi)
        (:mod:`common.engine.part`; ``match(query, part=...)`` chooses per call).
    branch_part : (int, int), ((int, int), (int, int)) or None
        The :attr:`default_part`'s: ``(j, m)`` keeps the embeddings whose second vertex of the
        order (the first of :meth:`branch_vertices`) maps to a data vertex v with ``v % m == j``;
        ``((j, m), (k, m2))`` also keeps only those whose third vertex maps to a w with
        ``w % m2 == k``.
    device_memory_limit : int or None
        Accepted and ignored: this engine runs on the CPU.
    """

    name = "cpu"
    limitations = {}
    max_query_vertices = None
    uses_device = False
    supports_parts = True
    supports_branch_parts = True

    def __init__(self, *, filter: str = "refine", order: str = "ri", chunk_steps: int = 1 << 22,
                 root_range: tuple[int, int] | None = None, branch_part: tuple | None = None,
                 device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if filter not in FILTERS:
            raise ValueError(f"unknown filter {filter!r}; choose one of {FILTERS}")
        if order not in ORDERS:
            raise ValueError(f"unknown order {order!r}; choose one of {ORDERS}")
        if int(chunk_steps) < 1:
            raise ValueError(f"chunk_steps must be >= 1, got {chunk_steps}")
        self.filter = filter
        self.order = order
        self.chunk_steps = int(chunk_steps)
        self.default_part = Part(root_range, branch_part)
        self._arrays: _DataArrays | None = None

    def _prepare(self, data: Graph) -> None:
        _warm_up()
        self._arrays = _DataArrays.build(data)

    # ------------------------------------------------------------------ phases
    def candidates(self, query: Graph, *, homomorphic: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Filter phase: (bitmap (nq, n) uint8, list offsets (nq+1), lists) of the candidates.

        A homomorphism may map two neighbours of u to one data vertex, so the degree and NLF
        conditions do not hold for it: with ``homomorphic`` only labels and refinement apply.
        """
        g = self._arrays
        q_labels = _own(query.labels, np.int32)
        q_out_deg, q_in_deg = _query_degrees(query)
        level = 0 if homomorphic else min(FILTERS.index(self.filter), 2)
        cand = _filter(level, g.n, g.vertices_by_label, g.label_offsets,
                       g.out[0], g.out[1], g.inn[0], g.inn[1], g.directed,
                       q_labels, q_out_deg, q_in_deg, *_query_nlf(query))
        if self.filter == "refine":
            use_el = bool(g.has_edge_labels or query.has_edge_labels)
            _refine(cand, g.n, g.vertices_by_label, g.label_offsets, *g.out, *g.inn, use_el,
                    q_labels, *_query_arcs(query))
        return (cand, *_candidate_lists(cand, q_labels, g.vertices_by_label, g.label_offsets))

    def root_vertex(self, query: Graph, *, homomorphic: bool = False) -> int:
        """The query vertex a part's ``root_range`` restricts: the first of the matching order."""
        _, cl_off, _ = self.candidates(query, homomorphic=homomorphic)
        return matching_order(query, np.diff(cl_off), self.order)[0]

    def branch_vertices(self, query: Graph, *, homomorphic: bool = False) -> tuple[int, ...]:
        """The query vertices a part's ``branch_part`` levels restrict: the second and third of
        the matching order (the last for a shorter query)."""
        _, cl_off, _ = self.candidates(query, homomorphic=homomorphic)
        return order_branch_vertices(matching_order(query, np.diff(cl_off), self.order))

    def _restrict(self, cand: np.ndarray, order, query: Graph, part: Part):
        """Drop the root's candidates outside the part's ``root_range`` and the branch vertices'
        outside its ``branch_part``, refine again (fewer candidates can only remove others) and
        rebuild the lists."""
        g = self._arrays
        if part.root_range is not None:
            cand[order[0], outside_mask(g.n, part.root_range)] = 0
        for u, level in zip(order_branch_vertices(order), part.branch_part or ()):
            cand[u, branch_outside_mask(g.n, level)] = 0
        q_labels = _own(query.labels, np.int32)
        if self.filter == "refine":
            use_el = bool(g.has_edge_labels or query.has_edge_labels)
            _refine(cand, g.n, g.vertices_by_label, g.label_offsets, *g.out, *g.inn, use_el,
                    q_labels, *_query_arcs(query))
        return (cand, *_candidate_lists(cand, q_labels, g.vertices_by_label, g.label_offsets))

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic, part: Part) -> MatchResult:
        start = time.perf_counter()
        deadline = Deadline(timeout_s, start)
        g = self._arrays
        nq = query.num_vertices

        cand, cl_off, cl = self.candidates(query, homomorphic=homomorphic)
        sizes = np.diff(cl_off)
        t_filter = time.perf_counter()

        # The deadline holds in every phase: after the (compiled) filter, inside the planning
        # loops, and between the enumeration's compiled chunks.
        try:
            deadline.check()
            order = matching_order(query, sizes, self.order, deadline)
            if not part.whole:                                                # the order comes first
                cand, cl_off, cl = self._restrict(cand, order, query, part)
                sizes = np.diff(cl_off)
            bw_off, bw_p, bw_dir, bw_el = _backward_constraints(query, order)
            qv = np.asarray(order, dtype=np.int64)
            qlab = _own(query.labels[qv], np.int32)
            counting = not collect and limit is None
            tail = _counting_tail(query, order, bw_off, bw_p, homomorphic, deadline) if counting else nq - 1
        except Stop:
            t_plan = time.perf_counter()
            return MatchResult(self.name, 0, Status.TIMEOUT, reason="deadline passed before the search began",
                               embeddings=np.zeros((0, nq), np.int32) if collect else None,
                               phases={"filter": t_filter - start, "plan": t_plan - t_filter, "enumerate": 0.0},
                               stats={"filter": self.filter, "candidate_sizes": sizes.tolist()})
        t_plan = time.perf_counter()

        stats = {"filter": self.filter, "order": order, "candidate_sizes": sizes.tolist(),
                 "multiplied_levels": nq - tail}
        stats.update(part.stats())
        chunks: list[np.ndarray] = []
        status, count, calls = Status.OK, 0, 0
        if sizes.min() > 0 and (homomorphic or nq <= g.n):
            state = np.zeros(7, np.int64)
            factor = np.ones(nq, np.int64)
            carried = 0                  # suffix products past 2^62, as Python ints (_CARRY)
            pos, end = np.zeros(nq, np.int64), np.zeros(nq, np.int64)
            src, skip = np.zeros(nq, np.int64), np.zeros(nq, np.int64)
            f = np.full(nq, -1, np.int64)
            used = np.zeros(g.n, np.uint8)
            capacity = min(limit or _COLLECT_START, _COLLECT_START) if collect else 0
            use_el = bool(g.has_edge_labels or query.has_edge_labels)
            while True:
                out = np.empty((capacity, nq), np.int32)
                code, written = _enumerate(
                    g.n, g.labels, *g.out, *g.inn, use_el, bool(homomorphic), qv, qlab,
                    bw_off, bw_p, bw_dir, bw_el, cand, cl_off, cl, tail, state, pos, end, src, skip,
                    f, used, -1 if limit is None else int(limit), bool(collect), out,
                    self.chunk_steps, factor)
                calls += 1
                if written:
                    chunks.append(out[:written] if 2 * written >= capacity else out[:written].copy())
                if code == _DONE:
                    break
                if code == _LIMIT:
                    status = Status.LIMIT
                    break
                if code == _CARRY:
                    carried += math.prod(int(m) for m in factor[tail:])
                    if deadline.passed():
                        status = Status.TIMEOUT
                        break
                    continue
                if code == _FULL:
                    capacity = min(2 * capacity, _COLLECT_MAX)
                if deadline.passed():
                    status = Status.TIMEOUT
                    break
            count = carried + (int(state[6]) << 62) + int(state[1])
        t_end = time.perf_counter()
        stats["compiled_calls"] = calls
        embeddings = None
        if collect:
            embeddings = np.concatenate(chunks) if chunks else np.zeros((0, nq), np.int32)
        return MatchResult(self.name, count, status, embeddings=embeddings,
                           phases={"filter": t_filter - start, "plan": t_plan - t_filter,
                                   "enumerate": t_end - t_plan},
                           stats=stats)


_WARM = False


def _warm_up() -> None:
    """Compile (or load from numba's cache) every kernel once per process on a tiny graph, with
    the same argument types as real calls, so no query's time includes compilation."""
    global _WARM
    if _WARM:
        return
    _WARM = True
    tiny = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], [0, 0, 0], [1, 1, 1])
    ReferenceMatcher(filter="refine").prepare(tiny).match(tiny, collect=True)
