"""CUDA events through the driver's own calls (numba's wrappers cost host time per call): create,
record, wait, query and time events on a stream; what :mod:`common.gpu.timers` and
:mod:`common.gpu.watch` build on."""

from __future__ import annotations

from . import launch
from .runtime import cuda

SPARE_EVENTS: list = []            # timing events read already, reused (creating one is a numba call)


def driver_event(timing: bool):
    """A numba event that also carries its driver handle (for the direct calls below)."""
    event = cuda.event(timing=timing)
    event.driver_handle = int(event.handle)
    return event


def timing_event():
    try:
        return SPARE_EVENTS.pop()
    except IndexError:
        return driver_event(timing=True)


def record(event, stream) -> None:
    """``event.record(stream)`` through the driver directly (not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is None or direct.event_record(event.driver_handle, launch.stream_handle(stream))[0] != 0:
        event.record(stream)                  # numba's call raises the driver's error


def synchronize(event) -> None:
    """Wait for ``event`` (the driver's call, not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is None or direct.event_synchronize(event.driver_handle)[0] != 0:
        event.synchronize()


def query(event) -> bool:
    """Whether the work before ``event`` has completed (the driver's call, not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is not None:
        error = direct.event_query(event.driver_handle)[0]
        if error == 0:
            return True
        if int(error) == _NOT_READY:
            return False
    return event.query()                  # numba's call raises the driver's error


_NOT_READY = 600                          # CUDA_ERROR_NOT_READY


def elapsed_seconds(start, end) -> float:
    """Seconds between two recorded events, once ``end`` has completed."""
    direct = launch._NUMBA
    if direct is not None:
        error, ms = direct.event_elapsed(start.driver_handle, end.driver_handle)
        if error == 0:
            return ms / 1000.0
    return start.elapsed_time(end) / 1000.0
