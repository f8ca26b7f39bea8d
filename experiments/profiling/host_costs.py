"""Host cost of the single operations a small query is made of, on the GPU.

Each operation is repeated ``--repeat`` times after a warm-up; printed: the median host
microseconds per operation, and each copy's cost as a ratio to a quick launch measured in the
same run. The ways to move a few hundred bytes up to the device are compared:
numba's ``copy_to_device`` (pageable and pinned source), the driver's ``cuMemcpyHtoD`` called
directly, its asynchronous form, and a copy kernel reading mapped (zero-copy) pinned host memory.

    python -m experiments.profiling.host_costs --repeat 2000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from common.gpu.backend import require_gpu
from common.gpu.launch import jit
from common.gpu.runtime import cuda


@jit
def _copy_words(source, target, count):
    """target[:count] = source[:count] (one grid-stride loop)."""
    i = cuda.grid(1)
    while i < count:
        target[i] = source[i]
        i += cuda.gridsize(1)


@jit
def _touch(a, b, c, d, n):
    if cuda.grid(1) == 0 and n < 0:
        a[0] = b[0] + c[0] + d[0]


@jit
def _touch16(a, b, c, d, e, f, g, h, i, j, k, m, o, p, q, r, n1, n2, n3, n4):
    if cuda.grid(1) == 0 and n1 + n2 + n3 + n4 < 0:
        a[0] = b[0] + c[0] + d[0] + e[0] + f[0] + g[0] + h[0] + i[0] + j[0] + k[0] + m[0] + o[0] + p[0] + q[0] + r[0]


def launch_breakdown(repeat: int) -> list[dict]:
    """Host microseconds of a quick launch of 16 device arrays + 4 ints, whole (back to back, no
    sync: what the host pays per launch) and by step (argument kinds, launch words, packing, the
    driver call); against the same launch through cuda.core's ``launch`` and through numba's
    dispatcher."""
    import ctypes

    from numba.cuda.cudadrv.driver import _to_core_stream
    from numba.cuda.dispatcher import LaunchConfig, launch

    from common.gpu import launch as L

    arrays = [cuda.device_array(8, np.int32) for _ in range(16)]
    args = (*arrays, 1, 2, 3, np.int64(4))
    _touch16[1, 32](*args)
    _touch16[1, 32](*args)
    kinds = L._kinds(args)
    entry = _touch16._overloads[kinds]

    def words():
        out = []
        for put, value in zip(entry.putters, args):
            put(value, out)
        return out

    packed = words()
    core_words = [ctypes.c_int64(w) if i >= 16 * 7 else w for i, w in enumerate(packed)]
    core_kernel = _touch16.dispatcher.overloads[L.argument_types(args)]._codelibrary.get_cufunc().kernel
    core_config, core_stream = LaunchConfig(grid=(1, 1, 1), block=(32, 1, 1), shmem_size=0), _to_core_stream(0)
    steps = {
        "quick launch 16 arrays + 4 ints (back to back)": lambda: _touch16[1, 32](*args),
        "  of which: argument kinds": lambda: L._kinds(args),
        "  of which: launch words": words,
        "  of which: packing the parameter block": lambda: entry.pack(entry.buffer, 0, *packed),
        "  of which: cuLaunchKernel call": lambda: L._NUMBA.launch_kernel(
            entry.handle, 1, 1, 1, 32, 1, 1, 0, 0, entry.pointers, 0),
        "cuda.core launch call, same words": lambda: launch(
            core_stream, core_config, core_kernel, *core_words),
        "numba dispatcher launch 16 arrays + 4 ints (back to back)": lambda: _touch16.dispatcher[1, 32](*args),
    }
    return [{"operation": name, "median_us": _median_us(step, repeat, sync_each=False)}
            for name, step in steps.items()]


def _median_us(operation, repeat: int, sync_each: bool = True) -> float:
    for _ in range(max(10, repeat // 10)):
        operation()
    cuda.synchronize()
    times = np.empty(repeat)
    for i in range(repeat):
        start = time.perf_counter()
        operation()
        if sync_each:
            cuda.synchronize()
        times[i] = time.perf_counter() - start
    return float(np.median(times) * 1e6)


def measure(repeat: int, words: int) -> pd.DataFrame:
    from cuda.bindings import driver as cu
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    host = np.arange(words, dtype=np.int64)
    pinned = cuda.pinned_array(words, np.int64)
    pinned[:] = host
    mapped = cuda.mapped_array(words, np.int64)
    mapped[:] = host
    mapped_view = DeviceNDArray(mapped.shape, mapped.strides, mapped.dtype, gpu_data=mapped.gpu_data)
    target = cuda.device_array(words, np.int64)
    small = [cuda.device_array(8, np.int32) for _ in range(4)]
    stream = cuda.stream()
    pointer = target.device_ctypes_pointer.value
    nbytes = host.nbytes
    event = cuda.event(timing=False)

    def checked(result):
        if result[0] != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"driver call failed: {result[0]}")

    def raw_copy(source):
        return lambda: checked(cu.cuMemcpyHtoD(pointer, source.ctypes.data, nbytes))

    rows = {
        "sync (idle device)": (lambda: None, True),
        "quick launch, 4 arrays + 1 int (+ sync)": (lambda: _touch[1, 32](*small, 1), True),
        "event record + synchronize": (lambda: (event.record(), event.synchronize()), False),
        f"copy_to_device, {nbytes} B pageable": (lambda: target.copy_to_device(host), True),
        f"copy_to_device, {nbytes} B pinned": (lambda: target.copy_to_device(pinned), True),
        f"cuMemcpyHtoD, {nbytes} B pageable": (raw_copy(host), True),
        f"cuMemcpyHtoD, {nbytes} B pinned": (raw_copy(pinned), True),
        f"cuMemcpyHtoDAsync, {nbytes} B pinned, stream (+ sync)": (
            lambda: checked(cu.cuMemcpyHtoDAsync(pointer, pinned.ctypes.data, nbytes, stream.handle)), True),
        f"copy kernel from mapped memory, {nbytes} B (+ sync)": (
            lambda: _copy_words[1, 256](mapped_view, target, words), True),
        f"copy_to_host, {nbytes} B pinned": (lambda: target.copy_to_host(pinned), False),
    }
    out = []
    for name, (operation, sync_each) in rows.items():
        out.append({"operation": name, "median_us": _median_us(operation, repeat, sync_each)})
    out.extend(launch_breakdown(repeat))
    if not np.array_equal(target.copy_to_host(), host):
        raise AssertionError("a copy did not arrive")
    table = pd.DataFrame(out)
    launch = table.median_us[1]
    table["vs_quick_launch"] = table.median_us / launch
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--words", type=int, default=256, help="int64 words per copy")
    args = parser.parse_args(argv)
    require_gpu("python -m experiments.profiling.host_costs")
    name = cuda.get_current_device().name
    print(f"device: {name.decode() if isinstance(name, bytes) else name}")
    print(measure(args.repeat, args.words).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
