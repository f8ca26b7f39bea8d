"""SGSI's segment streaming (Zeng et al., TKDE 2022 §6.3): two device slots fed on a copy
stream while the kernels run on a compute stream, and the clock of copies and kernels (the
paper's Table 7)."""

from __future__ import annotations

import contextlib

import numpy as np

from common.gpu import launch as _launch
from common.gpu.runtime import cuda, simulator_active
from common.gpu.timers import PhaseTimer

from .segments import Segment

_SIM = simulator_active()


def _copy_async(slot, host: np.ndarray, stream) -> None:
    """host -> slot[:host.size] on ``stream``: the driver's asynchronous copy from pinned memory
    (numba's copy_to_device spends more host time per call: docs/decisions.md), numba's under
    the simulator."""
    direct = _launch._NUMBA
    if direct is not None:
        from cuda.bindings import driver

        if driver.cuMemcpyHtoDAsync(_launch.device_pointer(slot), host.ctypes.data, host.nbytes,
                                    _launch.stream_handle(stream))[0] == 0:
            return
    slot[:host.size].copy_to_device(host, stream=stream)


def _record(event, stream) -> None:
    """event.record(stream) through the driver (cheaper on the host than numba's call)."""
    direct = _launch._NUMBA
    if direct is None or direct.event_record(event.driver_handle, _launch.stream_handle(stream))[0] != 0:
        event.record(stream)


def _wait(event, stream) -> None:
    """stream waits for event, through the driver when it can."""
    direct = _launch._NUMBA
    if direct is not None:
        from cuda.bindings import driver

        if driver.cuStreamWaitEvent(_launch.stream_handle(stream), event.driver_handle, 0)[0] == 0:
            return
    event.wait(stream)


def _event():
    event = cuda.event(timing=False)
    event.driver_handle = int(event.handle)
    return event


class _Streams:
    """Two segment slots fed on a copy stream while kernels run on a compute stream (events
    order a slot's copy after the kernels that last read it and before the kernels that read
    it next). The join places the slots in its words arena for each chunk that streams
    (:meth:`place`); within a placement a slot still holding the segment asked for is not
    copied again."""

    def __init__(self, slot_words: int):
        self.slot_words = slot_words
        self.slots = [None, None]
        self.holds = [-1, -1]
        if _SIM:
            self.copy = self.compute = 0
            self.ready = self.free = [None, None]
        else:
            self.copy, self.compute = cuda.stream(), cuda.stream()
            self.ready = [_event() for _ in range(2)]
            self.free = [_event() for _ in range(2)]

    def place(self, view, arena, start: int) -> None:
        """The slots at arena[start : start + 2 * slot_words] (``view`` makes an arena view);
        what they held before is forgotten (the join may have written there since)."""
        S = self.slot_words
        self.slots = [view(arena, start, start + S), view(arena, start + S, start + 2 * S)]
        self.holds = [-1, -1]

    def _load(self, seg: Segment, avoid: int, clock) -> int:
        for s in range(2):
            if self.holds[s] == seg.sid:
                return s
        s = 1 - avoid if avoid >= 0 else (0 if self.holds[0] == -1 or self.holds[1] != -1 else 1)
        if not _SIM:
            _wait(self.free[s], self.copy)
        with clock.comm_copy.phase("h2d"):
            _copy_async(self.slots[s], seg.host, self.copy)
        if not _SIM:
            _record(self.ready[s], self.copy)
        self.holds[s] = seg.sid
        clock.bytes_h2d += seg.words * 4
        clock.bytes_streamed += seg.words * 4
        clock.streamed += 1
        return s

    def run(self, segments: list[Segment], launch, clock) -> None:
        """Call ``launch(slot array, segment, stream)`` for each segment in order, prefetching
        the next segment into the other slot while the current one's kernels run."""
        if not segments:
            return
        cur = self._load(segments[0], -1, clock)
        for j, seg in enumerate(segments):
            nxt = self._load(segments[j + 1], cur, clock) if j + 1 < len(segments) else -1
            if not _SIM:
                _wait(self.ready[cur], self.compute)
            with clock.comp_stream.phase("kernels"):
                launch(self.slots[cur], seg, self.compute)
            if not _SIM:
                _record(self.free[cur], self.compute)
            cur = nxt


class _Untimed:
    """A :class:`PhaseTimer` that times nothing (SGSI without ``instrument``)."""

    seconds: dict = {}

    def phase(self, name: str):
        return _NO_PHASE


_NO_PHASE = contextlib.nullcontext()


class _Clock:
    """Device time of copies and kernels (Table 7's communication and computation; with
    ``timed``, two events around every copy and launch) and bytes."""

    def __init__(self, streams: _Streams, timed: bool):
        make = PhaseTimer if timed else (lambda stream: _Untimed())
        self.comm_copy = make(streams.copy)
        self.comm_default = make(0)
        self.comp_stream = make(streams.compute)
        self.comp_default = make(0)
        self.bytes_h2d = self.bytes_d2h = self.streamed = self.bytes_streamed = 0

    def totals(self) -> tuple[float, float, float]:
        """(communication, computation, the segment copies' share of communication) seconds."""
        stream_s = sum(self.comm_copy.seconds.values())
        comm = stream_s + sum(self.comm_default.seconds.values())
        comp = sum(self.comp_stream.seconds.values()) + sum(self.comp_default.seconds.values())
        return comm, comp, stream_s

