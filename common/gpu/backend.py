"""Choose the CUDA backend once, before ``numba.cuda`` is first imported.

On a machine with an NVIDIA driver the kernels run on the GPU. Without one, gpusm sets
``NUMBA_ENABLE_CUDASIM=1`` so that the same kernels run in Numba's CUDA simulator (slow: for tiny
inputs and tests). A user who sets ``NUMBA_ENABLE_CUDASIM`` themselves is obeyed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else None


def parse_cpulist(text: str) -> set[int]:
    """The CPUs of a Linux cpulist (``"0-3,8,10-11"``, as sysfs writes them)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def sysfs_pci_path(bus_id: str) -> str:
    """sysfs's folder of a PCI device named as ``nvidia-smi`` names it (``00000000:19:00.0``: an
    eight-digit domain, where sysfs writes four)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"/sys/bus/pci/devices/{domain[-4:]}:{rest}"


def gpu_local_cpus(device: str | None = None) -> tuple[set[int] | None, str]:
    """The host CPUs on the NUMA node of the GPU this process uses (``device``: an index or UUID as
    ``nvidia-smi -i`` takes it; default the first of ``CUDA_VISIBLE_DEVICES``, else 0), among the
    CPUs this process may use, and a line that says which, or why none: the GPU's PCI address from
    ``nvidia-smi``, its ``local_cpulist`` from sysfs. A benchmark's processes pinned to these all
    run on the GPU's own node."""
    if device is None:
        device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", device],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"not pinned: nvidia-smi ({type(exc).__name__})"
    if not bus:
        return None, f"not pinned: nvidia-smi names no GPU {device}"
    path = sysfs_pci_path(bus[0]) + "/local_cpulist"
    try:
        with open(path) as f:
            local = parse_cpulist(f.read())
    except (OSError, ValueError) as exc:
        return None, f"not pinned: {path} ({type(exc).__name__})"
    cpus = local & os.sched_getaffinity(0)
    if not cpus:
        return None, f"not pinned: none of GPU {device}'s local CPUs ({path}) is allowed to this process"
    return cpus, f"pinned to GPU {device}'s NUMA node: {len(cpus)} CPUs ({min(cpus)}-{max(cpus)})"


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
