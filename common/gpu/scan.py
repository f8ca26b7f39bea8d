"""Device prefix sums: an exclusive scan over int32/int64 device arrays of any length, and the
warp- and block-level scans the engines' kernels use (turning per-thread counts into write
offsets, as GSI's Prealloc-Combine and filter and STwig's split levels do).

:func:`block_exclusive_scan` is the one block-wide scan: a warp scan by ``shfl_up_sync``, the
warp totals through ``warps`` words of shared memory, two barriers; :func:`block_carry_scan` runs
it round after round from a carry.

The array scan is the classic three-phase, work-efficient scan: each block scans one tile in
shared memory (a serial scan of ``SCAN_ITEMS`` items per thread, a warp scan by ``shfl_up_sync``
of the thread totals, a scan of the warp totals) and writes the tile's total; the tile totals are
scanned the same way, recursively, until one tile remains; then each level adds its scanned
totals back into the level below. ``ceil(log_TILE n)`` scan launches, one fewer add-back launches
and a single device-to-host copy (the grand total).
"""

from __future__ import annotations

import functools

import numpy as np

from .copies import download
from .cudasim import FULL_MASK
from .runtime import cuda, jit, simulator_active

# The simulator runs one Python thread per CUDA thread, so its tiles are small: 64 threads keep
# two warps per block (the cross-warp step is exercised) and 1000 elements already need 2 levels.
SCAN_THREADS = 64 if simulator_active() else 256
SCAN_ITEMS = 1 if simulator_active() else 4
SCAN_TILE = SCAN_THREADS * SCAN_ITEMS
_WARPS = SCAN_THREADS // 32
_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


@cuda.jit(device=True)
def warp_inclusive_scan(mask, value):
    """Inclusive prefix sum of ``value`` over the lanes of the calling warp (Hillis-Steele by
    ``shfl_up_sync``). ``mask`` must name lanes 0..k-1 and each of them must call; lane i gets
    the sum of lanes 0..i."""
    lane = cuda.laneid
    delta = 1
    while delta < 32:
        up = cuda.shfl_up_sync(mask, value, delta)
        if lane >= delta:
            value += up
        delta *= 2
    return value


@cuda.jit(device=True)
def block_exclusive_scan(value, wsum, warps):
    """Block-wide exclusive prefix sum of each thread's ``value``: (this thread's prefix, the
    block's total), both int64. Every thread of a block of ``warps`` full warps must call;
    ``wsum`` is shared scratch of at least ``warps`` elements, free again on return."""
    lane = cuda.laneid
    w = cuda.threadIdx.x // 32
    inc = warp_inclusive_scan(FULL_MASK, value)
    if lane == 31:
        wsum[w] = inc
    cuda.syncthreads()
    before = np.int64(0)
    total = np.int64(0)
    for r in range(warps):
        if r < w:
            before += wsum[r]
        total += wsum[r]
    cuda.syncthreads()
    return before + inc - value, total


@cuda.jit(device=True)
def block_carry_scan(value, carry, wsum, warps):
    """One round of a block-wide exclusive scan that goes on from ``carry`` (the total of the
    earlier rounds): (this thread's offset, the carry after the round)."""
    before, total = block_exclusive_scan(value, wsum, warps)
    return carry + before, carry + total


@functools.lru_cache(maxsize=None)
def _kernels(dtype_str: str):
    """(scan_tiles, add_offsets) for output dtype ``dtype_str``."""
    scalar = np.dtype(dtype_str).type
    threads, items, tile_size, warps = SCAN_THREADS, SCAN_ITEMS, SCAN_TILE, _WARPS

    @jit
    def scan_tiles(inp, out, n, tile_totals):
        tile = cuda.shared.array(tile_size, scalar)
        warp_totals = cuda.shared.array(warps, scalar)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * tile_size
        for k in range(items):                      # coalesced load, zero past the end
            g = base + k * threads + tid
            tile[k * threads + tid] = inp[g] if g < n else 0
        cuda.syncthreads()
        first = tid * items
        total = tile[first]
        for k in range(1, items):
            total += tile[first + k]
        inclusive = warp_inclusive_scan(FULL_MASK, total)
        lane = tid % 32
        warp = tid // 32
        if lane == 31:
            warp_totals[warp] = inclusive
        cuda.syncthreads()
        if warp == 0:
            w = warp_totals[lane] if lane < warps else 0
            w = warp_inclusive_scan(FULL_MASK, w)
            if lane < warps:
                warp_totals[lane] = w
        cuda.syncthreads()
        running = inclusive - total
        if warp > 0:
            running += warp_totals[warp - 1]
        for k in range(items):                      # this thread's items, exclusive
            x = tile[first + k]
            tile[first + k] = running
            running += x
        if tid == threads - 1:
            tile_totals[cuda.blockIdx.x] = running
        cuda.syncthreads()
        for k in range(items):                      # coalesced store
            g = base + k * threads + tid
            if g < n:
                out[g] = tile[k * threads + tid]

    @jit
    def add_offsets(out, n, offsets):
        b = cuda.blockIdx.x + 1                     # tile 0's offset is 0
        offset = offsets[b]
        base = b * tile_size
        for k in range(items):
            g = base + k * threads + cuda.threadIdx.x
            if g < n:
                out[g] += offset

    return scan_tiles, add_offsets


def _level_sizes(n: int) -> list[int]:
    """Number of tiles at each level of the scan of ``n`` elements (the last is 1)."""
    sizes, m = [], max(n, 1)
    while True:
        m = (m + SCAN_TILE - 1) // SCAN_TILE
        sizes.append(m)
        if m == 1:
            return sizes


def workspace_bytes(n: int, dtype=np.int64) -> int:
    """Bytes of the tile totals a scan of ``n`` elements with output ``dtype`` uses."""
    return sum(_level_sizes(n)) * np.dtype(dtype).itemsize


class ScanWorkspace:
    """Tile-total buffers for scans of up to ``capacity`` elements with output ``dtype``; make one
    per engine (through its :class:`~common.gpu.budget.DeviceMemoryBudget`) to scan without
    allocating per query. It also keeps the kernels and the host cell the total comes back in
    (so the copy needs no slice of a device array, which costs as much as a launch)."""

    def __init__(self, capacity: int, dtype=np.int64, budget=None):
        self.capacity = int(capacity)
        self.dtype = np.dtype(dtype)
        if self.dtype not in _DTYPES:
            raise TypeError(f"scan dtype must be int32 or int64, got {self.dtype}")
        if budget is None:
            self.levels = [cuda.device_array(size, self.dtype) for size in _level_sizes(capacity)]
        else:
            self.levels = [budget.device_array(size, self.dtype, what=f"scan level {i}")
                           for i, size in enumerate(_level_sizes(capacity))]
        self.heads = [level[0:1] for level in self.levels]
        self.host_total = np.zeros(1, self.dtype)
        self.kernels = _kernels(self.dtype.str)

    @property
    def nbytes(self) -> int:
        """Device bytes of the tile buffers."""
        return sum(level.nbytes for level in self.levels)

    def free(self, budget) -> None:
        """Give the tile buffers back to ``budget`` (the one they were allocated through)."""
        for level in self.levels:
            budget.free(level)
        self.levels, self.heads, self.capacity = [], [], 0


def exclusive_scan(d_in, d_out=None, stream=0, workspace: ScanWorkspace | None = None, *,
                   n: int | None = None, want_total: bool = True) -> int | None:
    """Exclusive prefix sum of the 1-D int32/int64 device array ``d_in`` into ``d_out`` (in place
    when ``d_out`` is None; may be wider than ``d_in``, e.g. int32 counts to int64 offsets).

    ``n`` scans only the first ``n`` elements of both arrays (a reused buffer longer than the
    data: slicing a device array costs as much as a launch). Returns the sum of the scanned
    elements (sums wrap at the output dtype's width), or None with ``want_total=False``, which
    saves the device-to-host copy."""
    out = d_in if d_out is None else d_out
    for name, array in (("input", d_in), ("output", out)):
        if array.ndim != 1 or np.dtype(array.dtype) not in _DTYPES:
            raise TypeError(f"exclusive_scan {name} must be a 1-D int32/int64 device array, "
                            f"got {array.ndim}-D {array.dtype}")
    if n is None:
        n = d_in.size
        if out.size != n:
            raise ValueError(f"exclusive_scan output has {out.size} elements, input {n}")
    elif not 0 <= n <= min(d_in.size, out.size):
        raise ValueError(f"exclusive_scan of {n} elements, but the input has {d_in.size} and the "
                         f"output {out.size}")
    if n == 0:
        return 0 if want_total else None
    if workspace is None:
        workspace = ScanWorkspace(n, out.dtype)
    elif workspace.capacity < n or workspace.dtype != np.dtype(out.dtype):
        raise ValueError(f"scan workspace ({workspace.capacity} x {workspace.dtype}) does not fit "
                         f"{n} x {np.dtype(out.dtype)}")
    scan_tiles, add_offsets = workspace.kernels
    levels = []
    src, dst, m = d_in, out, n
    for totals in workspace.levels:
        tiles = (m + SCAN_TILE - 1) // SCAN_TILE
        scan_tiles[tiles, SCAN_THREADS, stream](src, dst, m, totals)
        levels.append((dst, m, totals, tiles))
        if tiles == 1:
            break
        src = dst = totals
        m = tiles
    for dst, m, totals, tiles in reversed(levels[:-1]):
        add_offsets[tiles - 1, SCAN_THREADS, stream](dst, m, totals)
    if not want_total:
        return None
    head = workspace.heads[len(levels) - 1]
    if stream == 0:
        download(head, workspace.host_total)
    else:
        head.copy_to_host(workspace.host_total, stream=stream)
        stream.synchronize()
    return int(workspace.host_total[0])


__all__ = ["SCAN_THREADS", "SCAN_ITEMS", "SCAN_TILE", "ScanWorkspace", "block_carry_scan", "workspace_bytes",
           "block_exclusive_scan", "exclusive_scan", "warp_inclusive_scan"]
