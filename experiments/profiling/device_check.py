"""Report the device, the resources of the shared kernels and the cost of a device prefix sum.

Run on a GPU machine: ``python -m experiments.profiling.device_check``. A benchmark that prints, never a test.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from common.gpu.backend import require_gpu
from common.gpu.runtime import cuda, device_info, kernel_resources
from common.gpu.scan import SCAN_THREADS, ScanWorkspace, _kernels, exclusive_scan
from common.gpu.timers import PhaseTimer


def _median_seconds(fn, repeats=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        cuda.synchronize()
        start = time.perf_counter()
        fn()
        cuda.synchronize()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main() -> None:
    require_gpu("python -m experiments.profiling.device_check")
    print("device:", device_info())
    for dtype in (np.int32, np.int64):
        scan_tiles, add_offsets = _kernels(np.dtype(dtype).str)
        d = cuda.to_device(np.ones(SCAN_THREADS * 8, dtype))
        totals = cuda.device_array(8, dtype)
        print(f"scan_tiles[{np.dtype(dtype)}]:", kernel_resources(scan_tiles, d, d, d.size, totals))
        print(f"add_offsets[{np.dtype(dtype)}]:", kernel_resources(add_offsets, d, d.size, totals))
    print(f"{'n':>11} {'wall us':>9} {'event us':>9} {'GB/s':>7}")
    for n in (1_000, 100_000, 1_000_000, 10_000_000, 100_000_000):
        a = np.random.default_rng(n).integers(0, 100, n).astype(np.int32)
        d_in, d_out = cuda.to_device(a), cuda.device_array(n, np.int64)
        workspace = ScanWorkspace(n, np.int64)
        assert exclusive_scan(d_in, d_out, workspace=workspace) == int(a.sum())
        wall = _median_seconds(functools.partial(exclusive_scan, d_in, d_out,
                                                 workspace=workspace))
        timer = PhaseTimer()
        for _ in range(10):
            with timer.phase("scan"):
                exclusive_scan(d_in, d_out, workspace=workspace)
        event = timer.seconds["scan"] / 10
        print(f"{n:>11} {wall * 1e6:>9.1f} {event * 1e6:>9.1f} {n * 12 / event / 1e9:>7.1f}")


if __name__ == "__main__":
    main()
