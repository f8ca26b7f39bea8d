"""Compile the engines' hot kernels for a real GPU on a machine without one, and read their resources.

The CUDA simulator accepts code that Numba's CUDA compiler rejects, so a kernel changed without a
GPU at hand should at least compile. This compiles every variant of gMatch's fine and coarse DFS,
the filter and the BFS seed expansion, EGSM's filter, index, scan, wedge-filter and enumeration
kernels, GSI's first-edge, heavy-row, counts-and-scan kernels and one-launch join, SGSI's kernels
and STwig's join kernels, to PTX for ``--cc`` (default 9.0, Hopper) with NVVM, and with ``ptxas``
(when found) prints registers, spills and shared memory of gMatch's fine kernel as the engine
builds it (``max_registers=64``), its seed expansion and filter, and every EGSM, GSI, SGSI and STwig kernel. It
needs the CUDA toolkit libraries numba-cuda uses (``pip install 'numba-cuda[cu12]'``) but no
driver: the device functions' compute capability is taken from ``--cc``. Not a test (CI has
no CUDA toolkit); a developer's check.

    NUMBA_ENABLE_CUDASIM=0 python -m experiments.profiling.ptx_check
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import types as pytypes
from pathlib import Path

import numpy as np


def _patch_device(cc: tuple[int, int]) -> None:
    """Device functions compile for the current device's capability: use ``cc`` without a driver."""
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=cc)


def _ptxas() -> str | None:
    found = shutil.which("ptxas")
    if found:
        return found
    import nvidia.cuda_nvcc as nvcc  # the pip toolkit's location

    path = Path(list(nvcc.__path__)[0]) / "bin" / "ptxas"
    return str(path) if path.exists() else None


def _missing_toolkit() -> str | None:
    """Why NVVM cannot compile here (the simulator on, or the CUDA libraries absent); None: it can."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1":
        return "compiles for a real GPU: run it with NUMBA_ENABLE_CUDASIM=0 (no driver needed)"
    try:
        import cuda.pathfinder as pathfinder

        for library in ("nvvm", "nvrtc"):
            pathfinder.load_nvidia_dynamic_lib(library)
    except ImportError:
        return "needs numba-cuda's CUDA bindings: pip install 'numba-cuda[cu12]'"
    except Exception as exc:                  # DynamicLibNotFoundError and the like
        return f"needs the CUDA toolkit libraries (NVVM, NVRTC; {type(exc).__name__}): pip install 'numba-cuda[cu12]'"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0", help="compute capability, e.g. 9.0")
    args = parser.parse_args(argv)
    missing = _missing_toolkit()
    if missing:
        print(f"python -m experiments.profiling.ptx_check: {missing}", file=sys.stderr)
        return 2
    cc = tuple(int(x) for x in args.cc.split("."))
    _patch_device(cc)
    from numba import cuda, typeof, types

    from gmatch.balance import seed_expand_kernel
    from gmatch.enumerate import (
        LEAF_LAST,
        LEAF_ONE,
        LEAF_PRODUCT,
        STEAL_BLOCK,
        STEAL_GLOBAL,
        STEAL_MAILBOX,
        STEAL_NONE,
        coarse_kernel,
        fine_kernel,
    )
    from gmatch.filter import filter_kernel

    def array(dtype, ndim):
        return typeof(np.zeros((1,) * ndim, dtype))

    i32, i64, u32, int64 = (lambda n: array(np.int32, n)), (lambda n: array(np.int64, n)), \
        (lambda n: array(np.uint32, n)), types.int64

    def graph(indexed):                   # (off, ent, bitmap, cset, eg) as the engine passes them
        return (i32(1) if indexed else i64(1), i32(1), u32(1), i32(1), i32(1))

    fine_ptx, seed_ptx = {}, {}
    for indexed in (False, True):
        for scope in (STEAL_GLOBAL, STEAL_MAILBOX, STEAL_BLOCK, STEAL_NONE):
            for batch in (True, False):
                kernel = fine_kernel(12, 8, batch, scope, 4, indexed, False, 64)
                sig = (*graph(indexed), u32(2), i32(3), i32(1), int64, i64(2), i32(2), int64, int64, i64(1),
                       i32(1), i32(2), i32(1))
                ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=cc)
                if scope == STEAL_GLOBAL and batch:
                    fine_ptx[indexed] = ptx
        for unroll in (1, 2, 8):
            sig = (*graph(indexed), u32(1), i32(2), i32(1), int64, int64, int64, i64(1), i32(2), int64, int64,
                   int64, i64(1), i32(3), i32(3))
            cuda.compile_ptx(coarse_kernel(8, unroll, indexed).py_func, sig, cc=cc)
        sig = (*graph(indexed), u32(1), i32(2), i32(1), int64, int64, i32(1), int64, i64(1), int64)
        seed_ptx[indexed], _ = cuda.compile_ptx(seed_expand_kernel(indexed).py_func, sig, cc=cc)
    sig = (*graph(True), u32(2), i32(3), i32(1), int64, i64(2), i32(2), int64, int64, i64(1), i32(1), i32(2), i32(1))
    count_last_ptx, _ = cuda.compile_ptx(fine_kernel(12, 8, True, STEAL_GLOBAL, 4, True, False, 64, LEAF_LAST).py_func,
                                         sig, cc=cc)
    count_one_ptx, _ = cuda.compile_ptx(fine_kernel(12, 8, True, STEAL_GLOBAL, 4, True, False, 64, LEAF_ONE).py_func,
                                        sig, cc=cc)
    leaves_ptx, _ = cuda.compile_ptx(fine_kernel(12, 8, True, STEAL_GLOBAL, 4, True, False, 64, LEAF_PRODUCT).py_func,
                                     sig, cc=cc)
    filter_ptx, _ = cuda.compile_ptx(filter_kernel.py_func, (i64(1), i32(1), i32(1), i32(3), u32(2)), cc=cc)
    egsm_ptx = _egsm_ptx(cuda, types, i32, i64, cc)
    gsi_ptx = _gsi_ptx(cuda, types, i32, i64, u32, cc)
    build_ptx = _compiled(cuda, _candidate_graph_kernels(), cc)
    sgsi_ptx = _compiled(cuda, _sgsi_kernels(), cc)
    stwig_ptx = _compiled(cuda, _stwig_kernels(), cc)
    print(f"compiled for sm_{cc[0]}{cc[1]}: 19 fine (one multiplying countable leaves, one counting the last "
          f"position, one adding one per match), 6 coarse, 2 seed-expansion kernels, the filter and "
          f"{len(build_ptx)} candidate-graph build kernels of gMatch, "
          f"{len(egsm_ptx)} EGSM kernels, "
          f"{len(gsi_ptx)} GSI kernels, {len(sgsi_ptx)} SGSI kernels, {len(stwig_ptx)} STwig kernels")
    ptxas = _ptxas()
    if ptxas is None:
        print("ptxas not found: no resource report")
        return 0
    reports = [(f"fine kernel ({'candidate graph' if indexed else 'data graph'}, 12 levels, 8 warps)", ptx, 64)
               for indexed, ptx in fine_ptx.items()]
    reports.append(("fine kernel (candidate graph, 12 levels, 8 warps, countable leaves)", leaves_ptx, 64))
    reports.append(("fine kernel (candidate graph, 12 levels, 8 warps, count_last)", count_last_ptx, 64))
    reports.append(("fine kernel (candidate graph, 12 levels, 8 warps, every position enumerated)", count_one_ptx, 64))
    reports += [(f"seed expansion ({'candidate graph' if indexed else 'data graph'}, a warp per row)", ptx, None)
                for indexed, ptx in seed_ptx.items()]
    reports.append(("filter kernel (a warp per data vertex)", filter_ptx, None))
    reports += [(f"gMatch candidate-graph build: {name}", ptx, None) for name, ptx in build_ptx.items()]
    reports += [(f"EGSM {name}", ptx, None) for name, ptx in egsm_ptx.items()]
    reports += [(f"GSI {name}", ptx, 64 if name.startswith("fused") else None) for name, ptx in gsi_ptx.items()]
    reports += [(f"SGSI {name}", ptx, None) for name, ptx in sgsi_ptx.items()]
    reports += [(f"STwig {name}", ptx, None) for name, ptx in stwig_ptx.items()]
    for name, ptx, max_registers in reports:
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        limit = [f"--maxrregcount={max_registers}"] if max_registers else []
        if ".extern .func" in ptx:          # a grid barrier calls into cudadevrt: compile, do not link
            limit.append("--compile-only")
        out = subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", *limit, "-v", f.name, "-o", os.devnull],
                             capture_output=True, text=True)
        os.unlink(f.name)
        lines = [line.split(":", 1)[-1].strip() for line in out.stderr.splitlines()
                 if "registers" in line or "spill" in line]
        print(f"{name}: " + "; ".join(lines))
    return 0


def _egsm_ptx(cuda, types, i32, i64, cc) -> dict:
    """PTX of EGSM's kernels for the argument types the engine passes."""
    from egsm.cuckoo_trie import count_kernel, fill_kernel, small_index_kernel, small_scan_kernel
    from egsm.enumerate import extend_kernel
    from egsm.filter import candidate_kernel, prune_all_kernel

    n, flag = types.int64, types.boolean
    signatures = {
        "candidate_kernel": (candidate_kernel, (n, n, i64(1), i32(1), i64(1), i32(1), i32(1), i64(1), i64(1),
                                                i64(1))),
        "count_kernel": (count_kernel, (n, n, i64(1), i32(1), i64(1), n, i64(1), i32(1), i32(1))),
        "fill_kernel": (fill_kernel, (i64(1), i32(1), i64(1), n, i64(1), i32(1), i64(1), i32(1), i32(1))),
        "small_index_kernel": (small_index_kernel, (n, n, i64(1), i64(1), i32(1), i64(1), n, n, i64(1), i32(1),
                                                    i32(1), i64(1), i32(1), i32(1), i64(1), i32(1), i64(1))),
        "small_scan_kernel": (small_scan_kernel, (i64(1), n, n, i64(1), i64(1), i64(1), n)),
        "prune_all_kernel": (prune_all_kernel, (i64(1), i32(1), i32(1), i64(1), i32(1), i32(1), i64(1), n)),
        "extend_kernel": (extend_kernel, (i64(1), i64(1), i32(1), i64(1), i32(1), i32(1), i32(1), i64(1),
                                          i32(1), n, i64(1), n, n, n, n, n, n, n, n, n, flag, flag, n, flag,
                                          n)),
    }
    return {name: cuda.compile_ptx(kernel.py_func, sig, cc=cc)[0]
            for name, (kernel, sig) in signatures.items()}


def _gsi_ptx(cuda, types, i32, i64, u32, cc) -> dict:
    """PTX of GSI's first-edge, heavy-row and counts-and-scan kernels (8 warps: the default
    block) and its one-launch join (``FUSE_WARPS``)."""
    from gsi.balance import make_balanced_kernels
    from gsi.engine import FUSE_WARPS
    from gsi.fused import make_fused_kernel
    from gsi.join import make_kernels as make_join_kernels

    n = types.int64
    index = (n, i64(1), i32(1), i32(1), i64(1), i32(1), i32(1))      # DeviceNeighborIndex.args()
    signatures = {
        "block_first_edge (8 warps)": (make_balanced_kernels(8).block_first_edge,
                             (i32(1), n, n, n, n, n, n, u32(1), n, i64(1), i32(1), i64(1), n, *index, n, n, n, n,
                              i64(1), i64(1), i32(1), n, n, i64(1), n)),
        "heavy (8 warps)": (make_balanced_kernels(8).heavy, _signature(
            "i32, n, n, n, n, n, u32, n, i64, i32, i64, n, n, i64, i32, i32, i64, i32, i32, i64, i64, i32, n, n, n, "
            "i64, n")),
        "counts_scan (8 warps)": (make_join_kernels(8).counts_scan, _signature(
            "i32, n, n, n, n, n, n, n, i64, i32, i32, i64, i32, i32, i64, i64, i64, i64, i64, n")),
        f"fused_join ({FUSE_WARPS} warps)": (make_fused_kernel(FUSE_WARPS),
                                            (u32(1), n, n, i32(1), n, n, n, i32(1), n, i32(1), i32(1), n, n, n, n,
                                             n, n, i64(1), i64(1), i32(1), i64(1), i64(1), n, *index, n, i64(1))),
    }
    return {name: cuda.compile_ptx(kernel.py_func, sig, cc=cc)[0]
            for name, (kernel, sig) in signatures.items()}


def _signature(spec: str) -> tuple:
    """Argument types from a compact spec: ``i32``/``i64``/``u32`` 1-D arrays (``i32.2``: 2-D),
    ``n`` an int64 scalar, ``b`` a boolean (the types the engines' launches pass)."""
    from numba import typeof, types

    dtypes = {"i32": np.int32, "i64": np.int64, "u32": np.uint32}
    out = []
    for item in (part.strip() for part in spec.split(",")):
        name, _, ndim = item.partition(".")
        if name == "n":
            out.append(types.int64)
        elif name == "b":
            out.append(types.boolean)
        else:
            out.append(typeof(np.zeros((1,) * int(ndim or 1), dtypes[name])))
    return tuple(out)


def _compiled(cuda, kernels: dict, cc) -> dict:
    """PTX of each (kernel, signature spec) in ``kernels``, by name."""
    return {name: cuda.compile_ptx(kernel.py_func, _signature(spec), cc=cc)[0]
            for name, (kernel, spec) in kernels.items()}


def _candidate_graph_kernels() -> dict:
    """gMatch's candidate-graph build on the GPU (gmatch.candidate_graph) with the types it passes."""
    from gmatch import candidate_graph as k

    return {
        "refine_position": (k.refine_position_kernel, "i64, i32, i32, i32.2, u32, n, n, n"),
        "count_candidates": (k.count_candidates_kernel, "u32, n, n, n, i64, n"),
        "place_candidates": (k.place_candidates_kernel, "u32, n, n, n, i64, n, i32"),
        "candidate_rows": (k.candidate_rows_kernel, "i64, i32, i32, i32.2, u32, i32, i32.2, n, n, i64, u32, i64, i32, "
                                                    "i32, n"),
    }


def _sgsi_kernels() -> dict:
    """SGSI's kernels (8 warps) with the argument types its out-of-core join passes."""
    from gsi.sgsi import make_sgsi_kernels

    k = make_sgsi_kernels(8)
    return {
        "bounds": (k.bounds, "i32, n, n, n, i32, n, n, i32, n, i32, n, n, i64, i64, i64, i32, i32, i32, i32, i64, n, "
                             "i64"),
        "segment_first": (k.segment_first, "i32, n, n, n, n, n, n, n, n, n, u32, n, i64, i32, i64, n, i64, i32, n"),
        "segment_prep": (k.segment_prep, "i64, i64, i64, n, i64"),
        "segment_add": (k.segment_add, "i64, i64, n"),
        "segment_intersect": (k.segment_intersect, "i32, n, n, n, n, n, n, n, i64, i32, i64, i64, i64, n, i64, i32, "
                                                   "n"),
        "link_part": (k.link_part, "i32, n, n, n, n, i32, i64, i64, i64, n, i32"),
        "bucket_count": (k.bucket_count, "i32, n, n, n, n, i32, i64, i64, n, i32, n, n, i64"),
        "bucket_link": (k.bucket_link, "i32, n, n, n, n, i32, i64, i64, n, i32, n, n, i64, i32"),
        "in_place_count": (k.in_place_count, "i32, n, n, n, i32, n, n, u32, n, i32, i32, i64, n, n, i64, i64"),
        "in_place_write": (k.in_place_write, "i32, n, n, n, n, i32, n, n, u32, n, i32, i32, i64, n, i64, n, i32, "
                                             "i64"),
    }


def _stwig_kernels() -> dict:
    """STwig's join kernels with the argument types its hash join passes."""
    from stwig.join import _build_tables_gpu, _expand_units_kernel, _join_gpu, _split_small_gpu

    tables = "i64.2, i64.2, i64.2, i64.2"
    return {
        "build_tables": (_build_tables_gpu, "i32, i64.2, i64.2, n, n, i32, i32"),
        "expand_units": (_expand_units_kernel, f"n, n, i32, i32.2, i32, n, n, i32, i32, {tables}, b, b, i64, i32, "
                                               "i32.2"),
        "join": (_join_gpu, f"i32, n, n, n, n, i64, n, n, i64.2, n, n, n, i32, i32.2, n, n, i32, i32, {tables}, b, "
                            "n, i64, i32"),
        "split_small": (_split_small_gpu, f"n, n, n, n, i32, n, n, i32, i32, {tables}, b, i32, i32.2, i32, i32.2, "
                                          "i64"),
    }


if __name__ == "__main__":
    raise SystemExit(main())
