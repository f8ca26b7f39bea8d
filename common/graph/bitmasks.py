"""Small vertex sets as int64 bitmasks (bit u = query vertex u), for compiled host code.

A query has at most 32 vertices in every GPU engine (64 fit), so its vertex sets and adjacency
fit in int64 masks; the planning steps that run on the host for every query (orders, cores, groupings,
automorphism searches) are ``numba.njit`` functions over them (docs/decisions.md, "The
per-query planning compiled").
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def popcount(x):
    """Set bits of a non-negative int64."""
    count = 0
    while x:
        x &= x - 1
        count += 1
    return count


@njit(cache=True, nogil=True)
def lowest_bit(x):
    """Index of the lowest set bit of a non-zero int64."""
    i = 0
    while not (x >> i) & 1:
        i += 1
    return i


@njit(cache=True, nogil=True)
def neighbour_masks(offsets, neighbors):
    """nbr[u]: bit x set iff an edge joins u and x in either direction (a CSR of at most 64
    vertices; an undirected graph's rows are its neighbours)."""
    n = offsets.size - 1
    nbr = np.zeros(n, np.int64)
    for u in range(n):
        for i in range(offsets[u], offsets[u + 1]):
            x = neighbors[i]
            nbr[u] |= np.int64(1) << np.int64(x)
            nbr[x] |= np.int64(1) << np.int64(u)
    return nbr


@njit(cache=True, nogil=True)
def connected(nbr):
    """Whether the graph of neighbour masks ``nbr`` is connected (a BFS over masks)."""
    seen = frontier = np.int64(1)
    while frontier:
        reached = np.int64(0)
        while frontier:
            reached |= nbr[lowest_bit(frontier)]
            frontier &= frontier - 1
        frontier = reached & ~seen
        seen |= reached
    return popcount(seen) == nbr.size


def bits(mask: int) -> list[int]:
    """The set bits of ``mask``, ascending (plain Python, for results and tests)."""
    out = []
    mask = int(mask)
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def masks_of(adjacency) -> np.ndarray:
    """Neighbour masks (int64) of an adjacency given as one iterable of neighbours per vertex."""
    return np.array([sum(1 << int(a) for a in row) for row in adjacency], dtype=np.int64)


__all__ = ["popcount", "lowest_bit", "neighbour_masks", "connected", "bits", "masks_of"]
