"""Timing of the benchmarks: a warm-up run, then the median of repeated timed runs.

:func:`timed` is the one per-query measurement of the engine benchmarks (``experiments.bench``);
``measure`` picks what is timed (``MatchResult.seconds``, the sum of the engine's device-event-timed
phases, by default; a phase or a statistic otherwise), and :meth:`Timing.median_of` gives the
median of any other figure over the same runs. :func:`clocked` is the host wall time of one call
(a whole query set, a Dask submission); :func:`without_compiles` repeats a timed call that compiled
or loaded a kernel; :class:`Budget` is a benchmark's ``--time-budget``; :func:`gpu_local_cpus`
names the host CPUs next to the GPU, to which a benchmark's processes can be pinned.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable

from common.engine.result import MatchResult, Status


@dataclass
class Timing:
    """What :func:`timed` measured: the warm-up's result, the last timed run's, and medians."""

    warm: MatchResult
    last: MatchResult
    seconds: float                     # median of ``measure`` over the timed runs
    wall_s: float                      # median host time of ``engine.match`` over the timed runs
    runs: list[MatchResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.warm.status is Status.OK and self.last.status is Status.OK

    @property
    def repeated(self) -> bool:
        """Whether timed runs followed the warm-up (False: the warm-up's own figures are the result;
        with ``warm=False`` the first timed run stands for the warm-up)."""
        return self.runs[-1] is not self.warm

    def median_of(self, figure: Callable[[MatchResult], float]) -> float:
        """The median of ``figure`` over the timed runs (a phase, a statistic)."""
        return median(figure(r) for r in self.runs)


def median(values) -> float:
    """The median, NaN for no values."""
    values = list(values)
    return statistics.median(values) if values else math.nan


class Budget:
    """A benchmark's ``--time-budget``: once ``seconds`` have passed since it was made, no new
    query starts (``seconds=None``: no budget)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the budget was made."""
        return time.perf_counter() - self.start

    def spent(self) -> bool:
        return self.seconds is not None and self.elapsed() > self.seconds


def clocked(call: Callable[[], object]) -> tuple[float, object]:
    """``(host seconds, value)`` of one ``call()``."""
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def without_compiles(call: Callable[[], object], attempts: int = 3) -> tuple[float, object, int]:
    """``(host seconds, value, reruns)`` of ``call()``, called again while a call compiled code or
    loaded a kernel from the disk cache (:data:`common.gpu.compile_clock.compile_clock`), at most
    ``attempts`` calls in all: a kernel's first use, on a path the warm-up did not take, is not
    the engine's time. The last call counts."""
    from common.gpu.compile_clock import compile_clock

    for attempt in range(attempts):
        before = compile_clock.seconds
        seconds, value = clocked(call)
        if compile_clock.seconds == before:
            break
    return seconds, value, attempt


def timed(engine, query, repeats: int = 1, *, timeout_s: float | None = None,
          measure: Callable[[MatchResult], float] = lambda r: r.seconds, warm: bool = True,
          repeat_below_s: float | None = None, untimed_after_warm: bool = False) -> Timing:
    """Run ``query`` on a prepared ``engine``: one warm-up (compiles; skipped with ``warm=False``),
    then ``repeats`` timed runs, stopping at the first run that is not ``ok``.

    A warm-up that is not ``ok``, or that took longer than ``repeat_below_s`` seconds of wall
    time, is not repeated: its own measurement is the result. ``untimed_after_warm`` runs the timed
    runs without ``timeout_s`` once the warm-up finished within it (no host polling of the
    deadline). Returns a :class:`Timing`.
    """
    first = None
    if warm:
        start = time.perf_counter()
        first = engine.match(query, timeout_s=timeout_s)
        first_wall = time.perf_counter() - start
        repeat = first.status is Status.OK and (repeat_below_s is None or first_wall < repeat_below_s)
        if not repeat:
            return Timing(first, first, measure(first), first_wall, [first])
        if untimed_after_warm:
            timeout_s = None
    runs, walls = [], []
    for _ in range(max(1, repeats)):
        wall, result, _ = without_compiles(lambda: engine.match(query, timeout_s=timeout_s))
        walls.append(wall)
        runs.append(result)
        if result.status is not Status.OK:
            break
    return Timing(first or runs[0], runs[-1], median(measure(r) for r in runs), median(walls), runs)


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
    ``nvidia-smi``, its ``local_cpulist`` from sysfs. Processes of one benchmark pinned to these
    share one NUMA node with the GPU, where their host walls otherwise differ by process."""
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
