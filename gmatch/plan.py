"""gMatch query plan (paper Sec. 3.1 step 1; docs/papers.md): RI matching order, the
query's automorphism group and symmetry-breaking restrictions, renamed to order positions.

* Order: RI (Bonnici et al. 2013) as the authors' code implements it: first the vertex of maximum
  degree; then the vertex with most neighbours already ordered; ties by (1) the number of ordered
  vertices that share a neighbour with the candidate's unordered neighbours, (2) the number of the
  candidate's unordered neighbours not adjacent to the ordered set, (3) lowest id. The authors'
  hard-coded order for the 4-cycle is what RI yields anyway, so it needs no special case.
* Symmetry breaking (paper App. A only names it; the authors' code is GraphPi-style): walking the
  order u_0, u_1, ..., every vertex w != u_i in the orbit of u_i under the pointwise stabiliser of
  u_0..u_{i-1} must get a smaller data vertex than u_i (f(w) < f(u_i)). Each automorphism class of
  embeddings then has exactly one member that meets every restriction (Grochow and Kellis 2007),
  and |Aut(Q)| = product of those orbit sizes (orbit-stabiliser theorem). CHOICE: we compute
  orbits by a search for one automorphism per (u_i, w) pair, pruned by colour refinement, instead
  of listing Aut(Q) by brute force as the authors' code does; that keeps |V(Q)| = 32 stars and
  cliques (|Aut| up to 32!) cheap. The "smaller than" direction (the code's choice) lets a task
  group end at the first neighbour past the bound, since adjacency lists are sorted.
* Every query vertex is renamed to its order position: ``backward[d]`` is the bitmask of earlier
  positions adjacent to position d, ``restrict[d]`` the bitmask of earlier positions whose image
  must be greater than the image of position d, ``same_label[d]`` the bitmask of earlier positions
  with d's label (the only ones an injectivity check must look at: candidates are label-filtered).
* Leaf deferral (``defer_leaves=True``; not in the paper, CFL-Match's postponement of degree-one
  vertices, Bi et al. SIGMOD 2016): a *countable leaf* is a query vertex of degree one that every
  automorphism fixes (so no restriction names it) and whose label no other countable leaf has.
  Given the images of the other positions, its matches are the candidate-graph row of its
  neighbour's image minus the images of the same-label positions that lie in that row, and
  countable leaves cannot collide with each other, so the number of ways to place all of them is
  a product. They are moved to the end of the RI order (at most n - 2, so at least two positions
  are enumerated); of several leaves with one label, the first in RI order is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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


def _adjacency(query: Graph) -> np.ndarray:
    n = query.num_vertices
    adj = np.zeros((n, n), dtype=bool)
    src = np.repeat(np.arange(n), np.diff(query.offsets))
    adj[src, query.neighbors] = True
    return adj


def _masks(adj: np.ndarray) -> list[int]:
    """Adjacency rows as Python int bitmasks (|V(Q)| <= 32)."""
    weights = 1 << np.arange(adj.shape[0], dtype=np.int64)
    return [int(x) for x in (adj.astype(np.int64) * weights).sum(axis=1)]


def ri_order(adj: np.ndarray) -> list[int]:
    """RI matching order over a connected query given by its boolean adjacency matrix."""
    n = adj.shape[0]
    nbr = _masks(adj)
    first = max(range(n), key=lambda u: (nbr[u].bit_count(), -u))
    order = [first]
    placed = 1 << first
    near = nbr[first]                      # vertices adjacent to the ordered set
    while len(order) < n:
        best, best_key = -1, None
        for u in range(n):
            if placed >> u & 1 or not near >> u & 1:
                continue                   # ordered already, or would disconnect the order
            unplaced = nbr[u] & ~placed
            reach, rest = 0, unplaced         # ordered vertices adjacent to an unplaced neighbour
            while rest:
                low = rest & -rest
                reach |= nbr[low.bit_length() - 1]
                rest ^= low
            shared = (reach & placed).bit_count()
            key = ((nbr[u] & placed).bit_count(), shared, (unplaced & ~near).bit_count(), -u)
            if best_key is None or key > best_key:
                best, best_key = u, key
        order.append(best)
        placed |= 1 << best
        near |= nbr[best]
    return order


def _refined_colours(adj: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Colour refinement (1-WL) starting from (label, degree): automorphisms preserve colours.
    Plain Python over neighbour lists: a query has at most 32 vertices, and numpy's per-call cost
    would dominate."""
    n = adj.shape[0]
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for u, x in zip(*(axis.tolist() for axis in np.nonzero(adj))):
        neighbours[u].append(x)
    start = [(int(labels[u]), len(neighbours[u])) for u in range(n)]
    table = {key: i for i, key in enumerate(sorted(set(start)))}
    colours = [table[key] for key in start]
    classes = len(table)
    while classes < n:
        signatures = [(colours[u], tuple(sorted(colours[x] for x in neighbours[u]))) for u in range(n)]
        table = {sig: i for i, sig in enumerate(sorted(set(signatures)))}
        refined = [table[sig] for sig in signatures]
        if len(table) == classes:
            colours = refined
            break
        colours, classes = refined, len(table)
    return np.asarray(colours, dtype=np.int64)


def _automorphisms_extending(adj: np.ndarray, colours: np.ndarray, order: list[int], fixed: dict):
    """Yield every automorphism (dict u -> image) that extends the partial map ``fixed``,
    assigning the other vertices in ``order`` by colour-preserving backtracking."""
    n = adj.shape[0]
    image = dict(fixed)
    used = set(image.values())
    for u, w in image.items():               # the fixed pairs must agree among themselves
        for x, y in image.items():
            if adj[u, x] != adj[w, y]:
                return
    rest = [u for u in order if u not in image]

    def search(i: int):
        if i == len(rest):
            yield dict(image)
            return
        u = rest[i]
        for w in range(n):
            if w in used or colours[w] != colours[u]:
                continue
            if any(adj[u, x] != adj[w, y] for x, y in image.items()):
                continue
            image[u] = w
            used.add(w)
            yield from search(i + 1)
            del image[u]
            used.discard(w)

    yield from search(0)


def _extends_to_automorphism(adj: np.ndarray, colours: np.ndarray, order: list[int], fixed: dict) -> bool:
    """Whether the partial map ``fixed`` (query vertex -> query vertex) extends to an automorphism."""
    return next(_automorphisms_extending(adj, colours, order, fixed), None) is not None


def symmetry_restrictions(adj: np.ndarray, labels: np.ndarray, order: list[int]):
    """(restrict masks by position, |Aut(Q)|, orbit sizes) for the stabiliser chain along ``order``."""
    n = adj.shape[0]
    colours = _refined_colours(adj, labels)
    restrict = np.zeros(n, dtype=np.uint32)
    if np.unique(colours).size == n:          # every vertex its own colour: Aut(Q) is trivial
        return restrict, 1, tuple([1] * n)
    position = {u: d for d, u in enumerate(order)}
    fixed: dict[int, int] = {}
    automorphisms = 1
    orbit_sizes = []
    for u in order:
        orbit = [u]
        for w in order:
            if w == u or w in fixed or colours[w] != colours[u]:
                continue
            if _extends_to_automorphism(adj, colours, order, {**fixed, u: w}):
                orbit.append(w)
        for w in orbit[1:]:
            restrict[position[w]] |= np.uint32(1 << position[u])
        automorphisms *= len(orbit)
        orbit_sizes.append(len(orbit))
        fixed[u] = u
    return restrict, automorphisms, tuple(orbit_sizes)


def all_automorphisms(query: Graph) -> np.ndarray:
    """Every label-preserving automorphism as rows sigma (sigma[u] = image of u), identity first."""
    adj = _adjacency(query)
    labels = np.asarray(query.labels)
    colours = _refined_colours(adj, labels)
    n = adj.shape[0]
    order = ri_order(adj)
    found = [[image[u] for u in range(n)] for image in _automorphisms_extending(adj, colours, order, {})]
    rows = np.array(found, dtype=np.int64)
    identity = np.all(rows == np.arange(n), axis=1)
    return np.concatenate([rows[identity], rows[~identity]]).astype(np.int64)


def countable_leaves(adj: np.ndarray, labels: np.ndarray, order: list[int]) -> list[int]:
    """Degree-one query vertices fixed by every automorphism, at most one per label, in
    ``order`` (at most n - 2 of them)."""
    n = adj.shape[0]
    if n < 3:
        return []
    colours = _refined_colours(adj, labels)
    chosen, taken = [], set()
    for u in order:
        if adj[u].sum() != 1 or int(labels[u]) in taken:
            continue
        if any(w != u and colours[w] == colours[u]
               and _extends_to_automorphism(adj, colours, order, {u: w}) for w in range(n)):
            continue
        chosen.append(u)
        taken.add(int(labels[u]))
    return chosen[:n - 2]


def build_plan(query: Graph, symmetry_breaking: bool = True, defer_leaves: bool = False) -> QueryPlan:
    """RI order (free leaves last with ``defer_leaves``), backward masks and symmetry-breaking
    restrictions for a connected query."""
    n = query.num_vertices
    if n > MAX_QUERY_VERTICES:
        raise ValueError(f"gMatch takes at most {MAX_QUERY_VERTICES} query vertices, query has {n}")
    adj = _adjacency(query)
    labels = np.asarray(query.labels, dtype=np.int64)
    order = ri_order(adj)
    leaves = countable_leaves(adj, labels, order) if defer_leaves else []
    order = [u for u in order if u not in leaves] + [u for u in order if u in leaves]
    position = [0] * n
    for d, u in enumerate(order):
        position[u] = d
    nbr = _masks(adj)
    backward = np.zeros(n, dtype=np.uint32)
    for d, u in enumerate(order):
        mask, rest = 0, nbr[u]                 # u's neighbours as positions, the earlier ones kept
        while rest:
            low = rest & -rest
            mask |= 1 << position[low.bit_length() - 1]
            rest ^= low
        backward[d] = mask & ((1 << d) - 1)
    if symmetry_breaking:
        restrict, automorphisms, orbits = symmetry_restrictions(adj, labels, order)
    else:
        restrict, automorphisms, orbits = np.zeros(n, dtype=np.uint32), 1, tuple([1] * n)
    order_arr = np.asarray(order, dtype=np.int32)
    ordered_labels = labels[order_arr]
    same = np.zeros(n, dtype=np.uint32)
    earlier: dict[int, int] = {}                 # label -> positions so far with it
    for d, label in enumerate(ordered_labels.tolist()):
        same[d] = earlier.get(label, 0)
        earlier[label] = same[d] | 1 << d
    return QueryPlan(order=order_arr, labels=ordered_labels.astype(np.int32),
                     degrees=adj.sum(axis=1)[order_arr].astype(np.int32), backward=backward,
                     restrict=restrict, automorphisms=int(automorphisms), orbit_sizes=orbits,
                     same_label=same, free_leaves=len(leaves))
