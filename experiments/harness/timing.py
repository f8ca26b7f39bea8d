"""Timing of the benchmarks: a warm-up run, then the median of repeated timed runs.

:func:`timed` is the one per-query measurement of the engine benchmarks (``experiments.bench``);
``measure`` picks what is timed (``MatchResult.seconds``, the sum of the engine's device-event-timed
phases, by default; a phase or a statistic otherwise), and :meth:`Timing.median_of` gives the
median of any other figure over the same runs. :func:`clocked` is the host wall time of one call
(a whole query set, a Dask submission); :func:`without_compiles` repeats a timed call that compiled
or loaded a kernel; :class:`Budget` is a benchmark's ``--time-budget``.
"""

from __future__ import annotations

import math
import statistics
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
