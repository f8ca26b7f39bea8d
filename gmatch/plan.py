"""gMatch query plan (paper Sec. 3.1 step 1; docs/papers.md): RI matching order, the query's
automorphism group and symmetry-breaking restrictions, renamed to order positions.

* Order: RI (Bonnici et al. 2013) as the authors' code implements it: the vertex of maximum
  degree, then the vertex with most ordered neighbours; ties by (1) ordered vertices sharing a
  neighbour with the candidate's unordered neighbours, (2) the candidate's unordered neighbours
  not adjacent to the ordered set, (3) lowest id.
* Symmetry breaking (paper App. A; GraphPi-style, as the authors' code): walking the order, every
  vertex w != u_i in the orbit of u_i under the pointwise stabiliser of u_0..u_{i-1} must get a
  smaller data vertex than u_i; each automorphism class of embeddings then has exactly one member
  that meets every restriction (Grochow and Kellis 2007), and |Aut(Q)| is the product of those
  orbit sizes.
* Every query vertex is renamed to its order position: ``backward[d]``, ``restrict[d]`` and
  ``same_label[d]`` are bitmasks of earlier positions (adjacent; whose image must be greater;
  with d's label).
* Leaf deferral (``defer_leaves=True``; not in the paper, CFL-Match's postponement of degree-one
  vertices, Bi et al. SIGMOD 2016): a *countable leaf* (degree one, fixed by every automorphism,
  its label unique among countable leaves) is moved to the end of the order and counted as its
  neighbour's candidate-graph row minus the same-label images in it (at least two positions stay
  enumerated).

The plan is compiled host code (``numba.njit``) over neighbour bitmasks (bit x of ``nbr[u]`` =
edge u-x). docs/decisions.md ("gMatch's plan") gives the choices where the paper is silent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from common.bitmasks import lowest_bit, neighbour_masks, popcount
from common.graph import Graph

MAX_QUERY_VERTICES = 32     # positions are bits of a uint32 mask


@dataclass(frozen=True)
class QueryPlan:
    """Everything the kernels need about one query, indexed by order position."""

    order: np.ndarray            # order[d] = query vertex at position d (int32)
    labels: np.ndarray           # label of position d (int32)
    degrees: np.ndarray          # query degree of position d (int32)
    backward: np.ndarray         # uint32 bitmask of earlier adjacent positions, per position
    restrict: np.ndarray         # uint32 bitmask of earlier positions whose image must be larger
    automorphisms: int           # |Aut(Q)| (label-preserving)
    orbit_sizes: tuple = field(default_factory=tuple)
    same_label: np.ndarray = None   # uint32 bitmask of earlier positions with the same label
    free_leaves: int = 0         # trailing positions that are countable leaves (``defer_leaves``)

    @property
    def size(self) -> int:
        return int(self.order.size)


@njit(cache=True, nogil=True)
def ri_order(nbr):
    """RI matching order of a connected query given by its neighbour masks."""
    n = nbr.size
    first, most = 0, -1
    for u in range(n):                     # largest degree, then smallest id
        if popcount(nbr[u]) > most:
            first, most = u, popcount(nbr[u])
    order = np.empty(n, np.int64)
    order[0] = first
    placed = np.int64(1) << first
    near = nbr[first]                      # vertices adjacent to the ordered set
    for k in range(1, n):
        best, key0, key1, key2 = -1, -1, -1, -1
        for u in range(n):
            if (placed >> u) & 1 or not (near >> u) & 1:
                continue                   # ordered already, or would disconnect the order
            unplaced = nbr[u] & ~placed
            reach, rest = np.int64(0), unplaced   # ordered vertices adjacent to an unplaced neighbour
            while rest:
                low = rest & -rest
                reach |= nbr[lowest_bit(low)]
                rest ^= low
            k0 = popcount(nbr[u] & placed)
            k1 = popcount(reach & placed)
            k2 = popcount(unplaced & ~near)
            if (k0, k1, k2) > (key0, key1, key2):     # ties keep the smaller id
                best, key0, key1, key2 = u, k0, k1, k2
        if best < 0:
            raise ValueError("the query is not connected")
        order[k] = best
        placed |= np.int64(1) << best
        near |= nbr[best]
    return order


@njit(cache=True, nogil=True)
def _first_seen_classes(keys):
    """Class ids of the rows of ``keys`` (equal rows, equal ids; numbered by first occurrence)
    and the number of classes."""
    n = keys.shape[0]
    ids = np.empty(n, np.int64)
    classes = 0
    for u in range(n):
        ids[u] = -1
        for w in range(u):
            if (keys[w] == keys[u]).all():
                ids[u] = ids[w]
                break
        if ids[u] < 0:
            ids[u] = classes
            classes += 1
    return ids, classes


@njit(cache=True, nogil=True)
def refined_colours(nbr, labels):
    """Colour refinement (1-WL) starting from (label, degree): automorphisms preserve colours.
    Only the partition matters (colours are compared, never ordered)."""
    n = nbr.size
    keys = np.empty((n, 2), np.int64)
    for u in range(n):
        keys[u, 0], keys[u, 1] = labels[u], popcount(nbr[u])
    colours, classes = _first_seen_classes(keys)
    while classes < n:
        signature = np.zeros((n, classes + 1), np.int64)   # own colour, neighbours per colour
        for u in range(n):
            signature[u, 0] = colours[u]
            rest = nbr[u]
            while rest:
                signature[u, 1 + colours[lowest_bit(rest)]] += 1
                rest &= rest - 1
        refined, count = _first_seen_classes(signature)
        colours = refined
        if count == classes:
            break
        classes = count
    return colours


@njit(cache=True, nogil=True)
def automorphisms_extending(nbr, colours, order, image, out, stop_at):
    """Count the automorphisms that extend the partial map ``image`` (u -> image[u], -1 where
    free; changed in place), assigning the free vertices in ``order`` by colour-preserving
    backtracking (images tried in ascending order); the first ``len(out)`` found are written to
    ``out``'s rows; the search stops after ``stop_at`` of them (0: none stops it)."""
    n = nbr.size
    used = np.int64(0)
    mapped = np.int64(0)
    for u in range(n):
        if image[u] >= 0:
            used |= np.int64(1) << image[u]
            mapped |= np.int64(1) << u
    for u in range(n):                     # the fixed pairs must agree among themselves
        for x in range(n):
            if image[u] >= 0 and image[x] >= 0 and (nbr[u] >> x) & 1 != (nbr[image[u]] >> image[x]) & 1:
                return 0
    rest = np.empty(n, np.int64)
    m = 0
    for u in order:
        if image[u] < 0:
            rest[m] = u
            m += 1
    if m == 0:
        if out.shape[0]:
            out[0] = image
        return 1
    following = np.zeros(m, np.int64)      # per level: the next image to try
    found, level = 0, 0
    while level >= 0:
        u = rest[level]
        if image[u] >= 0:                  # undo this level's last choice
            used &= ~(np.int64(1) << image[u])
            mapped &= ~(np.int64(1) << u)
            image[u] = -1
        # u -> w keeps every edge and non-edge to the mapped vertices
        mapped_nbrs, want = nbr[u] & mapped, np.int64(0)
        while mapped_nbrs:
            want |= np.int64(1) << image[lowest_bit(mapped_nbrs)]
            mapped_nbrs &= mapped_nbrs - 1
        w = following[level]
        while w < n and ((used >> w) & 1 or colours[w] != colours[u] or nbr[w] & used != want):
            w += 1
        if w == n:
            following[level] = 0
            level -= 1
            continue
        following[level] = w + 1
        image[u] = w
        used |= np.int64(1) << w
        mapped |= np.int64(1) << u
        if level < m - 1:
            level += 1
            continue
        if found < out.shape[0]:
            out[found] = image
        found += 1
        if found == stop_at:
            return found
    return found


@njit(cache=True, nogil=True)
def _extends(nbr, colours, order, u, w):
    """Whether u -> w extends to an automorphism."""
    image = np.full(nbr.size, -1, np.int64)
    image[u] = w
    return automorphisms_extending(nbr, colours, order, image, np.empty((0, nbr.size), np.int64), 1) > 0


@njit(cache=True, nogil=True)
def stabiliser_chain(nbr, colours, order):
    """(restrict masks by position, orbit sizes by position) along ``order``: the orbit of each
    u_i under the pointwise stabiliser of u_0..u_{i-1}."""
    n = nbr.size
    restrict = np.zeros(n, np.int64)
    orbit_sizes = np.ones(n, np.int64)
    position = np.empty(n, np.int64)
    for d in range(n):
        position[order[d]] = d
    fixed = np.full(n, -1, np.int64)
    none = np.empty((0, n), np.int64)
    for d in range(n):
        u = order[d]
        for w in order:
            if w == u or fixed[w] >= 0 or colours[w] != colours[u]:
                continue
            image = fixed.copy()
            image[u] = w
            if automorphisms_extending(nbr, colours, order, image, none, 1):
                restrict[position[w]] |= np.int64(1) << d
                orbit_sizes[d] += 1
        fixed[u] = u
    return restrict, orbit_sizes


@njit(cache=True, nogil=True)
def countable_leaves(nbr, labels, colours, order):
    """Degree-one query vertices fixed by every automorphism, at most one per label, in
    ``order`` (at most n - 2 of them)."""
    n = nbr.size
    chosen = np.empty(n, np.int64)
    count = 0
    if n < 3:
        return chosen[:0]
    for u in order:
        if popcount(nbr[u]) != 1:
            continue
        taken = False
        for i in range(count):
            taken |= labels[chosen[i]] == labels[u]
        if taken:
            continue
        moves = False
        for w in range(n):
            if w != u and colours[w] == colours[u] and _extends(nbr, colours, order, u, w):
                moves = True
                break
        if not moves:
            chosen[count] = u
            count += 1
    return chosen[:min(count, n - 2)]


@njit(cache=True, nogil=True)
def _plan_arrays(offsets, neighbors, labels, symmetry_breaking, defer_leaves):
    """Order (leaves last), labels, degrees, backward, restrict and same-label masks by
    position, orbit sizes and the number of trailing countable leaves."""
    nbr = neighbour_masks(offsets, neighbors)
    n = nbr.size
    order = ri_order(nbr)
    colours = refined_colours(nbr, labels)
    if defer_leaves:
        leaves = countable_leaves(nbr, labels, colours, order)
        is_leaf = np.zeros(n, np.bool_)
        is_leaf[leaves] = True
        order = np.concatenate((order[~is_leaf[order]], order[is_leaf[order]]))
    else:
        leaves = order[:0]
    position = np.empty(n, np.int64)
    for d in range(n):
        position[order[d]] = d
    backward = np.zeros(n, np.uint32)
    same = np.zeros(n, np.uint32)
    for d in range(n):
        u = order[d]
        rest = nbr[u]                      # u's neighbours as positions, the earlier ones kept
        while rest:
            x = position[lowest_bit(rest)]
            if x < d:
                backward[d] |= np.uint32(1) << np.uint32(x)
            rest &= rest - 1
        for e in range(d):
            if labels[order[e]] == labels[u]:
                same[d] |= np.uint32(1) << np.uint32(e)
    distinct = np.unique(colours).size == n     # every vertex its own colour: Aut(Q) is trivial
    if symmetry_breaking and not distinct:
        restrict, orbit_sizes = stabiliser_chain(nbr, colours, order)
    else:
        restrict, orbit_sizes = np.zeros(n, np.int64), np.ones(n, np.int64)
    degrees = np.empty(n, np.int32)
    for d in range(n):
        degrees[d] = popcount(nbr[order[d]])
    return (order.astype(np.int32), labels[order].astype(np.int32), degrees, backward,
            restrict.astype(np.uint32), orbit_sizes, same, leaves.size)


def build_plan(query: Graph, symmetry_breaking: bool = True, defer_leaves: bool = False) -> QueryPlan:
    """RI order (free leaves last with ``defer_leaves``), backward masks and symmetry-breaking
    restrictions for a connected query."""
    n = query.num_vertices
    if n > MAX_QUERY_VERTICES:
        raise ValueError(f"gMatch takes at most {MAX_QUERY_VERTICES} query vertices, query has {n}")
    order, labels, degrees, backward, restrict, orbits, same, leaves = _plan_arrays(
        query.offsets, query.neighbors, np.asarray(query.labels, dtype=np.int64),
        bool(symmetry_breaking), bool(defer_leaves))
    orbit_sizes = tuple(orbits.tolist())
    return QueryPlan(order=order, labels=labels, degrees=degrees, backward=backward,
                     restrict=restrict, automorphisms=math.prod(orbit_sizes), orbit_sizes=orbit_sizes,
                     same_label=same, free_leaves=int(leaves))


def all_automorphisms(query: Graph) -> np.ndarray:
    """Every label-preserving automorphism as rows sigma (sigma[u] = image of u), identity first."""
    nbr = neighbour_masks(query.offsets, query.neighbors)
    colours = refined_colours(nbr, np.asarray(query.labels, dtype=np.int64))
    order = ri_order(nbr)
    n = nbr.size
    free = np.full(n, -1, np.int64)
    rows = np.empty((automorphisms_extending(nbr, colours, order, free.copy(), np.empty((0, n), np.int64), 0),
                     n), np.int64)
    automorphisms_extending(nbr, colours, order, free, rows, 0)
    identity = np.all(rows == np.arange(n), axis=1)
    return np.concatenate([rows[identity], rows[~identity]])
