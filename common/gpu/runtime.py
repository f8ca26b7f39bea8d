"""The simulator-aware ``cuda`` module, the kernel decorator, device detection and kernel
resources (docs/design.md, "GPU, simulator and CPU").

Engines write ``from common.gpu.runtime import cuda, jit``: under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) importing this module first installs the warp intrinsics the
simulator lacks (:mod:`common.gpu.cudasim`), so the same kernels run on a GPU and in CI.
"""

from __future__ import annotations

import functools
import importlib.metadata

from numba import cuda

from . import cudasim
from .cudasim import FULL_MASK, WARP_SIZE, simulator_active

cudasim.install()

from .launch import jit  # noqa: E402  (after the simulator's intrinsics are installed)


def gpu_available() -> bool:
    """True when a real CUDA GPU can be used (never under the simulator)."""
    return not simulator_active() and cuda.is_available()


def device_info() -> dict:
    """What ``gpusm info --device`` reports: the device, its memory and the numba-cuda version."""
    info: dict = {"numba_cuda": importlib.metadata.version("numba-cuda"),
                  "simulator": simulator_active()}
    if info["simulator"]:
        info.update(available=True, name="Numba CUDA simulator",
                    compute_capability=tuple(cuda.get_current_device().compute_capability),
                    total_memory=None, free_memory=None, multiprocessors=None)
        return info
    if not cuda.is_available():
        error = cuda.cuda_error()
        info.update(available=False, error=str(error) if error else "no CUDA GPU found")
        return info
    from numba.cuda.cudadrv import driver

    device = cuda.get_current_device()
    free, total = cuda.current_context().get_memory_info()
    name = device.name
    info.update(available=True, name=name.decode() if isinstance(name, bytes) else str(name),
                compute_capability=tuple(device.compute_capability),
                total_memory=int(total), free_memory=int(free),
                multiprocessors=int(device.MULTIPROCESSOR_COUNT),
                driver_version=tuple(driver.get_version()),
                runtime_version=tuple(cuda.runtime.get_version()))
    return info


@functools.lru_cache(maxsize=1)
def backend_label() -> str:
    """Where device work runs, for every output: the GPU's model name, or ``"simulator"``."""
    if simulator_active():
        return "simulator"
    try:
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:                       # no usable device: say so, do not fail
        return f"no GPU ({type(exc).__name__})"


_RESOURCE_GETTERS = {
    "registers_per_thread": "get_regs_per_thread",
    "shared_bytes_per_block": "get_shared_mem_per_block",
    "local_bytes_per_thread": "get_local_mem_per_thread",
    "const_bytes": "get_const_mem_size",
    "max_threads_per_block": "get_max_threads_per_block",
}


def kernel_resources(kernel, *signature_args) -> dict:
    """Registers, static shared memory, local (spill) memory, constant memory and the launchable
    block size of ``kernel`` compiled for ``signature_args`` (example arguments or Numba types),
    read from numba-cuda's dispatcher (``get_regs_per_thread`` etc.). Empty under the simulator,
    which compiles nothing."""
    if simulator_active():
        return {}
    from numba.core import types as core_types
    from numba.cuda import types as cuda_types

    type_classes = (cuda_types.Type, core_types.Type)
    argtypes = tuple(a if isinstance(a, type_classes) else kernel.typeof_pyval(a)
                     for a in signature_args)
    kernel.compile(argtypes)
    return {key: int(getattr(kernel, getter)()[argtypes])
            for key, getter in _RESOURCE_GETTERS.items()}


__all__ = ["cuda", "jit", "FULL_MASK", "WARP_SIZE", "simulator_active", "gpu_available", "device_info",
           "backend_label", "kernel_resources"]
