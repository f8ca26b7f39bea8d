"""GSI's filtering phase (GSI §III-A, §VIII-B; SGSI §3): vertex signatures, the
candidate bitsets C(u) and the first intermediate table.

A signature is 16 int32 words (N = 512 bits, K = 32): word 0 is the vertex label itself (GSI
§VII-B "store the label directly"; compared by equality, so unlike the released code's one-hot
label hash it admits no false candidate when there are more than 32 labels), words 1..15 hold
240 two-bit groups. Every (edge, neighbour) pair of v is hashed to a group whose state moves
00 -> 01 -> 11 (one pair, more than one pair). A data vertex v is a candidate of u when
``word0(v) == word0(u)`` and ``S(v) & S(u) == S(u)`` on words 1..15. The data table is built on
the host once (offline, as in the paper) and stored column-first (word k of vertex i at
``k * |V| + i``) so that a warp reading word k of 32 consecutive vertices is coalesced.

Choices where the paper is silent: the pair key is (neighbour label, signed edge label) with
``+(l+1)`` for an in-edge and ``-(l+1)`` for an out-edge of a directed graph and ``l+1`` when
undirected (the released code's sign convention; our labels start at 0); the 8-byte key is hashed
as ``MurmurHash2(neighbour label, seed = MurmurHash2(signed label, 17)) mod 240``
(``common.gpu.device_functions.hash32``, the 4-byte MurmurHash2). The filter options of GSI
Table IV: ``label`` (label equality), ``degree`` (label and in/out-degree at least the query's)
and ``signature``.

One launch filters every query vertex: a warp takes 32 consecutive data vertices of one query
vertex, and a ballot gives the 32-bit bitset word directly (no atomics on the bitset); lane 0
adds the word's population to |C(u)|. The first table, C(u_start) as a sorted list, comes from a
one-block compaction kernel (a block-wide scan of word popcounts, round after round), which
needs no scan workspace and no host round trip.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from common.gpu.cudasim import FULL_MASK
from common.gpu.device_functions import hash32_host
from common.gpu.runtime import cuda, jit
from common.gpu.scan import block_carry_scan
from common.graph.model import Graph

from .pcsr import HASH_SEED

FILTERS = ("label", "degree", "signature")
SIG_WORDS = 16
SIG_GROUPS = 240


@njit(cache=True)
def _signatures(n, labels, offsets, neighbors, edge_labels, sign, out, column_first):
    """Add the pairs of one adjacency (out-CSR or in-CSR, ``sign`` +1/-1/0 = in/out/undirected)
    into the signature table ``out``; call once per direction."""
    for v in range(n):
        for k in range(offsets[v], offsets[v + 1]):
            w = neighbors[k]
            el = np.int64(edge_labels[k]) + 1
            if sign < 0:
                el = -el
            seed = hash32_host(el, HASH_SEED)
            pos = np.int64(hash32_host(labels[w], seed)) % SIG_GROUPS
            word = 1 + pos // 16
            shift = 2 * (pos % 16)
            idx = word * n + v if column_first else v * SIG_WORDS + word
            state = (out[idx] >> shift) & 3
            if state == 0:
                out[idx] |= np.int32(1) << shift
            elif state == 1:
                out[idx] |= np.int32(3) << shift
    for v in range(n):
        idx = v if column_first else v * SIG_WORDS
        out[idx] = labels[v]


def signature_table(graph: Graph, column_first: bool) -> np.ndarray:
    """int32 signatures of every vertex: column-first (data) or row-first (query) layout."""
    n = graph.num_vertices
    out = np.zeros(n * SIG_WORDS, np.int32)
    labels = np.ascontiguousarray(graph.labels, np.int32)

    def el(x, size):
        return np.zeros(size, np.int32) if x is None else np.ascontiguousarray(x, np.int32)

    _signatures(n, labels, np.ascontiguousarray(graph.offsets), np.ascontiguousarray(graph.neighbors),
                el(graph.edge_labels, graph.neighbors.size), -1 if graph.directed else 0, out, column_first)
    if graph.directed:
        off, nb, lab = graph.in_csr
        _signatures(n, labels, np.ascontiguousarray(off), np.ascontiguousarray(nb),
                    el(lab, nb.size), 1, out, column_first)
    return out


@jit
def filter_kernel(mode, n, nwords, nq, sig, labels, out_deg, in_deg, qinfo, q_lab, q_out, q_in,
                  q_sig, bits, sizes, word0, row_words):
    """bits[u * row_words + word0 + k] = candidate word k of query vertex u over the ``n`` vertices
    of ``sig`` (the whole graph, or SGSI's segment starting at vertex 32 * word0); sizes[u] += its
    popcount."""
    lane = cuda.laneid
    warp = (cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) // 32
    warps = cuda.gridDim.x * cuda.blockDim.x // 32
    task = warp
    while task < nq * nwords:
        u = task // nwords
        k = task - u * nwords
        v = k * 32 + lane
        ok = False
        if v < n:
            if mode == 2:
                ok = sig[v] == qinfo[q_lab + u]
                w = 1
                while ok and w < SIG_WORDS:
                    q = qinfo[q_sig + u * SIG_WORDS + w]
                    ok = (sig[w * n + v] & q) == q
                    w += 1
            else:
                ok = labels[v] == qinfo[q_lab + u]
                if ok and mode == 1:
                    ok = out_deg[v] >= qinfo[q_out + u] and in_deg[v] >= qinfo[q_in + u]
        mask = cuda.ballot_sync(FULL_MASK, ok)
        if lane == 0:
            bits[u * row_words + word0 + k] = mask
            if mask != 0:
                cuda.atomic.add(sizes, u, cuda.popc(mask))
        task += warps


@cuda.jit(device=True)
def compact_bitset(bits, row_base, nwords, out, totals, warps):
    """One block: the set bits of ``bits[row_base : row_base + nwords]`` to ``out`` ascending (a
    block-wide scan of word popcounts, round after round; ``totals``: shared, ``warps`` int64)."""
    threads = warps * 32
    tid = cuda.threadIdx.x
    base = np.int64(0)
    start = 0
    while start < nwords:
        k = start + tid
        word = np.uint32(0)
        if k < nwords:
            word = np.uint32(bits[row_base + k])
        offset, base = block_carry_scan(np.int32(cuda.popc(word)), base, totals, warps)
        b = 0
        while word != 0:
            if word & np.uint32(1):
                out[offset] = k * 32 + b
                offset += 1
            word >>= np.uint32(1)
            b += 1
        start += threads


@functools.lru_cache(maxsize=None)
def make_compact_kernel(threads: int):
    """Kernel writing the set bits of ``bits[row_base : row_base + nwords]`` to ``out`` ascending;
    one per block size, shared by every engine instance (a new kernel object compiles again: it
    cost each new GSI engine 0.2-0.3 s on its first query)."""
    warps = threads // 32

    @jit
    def compact_kernel(bits, row_base, nwords, out):
        totals = cuda.shared.array(warps, np.int64)
        compact_bitset(bits, row_base, nwords, out, totals, warps)

    return compact_kernel
