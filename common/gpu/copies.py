"""Checked host-device copies and the device fills the engines share: :func:`upload`,
:func:`download`, :func:`fill`, :func:`clear_bit_outside`, and :func:`mapped` (host memory that
kernels read in place)."""

from __future__ import annotations

import numpy as np

from . import launch
from .runtime import cuda, jit, simulator_active


def _check_copy(d_array, host: np.ndarray, verb: str, start: int = 0) -> None:
    if host.dtype != d_array.dtype:
        raise TypeError(f"{verb}: host dtype {host.dtype} differs from the device array's {d_array.dtype}")
    if start < 0 or start + host.size > d_array.size:
        raise ValueError(f"{verb}: {host.size} elements do not fit a device array of {d_array.size} "
                         f"at element {start}")
    if not host.flags.c_contiguous or not d_array.is_c_contiguous():
        raise ValueError(f"{verb} needs contiguous arrays")


def upload(d_target, host, start: int = 0) -> None:
    """Copy ``host`` into ``d_target[start:start + host.size]`` (same dtype, both contiguous;
    returns once ``host`` may be reused). On a GPU this calls the driver directly, not numba's
    ``copy_to_device``, which slices the device array and re-checks both arrays
    (docs/decisions.md, "Small copies through the driver")."""
    host = np.ascontiguousarray(host)
    _check_copy(d_target, host, "upload", start)
    if host.size == 0:
        return
    direct = launch._NUMBA                 # None under the simulator or GPUSM_FAST_LAUNCH=0
    if direct is not None and direct.memcpy_htod(launch.device_pointer(d_target) + start * host.itemsize,
                                                 host.ctypes.data, host.nbytes)[0] == 0:
        return                           # else numba's path below raises its own error
    flat = d_target if d_target.ndim == 1 else d_target.reshape(d_target.size)
    flat[start:start + host.size].copy_to_device(host.reshape(-1))


def mapped(host: np.ndarray):
    """``host`` copied into page-locked host memory mapped into the device's address space:
    (that host buffer, a device array over it). Kernels read the device array in place over the
    host link (zero-copy: each access is a transfer; nothing is copied ahead), and it takes no
    device memory. Keep the host buffer alive as long as the device array is used. Under the
    simulator the device array is an ordinary device copy."""
    host = np.ascontiguousarray(host)
    if simulator_active():
        return host, cuda.to_device(host)
    buffer = cuda.mapped_array(max(host.size, 1), host.dtype)
    buffer[:host.size] = host.reshape(-1)
    return buffer, cuda.as_cuda_array(buffer)


def download(d_source, host: np.ndarray) -> np.ndarray:
    """Copy the first ``host.size`` elements of ``d_source`` into ``host`` (same dtype, both
    contiguous) after the work queued before it (default stream); returns ``host``. On a GPU
    this calls the driver directly, not numba's ``copy_to_host``."""
    _check_copy(d_source, host, "download")
    if host.size == 0:
        return host
    direct = launch._NUMBA
    if direct is not None and direct.memcpy_dtoh(host.ctypes.data, launch.device_pointer(d_source),
                                                 host.nbytes)[0] == 0:
        return host
    _first(d_source, host.size).copy_to_host(host.reshape(-1))
    return host


def _first(d_array, elements: int):
    """The first ``elements`` of a contiguous device array, flat (numba's copies want equal shapes)."""
    flat = d_array if d_array.ndim == 1 else d_array.reshape(d_array.size)
    return flat if elements == flat.size else flat[:elements]


@jit
def _fill_kernel(out, value, count):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < count:
        out[i] = value
        i += stride


FILL_THREADS = 32 if simulator_active() else 256
#: blocks of a fill launch at most: the kernel strides over the array, and the simulator runs
#: every block in turn at a fixed cost per block, so there a few blocks do the same work sooner
FILL_BLOCKS = 4 if simulator_active() else 1024


def _repeated_word(value, dtype) -> int | None:
    """The 32-bit word that ``value`` of ``dtype`` repeats (a 4- or 8-byte type), else None."""
    if dtype.itemsize not in (4, 8):
        return None
    if type(value) is int and dtype.kind in "iu" and (value == 0 or (value == -1 and dtype.kind == "i")):
        return 0 if value == 0 else 0xFFFFFFFF      # the common cases, without numpy
    words = np.array([value], dtype=dtype).view(np.uint32)
    return int(words[0]) if (words == words[0]).all() else None


def fill(d_array, value, stream=0, count: int | None = None) -> None:
    """Set the first ``count`` elements (default: all) of a contiguous device array to ``value``:
    one driver memset when the value's bytes repeat a 32-bit word (0 and -1 of any 4- or 8-byte
    type), else one launch."""
    count = d_array.size if count is None else int(count)
    if not 0 <= count <= d_array.size:
        raise ValueError(f"fill count {count} outside the array's {d_array.size} elements")
    if count == 0:
        return
    direct = launch._NUMBA
    if direct is not None:
        dtype = d_array.dtype
        word = _repeated_word(value, dtype)
        if word is not None and direct.memset_d32(
                launch.device_pointer(d_array), word, count * (dtype.itemsize // 4),
                launch.stream_handle(stream))[0] == 0:
            return
    flat = d_array if d_array.ndim == 1 else d_array.reshape(d_array.size)   # a reshape costs as much as a launch
    blocks = min(FILL_BLOCKS, (count + FILL_THREADS - 1) // FILL_THREADS)
    _fill_kernel[blocks, FILL_THREADS, stream](flat, value, count)


@jit
def _clear_bit_kernel(masks, bit, keep, lo, hi, modulus, residue, counter, index):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < masks.size:
        if (i < lo or i >= hi or i % modulus != residue) and (masks[i] & bit) != 0:
            masks[i] = masks[i] & keep
            if index >= 0:
                cuda.atomic.add(counter, index, -1)
        i += stride


def clear_bit_outside(d_masks, bit: int, lo: int, hi: int, counter=None, index: int = -1,
                      part: tuple[int, int] = (0, 1)) -> None:
    """Clear bit ``bit`` of ``d_masks[v]`` for every v outside ``[lo, hi)`` (a root range,
    :mod:`common.engine.part`) or, with ``part=(j, m)`` (a branch part), with ``v % m != j``,
    subtracting one from ``counter[index]`` per bit cleared when given."""
    if d_masks.size == 0:
        return
    kind = np.dtype(d_masks.dtype).type
    width = 8 * np.dtype(d_masks.dtype).itemsize
    one = 1 << bit
    keep = kind(((1 << width) - 1) & ~one) if np.dtype(d_masks.dtype).kind == "u" else kind(~one)
    if counter is None:
        counter, index = d_masks, -1
    blocks = min(1024, (d_masks.size + FILL_THREADS - 1) // FILL_THREADS)
    _clear_bit_kernel[blocks, FILL_THREADS](d_masks, kind(one), keep, lo, hi, part[1], part[0], counter, index)
