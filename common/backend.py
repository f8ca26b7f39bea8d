"""Choose the CUDA backend once, before ``numba.cuda`` is first imported.

On a machine with an NVIDIA driver the kernels run on the GPU. Without one, gpusm sets
``NUMBA_ENABLE_CUDASIM=1`` so that the same kernels run in Numba's CUDA simulator (slow: for tiny
inputs and tests). A user who sets ``NUMBA_ENABLE_CUDASIM`` themselves is obeyed.
"""

from __future__ import annotations

import os
import shutil
import sys


def _driver_present() -> bool:
    return bool(shutil.which("nvidia-smi")) or os.path.exists("/dev/nvidiactl")


def select_backend() -> str:
    """Return ``"gpu"`` or ``"simulator"``, enabling the simulator when no GPU driver is found."""
    if "NUMBA_ENABLE_CUDASIM" not in os.environ and "numba.cuda" not in sys.modules:
        if not _driver_present():
            os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    return "simulator" if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1" else "gpu"


BACKEND = select_backend()
