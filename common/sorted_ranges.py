"""Searches in sorted ranges for host code compiled with ``numba.njit`` (the CUDA device
versions are in :mod:`common.device_functions`). Ranges are ``a[lo:hi]`` of a sorted array, as
CSR neighbour lists are."""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def lower_bound(a, lo, hi, x):
    """First index in ``a[lo:hi]`` (sorted) whose value is >= x, or ``hi``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo
