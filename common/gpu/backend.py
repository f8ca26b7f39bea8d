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


def gpu_missing_reason() -> str | None:
    """Why device work would not run on a real GPU here (None: a driver is found and the simulator is off)."""
    if not _driver_present():
        return "no NVIDIA GPU found (no nvidia-smi, no /dev/nvidiactl)"
    if BACKEND == "simulator":
        return "the CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1)"
    return None


def gpu_count() -> int | None:
    """How many GPUs ``nvidia-smi -L`` lists (None where it cannot be asked)."""
    import subprocess

    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else None


def require_gpu(what: str) -> None:
    """Exit with status 2 and one line on stderr where ``what`` cannot run on a real GPU."""
    reason = gpu_missing_reason()
    if reason:
        print(f"{what}: needs an NVIDIA GPU: {reason}", file=sys.stderr)
        raise SystemExit(2)


def simulator_note(what: str, plan: str) -> None:
    """Say on stderr, before a benchmark starts, that it runs in the simulator and what it plans to run."""
    if BACKEND == "simulator":
        print(f"{what}: no GPU: runs in Numba's CUDA simulator, orders of magnitude slower than a GPU; "
              f"plan: {plan}", file=sys.stderr, flush=True)

#: numba-cuda warns "Grid size N will likely result in GPU under-utilization" on every launch of
#: fewer than 128 blocks. The engines size small launches on purpose (one block per query vertex,
#: a one-block scan, a tiny query), so these warnings say nothing to a user and bury the output.
#: (numba may wrap the text in terminal highlighting, hence the leading ".*")
LOW_OCCUPANCY_MESSAGE = r"(?s).*Grid size \d+ will likely result in GPU under-utilization"


def quiet_launch_warnings() -> None:
    """Hide numba-cuda's low-occupancy NumbaPerformanceWarning (only that one; others still show)."""
    import warnings

    warnings.filterwarnings("ignore", message=LOW_OCCUPANCY_MESSAGE, category=Warning)


quiet_launch_warnings()
