"""Stops a running kernel launch at a host deadline: :class:`LaunchWatch`."""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from .events import driver_event, query, record
from .runtime import cuda, simulator_active

SPIN_S = 1e-3       # LaunchWatch polls without sleeping for this long after a launch
FIRST_PAUSE_S = 2e-5    # then sleeps this long between event queries, doubling each time
MAX_PAUSE_S = 1e-3      # up to this


def sleep_for(pause: float, now: float, deadline: float | None) -> float:
    """How long the watch sleeps between event queries: ``pause``, but never past a ``deadline``
    still to be acted on (None once the flag is raised), so that a deadline is met to within a
    query's cost rather than a whole pause."""
    return pause if deadline is None else max(0.0, min(pause, deadline - now))


class LaunchWatch:
    """Stops a running kernel launch at a host deadline (the engines' ``timeout_s``).

    :meth:`run` launches a kernel on the watch's own stream and polls a completion event; once
    the deadline passes it copies 1 from a pinned host word into ``flag`` (a one-element int64
    device array the kernel polls) through a second stream, so the copy engine writes the flag
    while the kernel runs. The kernel must read the flag with an atomic (a plain load may be
    served from a stale L1 line) and leave when it is set; the caller clears it before the next
    watched launch. The simulator runs a launch synchronously, so there a thread raises the
    flag. Polling spins for the first ``SPIN_S`` (a sleep, however short, lasts longer than a
    small query's whole launch), then backs off from ``FIRST_PAUSE_S`` to ``MAX_PAUSE_S`` between
    event queries. The host time spent
    enqueueing the launch (Numba compiles a kernel on its first launch with new argument types)
    moves the deadline back: a cold kernel's compilation is not charged to the search. Launches
    without a deadline should not go through the watch (no stream, no polling). A caller that may
    let a launch run on passes ``extend``, asked each time the deadline passes and answering a
    later one or None (stop now); it may read the launch's progress with :meth:`peek`.
    """

    def __init__(self):
        self._one = cuda.pinned_array(1, np.int64)
        self._one[0] = 1
        self._sim = simulator_active()
        self.stream = 0 if self._sim else cuda.stream()      # the watched launches
        self._side = 0 if self._sim else cuda.stream()       # the flag's copy
        self._done = None if self._sim else driver_event(timing=False)

    def _raise(self, flag) -> None:
        flag.copy_to_device(self._one, stream=self._side)

    def peek(self, array, out) -> None:
        """Copy device ``array`` into pinned host ``out`` while a watched launch runs (the side
        stream's copy engine: a kernel's atomics are read as they stand in L2)."""
        if self._sim:
            out[...] = array.copy_to_host()
            return
        array.copy_to_host(out, stream=self._side)
        self._side.synchronize()

    def _run_simulated(self, launch_all, deadline, flag, extend) -> bool:
        """The simulator's launch returns when the kernel has ended, so a thread raises the flag.
        The simulator's atomics are read-modify-writes under a lock that a plain write does not
        take: a write landing inside a kernel's atomic read of the flag is overwritten with the
        old value, so the thread writes the flag again every millisecond until the launch ends."""
        ended, raised = threading.Event(), threading.Event()
        launched = time.perf_counter()

        def keep_raising():
            at = deadline
            while True:
                wait = at - time.perf_counter()
                if ended.wait(None if math.isinf(wait) else max(0.0, wait)):
                    return
                now = time.perf_counter()
                at = None if extend is None else extend(now - launched)
                if at is None or at <= now:
                    break
            raised.set()
            while True:
                self._raise(flag)
                if ended.wait(1e-3):
                    return

        raiser = threading.Thread(target=keep_raising, name="LaunchWatch", daemon=True)
        raiser.start()
        try:
            launch_all()
        finally:
            ended.set()
            raiser.join()
        return raised.is_set()

    def run(self, kernel, griddim, blockdim, args, deadline: float, flag, extend=None) -> bool:
        """Launch ``kernel[griddim, blockdim]`` with ``args``, raise ``flag`` once
        ``time.perf_counter()`` passes ``deadline``, return after the launch ends; True when the
        flag was raised (the launch's results are then partial), whether or not the kernel had
        already finished its work. ``extend(seconds since the launch)``, called each time the
        deadline passes, may return a later deadline (asked again when it passes) to raise the
        flag at instead (None, or a time already past: now)."""
        return self.run_all([(kernel, griddim, blockdim, args)], deadline, flag, extend)

    def run_all(self, launches, deadline: float, flag, extend=None) -> bool:
        """:meth:`run` for launches ``(kernel, griddim, blockdim, args)`` queued back to back on
        the watch's stream (no host round trip between them); every kernel must leave at once
        when it starts with the flag raised."""
        if flag.size != 1 or flag.dtype != np.int64:
            raise ValueError(f"flag must be a one-element int64 device array, got {flag.dtype} x {flag.size}")

        def launch_all():
            for kernel, griddim, blockdim, args in launches:
                kernel[griddim, blockdim, self.stream](*args)

        if self._sim:
            return self._run_simulated(launch_all, deadline, flag, extend)
        enqueue = time.perf_counter()
        launch_all()
        launched = time.perf_counter()
        # a kernel's first launch with new argument types compiles it: that is not search time
        deadline += launched - enqueue
        record(self._done, self.stream)
        raised = False
        spin_until = time.perf_counter() + SPIN_S
        pause = FIRST_PAUSE_S
        while not query(self._done):
            now = time.perf_counter()
            if not raised and now > deadline:
                later = None if extend is None else extend(now - launched)
                if later is not None and later > now:
                    deadline = later
                    continue
                self._raise(flag)
                raised = True
            if now > spin_until:             # a short launch is caught while spinning
                time.sleep(sleep_for(pause, now, None if raised else deadline))
                pause = min(2 * pause, MAX_PAUSE_S)
        if raised:
            self._side.synchronize()        # the flag has landed before the caller clears it
        return raised
