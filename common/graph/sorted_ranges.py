"""Searches in sorted ranges, written once for every target. Ranges are ``a[lo:hi]`` of a sorted
array, as CSR neighbour lists are.

:func:`lower_bound_probes` and :func:`label_range` are plain Python registered with
``numba.extending.register_jitable``: ``numba.njit`` host code and CUDA device code (and the
CUDA simulator) compile or run the same source wherever they call it.
:func:`lower_bound` is its compiled host form; the device form is
:func:`common.gpu.device_functions.lower_bound`."""

from __future__ import annotations

from numba import njit
from numba.extending import register_jitable


@register_jitable
def lower_bound_probes(a, lo, hi, x):
    """(first index in ``a[lo:hi]`` (sorted) whose value is >= x, or ``hi``; how many elements
    the search read)."""
    probes = 0
    while lo < hi:
        mid = (lo + hi) >> 1
        probes += 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo, probes


@register_jitable
def label_range(a, lo, hi, label):
    """[first, last) of the entries equal to the integer ``label`` in ``a[lo:hi]`` (sorted): two
    binary searches."""
    first = lower_bound_probes(a, lo, hi, label)[0]
    return first, lower_bound_probes(a, first, hi, label + 1)[0]


@njit(cache=True, nogil=True)
def lower_bound(a, lo, hi, x):
    """First index in ``a[lo:hi]`` (sorted) whose value is >= x, or ``hi``."""
    return lower_bound_probes(a, lo, hi, x)[0]
