"""Test configuration: without an NVIDIA GPU every kernel runs under Numba's CUDA simulator.

``common.backend`` makes that choice (before numba.cuda is imported) when the package is first
imported; importing it here makes the choice before any test module imports numba itself.
Set ``NUMBA_ENABLE_CUDASIM`` yourself to override (``0`` forces the real driver).
"""

from common.backend import BACKEND


def pytest_report_header(config):
    if BACKEND == "simulator":
        return "gpusm: no GPU found, CUDA kernels run in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"
    return "gpusm: CUDA kernels run on the GPU"
