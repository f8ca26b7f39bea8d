"""Device-timed phases: :class:`PhaseTimer` adds the seconds of named phases, measured with CUDA
events on a stream around the work (host time for a CPU engine)."""

from __future__ import annotations

import time

from .events import SPARE_EVENTS, elapsed_seconds, record, synchronize, timing_event
from .runtime import simulator_active


class PhaseTimer:
    """Seconds per named phase, taken with CUDA events on ``stream`` around the work.

    ``with timer.phase("filter"): ...`` records an event pair; entering a phase again adds to it.
    Reading :attr:`seconds` synchronises on the recorded events, so phases cost no host sync
    while they run. The simulator's events carry no time (numba-cuda returns -1), so there the
    phases are host wall-clock (``time.perf_counter``), which is what simulated work costs.
    ``host=True`` takes wall-clock time on a GPU too: a CPU engine's timer (it runs no device work).
    """

    def __init__(self, stream=0, host: bool = False):
        self.stream = stream
        self._use_events = not host and not simulator_active()
        self._pending: list[tuple[str, object, object]] = []
        self._seconds: dict[str, float] = {}

    def phase(self, name: str) -> "_Phase":
        """``with timer.phase(name):`` times the block (a plain class: a generator-based context
        manager costs a few us of host time per use)."""
        return _Phase(self, name)

    def add(self, name: str, seconds: float) -> None:
        """Add host-measured seconds to a phase (e.g. work that never touches the device)."""
        self._seconds[name] = self._seconds.get(name, 0.0) + float(seconds)

    @property
    def seconds(self) -> dict[str, float]:
        if self._pending:                     # one stream: the last event ends after the others
            synchronize(self._pending[-1][2])
        for name, start, end in self._pending:
            self.add(name, elapsed_seconds(start, end))
            SPARE_EVENTS.extend((start, end))
        self._pending.clear()
        return dict(self._seconds)

    def reset(self) -> None:
        self._pending.clear()
        self._seconds.clear()


class _Phase:
    """One timed block of a :class:`PhaseTimer`."""

    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: PhaseTimer, name: str):
        self.timer, self.name = timer, name

    def __enter__(self):
        if self.timer._use_events:
            self.start = timing_event()
            record(self.start, self.timer.stream)
        else:
            self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> bool:
        timer = self.timer
        if timer._use_events:
            end = timing_event()
            record(end, timer.stream)
            timer._pending.append((self.name, self.start, end))
        else:
            timer.add(self.name, time.perf_counter() - self.start)
        return False

