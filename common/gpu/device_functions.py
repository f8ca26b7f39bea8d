"""Device functions every engine shares: searches in sorted ranges, sorted-set intersection, warp
reductions and a 32-bit hash (docs/design.md: shared device functions live once in common/).

Ranges are ``arr[lo:hi]`` of a sorted array, as CSR neighbour lists are
(``neighbors[offsets[v]:offsets[v + 1]]``). Intersections assume sorted ranges without
duplicates: :func:`intersect_walk` merges or binary-searches, :func:`intersect` picks one by the
ranges' sizes. Each function is a small ``@cuda.jit(device=True)`` function that Numba inlines;
the binary search itself (:func:`lower_bound_probes`) is :mod:`common.graph.sorted_ranges`' one
source, which host ``numba.njit`` code compiles too. The intersections write to ``out`` or,
given ``out=None``, only count (Numba prunes the write for that type).
"""

from __future__ import annotations

import numba
import numpy as np

from ..graph.sorted_ranges import lower_bound_probes
from .cudasim import FULL_MASK
from .runtime import cuda


@cuda.jit(device=True)
def lower_bound(arr, lo, hi, key):
    """First index i in [lo, hi) with arr[i] >= key (hi if none)."""
    return lower_bound_probes(arr, lo, hi, key)[0]


@cuda.jit(device=True)
def warp_sum(x):
    """The sum of ``x`` over the full warp, in lane 0 (every lane calls it)."""
    step = 16
    while step > 0:
        x += cuda.shfl_down_sync(FULL_MASK, x, step)
        step //= 2
    return x


@cuda.jit(device=True)
def warp_max(x):
    """The maximum of ``x`` over the full warp, in lane 0 (every lane calls it)."""
    step = 16
    while step > 0:
        x = max(x, cuda.shfl_down_sync(FULL_MASK, x, step))
        step //= 2
    return x


@cuda.jit(device=True)
def warp_seek(arr, lo, hi, key):
    """:func:`lower_bound` by a whole warp (every lane calls it, all get the answer): rounds of
    32 probes whose stride grows 32-fold from 32 until one passes ``key``, then shrinks, so an
    answer d entries past ``lo`` costs about 2 log32(d) rounds of scattered reads instead of
    d/32 contiguous ones (a galloping search, Bentley & Yao 1976)."""
    lane = cuda.laneid
    big = np.int64(1) << 62
    stride = np.int64(32)
    while True:                                  # grow: the window that holds the answer
        p = lo + (lane + 1) * stride - 1
        below = p < hi and arr[p] < key
        c = cuda.popc(cuda.ballot_sync(FULL_MASK, below))
        if c < 32:
            hi = min(hi, lo + (c + 1) * stride)
            lo = min(lo + c * stride, hi)
            break
        lo += 32 * stride
        if lo >= hi or stride > big // 32:
            lo = min(lo, hi)
            break
        stride *= 32
    while hi - lo > 32:                          # shrink it 32-fold per round
        stride = (hi - lo + 31) // 32
        p = lo + (lane + 1) * stride - 1
        below = p < hi and arr[p] < key
        c = cuda.popc(cuda.ballot_sync(FULL_MASK, below))
        hi = min(hi, lo + (c + 1) * stride)
        lo = min(lo + c * stride, hi)
    below = lo + lane < hi and arr[lo + lane] < key
    return lo + cuda.popc(cuda.ballot_sync(FULL_MASK, below))


@cuda.jit(device=True)
def contains(arr, lo, hi, key):
    """Whether ``key`` occurs in arr[lo:hi]."""
    i = lower_bound(arr, lo, hi, key)
    return i < hi and arr[i] == key


@cuda.jit(device=True)
def intersect_walk(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos, search):
    """Write a[a_lo:a_hi] ∩ b[b_lo:b_hi] (ascending) to out[out_pos:]; return how many
    (``out=None`` only counts). One walk over a with a forward-only position in b, which moves
    by one step (a merge, O(|a| + |b|)) or, with ``search``, by a binary search for a's element
    (O(|a| log |b|): pass the shorter range as a)."""
    count = 0
    while a_lo < a_hi and b_lo < b_hi:
        x = a[a_lo]
        if search:
            b_lo = lower_bound(b, b_lo, b_hi, x)
            if b_lo == b_hi:
                break
        y = b[b_lo]
        if x < y:
            a_lo += 1
        elif y < x:
            b_lo += 1
        else:
            if out is not None:
                out[out_pos + count] = x
            count += 1
            a_lo += 1
            b_lo += 1
    return count


@cuda.jit(device=True)
def _prefer_search(short_len, long_len):
    """Binary search wins when |short| * log2(|long|) < |short| + |long|."""
    steps = 1
    while (1 << steps) <= long_len:
        steps += 1
    return short_len * steps < short_len + long_len


@cuda.jit(device=True)
def intersect(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos):
    """Write a ∩ b (ascending) to out[out_pos:], choosing merge or, for very unequal sizes,
    binary search of the shorter range; return how many. ``out=None`` only counts."""
    if a_hi - a_lo <= b_hi - b_lo:
        return intersect_walk(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos,
                              _prefer_search(a_hi - a_lo, b_hi - b_lo))
    if _prefer_search(b_hi - b_lo, a_hi - a_lo):
        return intersect_walk(b, b_lo, b_hi, a, a_lo, a_hi, out, out_pos, True)
    return intersect_walk(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos, False)


def _murmur2_32(key, seed):
    """MurmurHash2 of the 4-byte little-endian ``key`` (any int32/uint32 value) with ``seed``.
    Products of two 32-bit values stay below 2**64, so uint64 arithmetic masked to 32 bits is
    exact on the device, in @njit code and in NumPy (the simulator) alike."""
    m = np.uint64(0x5BD1E995)
    low = np.uint64(0xFFFFFFFF)
    k = np.uint64(np.int64(key) & np.int64(0xFFFFFFFF))
    h = (np.uint64(np.int64(seed) & np.int64(0xFFFFFFFF))) ^ np.uint64(4)
    k = (k * m) & low
    k ^= k >> np.uint64(24)
    k = (k * m) & low
    h = ((h * m) & low) ^ k
    h ^= h >> np.uint64(13)
    h = (h * m) & low
    h ^= h >> np.uint64(15)
    return np.uint32(h)


hash32 = cuda.jit(device=True)(_murmur2_32)
hash32_host = numba.njit(_murmur2_32)


__all__ = ["lower_bound", "lower_bound_probes", "contains", "intersect_walk", "intersect", "hash32", "hash32_host"]
