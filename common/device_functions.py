"""Device functions every engine shares: searches in sorted ranges, sorted-set intersection and a
32-bit hash (docs/design.md: shared device functions live once in common/).

Ranges are ``arr[lo:hi]`` of a sorted array, as CSR neighbour lists are
(``neighbors[offsets[v]:offsets[v + 1]]``). Intersections assume sorted ranges without
duplicates. Each function is a small ``@cuda.jit(device=True)`` function that Numba inlines.
"""

from __future__ import annotations

import numba
import numpy as np

from .device import cuda


@cuda.jit(device=True)
def lower_bound(arr, lo, hi, key):
    """First index i in [lo, hi) with arr[i] >= key (hi if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def binary_search(arr, lo, hi, key):
    """Index of ``key`` in arr[lo:hi], or -1."""
    i = lower_bound(arr, lo, hi, key)
    if i < hi and arr[i] == key:
        return i
    return -1


@cuda.jit(device=True)
def contains(arr, lo, hi, key):
    """Whether ``key`` occurs in arr[lo:hi]."""
    i = lower_bound(arr, lo, hi, key)
    return i < hi and arr[i] == key


@cuda.jit(device=True)
def intersect_count_merge(a, a_lo, a_hi, b, b_lo, b_hi):
    """|a[a_lo:a_hi] ∩ b[b_lo:b_hi]| by a merge walk: O(|a| + |b|)."""
    count = 0
    while a_lo < a_hi and b_lo < b_hi:
        x = a[a_lo]
        y = b[b_lo]
        if x < y:
            a_lo += 1
        elif y < x:
            b_lo += 1
        else:
            count += 1
            a_lo += 1
            b_lo += 1
    return count


@cuda.jit(device=True)
def intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos):
    """Write a[a_lo:a_hi] ∩ b[b_lo:b_hi] (ascending) to out[out_pos:]; return how many."""
    count = 0
    while a_lo < a_hi and b_lo < b_hi:
        x = a[a_lo]
        y = b[b_lo]
        if x < y:
            a_lo += 1
        elif y < x:
            b_lo += 1
        else:
            out[out_pos + count] = x
            count += 1
            a_lo += 1
            b_lo += 1
    return count


@cuda.jit(device=True)
def intersect_count_search(a, a_lo, a_hi, b, b_lo, b_hi):
    """|a ∩ b| by binary-searching each element of the (short) range a in the (long) range b;
    the search start only moves forward: O(|a| log |b|)."""
    count = 0
    while a_lo < a_hi and b_lo < b_hi:
        b_lo = lower_bound(b, b_lo, b_hi, a[a_lo])
        if b_lo < b_hi and b[b_lo] == a[a_lo]:
            count += 1
            b_lo += 1
        a_lo += 1
    return count


@cuda.jit(device=True)
def intersect_search(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos):
    """Write a ∩ b (ascending) to out[out_pos:] by binary search of a's elements in b; return
    how many. Pass the shorter range as a."""
    count = 0
    while a_lo < a_hi and b_lo < b_hi:
        x = a[a_lo]
        b_lo = lower_bound(b, b_lo, b_hi, x)
        if b_lo < b_hi and b[b_lo] == x:
            out[out_pos + count] = x
            count += 1
            b_lo += 1
        a_lo += 1
    return count


@cuda.jit(device=True)
def _prefer_search(short_len, long_len):
    """Binary search wins when |short| * log2(|long|) < |short| + |long|."""
    steps = 1
    while (1 << steps) <= long_len:
        steps += 1
    return short_len * steps < short_len + long_len


@cuda.jit(device=True)
def intersect_count(a, a_lo, a_hi, b, b_lo, b_hi):
    """|a ∩ b|, by merge or, for very unequal sizes, by binary search of the shorter range."""
    if a_hi - a_lo <= b_hi - b_lo:
        if _prefer_search(a_hi - a_lo, b_hi - b_lo):
            return intersect_count_search(a, a_lo, a_hi, b, b_lo, b_hi)
    elif _prefer_search(b_hi - b_lo, a_hi - a_lo):
        return intersect_count_search(b, b_lo, b_hi, a, a_lo, a_hi)
    return intersect_count_merge(a, a_lo, a_hi, b, b_lo, b_hi)


@cuda.jit(device=True)
def intersect(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos):
    """Write a ∩ b (ascending) to out[out_pos:], choosing merge or binary search; return how
    many."""
    if a_hi - a_lo <= b_hi - b_lo:
        if _prefer_search(a_hi - a_lo, b_hi - b_lo):
            return intersect_search(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos)
        return intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos)
    if _prefer_search(b_hi - b_lo, a_hi - a_lo):
        return intersect_search(b, b_lo, b_hi, a, a_lo, a_hi, out, out_pos)
    return intersect_merge(a, a_lo, a_hi, b, b_lo, b_hi, out, out_pos)


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


__all__ = [
    "lower_bound", "binary_search", "contains", "intersect_count_merge", "intersect_merge",
    "intersect_count_search", "intersect_search", "intersect_count", "intersect", "hash32",
    "hash32_host",
]
