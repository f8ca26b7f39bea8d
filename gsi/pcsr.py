"""Neighbour-list structures of GSI's join: plain CSR, BR, CR and PCSR (GSI §IV, Def. 5, Alg. 1;
SGSI §4), built on the host once per data graph and kept on the device.

Every structure answers the join's one question, "where is N(v, l)?", with a range ``[start, end)``
of one column-index array ``ci``:

* ``csr``: the plain CSR of the whole graph (out-CSR, and the in-CSR for directed graphs) with an
  edge-label array beside ``ci``; N(v, l) is the whole row N(v), so the join must check each
  element's label (``ci_label``), as the paper's "traditional CSR" baseline does.
* ``br`` (basic): one CSR per edge-label partition with a full |V|+1 row-offset array each.
* ``cr`` (compressed): one CSR per partition over the vertices that have an l-edge, found by a
  binary search of the sorted vertex-id array.
* ``pcsr``: one hashed CSR per partition. Groups of 32 int32 words (128 bytes): 15 pairs
  ``(vertex, offset)`` and a last pair ``(GID, END)``; the end of a vertex's list is the offset
  field of the next pair. ``|V(D)|`` groups, bucket ``MurmurHash2(v, seed 17) mod |V(D)|``.
  A bucket with more than 15 vertices continues in an empty group named by GID (the released
  code aborts there; Claim 1 guarantees enough empty groups). A warp reads one group with one
  128-byte load (:func:`warp_neighbor_range`).

Partitions: one per (edge label, direction). Undirected graphs have one direction (each edge is
stored from both endpoints); directed graphs have "out" (N(v, l) = heads of v's out-edges) and
"in" (tails of v's in-edges), as the released code's in/out PCSRs. Partition ``p = label *
directions + direction``. Choices where the paper is silent: PCSR offsets are int32 relative to
the partition's start in ``ci`` (so a partition holds < 2^31 edges; the whole graph may hold
more), unused vertex words are -1 (INVALID) and ``ci`` is laid out in group order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from common.gpu.cudasim import FULL_MASK
from common.gpu.device_functions import hash32, hash32_host, lower_bound_probes
from common.gpu.runtime import cuda
from common.graph.model import Graph

STRUCTURES = ("csr", "br", "cr", "pcsr")
CSR, BR, CR, PCSR = range(4)
GROUP_WORDS = 32          # one 128-byte PCSR group
GROUP_PAIRS = 15          # vertex slots per group; the 16th pair is (GID, END)
HASH_SEED = 17            # the released code's MurmurHash2 seed
META = 4                  # per-partition metadata: (keys, key base, ci base, direction)


@njit(cache=True)
def _build_pcsr_partition(keys, starts, degrees, nbrs):
    """PCSR groups (int32, 32 words each) and the group-ordered column index of one partition."""
    n = keys.size
    gl = np.full(n * GROUP_WORDS, -1, np.int32)
    bucket_of = np.empty(n, np.int64)
    size = np.zeros(n, np.int64)
    for k in range(n):
        b = np.int64(hash32_host(keys[k], HASH_SEED)) % n
        bucket_of[k] = b
        size[b] += 1
    empty = np.flatnonzero(size == 0)
    next_empty = 0
    fill = np.zeros(n, np.int64)          # vertices placed in each group
    last_group = np.arange(n)             # current tail group of each bucket's chain
    slot_group = np.empty(n, np.int64)
    slot_pair = np.empty(n, np.int64)
    for k in range(n):
        g = last_group[bucket_of[k]]
        if fill[g] == GROUP_PAIRS:        # overflow: chain an empty group
            h = empty[next_empty]
            next_empty += 1
            gl[g * GROUP_WORDS + 30] = h
            last_group[bucket_of[k]] = h
            g = h
        slot_group[k] = g
        slot_pair[k] = fill[g]
        fill[g] += 1
    owner = np.full(n * GROUP_PAIRS, -1, np.int64)
    for k in range(n):
        owner[slot_group[k] * GROUP_PAIRS + slot_pair[k]] = k
    ci = np.empty(nbrs.size, np.int32)
    pos = 0
    for g in range(n):
        base = g * GROUP_WORDS
        for j in range(fill[g]):
            k = owner[g * GROUP_PAIRS + j]
            gl[base + 2 * j] = keys[k]
            gl[base + 2 * j + 1] = pos
            d = degrees[k]
            ci[pos:pos + d] = nbrs[starts[k]:starts[k] + d]
            pos += d
        if fill[g] < GROUP_PAIRS:
            gl[base + 2 * fill[g] + 1] = pos
        gl[base + 31] = pos
    return gl, ci


@dataclass
class NeighborIndex:
    """One structure's host arrays (see module docstring); :meth:`to_device` copies them once."""

    structure: int
    directions: int
    num_partitions: int
    partition_edges: np.ndarray   # int64, entries of each partition (the paper's freq(l))
    partition_max_list: np.ndarray  # int64, longest list a lookup can return per partition
    meta: np.ndarray              # int64 [P * META]
    gl: np.ndarray                # int32 PCSR groups (pcsr), else a dummy
    keys: np.ndarray              # int32 sorted vertex ids per partition (cr), else a dummy
    offs: np.ndarray              # int64 row offsets (csr, br, cr), else a dummy
    ci: np.ndarray                # int32 column index
    ci_label: np.ndarray          # int32 edge label of each ci entry (csr), else a dummy

    def partition(self, label: int, direction: int) -> int:
        return int(label) * self.directions + int(direction)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.meta, self.gl, self.keys, self.offs, self.ci, self.ci_label))

    def to_device(self, budget) -> "DeviceNeighborIndex":
        arrays = {name: budget.to_device(getattr(self, name), what=f"{STRUCTURES[self.structure]} {name}")
                  for name in ("meta", "gl", "keys", "offs", "ci", "ci_label")}
        return DeviceNeighborIndex(self.structure, **arrays)


@dataclass
class DeviceNeighborIndex:
    structure: int
    meta: object
    gl: object
    keys: object
    offs: object
    ci: object
    ci_label: object

    def args(self) -> tuple:
        """The kernel arguments every join kernel takes, in order."""
        return (self.structure, self.meta, self.gl, self.keys, self.offs, self.ci, self.ci_label)


def _directional_csrs(data: Graph):
    """[(offsets, neighbors, edge labels)] per direction, edge labels never None."""
    def el(x, size):
        return np.zeros(size, np.int32) if x is None else np.asarray(x, np.int32)
    out = (data.offsets, data.neighbors, el(data.edge_labels, data.neighbors.size))
    if not data.directed:
        return [out]
    off, nb, lab = data.in_csr
    return [out, (off, nb, el(lab, nb.size))]


def partition_lists(data: Graph) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per partition ``p = label * directions + direction``: (source vertex of each entry int64,
    neighbour int32), sorted by (source, neighbour): the concatenated lists N(v, p)."""
    csrs = _directional_csrs(data)
    directions, num_labels = len(csrs), data.num_edge_labels
    per_part = [None] * (num_labels * directions)
    for d, (off, nb, lab) in enumerate(csrs):
        rows = np.repeat(np.arange(data.num_vertices, dtype=np.int64), np.diff(off))
        order = np.lexsort((rows, lab))        # stable: neighbours stay sorted within a row
        rows, nbrs, labs = rows[order], nb[order], lab[order]
        bounds = np.searchsorted(labs, np.arange(num_labels + 1))
        for l in range(num_labels):
            per_part[l * directions + d] = (rows[bounds[l]:bounds[l + 1]],
                                            np.ascontiguousarray(nbrs[bounds[l]:bounds[l + 1]], np.int32))
    return per_part


def build_index(data: Graph, structure: str) -> NeighborIndex:
    """Build ``structure`` (one of :data:`STRUCTURES`) for ``data`` on the host."""
    code = STRUCTURES.index(structure)
    n = data.num_vertices
    csrs = _directional_csrs(data)
    directions = len(csrs)
    num_labels = data.num_edge_labels
    P = num_labels * directions
    meta = np.zeros(P * META, np.int64)
    part_edges = np.zeros(P, np.int64)
    part_max = np.zeros(P, np.int64)
    dummy32, dummy64 = np.zeros(1, np.int32), np.zeros(1, np.int64)
    for d, (off, nb, lab) in enumerate(csrs):
        counts = np.bincount(lab, minlength=num_labels)
        part_edges[np.arange(num_labels) * directions + d] = counts
        degrees = np.diff(off)
        if code == CSR:      # a CSR lookup returns the whole row, whatever the label
            part_max[np.arange(num_labels) * directions + d] = degrees.max() if degrees.size else 0
        elif lab.size:
            rows = np.repeat(np.arange(n, dtype=np.int64), degrees)
            per_row_label = np.bincount(rows * num_labels + lab, minlength=n * num_labels)
            part_max[np.arange(num_labels) * directions + d] = per_row_label.reshape(n, num_labels).max(axis=0)
        for l in range(num_labels):
            meta[(l * directions + d) * META + 3] = d
    if code == CSR:
        offs = np.concatenate([csrs[d][0][:n + 1] + (csrs[0][1].size if d else 0) for d in range(directions)])
        ci = np.concatenate([c[1] for c in csrs]).astype(np.int32)
        ci_label = np.concatenate([c[2] for c in csrs]).astype(np.int32)
        return NeighborIndex(code, directions, P, part_edges, part_max, meta, dummy32, dummy32,
                             offs.astype(np.int64), ci, ci_label)
    gl_parts, key_parts, off_parts, ci_parts = [], [], [], []
    key_base = ci_base = 0
    for p, (rows, nbrs) in enumerate(partition_lists(data)):
        keys, starts, degrees = np.unique(rows, return_index=True, return_counts=True)
        if code == BR:
            row_off = np.zeros(n + 1, np.int64)
            np.cumsum(np.bincount(rows, minlength=n), out=row_off[1:])
            off_parts.append(row_off + ci_base)
            ci_parts.append(nbrs)
            meta[p * META:p * META + 3] = (n, key_base, ci_base)
            key_base += n + 1
        elif code == CR:
            key_parts.append(keys.astype(np.int32))
            row_off = np.zeros(keys.size + 1, np.int64)
            np.cumsum(degrees, out=row_off[1:])
            off_parts.append(row_off + ci_base)
            ci_parts.append(nbrs)
            meta[p * META:p * META + 3] = (keys.size, key_base, ci_base)
            key_base += keys.size
        else:
            if nbrs.size >= 2 ** 31:
                raise ValueError(f"edge-label partition {p} has {nbrs.size} entries: PCSR offsets are int32")
            gl, ci_p = _build_pcsr_partition(keys.astype(np.int32), starts.astype(np.int64),
                                             degrees.astype(np.int64), nbrs)
            gl_parts.append(gl)
            ci_parts.append(ci_p)
            meta[p * META:p * META + 3] = (keys.size, key_base, ci_base)
            key_base += keys.size
        ci_base += nbrs.size
    ci = np.concatenate(ci_parts).astype(np.int32) if ci_parts else dummy32
    if ci.size == 0:
        ci = dummy32
    gl = np.concatenate(gl_parts) if gl_parts and key_base else dummy32
    keys = np.concatenate(key_parts) if key_parts and key_base else dummy32
    offs = np.concatenate(off_parts) if off_parts else dummy64
    return NeighborIndex(code, directions, P, part_edges, part_max, meta, gl, keys, offs, ci, dummy32)


# ---------------------------------------------------------------------------- device lookups
@cuda.jit(device=True)
def neighbor_range(structure, meta, gl, keys, offs, p, v, n):
    """[start, end) of N(v, partition p) in ci, looked up by one thread; also the number of
    global loads it issued (for the instrumented counters)."""
    m = p * META
    count = meta[m]
    base = meta[m + 1]
    ci_base = meta[m + 2]
    if structure == CSR:
        row = meta[m + 3] * (n + 1) + v
        return offs[row], offs[row + 1], 1
    if structure == BR:
        return offs[base + v], offs[base + v + 1], 1
    if count == 0:
        return 0, 0, 1
    if structure == CR:
        lo, probes = lower_bound_probes(keys, base, base + count, v)
        loads = 1 + probes
        if lo < base + count and keys[lo] == v:
            k = lo - base + base + p      # offsets of partition p start at base + p
            return offs[k], offs[k + 1], loads + 1
        return 0, 0, loads
    g = np.int64(hash32(v, HASH_SEED)) % count
    loads = 0
    while True:
        w = (base + g) * GROUP_WORDS
        loads += 1
        for j in range(GROUP_PAIRS):
            key = gl[w + 2 * j]
            if key == v:
                return ci_base + gl[w + 2 * j + 1], ci_base + gl[w + 2 * j + 3], loads
            if key == -1:
                return 0, 0, loads
        nxt = gl[w + 30]
        if nxt == -1:
            return 0, 0, loads
        g = nxt


@cuda.jit(device=True)
def warp_neighbor_range(structure, meta, gl, keys, offs, p, v, n):
    """:func:`neighbor_range` called by a whole warp (every lane, same p and v). For PCSR lane k
    loads word k of the group (one 128-byte transaction) and a ballot finds the pair; the other
    structures are looked up by every lane at the same addresses (broadcast loads)."""
    if structure != PCSR:
        return neighbor_range(structure, meta, gl, keys, offs, p, v, n)
    m = p * META
    count = meta[m]
    if count == 0:
        return 0, 0, 1
    base = meta[m + 1]
    ci_base = meta[m + 2]
    lane = cuda.laneid
    g = np.int64(hash32(v, HASH_SEED)) % count
    loads = 0
    while True:
        word = gl[(base + g) * GROUP_WORDS + lane]
        loads += 1
        hit = lane < 30 and (lane & 1) == 0 and word == v
        mask = cuda.ballot_sync(FULL_MASK, hit)
        up1 = cuda.shfl_down_sync(FULL_MASK, word, 1)
        up3 = cuda.shfl_down_sync(FULL_MASK, word, 3)
        nxt = cuda.shfl_sync(FULL_MASK, word, 30)
        if mask != 0:
            src = cuda.popc(mask ^ (mask - 1)) - 1
            start = cuda.shfl_sync(FULL_MASK, up1, src)
            end = cuda.shfl_sync(FULL_MASK, up3, src)
            return ci_base + start, ci_base + end, loads
        if nxt == -1:
            return 0, 0, loads
        g = nxt
